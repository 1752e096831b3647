#include "shim/hibernation.hpp"

#include <utility>

#include "journal/journal.hpp"

namespace warden::shim {

namespace {

// The prefix of our ids, as their raw JSON text begins: no client uses it.
constexpr std::string_view kOurIdPrefix = R"("mcpwarden-wake-)";

nlohmann::json parse_object(std::string_view line) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    return j.is_object() ? j : nlohmann::json();
}

nlohmann::json params_of(std::string_view line) {
    auto j = parse_object(line);
    return j.is_object() ? j.value("params", nlohmann::json()) : j;
}

}  // namespace

std::string_view to_string(Hibernation::State s) {
    switch (s) {
        case Hibernation::State::awake:
            return "awake";
        case Hibernation::State::going_to_sleep:
            return "going_to_sleep";
        case Hibernation::State::asleep:
            return "asleep";
        case Hibernation::State::waking:
            return "waking";
    }
    return "?";
}

Hibernation::Hibernation(Relay& relay, bool replay_all, bool sleep_needs_handshake)
    : relay_(relay), replay_all_(replay_all), sleep_needs_handshake_(sleep_needs_handshake) {}

bool Hibernation::can_sleep() const {
    if (stateless() && !sleep_needs_handshake_) return true;
    return handshake_done();
}

void Hibernation::note_sleepable() {
    if (!sleepable_told_ && can_sleep()) sleepable_told_ = sleepable_ = true;
}

void Hibernation::set_state(State s) {
    state_ = s;
    // Asleep again after a failed wake, only a new request wakes the server: the ones held
    // for the failed wake have been answered.
    if (s == State::awake || s == State::going_to_sleep) wake_wanted_ = false;
    if (s == State::waking) {
        wake_result_ = nullptr;
        wake_refusal_.reset();
        replay_init_id_.clear();
        // The last server went before it answered every recheck: the new one is asked them all.
        for (auto& [id, asked] : rechecks_)
            served_lists_.emplace(asked.first, asked.second);
        rechecks_.clear();
        checks_.clear();
        checks_ready_ = false;
    }
}

Hibernation::Event Hibernation::take_event() {
    if (event_ != Event::none) return std::exchange(event_, Event::none);
    if (std::exchange(checks_ready_, false)) return Event::lists_checked;
    const bool sleepable = std::exchange(sleepable_, false);
    const bool stream_ended = std::exchange(stream_ended_, false);  // both taken at once
    return sleepable || stream_ended ? Event::sleepable : Event::none;
}

bool Hibernation::client_message(const rpc::Message& m, std::string_view line) {
    watch_handshake(m, line);
    constexpr size_t kMostStreams = 256;  // a stream is one outstanding request each
    if (m.kind == rpc::Kind::request && m.method == "subscriptions/listen" &&
        open_streams_.size() < kMostStreams)
        open_streams_.insert(std::string(m.id.raw));
    if (m.kind == rpc::Kind::request && catalog_method(m.method) && asked_.size() < 64)
        asked_[std::string(m.id.raw)] = answer_key(m.method, params_of(line));
    if (state_ == State::awake) return false;
    // A wake that replays nothing (the client's own initialize is held for the new server):
    // what the client sends goes after it, in order, notifications too.
    if (wake_wanted_ && first_result_.is_null()) return false;
    switch (m.kind) {
        case rpc::Kind::request:
            if (m.method == "ping" && !stateless()) {  // no ping in the stateless era
                relay_.answer_client(R"({"jsonrpc":"2.0","id":)" + std::string(m.id.raw) +
                                     R"(,"result":{}})");
                return true;
            }
            if (state_ == State::asleep && answer_from_catalog(m, line)) return true;
            break;
        case rpc::Kind::batch:
            break;
        default:  // notifications, responses: nothing to deliver them to (see the header)
            return true;
    }
    if (!wake_wanted_) {
        wake_wanted_ = true;
        wake_method_ = m.kind == rpc::Kind::batch ? "batch" : std::string(m.method);
        event_ = Event::wake_wanted;
    }
    return false;
}

bool Hibernation::answer_from_catalog(const rpc::Message& m, std::string_view line) {
    if (!catalog_ || !catalog_method(m.method)) return false;
    const auto params = params_of(line);
    if (m.method != "initialize" && answer_key(m.method, params) == m.method &&
        !catalog_->same_legacy_version(params_of(initialize_line_)))
        return false;
    auto answer = catalog_->answer(m.method, m.id.raw, params, journal::now_ns());
    if (!answer) return false;
    // The handshake a wake replays: the client's initialize (watched above), this answer.
    if (m.method == "initialize" && first_result_.is_null()) {
        first_result_ = catalog_->initialize_result();
        note_sleepable();
    }
    if (m.method == "initialize") {
        const auto caps =
            catalog_->served_initialize()->result().value("capabilities", nlohmann::json());
        for (const char* cap : {"tools", "prompts", "resources"})
            if (caps.is_object() && caps.value(cap, nlohmann::json()).is_object() &&
                caps[cap].value("listChanged", false) == true)
                advertised_.insert(cap);
    } else if (const auto key = answer_key(m.method, params); key == m.method) {
        // A legacy list, asked again of the next server; a 2026-07-28 answer is served only
        // within the ttlMs its server gave it, which is the server's word for how long it holds.
        served_lists_.insert_or_assign(key, catalog_->answers.at(key));
    }
    asked_.erase(std::string(m.id.raw));
    ++served_;
    if (served_cb_) served_cb_(m, line);
    relay_.answer_client(*answer);
    return true;
}

void Hibernation::watch_handshake(const rpc::Message& m, std::string_view line) {
    if (m.kind == rpc::Kind::request && m.era == rpc::Era::stateless && !stateless_seen_) {
        stateless_seen_ = true;
        note_sleepable();
    }
    if (m.kind == rpc::Kind::request && m.method == "initialize" && initialize_line_.empty()) {
        initialize_line_ = std::string(line);
        initialize_id_ = std::string(m.id.raw);
    } else if (m.kind == rpc::Kind::notification && m.method == "notifications/initialized") {
        initialized_ = true;
    } else if (m.kind == rpc::Kind::request && m.method == "logging/setLevel") {
        set_level_line_ = std::string(line);
    } else if (m.kind == rpc::Kind::request &&
               (m.method == "resources/subscribe" || m.method == "resources/unsubscribe")) {
        auto j = parse_object(line);
        if (!j.is_object() || !j.contains("params") || !j["params"].is_object()) return;
        auto uri = j["params"].value("uri", std::string());
        if (m.method == "resources/subscribe")
            subscriptions_[uri] = std::string(line);
        else
            subscriptions_.erase(uri);
    }
}

bool Hibernation::server_response(const rpc::Message& m, std::string_view line) {
    if (!m.id.raw.starts_with(kOurIdPrefix)) {
        if (open_streams_.erase(std::string(m.id.raw)) > 0 && open_streams_.empty())
            stream_ended_ = true;
        if (first_result_.is_null() && !initialize_id_.empty() && m.id.raw == initialize_id_) {
            auto j = parse_object(line);
            if (j.is_object() && j.contains("result")) first_result_ = j["result"];
            note_sleepable();
        }
        if (auto it = asked_.find(std::string(m.id.raw)); it != asked_.end()) {
            keep_answer(it->second, m, line);
            asked_.erase(it);
        }
        return false;
    }
    if (auto it = rechecks_.find(std::string(m.id.raw)); it != rechecks_.end()) {
        auto [method, served] = std::move(it->second);
        rechecks_.erase(it);
        compare_list(method, served, line, m);
        if (rechecks_.empty()) checks_ready_ = true;
        return true;
    }
    if (m.id.raw == replay_init_id_ && state_ == State::waking) {
        keep_answer("initialize", m, line);
        auto j = parse_object(line);
        if (j.is_object() && j.contains("result")) {
            wake_result_ = j["result"];
        } else {
            std::string why = "it answered the replayed initialize with an error";
            if (j.is_object() && j.contains("error") && j["error"].is_object())
                why += ": " + j["error"].value("message", std::string("(no message)"));
            wake_refusal_ = why;
        }
        event_ = Event::initialize_answered;
    }
    return true;  // ours: never the client's
}

void Hibernation::compare_list(const std::string& method, const CachedAnswer& served,
                               std::string_view line, const rpc::Message& m) {
    ListCheck c;
    c.method = method;
    auto j = parse_object(line);
    if (j.is_object() && j.contains("result")) {
        c.difference = list_difference(method, served.result(), j["result"]);
        keep_answer(method, m, line);
        if (auto a = split_answer(line, m.id.raw); a && catalog_) catalog_->answers[method] = *a;
    } else {
        c.error = j.is_object() && j.contains("error") && j["error"].is_object()
                      ? j["error"].value("message", std::string("(no message)"))
                      : std::string("(not a JSON-RPC answer)");
        // Not served again, nor left in the next catalog.
        if (catalog_) catalog_->answers.erase(method);
        seen_.answers.erase(method);
    }
    if (!c.difference.is_null() || !c.error.empty()) {
        lists_changed_ = true;
        const std::string cap(list_capability(method));
        if (advertised_.contains(cap)) c.notification = "notifications/" + cap + "/list_changed";
    }
    checks_.push_back(std::move(c));
}

std::string Hibernation::recheck_lists() {
    if (first_result_.is_null()) return {};
    std::string out;
    for (auto& [method, served] : served_lists_) {
        const std::string id = "mcpwarden-wake-" + std::to_string(++next_id_);
        out += R"({"jsonrpc":"2.0","id":")" + id + R"(","method":")" + method + "\"}\n";
        rechecks_["\"" + id + "\""] = {method, std::move(served)};
    }
    served_lists_.clear();
    return out;
}

void Hibernation::keep_answer(const std::string& key, const rpc::Message& m,
                              std::string_view line) {
    if (key.empty()) return;
    if (auto a = split_answer(line, m.id.raw, key != key_method(key)))
        seen_.answers[key] = std::move(*a);
}

// `notifications/<capability>/list_changed`: what the server answered to the lists of that
// capability so far is out of date. Those answers are neither served again nor kept for the
// next catalog; the ones it gives from now on are. (A server that adds tools once the client
// has initialized, as many SDK servers do, so leaves the lists it answers after that.)
void Hibernation::server_notification(const rpc::Message& m) {
    constexpr std::string_view kPrefix = "notifications/", kSuffix = "/list_changed";
    if (!m.method.starts_with(kPrefix) || !m.method.ends_with(kSuffix)) return;
    const auto cap =
        m.method.substr(kPrefix.size(), m.method.size() - kPrefix.size() - kSuffix.size());
    auto out_of_date = [&](const auto& kv) { return list_capability(key_method(kv.first)) == cap; };
    if (std::erase_if(seen_.answers, out_of_date) > 0) lists_changed_ = true;
    if (catalog_ && std::erase_if(catalog_->answers, out_of_date) > 0) lists_changed_ = true;
}

std::optional<Catalog> Hibernation::catalog_to_record(bool refresh) const {
    Catalog out;
    auto seen_init = seen_.answers.find("initialize");
    auto served_init = catalog_ ? catalog_->answers.find("initialize") : seen_.answers.end();
    // A catalog of 2026-07-28 answers alone (a stateless client's: no initialize) is the same
    // server's as long as nothing says otherwise: each of its answers holds for its own ttlMs.
    const bool same_server =
        catalog_ && (served_init == catalog_->answers.end() || seen_init == seen_.answers.end() ||
                     served_init->second == seen_init->second);
    if (same_server) {
        out.answers = catalog_->answers;
        out.initialize_params = catalog_->initialize_params;
        // Out of their ttlMs, never to be served again: not carried on.
        std::erase_if(out.answers, [now = journal::now_ns()](const auto& kv) {
            const auto& a = kv.second;
            return a.ttl_ms > 0 && now - a.received_ns >= a.ttl_ms * 1'000'000;
        });
    }
    for (const auto& [method, a] : seen_.answers)
        out.answers[method] = a;
    if (seen_init != seen_.answers.end()) {
        auto j = parse_object(initialize_line_);
        out.initialize_params = j.is_object() ? j.value("params", nlohmann::json()) : j;
    }
    if (out.answers.empty()) return std::nullopt;
    if (!refresh && !lists_changed_ && same_server && out.answers == catalog_->answers &&
        out.initialize_params == catalog_->initialize_params)
        return std::nullopt;
    return out;
}

std::string Hibernation::with_our_id(const std::string& line, bool& ok) {
    auto j = parse_object(line);
    ok = j.is_object();
    if (!ok) return {};
    j["id"] = "mcpwarden-wake-" + std::to_string(++next_id_);
    return j.dump() + "\n";
}

std::optional<std::string> Hibernation::initialize_replay() {
    if (initialize_line_.empty() || first_result_.is_null()) return std::nullopt;
    bool ok = false;
    std::string out = with_our_id(initialize_line_, ok);
    if (!ok) return std::nullopt;
    replay_init_id_ = "\"mcpwarden-wake-" + std::to_string(next_id_) + "\"";
    return out;
}

std::string Hibernation::rest_of_replay() {
    if (!replay_all_) return {};
    std::string out;
    if (initialized_)
        out += R"({"jsonrpc":"2.0","method":"notifications/initialized"})"
               "\n";
    bool ok = false;
    if (!set_level_line_.empty()) out += with_our_id(set_level_line_, ok);
    for (auto& [uri, line] : subscriptions_)
        out += with_our_id(line, ok);
    return out;
}

nlohmann::json Hibernation::initialize_changes() const {
    if (!first_result_.is_object() || !wake_result_.is_object()) return nullptr;
    nlohmann::json before = nlohmann::json::object(), after = nlohmann::json::object();
    for (const char* key : {"protocolVersion", "capabilities", "serverInfo"}) {
        auto a = first_result_.value(key, nlohmann::json());
        auto b = wake_result_.value(key, nlohmann::json());
        if (a == b) continue;
        before[key] = a;
        after[key] = b;
    }
    if (before.empty()) return nullptr;
    return nlohmann::json{{"before", before}, {"after", after}};
}

}  // namespace warden::shim
