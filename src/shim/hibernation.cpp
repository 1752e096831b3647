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
    if (state_ == State::awake) return false;
    switch (m.kind) {
        case rpc::Kind::request:
            if (m.method == "ping") {
                relay_.answer_client(R"({"jsonrpc":"2.0","id":)" + std::string(m.id.raw) +
                                     R"(,"result":{}})");
                return true;
            }
            break;
        case rpc::Kind::batch:
            break;
        default:  // notifications, responses: nothing to deliver them to (see the header)
            return true;
    }
    if (!wake_wanted_) {
        wake_wanted_ = true;
        event_ = Event::wake_wanted;
    }
    return false;
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
        return false;
    }
    if (m.id.raw == replay_init_id_ && state_ == State::waking) {
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

std::string Hibernation::with_our_id(const std::string& line, bool& ok) {
    auto j = parse_object(line);
    ok = j.is_object();
    if (!ok) return {};
    j["id"] = "mcpwarden-wake-" + std::to_string(++next_id_);
    return j.dump() + "\n";
}

std::optional<std::string> Hibernation::initialize_replay() {
    if (initialize_line_.empty()) return std::nullopt;
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
