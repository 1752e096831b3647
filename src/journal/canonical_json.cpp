#include "journal/canonical_json.hpp"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <simdjson.h>

namespace warden::journal {

bool valid_utf8(std::string_view s) {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    const auto* end = p + s.size();
    while (p < end) {
        // ASCII, which most of a record is, eight bytes at a time.
        if (end - p >= 8) {
            uint64_t eight;
            std::memcpy(&eight, p, 8);
            if ((eight & 0x8080808080808080u) == 0) {
                p += 8;
                continue;
            }
        }
        unsigned char c = *p;
        if (c < 0x80) {
            ++p;
            continue;
        }
        int n;
        uint32_t cp;
        if ((c & 0xE0) == 0xC0) {
            n = 1;
            cp = c & 0x1F;
        } else if ((c & 0xF0) == 0xE0) {
            n = 2;
            cp = c & 0x0F;
        } else if ((c & 0xF8) == 0xF0) {
            n = 3;
            cp = c & 0x07;
        } else {
            return false;
        }
        if (end - p <= n) return false;
        for (int i = 1; i <= n; ++i) {
            if ((p[i] & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (p[i] & 0x3F);
        }
        if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000))
            return false;  // overlong
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        p += n + 1;
    }
    return true;
}

std::string base64_encode(std::string_view bytes) {
    static constexpr char kAlphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    size_t i = 0;
    auto at = [&](size_t k) { return static_cast<uint32_t>(static_cast<unsigned char>(bytes[k])); };
    for (; i + 2 < bytes.size(); i += 3) {
        uint32_t v = at(i) << 16 | at(i + 1) << 8 | at(i + 2);
        out += kAlphabet[v >> 18];
        out += kAlphabet[(v >> 12) & 63];
        out += kAlphabet[(v >> 6) & 63];
        out += kAlphabet[v & 63];
    }
    if (i + 1 == bytes.size()) {
        uint32_t v = at(i) << 16;
        out += kAlphabet[v >> 18];
        out += kAlphabet[(v >> 12) & 63];
        out += "==";
    } else if (i + 2 == bytes.size()) {
        uint32_t v = at(i) << 16 | at(i + 1) << 8;
        out += kAlphabet[v >> 18];
        out += kAlphabet[(v >> 12) & 63];
        out += kAlphabet[(v >> 6) & 63];
        out += '=';
    }
    return out;
}

Json bytes_value(std::string_view bytes) {
    if (valid_utf8(bytes)) return Json(std::string(bytes));
    return Json{{"b64", base64_encode(bytes)}};
}

// Member by member: from an initializer list nlohmann builds an array and copies it into the
// object, twice a journaled call (its request's id, its answer's).
Json rpc_id_number(int64_t n) {
    Json id = Json::object();
    id["n"] = n;
    return id;
}
Json rpc_id_string(std::string_view s) {
    Json id = Json::object();
    id["s"] = bytes_value(s);
    return id;
}
Json rpc_id_null() {
    return Json(nullptr);
}

Result<Json> rpc_id_from_json_text(std::string_view text) {
    // Most ids are small integers, written as such: read without a JSON parser (nlohmann's
    // costs thousands of instructions to set up, twice a call). Only the form JSON allows (no
    // sign, no leading zero) and at most 18 digits, which no int64_t overflows; any other text
    // is parsed below.
    if (!text.empty() && text.size() <= 18 && (text[0] != '0' || text.size() == 1) &&
        std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        int64_t n = 0;
        for (char c : text)
            n = n * 10 + (c - '0');
        return rpc_id_number(n);
    }
    Json v = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
    if (v.is_discarded()) return Error::msg(fmt::format("JSON-RPC id `{}`: not valid JSON", text));
    if (v.is_null()) return rpc_id_null();
    if (v.is_string()) return rpc_id_string(v.get_ref<const std::string&>());
    if (v.is_number_integer() && !v.is_number_unsigned()) return rpc_id_number(v.get<int64_t>());
    if (v.is_number_unsigned()) {
        auto u = v.get<uint64_t>();
        if (u <= static_cast<uint64_t>(INT64_MAX)) return rpc_id_number(static_cast<int64_t>(u));
    }
    if (v.is_number()) {
        // Keep the wire text, trimmed: floats never enter a body.
        size_t b = text.find_first_not_of(" \t\r\n");
        size_t e = text.find_last_not_of(" \t\r\n");
        return Json{{"t", std::string(text.substr(b, e - b + 1))}};
    }
    return Error::msg(fmt::format("JSON-RPC id `{}`: not a number, string or null", text));
}

std::string rpc_id_display(const Json& id) {
    if (id.is_null()) return "null";
    if (id.is_object()) {
        if (auto it = id.find("n"); it != id.end()) return it->dump();
        if (auto it = id.find("s"); it != id.end()) {
            if (it->is_string()) return Json(*it).dump();
            return it->dump();  // {"b64":...}
        }
        if (auto it = id.find("t"); it != id.end() && it->is_string())
            return it->get<std::string>();
    }
    return id.dump();
}

namespace {

bool snake_case_key(std::string_view k) {
    if (k.empty() || !(k[0] >= 'a' && k[0] <= 'z')) return false;
    for (char c : k)
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
    return true;
}

}  // namespace

namespace {

Status write_value(std::string& out, const Json& v, std::string& path) {
    switch (v.type()) {
        case Json::value_t::null:
            out += "null";
            return {};
        case Json::value_t::boolean:
            out += v.get<bool>() ? "true" : "false";
            return {};
        case Json::value_t::number_integer:
            out += std::to_string(v.get<int64_t>());
            return {};
        case Json::value_t::number_unsigned:
            out += std::to_string(v.get<uint64_t>());
            return {};
        case Json::value_t::number_float:
            return Error::msg(
                fmt::format("{}: floating-point number; journal bodies hold integers only", path));
        case Json::value_t::string: {
            append_canonical_string(out, v.get_ref<const std::string&>());
            return {};
        }
        case Json::value_t::binary:
            return Error::msg(fmt::format("{}: binary value; use bytes_value()", path));
        case Json::value_t::array: {
            out += '[';
            size_t i = 0;
            for (const auto& e : v) {
                if (i) out += ',';
                size_t mark = path.size();
                path += fmt::format("[{}]", i++);
                auto st = write_value(out, e, path);
                path.resize(mark);
                if (!st) return st;
            }
            out += ']';
            return {};
        }
        case Json::value_t::object: {
            // nlohmann's default object is a std::map<std::string, …>: iteration is already
            // bytewise sorted, which is the canonical order.
            out += '{';
            bool first = true;
            for (const auto& [k, e] : v.items()) {
                if (!snake_case_key(k))
                    return Error::msg(fmt::format("{}: key `{}` is not ASCII snake_case",
                                                  path.empty() ? "body" : path, k));
                out += first ? "\"" : ",\"";  // snake_case: nothing in it to escape
                first = false;
                out += k;
                out += "\":";
                size_t mark = path.size();
                if (!path.empty()) path += '.';
                path += k;
                auto st = write_value(out, e, path);
                path.resize(mark);
                if (!st) return st;
            }
            out += '}';
            return {};
        }
        case Json::value_t::discarded:
            return Error::msg(fmt::format("{}: discarded value", path));
    }
    return Error::msg(fmt::format("{}: unknown JSON value", path));
}

}  // namespace

bool canonical_of(std::string& out, simdjson::dom::element e) {
    using T = simdjson::dom::element_type;
    bool ok = true;
    switch (e.type()) {
        case T::OBJECT: {
            out += '{';
            std::string_view previous;
            bool first = true;
            for (auto [k, v] : simdjson::dom::object(e)) {
                if (!first) out += ',';
                ok = ok && snake_case_key(k) && (first || k > previous);
                first = false;
                previous = k;
                append_json_string(out, k);
                out += ':';
                ok = canonical_of(out, v) && ok;
            }
            out += '}';
            break;
        }
        case T::ARRAY: {
            out += '[';
            bool first = true;
            for (auto v : simdjson::dom::array(e)) {
                if (!first) out += ',';
                first = false;
                ok = canonical_of(out, v) && ok;
            }
            out += ']';
            break;
        }
        case T::STRING:
            append_json_string(out, e.get_string().value_unsafe());
            break;
        case T::INT64:
            out += std::to_string(e.get_int64().value_unsafe());
            break;
        case T::UINT64:
            out += std::to_string(e.get_uint64().value_unsafe());
            break;
        case T::DOUBLE:
            out += fmt::format("{}", e.get_double().value_unsafe());
            ok = false;
            break;
        case T::BOOL:
            out += e.get_bool().value_unsafe() ? "true" : "false";
            break;
        case T::NULL_VALUE:
            out += "null";
            break;
    }
    return ok;
}

Result<std::string> canonical_with(const Json& object, std::string_view key,
                                   std::string_view text) {
    if (!object.is_object()) return Error::msg("canonical_with: not an object");
    if (!snake_case_key(key))
        return Error::msg(fmt::format("canonical_with: key '{}' is not snake_case", key));
    thread_local simdjson::dom::parser parser;
    simdjson::dom::element value;
    if (parser.parse(text.data(), text.size()).get(value) != simdjson::SUCCESS)
        return Error::msg(fmt::format("{}: not JSON ({} bytes)", key, text.size()));
    std::string again;
    again.reserve(text.size());
    if (!canonical_of(again, value) || again != text)
        return Error::msg(fmt::format("{}: not canonical JSON ({} bytes)", key, text.size()));
    // The members before the key and after it, each serialized as usual; the text between.
    Json before = Json::object(), after = Json::object();
    for (const auto& [k, v] : object.items())
        if (k < key)
            before[k] = v;
        else if (k > key)
            after[k] = v;
    auto head = canonical(before);
    if (!head) return head.error();
    auto tail = canonical(after);
    if (!tail) return tail.error();
    std::string out = std::move(*head);
    out.pop_back();  // its '}'
    if (out.size() > 1) out += ',';
    append_json_string(out, key);
    out += ':';
    out += text;
    if (tail->size() > 2) {
        out += ',';
        out.append(*tail, 1);
    } else {
        out += '}';
    }
    return out;
}

void append_canonical_string(std::string& out, std::string_view s) {
    if (valid_utf8(s)) {
        append_json_string(out, s);
        return;
    }
    out += "{\"b64\":";
    append_json_string(out, base64_encode(s));
    out += '}';
}

// A key is snake_case (the builder's part): its literal is itself in quotes, nothing to escape.
void CanonicalObject::key(std::string_view k) {
    out_ += first_ ? "\"" : ",\"";
    first_ = false;
    out_ += k;
    out_ += "\":";
}

CanonicalObject& CanonicalObject::text(std::string_view k, std::string_view bytes) {
    key(k);
    append_canonical_string(out_, bytes);
    return *this;
}

CanonicalObject& CanonicalObject::number(std::string_view k, int64_t n) {
    key(k);
    out_ += std::to_string(n);
    return *this;
}

CanonicalObject& CanonicalObject::boolean(std::string_view k, bool b) {
    key(k);
    out_ += b ? "true" : "false";
    return *this;
}

CanonicalObject& CanonicalObject::value(std::string_view k, const Json& v) {
    key(k);
    std::string path(k);
    if (!write_value(out_, v, path)) ok_ = false;
    return *this;
}

CanonicalObject& CanonicalObject::canonical(std::string_view k, std::string_view text) {
    key(k);
    out_ += text;
    return *this;
}

Status append_canonical(std::string& out, const Json& value) {
    std::string path;
    return write_value(out, value, path);
}

Result<std::string> canonical(const Json& value) {
    std::string out;
    out.reserve(256);
    if (auto st = append_canonical(out, value); !st) return st.error();
    return out;
}

}  // namespace warden::journal
