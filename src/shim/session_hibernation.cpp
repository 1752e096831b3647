// The Session's side of hibernation and lazy start (docs/RUN.md, "Hibernation and lazy
// start"; shim/hibernation.hpp has the gate, shim/catalog.hpp the catalog).
#include <algorithm>
#include <chrono>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "contain/layers.hpp"
#include "journal/redact.hpp"
#include "shim/keeper.hpp"
#include "shim/session.hpp"
#include "sys/fd_passing.hpp"

namespace warden::shim {

// ---- Hibernation ------------------------------------------------------------------------
//
// The relay decides, the keeper acts (docs/RUN.md, "Hibernation and lazy start"): idle for
// --idle-stop → detach the server's input and say "hibernate"; the keeper's teardown report
// comes back as "hibernated" and is recorded as session.hibernate. A request while asleep
// (Hibernation says so through the relay's gate) → "wake"; the keeper passes the new pipes
// and says "spawned"; the handshake is replayed, and once the new server has answered the
// replayed initialize, what the client sent meanwhile is released to it: session.wake.

namespace {
int64_t ms_between(std::chrono::steady_clock::time_point a,
                   std::chrono::steady_clock::time_point b) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(b - a).count();
}
}  // namespace

int Session::idle_timeout_ms() const {
    if (!hib_ || !opts_.idle_stop || hib_->state() != Hibernation::State::awake) return -1;
    const auto dur = *opts_.idle_stop;
    auto since = relay_->idle_since();
    // Nothing to sleep with yet (no request of the stateless era, no legacy handshake to
    // replay): the gate says when there is (Event::sleepable), so no timeout till then.
    if (!hib_->can_sleep()) return -1;
    // A listen stream is activity until it ends, and its end wakes the relay (the gate):
    // nothing to look at before that.
    if (hib_->streams_open()) return -1;
    // Busy (a request in flight, bytes queued). The relay does not return from poll() when
    // that changes, so look again soon (at most every 10 ms, at least every second).
    if (!since || hib_->checking_lists())
        return static_cast<int>(std::clamp<int64_t>(dur.count() / 4, 10, 1000));
    int64_t left = dur.count() - ms_between(*since, std::chrono::steady_clock::now());
    return static_cast<int>(std::clamp<int64_t>(left, 0, 24 * 3600 * 1000));
}

void Session::hibernate_if_idle() {
    if (!hib_ || !opts_.idle_stop || end_ != End::none ||
        hib_->state() != Hibernation::State::awake)
        return;
    if (!hib_->can_sleep()) return;      // a legacy session with no handshake to replay yet
    if (hib_->checking_lists()) return;  // its answers are on their way
    auto since = relay_->idle_since();
    if (!since) return;
    const int64_t idle = ms_between(*since, std::chrono::steady_clock::now());
    if (idle < opts_.idle_stop->count()) return;
    idle_ms_ = idle;
    hibernate();
}

void Session::hibernate() {
    hib_->set_state(Hibernation::State::going_to_sleep);
    attached_ = false;
    relay_->detach_server();
    if (!write_all(control_.get(), "hibernate\n", "keeper control pipe")) keeper_gone();
}

void Session::hibernated(const std::string& report_json) {
    if (restarting_) return restart_torn_down(report_json);
    auto end = session_end_record(session_id_, "", std::nullopt, report_json);
    record("session.hibernate",
           journal::Json{
               {"idle_ms", idle_ms_},
               {"server", journal::Json{{"pid", server_.pid}, {"starttime", server_.starttime}}},
               {"teardown", end.teardown}});
    server_status_.reset();
    hib_->set_state(Hibernation::State::asleep);
    if (hib_->wake_wanted()) wake();
}

void Session::wake() {
    if (end_ != End::none || hib_->state() != Hibernation::State::asleep) return;
    if (!restart_allows_wake()) return;
    hib_->set_state(Hibernation::State::waking);
    wake_started_ = std::chrono::steady_clock::now();
    if (!write_all(control_.get(), "wake\n", "keeper control pipe")) keeper_gone();
}

void Session::on_gate() {
    switch (hib_->take_event()) {
        case Hibernation::Event::wake_wanted:
            wake();  // asleep: now; going to sleep: once the keeper says "hibernated"
            return;
        case Hibernation::Event::initialize_answered:
            replay_answered();
            return;
        case Hibernation::Event::lists_checked:
            lists_checked();
            return;
        case Hibernation::Event::sleepable:  // idle_timeout_ms() counts from now on
            return;
        case Hibernation::Event::none:
            return;
    }
}

// "spawned" from the keeper: the new server's pipes wait on the fd socket.
// Every "spawned" after the first comes with the pipes: they are taken off the socket whatever
// happens next, so that the next wake's are the next ones there.
void Session::server_woken(const KeeperMessage& m) {
    if (!hib_) return;
    auto fds = recv_fds(fd_socket_.get(), 3);
    // The wake failed meanwhile, or the client left while the keeper was spawning: the new
    // server gets EOF with these ends closed, and the teardown asked for takes its tree.
    if (hib_->state() != Hibernation::State::waking || end_ != End::none) return;
    if (!fds) {
        wake_failed("its pipes did not arrive: " + fds.error().message);
        return;
    }
    server_ = m.server;
    if (server_log_) server_log_->server_started(server_.pid);
    attached_ = true;
    if (auto s =
            relay_->attach_server(std::move((*fds)[0]), std::move((*fds)[1]), std::move((*fds)[2]));
        !s) {
        wake_failed("its pipes could not be watched: " + s.error().message);
        return;
    }
    auto init = hib_->initialize_replay();
    if (!init) {
        wake_done();  // the client never initialized: nothing to replay
        return;
    }
    if (!relay_->write_to_server_now(*init)) wake_failed("it did not read the replayed initialize");
}

void Session::replay_answered() {
    if (hib_->state() != Hibernation::State::waking) return;
    if (const auto& refusal = hib_->wake_refusal()) {
        wake_failed(*refusal);
        return;
    }
    std::string rest = hib_->rest_of_replay();
    if (!Faults::from_env().lazy_recheck) rest += hib_->recheck_lists();
    if (!relay_->write_to_server_now(rest)) {
        wake_failed("it did not read the replayed handshake");
        return;
    }
    wake_done();
}

// The woken server's answers to the lists the client was served from the catalog, compared:
// the client is told of each list that differs (once per notification: resources/list and
// resources/templates/list share one), and the comparison is on record.
void Session::lists_checked() {
    journal::Json compared = journal::Json::array(), changed = journal::Json::array();
    std::set<std::string> told;
    for (auto& c : hib_->take_list_checks()) {
        compared.push_back(c.method);
        if (c.difference.is_null() && c.error.empty()) continue;
        journal::Json d{{"method", c.method}};
        if (!c.difference.is_null()) d["difference"] = std::move(c.difference);
        if (!c.error.empty()) d["error"] = c.error;
        d["notified"] = c.notification.empty() ? journal::Json() : journal::Json(c.notification);
        if (!c.notification.empty() && told.insert(c.notification).second)
            relay_->answer_client(R"({"jsonrpc":"2.0","method":")" + c.notification + "\"}");
        changed.push_back(std::move(d));
    }
    record("session.lists_checked",
           journal::Json{{"compared", std::move(compared)}, {"changed", std::move(changed)}});
}

void Session::wake_done() {
    relay_->release_server_input();
    hib_->set_state(Hibernation::State::awake);
    journal::Json d{
        {"cold_start_us", std::chrono::duration_cast<std::chrono::microseconds>(
                              std::chrono::steady_clock::now() - wake_started_)
                              .count()},
        {"server", journal::Json{{"pid", server_.pid}, {"starttime", server_.starttime}}},
        {"request", hib_->wake_method()}};
    if (!server_started_) d["lazy_start"] = true;  // the session's first server (--lazy)
    server_started_ = true;
    if (auto changes = hib_->initialize_changes(); !changes.is_null())
        d["initialize_changed"] = std::move(changes);
    if (restarting_) return restarted(std::move(d));
    record("session.wake", std::move(d));
}

// The requests held for the new server are answered with an error naming why; whatever the
// failed start left is torn down, and the next request tries again.
void Session::wake_failed(const std::string& why) {
    relay_->fail_held_requests("mcpwarden: the server could not be woken: " + why);
    log("mcpwarden: the server could not be woken: " + why + "\n");
    record("session.wake",
           journal::Json{{"error", SensitiveText(why)}, {"request", hib_->wake_method()}});
    idle_ms_ = 0;
    hibernate();
}

void Session::record(const std::string& kind, journal::Json data) {
    if (!journal_ || !journal_->journal()) return;
    journal_->append(journal::Event{kind, session_id_, 0, std::move(data)});
}

// ---- Lazy start -------------------------------------------------------------------------
//
// --lazy (shim/catalog.hpp): the newest catalog of this server's identity, if it may be used,
// is handed to Hibernation by start_relay; session.start says which (`lazy.catalog_seq`) or
// why none is (`lazy.not_used`). At the end, what this session's server answered (over what
// was served) is recorded as the next catalog, unless it is the one served and still young.

journal::Json Session::find_usable_catalog() {
    identity_ = server_identity(opts_);
    journal::Json j{{"catalog_seq", nullptr},
                    {"max_age_ms", static_cast<int64_t>(opts_.lazy_max_age.count())}};
    if (!journal_ || !journal_->journal()) {
        j["not_used"] = "no journal";
        return j;
    }
    auto found = find_catalog(journal_->journal()->paths().db, *identity_);
    if (!found) {
        j["not_used"] = "the journal could not be read: " + found.error().message;
    } else if (!*found) {
        j["not_used"] = "no catalog of this server yet";
    } else if (auto why =
                   why_not_usable(**found, *identity_, journal::now_ns(), opts_.lazy_max_age);
               why && !Faults::from_env().lazy_stale) {
        j["not_used"] = *why;
    } else {
        j["catalog_seq"] = (*found)->seq;
        catalog_ = std::move(**found);
    }
    return j;
}

void Session::record_catalog() {
    if (!opts_.lazy || !hib_ || !identity_ || !journal_ || !journal_->journal()) return;
    const auto& serving = hib_->serving();
    const bool refresh = serving && journal::now_ns() - serving->ts_ns >
                                        std::chrono::nanoseconds(opts_.lazy_max_age).count() / 2;
    if (auto c = hib_->catalog_to_record(refresh))
        record("server.catalog", c->to_record(*identity_));
}

}  // namespace warden::shim
