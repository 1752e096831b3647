// The multiplexer of one shared tree; the rules are in mux.hpp.
#include "share/mux.hpp"

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "rpc/answer.hpp"

namespace warden::share {
namespace {

using Json = nlohmann::ordered_json;

// A line classified in a buffer of ours, padded for the classifier, so that the id's view
// (rpc::Id::raw) points into it and its offset is the offset in the line.
struct Classified {
    std::string buf;
    rpc::Message m;
    Classified(rpc::Classifier& c, std::string_view line) : buf(line) {
        buf.append(64, ' ');
        m = c.classify(std::string_view(buf.data(), line.size()), buf.size());
    }
    // The id's offset in the line (none: its end, where an empty view is harmless).
    size_t id_at() const {
        if (m.id.raw.data() < buf.data() || m.id.raw.data() > buf.data() + buf.size() - 64)
            return buf.size() - 64;
        return static_cast<size_t>(m.id.raw.data() - buf.data());
    }
};

// `line` with its id (at `at`, `len` bytes) replaced by `id`.
std::string with_id(std::string_view line, size_t at, size_t len, std::string_view id) {
    std::string out;
    out.reserve(line.size() + id.size());
    out.append(line.substr(0, at)).append(id).append(line.substr(at + len));
    return out;
}

constexpr std::array<std::string_view, 8> kLevels{"debug", "info",     "notice", "warning",
                                                  "error", "critical", "alert",  "emergency"};
std::optional<int> level_index(const Json& v) {
    if (!v.is_string()) return std::nullopt;
    auto it = std::find(kLevels.begin(), kLevels.end(), v.get<std::string>());
    if (it == kLevels.end()) return std::nullopt;
    return static_cast<int>(it - kLevels.begin());
}

Json parse(std::string_view line) {
    return Json::parse(line.begin(), line.end(), nullptr, false);
}

// The capability of the client that a server request needs ("" for none).
std::string_view needed_capability(std::string_view method) {
    if (method == "sampling/createMessage") return "sampling";
    if (method == "elicitation/create") return "elicitation";
    if (method == "roots/list") return "roots";
    return "";
}

}  // namespace

Multiplexer::Multiplexer(bool map_ids, bool check_responses, bool key_eras)
    : map_ids_(map_ids), check_responses_(check_responses), key_eras_(key_eras) {}

void Multiplexer::join(ClientId c) {
    clients_.try_emplace(c);
}

std::string Multiplexer::refusal(const rpc::Message& m) const {
    auto era_name = [](rpc::Era e) {
        return e == rpc::Era::legacy ? "legacy (initialize)" : "2026-07-28 (stateless)";
    };
    if (m.era == rpc::Era::none) return "";
    if (key_eras_ && era_ != rpc::Era::none && m.era != era_)
        return fmt::format(
            "it speaks the {} era and the tree's server took the {} era (a server's "
            "connection serves one era)",
            era_name(m.era), era_name(era_));
    if (m.era == rpc::Era::legacy && handshake_ != Handshake::none &&
        version_ != m.protocol_version)
        return fmt::format("it asks protocol {} and the tree speaks {}", m.protocol_version,
                           version_);
    if (key_eras_ && m.era == rpc::Era::stateless && !m.protocol_version.empty() &&
        !era_version_.empty() && era_version_ != m.protocol_version)
        return fmt::format("it names protocol {} and the tree's server took {}", m.protocol_version,
                           era_version_);
    return "";
}

std::string Multiplexer::next_id() {
    return std::to_string(++counter_);
}

// ---- From a client ------------------------------------------------------------------------

void Multiplexer::from_client(ClientId c, std::string_view line, MuxOutput& out) {
    join(c);
    Classified k(classifier_, line);
    k.m.id.raw = line.substr(k.id_at(), k.m.id.raw.size());  // a view into `line` from now on
    switch (k.m.kind) {
        case rpc::Kind::request:
            client_request(c, k.m, line, out);
            return;
        case rpc::Kind::notification:
            client_notification(c, k.m, line, out);
            return;
        case rpc::Kind::response:
            client_response(c, k.m, line, out);
            return;
        case rpc::Kind::batch:
            // No client of the current revisions sends one, and its members' ids would each
            // need mapping inside one line: refused whole rather than half-mapped.
            out.lines.push_back(
                {c, rpc::error_answer("null", rpc::kInvalidRequestCode,
                                      "mcpwarden --share: batches are not supported")});
            out.notes.push_back({c, "share.batch_refused", nlohmann::json::object()});
            return;
        case rpc::Kind::invalid:
            out.notes.push_back({c, "share.invalid_line", {{"reason", std::string(k.m.reason)}}});
            return;
    }
}

void Multiplexer::client_request(ClientId c, const rpc::Message& m, std::string_view line,
                                 MuxOutput& out) {
    if (m.era != rpc::Era::none) {
        if (const std::string why = refusal(m); !why.empty()) {
            out.lines.push_back({c, rpc::error_answer(m.id.raw, rpc::kInvalidParamsCode,
                                                      "mcpwarden --share: " + why)});
            out.notes.push_back({c,
                                 "share.era_refused",
                                 {{"method", std::string(m.method)},
                                  {"protocol", std::string(m.protocol_version)},
                                  {"why", why}}});
            return;
        }
        if (era_ == rpc::Era::none) {
            era_ = m.era;
            era_version_ = m.era == rpc::Era::stateless ? std::string(m.protocol_version) : "";
            era_request_ = {c, std::string(m.id.raw)};
        }
    }
    if (m.method == "initialize") return initialize(c, m, line, out);
    if (m.method == "ping" && m.era != rpc::Era::stateless) return answer(c, m.id.raw, "{}", out);
    if (m.method == "resources/subscribe") return subscribe(c, m, line, true, out);
    if (m.method == "resources/unsubscribe") return subscribe(c, m, line, false, out);
    if (m.method == "logging/setLevel") return set_level(c, m, line, out);
    forward_request(c, m, line, out);
}

void Multiplexer::forward_request(ClientId c, const rpc::Message& m, std::string_view line,
                                  MuxOutput& out, bool initialize) {
    Pending p{c, std::string(m.id.raw), std::string(m.method), "", initialize};
    std::string ours = map_ids_ ? next_id() : p.client_raw;
    std::string text;
    if (line.find("progressToken") != std::string_view::npos) {
        Json j = parse(line);
        Json* meta = nullptr;
        if (j.is_object() && j.contains("params") && j["params"].is_object() &&
            j["params"].contains("_meta") && j["params"]["_meta"].is_object())
            meta = &j["params"]["_meta"];
        if (meta && meta->contains("progressToken")) {
            const std::string theirs = (*meta)["progressToken"].dump();
            if (map_ids_) {
                (*meta)["progressToken"] = "mcpwarden-share-" + next_id();
                p.token = (*meta)["progressToken"].dump();
            } else {
                p.token = theirs;
            }
            tokens_[p.token] = {c, theirs};
            j["id"] = Json::parse(ours);
            text = j.dump();
        }
    }
    if (text.empty())
        text = with_id(line, static_cast<size_t>(m.id.raw.data() - line.data()), m.id.raw.size(),
                       ours);
    if (!map_ids_ && pending_.count(ours))
        out.notes.push_back({c, "share.id_collision", {{"id", ours}}});
    pending_[ours] = std::move(p);
    out.lines.push_back({0, std::move(text)});
}

void Multiplexer::initialize(ClientId c, const rpc::Message& m, std::string_view line,
                             MuxOutput& out) {
    Json j = parse(line);
    Client& cl = clients_[c];
    if (j.is_object() && j.contains("params") && j["params"].is_object()) {
        const Json& params = j["params"];
        if (params.contains("capabilities") && params["capabilities"].is_object())
            cl.capabilities = nlohmann::json::parse(params["capabilities"].dump());
    }
    const std::string asked = std::string(m.protocol_version);
    switch (handshake_) {
        case Handshake::none:
            handshake_ = Handshake::asked;
            version_ = asked;
            forward_request(c, m, line, out, /*initialize=*/true);
            return;
        case Handshake::asked:
            init_waiters_.emplace_back(c, std::string(m.id.raw));
            return;
        case Handshake::done:
            out.lines.push_back({c, init_before_id_ + std::string(m.id.raw) + init_after_id_});
            return;
    }
}

void Multiplexer::subscribe(ClientId c, const rpc::Message& m, std::string_view line, bool on,
                            MuxOutput& out) {
    Json j = parse(line);
    std::string uri;
    if (j.is_object() && j.contains("params") && j["params"].is_object() &&
        j["params"].contains("uri") && j["params"]["uri"].is_string())
        uri = j["params"]["uri"].get<std::string>();
    if (uri.empty()) return forward_request(c, m, line, out);  // the server's error to give
    std::set<ClientId>& subs = subscribers_[uri];
    const bool first = subs.empty();
    if (on) {
        subs.insert(c);
        clients_[c].subscriptions.insert(uri);
        if (first) return forward_request(c, m, line, out);
    } else {
        subs.erase(c);
        clients_[c].subscriptions.erase(uri);
        if (subs.empty()) {
            subscribers_.erase(uri);
            if (!first) return forward_request(c, m, line, out);
        }
    }
    answer(c, m.id.raw, "{}", out);
}

void Multiplexer::set_level(ClientId c, const rpc::Message& m, std::string_view line,
                            MuxOutput& out) {
    Json j = parse(line);
    std::optional<int> level;
    if (j.is_object() && j.contains("params") && j["params"].is_object() &&
        j["params"].contains("level"))
        level = level_index(j["params"]["level"]);
    if (!level) return forward_request(c, m, line, out);  // the server's error to give
    clients_[c].log_level = level;
    if (server_level_ && *server_level_ <= *level) return answer(c, m.id.raw, "{}", out);
    server_level_ = level;
    forward_request(c, m, line, out);
}

void Multiplexer::client_notification(ClientId c, const rpc::Message& m, std::string_view line,
                                      MuxOutput& out) {
    if (m.method == "notifications/initialized") {
        if (initialized_sent_) return;
        initialized_sent_ = true;
        out.lines.push_back({0, std::string(line)});
        return;
    }
    if (m.method == "notifications/cancelled") {
        Json j = parse(line);
        if (!j.is_object() || !j.contains("params") || !j["params"].is_object() ||
            !j["params"].contains("requestId"))
            return;
        const std::string theirs = j["params"]["requestId"].dump();
        for (const auto& [ours, p] : pending_)
            if (p.client == c && p.client_raw == theirs) {
                j["params"]["requestId"] = Json::parse(ours);
                out.lines.push_back({0, j.dump()});
                return;
            }
        // Already answered (a cancellation may cross its answer): nothing to cancel.
        return;
    }
    out.lines.push_back({0, std::string(line)});
}

void Multiplexer::client_response(ClientId c, const rpc::Message& m, std::string_view line,
                                  MuxOutput& out) {
    auto it = server_requests_.find(std::string(m.id.raw));
    if (check_responses_ && (it == server_requests_.end() || it->second.client != c)) {
        out.notes.push_back({c, "share.response_dropped", {{"id", std::string(m.id.raw)}}});
        return;
    }
    if (it != server_requests_.end()) server_requests_.erase(it);
    out.lines.push_back({0, std::string(line)});
}

// ---- From the server ----------------------------------------------------------------------

void Multiplexer::from_server(std::string_view line, MuxOutput& out) {
    Classified k(classifier_, line);
    k.m.id.raw = line.substr(k.id_at(), k.m.id.raw.size());  // a view into `line` from now on
    switch (k.m.kind) {
        case rpc::Kind::response:
            return server_response(k.m, line, out);
        case rpc::Kind::request:
            return server_request(k.m, line, out);
        case rpc::Kind::notification:
            return server_notification(k.m, line, out);
        case rpc::Kind::batch:
        case rpc::Kind::invalid:
            out.notes.push_back({0,
                                 "share.server_line_dropped",
                                 {{"kind", std::string(rpc::to_string(k.m.kind))}}});
            return;
    }
}

void Multiplexer::server_response(const rpc::Message& m, std::string_view line, MuxOutput& out) {
    auto it = pending_.find(std::string(m.id.raw));
    if (it == pending_.end()) {
        out.notes.push_back({0,
                             "share.answer_dropped",
                             {{"id", std::string(m.id.raw)},
                              {"why",
                               "no request of ours under this id is in flight (an "
                               "answer given twice, or to an id never sent)"}}});
        return;
    }
    Pending p = std::move(it->second);
    pending_.erase(it);
    if (!p.token.empty()) tokens_.erase(p.token);
    if (era_request_ && era_request_->first == p.client && era_request_->second == p.client_raw) {
        era_request_.reset();
        // A handshake refused, or a discovery the server does not know: no era taken.
        if (m.outcome == rpc::Outcome::rpc_error &&
            (p.method == "initialize" || p.method == "server/discover")) {
            era_ = rpc::Era::none;
            era_version_.clear();
        }
    }
    const size_t at = static_cast<size_t>(m.id.raw.data() - line.data());
    if (p.initialize) {
        init_before_id_ = std::string(line.substr(0, at));
        init_after_id_ = std::string(line.substr(at + m.id.raw.size()));
        if (m.outcome == rpc::Outcome::ok) {
            handshake_ = Handshake::done;
            Json j = parse(line);
            if (j.is_object() && j.contains("result") && j["result"].is_object() &&
                j["result"].contains("protocolVersion") &&
                j["result"]["protocolVersion"].is_string())
                version_ = j["result"]["protocolVersion"].get<std::string>();
        } else {
            handshake_ = Handshake::none;  // the next initialize asks again
        }
    }
    if (p.client != 0 && clients_.count(p.client))
        out.lines.push_back({p.client, with_id(line, at, m.id.raw.size(), p.client_raw)});
    if (p.initialize) answer_initialize_waiters(out);
}

void Multiplexer::answer_initialize_waiters(MuxOutput& out) {
    std::vector<std::pair<ClientId, std::string>> waiters;
    waiters.swap(init_waiters_);
    for (auto& [c, id] : waiters) {
        if (!clients_.count(c)) continue;
        if (handshake_ == Handshake::done) {
            out.lines.push_back({c, init_before_id_ + id + init_after_id_});
        } else {
            // The first initialize failed: the next waiter asks the server itself.
            Json j = Json::object();
            j["jsonrpc"] = "2.0";
            j["id"] = Json::parse(id);
            j["method"] = "initialize";
            j["params"] = {{"protocolVersion", version_},
                           {"capabilities", Json::parse(clients_[c].capabilities.dump())},
                           {"clientInfo", {{"name", "mcpwarden-share"}, {"version", "1"}}}};
            MuxOutput again;
            from_client(c, j.dump(), again);
            for (Delivery& d : again.lines)
                out.lines.push_back(std::move(d));
        }
    }
}

void Multiplexer::server_request(const rpc::Message& m, std::string_view line, MuxOutput& out) {
    if (m.method == "ping") {
        out.lines.push_back(
            {0, fmt::format(R"({{"jsonrpc":"2.0","id":{},"result":{{}}}})", m.id.raw)});
        return;
    }
    const std::string_view cap = needed_capability(m.method);
    std::set<ClientId> busy;
    for (const auto& [ours, p] : pending_)
        if (p.client != 0 && clients_.count(p.client)) busy.insert(p.client);
    std::vector<ClientId> able;
    for (ClientId c : busy)
        if (cap.empty() || clients_[c].capabilities.contains(std::string(cap))) able.push_back(c);
    if (able.size() != 1) {
        const std::string why = able.empty()
                                    ? fmt::format("no client with a request in flight declared {}",
                                                  cap.empty() ? "anything" : cap)
                                    : fmt::format(
                                          "{} clients with a request in flight declared {}: stdio "
                                          "does not say which one's call asked",
                                          able.size(), cap.empty() ? "anything" : cap);
        out.lines.push_back(
            {0, rpc::error_answer(m.id.raw, rpc::kInternalErrorCode, "mcpwarden --share: " + why)});
        out.notes.push_back(
            {0,
             "share.server_request_refused",
             {{"method", std::string(m.method)}, {"id", std::string(m.id.raw)}, {"why", why}}});
        return;
    }
    server_requests_[std::string(m.id.raw)] = {able.front(), std::string(m.method)};
    out.lines.push_back({able.front(), std::string(line)});
}

bool Multiplexer::to_stream_owner(std::string_view line, MuxOutput& out) const {
    static constexpr const char* kKey = "io.modelcontextprotocol/subscriptionId";
    if (line.find(kKey) == std::string_view::npos) return false;  // the common case, unparsed
    Json j = parse(line);
    if (!j.is_object() || !j.contains("params") || !j["params"].is_object()) return false;
    Json& params = j["params"];
    if (!params.contains("_meta") || !params["_meta"].is_object() ||
        !params["_meta"].contains(kKey))
        return false;
    auto it = pending_.find(params["_meta"][kKey].dump());
    if (it == pending_.end() || it->second.client == 0) {
        out.notes.push_back({0, "share.stream_notification_dropped", nlohmann::json::object()});
        return true;  // a stream nobody holds any more
    }
    params["_meta"][kKey] = Json::parse(it->second.client_raw, nullptr, false);
    out.lines.push_back({it->second.client, j.dump()});
    return true;
}

void Multiplexer::server_notification(const rpc::Message& m, std::string_view line,
                                      MuxOutput& out) {
    const std::string_view method = m.method;
    if (to_stream_owner(line, out)) return;
    if (method == "notifications/progress") {
        Json j = parse(line);
        if (j.is_object() && j.contains("params") && j["params"].is_object() &&
            j["params"].contains("progressToken")) {
            auto it = tokens_.find(j["params"]["progressToken"].dump());
            if (it != tokens_.end() && clients_.count(it->second.first)) {
                j["params"]["progressToken"] = Json::parse(it->second.second);
                out.lines.push_back({it->second.first, j.dump()});
                return;
            }
        }
        out.notes.push_back({0, "share.progress_dropped", nlohmann::json::object()});
        return;
    }
    if (method == "notifications/resources/updated") {
        Json j = parse(line);
        std::string uri;
        if (j.is_object() && j.contains("params") && j["params"].is_object() &&
            j["params"].contains("uri") && j["params"]["uri"].is_string())
            uri = j["params"]["uri"].get<std::string>();
        auto it = subscribers_.find(uri);
        if (it == subscribers_.end()) return;
        for (ClientId c : it->second)
            out.lines.push_back({c, std::string(line)});
        return;
    }
    if (method == "notifications/message") {
        Json j = parse(line);
        std::optional<int> level;
        if (j.is_object() && j.contains("params") && j["params"].is_object() &&
            j["params"].contains("level"))
            level = level_index(j["params"]["level"]);
        for (const auto& [c, cl] : clients_)
            if (!cl.log_level || !level || *level >= *cl.log_level)
                out.lines.push_back({c, std::string(line)});
        return;
    }
    if (method == "notifications/cancelled") {
        // The server gave up a request of its own: to the client it asked.
        Json j = parse(line);
        if (j.is_object() && j.contains("params") && j["params"].is_object() &&
            j["params"].contains("requestId")) {
            auto it = server_requests_.find(j["params"]["requestId"].dump());
            if (it != server_requests_.end()) {
                out.lines.push_back({it->second.client, std::string(line)});
                server_requests_.erase(it);
            }
        }
        return;
    }
    // list_changed and the rest: every client's.
    to_all(line, out);
}

// ---- A client leaving ---------------------------------------------------------------------

void Multiplexer::leave(ClientId c, MuxOutput& out) {
    auto cit = clients_.find(c);
    if (cit == clients_.end()) return;
    for (auto& [ours, p] : pending_) {
        if (p.client != c) continue;
        out.lines.push_back(
            {0, fmt::format(R"({{"jsonrpc":"2.0","method":"notifications/cancelled","params":)"
                            R"({{"requestId":{},"reason":"the client left the shared tree"}}}})",
                            ours)});
        out.notes.push_back({c, "share.abandoned", {{"id", p.client_raw}, {"method", p.method}}});
        p.client = 0;  // its answer, if it still comes, is dropped quietly
        if (!p.token.empty()) tokens_.erase(p.token);
        p.token.clear();
    }
    for (const std::string& uri : cit->second.subscriptions) {
        auto it = subscribers_.find(uri);
        if (it == subscribers_.end()) continue;
        it->second.erase(c);
        if (it->second.empty()) {
            subscribers_.erase(it);
            own_request("resources/unsubscribe", {{"uri", uri}}, out);
        }
    }
    for (auto it = server_requests_.begin(); it != server_requests_.end();) {
        if (it->second.client != c) {
            ++it;
            continue;
        }
        out.lines.push_back(
            {0, rpc::error_answer(it->first, rpc::kInternalErrorCode,
                                  "mcpwarden --share: the client asked left the shared tree")});
        it = server_requests_.erase(it);
    }
    std::erase_if(init_waiters_, [c](const auto& w) { return w.first == c; });
    clients_.erase(cit);
}

void Multiplexer::own_request(std::string_view method, nlohmann::json params, MuxOutput& out) {
    const std::string ours = next_id();
    pending_[ours] = Pending{0, "", std::string(method), "", false};
    out.lines.push_back({0, fmt::format(R"({{"jsonrpc":"2.0","id":{},"method":"{}","params":{}}})",
                                        ours, method, params.dump())});
}

void Multiplexer::answer(ClientId c, std::string_view id_raw, std::string_view result_json,
                         MuxOutput& out) const {
    out.lines.push_back(
        {c, fmt::format(R"({{"jsonrpc":"2.0","id":{},"result":{}}})", id_raw, result_json)});
}

void Multiplexer::to_all(std::string_view line, MuxOutput& out) const {
    for (const auto& [c, cl] : clients_)
        out.lines.push_back({c, std::string(line)});
}

}  // namespace warden::share
