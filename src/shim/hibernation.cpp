#include "shim/hibernation.hpp"

#include <utility>

namespace warden::shim {

namespace {

// The prefix of our ids, as their raw JSON text begins: no client uses it.
constexpr std::string_view kOurIdPrefix = R"("mcpwarden-wake-)";

nlohmann::json parse_object(std::string_view line) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    return j.is_object() ? j : nlohmann::json();
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

Hibernation::Hibernation(Relay& relay, bool replay_all) : relay_(relay), replay_all_(replay_all) {}

void Hibernation::set_state(State s) {
    state_ = s;
    // Asleep again after a failed wake, only a new request wakes the server: the ones held
    // for the failed wake have been answered.
    if (s == State::awake || s == State::going_to_sleep) wake_wanted_ = false;
    if (s == State::waking) {
        wake_result_ = nullptr;
        wake_refusal_.reset();
        replay_init_id_.clear();
    }
}

Hibernation::Event Hibernation::take_event() {
    return std::exchange(event_, Event::none);
}

bool Hibernation::client_message(const rpc::Message& m, std::string_view line) {
    watch_handshake(m, line);
    if (m.kind == rpc::Kind::request && catalog_method(m.method) && asked_.size() < 64)
        asked_[std::string(m.id.raw)] = std::string(m.method);
    if (state_ == State::awake) return false;
    // A wake that replays nothing (the client's own initialize is held for the new server):
    // what the client sends goes after it, in order, notifications too.
    if (wake_wanted_ && first_result_.is_null()) return false;
    switch (m.kind) {
        case rpc::Kind::request:
            if (m.method == "ping") {
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
    auto j = parse_object(line);
    auto answer = catalog_->answer(m.method, m.id.raw,
                                   j.is_object() ? j.value("params", nlohmann::json()) : j);
    if (!answer) return false;
    // The handshake a wake replays: the client's initialize (watched above), this answer.
    if (m.method == "initialize" && first_result_.is_null())
        first_result_ = catalog_->initialize_result();
    asked_.erase(std::string(m.id.raw));
    ++served_;
    relay_.answer_client(*answer);
    return true;
}

void Hibernation::watch_handshake(const rpc::Message& m, std::string_view line) {
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
        if (first_result_.is_null() && !initialize_id_.empty() && m.id.raw == initialize_id_) {
            auto j = parse_object(line);
            if (j.is_object() && j.contains("result")) first_result_ = j["result"];
        }
        if (auto it = asked_.find(std::string(m.id.raw)); it != asked_.end()) {
            keep_answer(it->second, m, line);
            asked_.erase(it);
        }
        return false;
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

void Hibernation::keep_answer(const std::string& method, const rpc::Message& m,
                              std::string_view line) {
    if (auto a = split_answer(line, m.id.raw)) seen_.answers[method] = std::move(*a);
}

void Hibernation::server_notification(const rpc::Message& m) {
    if (!m.method.starts_with("notifications/") || !m.method.ends_with("/list_changed")) return;
    seen_.stale = "the server sent " + std::string(m.method) + ": its lists change";
    catalog_.reset();
}

std::optional<Catalog> Hibernation::catalog_to_record(bool refresh) const {
    Catalog out;
    if (!seen_.stale.empty()) {
        out.stale = seen_.stale;
        return out;
    }
    auto seen_init = seen_.answers.find("initialize");
    auto served_init = catalog_ ? catalog_->answers.find("initialize") : seen_.answers.end();
    const bool same_server =
        catalog_ && served_init != catalog_->answers.end() &&
        (seen_init == seen_.answers.end() || served_init->second == seen_init->second);
    if (same_server) {
        out.answers = catalog_->answers;
        out.initialize_params = catalog_->initialize_params;
    }
    for (const auto& [method, a] : seen_.answers)
        out.answers[method] = a;
    if (seen_init != seen_.answers.end()) {
        auto j = parse_object(initialize_line_);
        out.initialize_params = j.is_object() ? j.value("params", nlohmann::json()) : j;
    }
    if (!out.answers.contains("initialize")) return std::nullopt;
    if (!refresh && same_server && out.answers == catalog_->answers &&
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
