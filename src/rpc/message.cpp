#include "rpc/message.hpp"

#include <cstring>
#include <string>

#include <simdjson.h>

#include "rpc/framer.hpp"

namespace warden::rpc {

static_assert(kParsePadding >= simdjson::SIMDJSON_PADDING);

namespace od = simdjson::ondemand;

std::string_view to_string(Kind k) {
    switch (k) {
        case Kind::request:
            return "request";
        case Kind::notification:
            return "notification";
        case Kind::response:
            return "response";
        case Kind::invalid:
            return "invalid";
        case Kind::batch:
            return "batch";
    }
    return "?";
}

std::string_view to_string(IdType t) {
    switch (t) {
        case IdType::none:
            return "none";
        case IdType::null:
            return "null";
        case IdType::number:
            return "number";
        case IdType::string:
            return "string";
    }
    return "?";
}

std::string_view to_string(Outcome o) {
    switch (o) {
        case Outcome::none:
            return "none";
        case Outcome::ok:
            return "ok";
        case Outcome::rpc_error:
            return "rpc_error";
        case Outcome::tool_error:
            return "tool_error";
        case Outcome::input_required:
            return "input_required";
    }
    return "?";
}

std::string_view to_string(Era e) {
    switch (e) {
        case Era::none:
            return "none";
        case Era::legacy:
            return "legacy";
        case Era::stateless:
            return "stateless";
    }
    return "?";
}

namespace {

// The parser keeps the capacity of the largest document it has seen; after a very large
// message we start over so a relay's memory returns to its small steady state.
constexpr size_t kParserKeep = size_t{1} << 20;

std::string_view trim_right(std::string_view s) {
    while (!s.empty() &&
           (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r'))
        s.remove_suffix(1);
    return s;
}

Message invalid(std::string_view reason) {
    Message m;
    m.kind = Kind::invalid;
    m.reason = reason;
    return m;
}

Message invalid(simdjson::error_code e) {
    Message m = invalid(simdjson::error_message(e));
    m.utf8_error = e == simdjson::UTF8_ERROR;
    return m;
}

// What of params the classifier keeps.
struct Params {
    std::string_view name, arguments;
    std::string_view protocol_version;  // params.protocolVersion (initialize)
    std::string_view meta_version;      // params._meta["io.modelcontextprotocol/protocolVersion"]
    std::string_view input_responses;   // raw text of params.inputResponses
};

// The raw text of a value, as sent: an object or array whole, a scalar as its token.
std::string_view raw_text(od::value a) {
    od::json_type t;
    if (a.type().get(t)) return {};
    std::string_view raw;
    if (t == od::json_type::object) {
        od::object o;
        if (!a.get_object().get(o) && !o.raw_json().get(raw)) return raw;
    } else if (t == od::json_type::array) {
        od::array arr;
        if (!a.get_array().get(arr) && !arr.raw_json().get(raw)) return raw;
    } else {
        return trim_right(a.raw_json_token());
    }
    return {};
}

// The protocol version a 2026-07-28 request names in its _meta.
std::string_view meta_protocol_version(od::value v) {
    od::object obj;
    if (v.get_object().get(obj)) return {};
    for (auto field : obj) {
        od::field f;
        if (std::move(field).get(f)) return {};
        std::string_view key;
        if (f.unescaped_key().get(key)) return {};
        if (key == "io.modelcontextprotocol/protocolVersion") {
            std::string_view s;
            return f.value().get_string().get(s) ? std::string_view() : s;
        }
    }
    return {};
}

// params.name (a string), the raw text of params.arguments and params.inputResponses, and the
// protocol versions.
void read_params(od::value v, Params& p) {
    od::object obj;
    if (v.get_object().get(obj)) return;
    for (auto field : obj) {
        od::field f;
        if (std::move(field).get(f)) return;
        std::string_view key;
        if (f.unescaped_key().get(key)) return;
        if (key == "name") {
            std::string_view s;
            if (!f.value().get_string().get(s)) p.name = s;
        } else if (key == "arguments") {
            p.arguments = raw_text(f.value());
        } else if (key == "protocolVersion") {
            std::string_view s;
            if (!f.value().get_string().get(s)) p.protocol_version = s;
        } else if (key == "_meta") {
            p.meta_version = meta_protocol_version(f.value());
        } else if (key == "inputResponses") {
            p.input_responses = raw_text(f.value());
            if (p.input_responses.empty()) p.input_responses = "null";  // present all the same
        }
    }
}

// What a result says of itself: result.isError == true, or result.resultType ==
// "input_required" (either ends the scan: a result is not both).
Outcome result_outcome(od::value v) {
    od::object obj;
    if (v.get_object().get(obj)) return Outcome::ok;
    for (auto field : obj) {
        od::field f;
        if (std::move(field).get(f)) return Outcome::ok;
        std::string_view key;
        if (f.unescaped_key().get(key)) return Outcome::ok;
        if (key == "isError") {
            bool b = false;
            if (!f.value().get_bool().get(b) && b) return Outcome::tool_error;
        } else if (key == "resultType") {
            std::string_view t;
            if (!f.value().get_string().get(t) && t == "input_required")
                return Outcome::input_required;
        }
    }
    return Outcome::ok;
}

// One pass over the members, in whatever order the sender wrote them.
Message classify_object(od::object obj) {
    Message m;
    bool has_method = false, has_result = false, has_error = false;
    Outcome result = Outcome::ok;
    Params params;
    for (auto field : obj) {
        od::field f;
        if (auto e = std::move(field).get(f)) return invalid(e);
        std::string_view key;
        if (auto e = f.unescaped_key().get(key)) return invalid(e);
        od::value v = f.value();
        if (key == "id") {
            od::json_type t;
            if (auto e = v.type().get(t)) return invalid(e);
            switch (t) {
                case od::json_type::number:
                    m.id.type = IdType::number;
                    break;
                case od::json_type::string:
                    m.id.type = IdType::string;
                    break;
                case od::json_type::null:
                    m.id.type = IdType::null;
                    break;
                default:
                    return invalid("id must be a string, a number or null");
            }
            m.id.raw = trim_right(v.raw_json_token());
            if (t == od::json_type::null && m.id.raw != "null") return invalid("bad id");
        } else if (key == "method") {
            if (v.get_string().get(m.method)) return invalid("method must be a string");
            has_method = true;
        } else if (key == "params") {
            read_params(v, params);
        } else if (key == "result") {
            has_result = true;
            result = result_outcome(v);
        } else if (key == "error") {
            has_error = true;
        }
    }
    if (has_method) {
        m.kind = m.id.type == IdType::none ? Kind::notification : Kind::request;
        if (m.method == "tools/call") m.tool = params.name;
        m.arguments = params.arguments;
        m.input_responses = params.input_responses;
        if (m.kind == Kind::request) {
            if (m.method == "initialize") {
                m.era = Era::legacy;
                m.protocol_version = params.protocol_version;
            } else if (!params.meta_version.empty() || m.method == "server/discover") {
                m.era = Era::stateless;
                m.protocol_version = params.meta_version;
            }
        }
        return m;
    }
    if (m.id.type != IdType::none && (has_result || has_error)) {
        m.kind = Kind::response;
        m.outcome = has_error ? Outcome::rpc_error : result;
        return m;
    }
    Message bad = invalid("neither a request, a notification nor a response");
    bad.json = true;  // every member was read: the text is JSON, just not JSON-RPC
    return bad;
}

}  // namespace

namespace {

// Every value of `v`, visited: On-Demand checks only what is read, so reading all of it is
// what validates it.
bool walk(od::value v, int depth) {
    if (depth > 256) return false;
    od::json_type t;
    if (v.type().get(t)) return false;
    switch (t) {
        case od::json_type::object: {
            od::object o;
            if (v.get_object().get(o)) return false;
            for (auto field : o) {
                std::string_view key;
                od::value member;
                if (field.unescaped_key().get(key) || field.value().get(member)) return false;
                if (!walk(member, depth + 1)) return false;
            }
            return true;
        }
        case od::json_type::array: {
            od::array a;
            if (v.get_array().get(a)) return false;
            for (auto element : a) {
                od::value member;
                if (std::move(element).get(member) || !walk(member, depth + 1)) return false;
            }
            return true;
        }
        case od::json_type::number: {
            od::number n;
            return !v.get_number().get(n);
        }
        case od::json_type::string: {
            std::string_view str;
            return !v.get_string().get(str);
        }
        case od::json_type::boolean: {
            bool b;
            return !v.get_bool().get(b);
        }
        case od::json_type::null: {
            bool null = false;
            return !v.is_null().get(null) && null;
        }
    }
    return false;
}

bool is_json(od::parser& parser, std::string_view line, size_t capacity) {
    od::document doc;
    if (parser.iterate(line.data(), line.size(), capacity).get(doc)) return false;
    od::json_type t;
    if (doc.type().get(t)) return false;
    bool ok = false;
    if (t == od::json_type::object || t == od::json_type::array) {
        od::value v;
        if (doc.get_value().get(v)) return false;
        ok = walk(v, 0);
    } else if (t == od::json_type::number) {
        od::number n;
        ok = !doc.get_number().get(n);
    } else if (t == od::json_type::string) {
        std::string_view str;
        ok = !doc.get_string().get(str);
    } else if (t == od::json_type::boolean) {
        bool b;
        ok = !doc.get_bool().get(b);
    } else {
        bool null = false;
        ok = !doc.is_null().get(null) && null;
    }
    const char* where = nullptr;
    return ok && doc.current_location().get(where) == simdjson::OUT_OF_BOUNDS;
}

}  // namespace

struct Classifier::Impl {
    od::parser parser;
    std::vector<Message> members;
    std::string scratch;  // padded copy for callers without padding
};

Classifier::Classifier() : impl_(std::make_unique<Impl>()) {}
Classifier::~Classifier() = default;
Classifier::Classifier(Classifier&&) noexcept = default;
Classifier& Classifier::operator=(Classifier&&) noexcept = default;

Message Classifier::classify(std::string_view line) {
    auto& s = impl_->scratch;
    s.assign(line);
    s.append(kParsePadding, '\0');
    return classify(std::string_view(s.data(), line.size()), s.size());
}

Message Classifier::classify(std::string_view line, size_t capacity) {
    if (capacity < line.size() + kParsePadding) return classify(line);
    if (impl_->parser.capacity() > kParserKeep && line.size() < kParserKeep) {
        impl_->parser = od::parser();
    }
    Message m = classify_parsed(line, capacity);
    // Classification stops at the first member that rules JSON-RPC out (`{"id":{"a":1}}`,
    // `{"method":1}`, `[]`, `42`): whether the text is JSON at all is then still open, and the
    // stdout guard diverts only what is not (message.hpp). Rare, so walked again in full.
    if (m.kind == Kind::invalid && !m.json && !m.utf8_error)
        m.json = is_json(impl_->parser, line, capacity);
    return m;
}

Message Classifier::classify_parsed(std::string_view line, size_t capacity) {
    od::document doc;
    if (auto e = impl_->parser.iterate(line.data(), line.size(), capacity).get(doc))
        return invalid(e);
    od::json_type t;
    if (auto e = doc.type().get(t)) return invalid(e);
    Message m;
    if (t == od::json_type::object) {
        od::object obj;
        if (auto e = doc.get_object().get(obj)) return invalid(e);
        m = classify_object(obj);
        if (m.kind == Kind::invalid && !m.json) return m;  // stopped early: no trailing check
    } else if (t == od::json_type::array) {
        od::array arr;
        if (auto e = doc.get_array().get(arr)) return invalid(e);
        auto& members = impl_->members;
        members.clear();
        for (auto element : arr) {
            od::value v;
            if (auto e = std::move(element).get(v)) return invalid(e);
            od::object obj;
            if (v.get_object().get(obj)) {
                members.push_back(invalid("batch member is not an object"));
                continue;
            }
            members.push_back(classify_object(obj));
        }
        if (members.empty()) return invalid("empty batch");
        m.kind = Kind::batch;
        m.members = &members;
    } else {
        return invalid("not a JSON object or array");
    }
    // Everything after the top-level value must be whitespace.
    const char* where = nullptr;
    if (doc.current_location().get(where) != simdjson::OUT_OF_BOUNDS)
        return invalid("trailing content after the JSON value");
    m.json = true;
    return m;
}

}  // namespace warden::rpc
