// The Session as a supervisor: the server's stderr kept (shim/server_log.hpp), a death while
// the client is still there explained to it, and the server started again under --restart
// on-failure (shim/restart.hpp).
//
// A restart is a hibernation the server did not ask for, and it goes the same way
// (session_hibernation.cpp): the relay detaches the dead server and holds what the client
// sends; the keeper tears down what the server left ("hibernate"), and once it has
// ("hibernated") the start limit decides: a start now, after the backoff (restart_at_, the
// relay's poll wakes for it: poll_timeout_ms), or none before the interval is over
// (refused_until_: each request is answered with why). A start is a wake ("wake": the keeper
// spawns, the handshake is replayed); when the new server has answered the replayed initialize,
// what was held is released to it and `session.restart` records the cause, the evidence and the
// cold start. A start that fails before that (the server dies again at once) fails its held
// requests as a failed wake does, and the teardown after it brings the next decision of the
// limit.
#include <sys/wait.h>

#include <algorithm>

#include <fmt/format.h>

#include "journal/canonical_json.hpp"
#include "journal/journal.hpp"
#include "journal/redact.hpp"
#include "shim/keeper.hpp"
#include "shim/session.hpp"

namespace warden::shim {

namespace {

// How long the relay waits for the log's writer to reach the server's last line.
constexpr std::chrono::milliseconds kTailWait{200};

int64_t us_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                                 t)
        .count();
}

}  // namespace

// ---- The server's log ---------------------------------------------------------------------

void Session::start_server_log() {
    const Faults faults = Faults::from_env();
    LogSettings s;
    s.on = opts_.logs && !opts_.no_journal;
    s.file_size = opts_.log_size;
    s.files = opts_.log_files;
    s.redact = !faults.log_unredacted;
    s.block = faults.log_blocking;
    std::string dir;
    if (s.on) {
        auto db = journal::resolve_path(opts_.journal);
        char cwd[4096];
        const std::string name = opts_.name.empty() ? opts_.command[0] : opts_.name;
        if (db)
            dir = logs_root(*db) + "/" +
                  log_key(name.substr(name.rfind('/') + 1), opts_.command,
                          ::getcwd(cwd, sizeof cwd) ? cwd : "");
    }
    server_log_ = std::make_unique<ServerLog>(dir, session_id_, s);
    if (server_.pid > 0) server_log_->server_started(server_.pid);
    relay_->set_stderr_tap(server_log_.get());
}

void Session::finish_server_log() {
    if (!server_log_) return;
    server_log_->close();
    const ServerLog::Stats st = server_log_->stats();
    // The log lives beside the journal: when the journal could not be opened or written either
    // (a missing home, a read-only or full disk), its own line has said why already, and a
    // client counts our lines.
    const bool journal_said = !journal_ || !journal_->journal() || journal_->warned();
    if (!st.error.empty() && !journal_said)
        log("mcpwarden: logs: " + st.error + " (the server's stderr is not kept)\n");
}

// ---- Crash ----------------------------------------------------------------------------------

// The keeper reported the server's exit while the session was awake and the client there.
// False: the session ends with it (the caller records the status).
bool Session::server_exit_handled(int wait_status) {
    if (Faults::from_env().crash_unexplained) return false;  // the guard off: as before
    ServerFailure f = ServerFailure::from_wait_status(wait_status);
    explain_exit(f);
    server_failed(std::move(f));
    return end_ == End::none;
}

void Session::server_failed(ServerFailure f) {
    // What the server wrote before it went is in its pipes: relayed first, so that a request it
    // answered is answered, and its last stderr lines are in the log.
    relay_ready_output();
    if (server_log_) f.stderr_tail = server_log_->tail(kCrashTailLines, kTailWait);
    const std::string message = crash_message(f);
    // Without a restart the session ends with the server: an open listen stream is not a call to
    // answer but a stream that ends with it, closed by the server (recorded at the end).
    const bool ends = opts_.restart != Restart::OnFailure;
    journal::Json answered = journal::Json::array();
    for (const Outstanding& o : relay_->outstanding())
        if (o.answer == 0 && end_ == End::none && !(ends && o.method == "subscriptions/listen")) {
            auto id = journal::rpc_id_from_json_text(o.raw.empty() ? "null" : o.raw);
            answered.push_back(id ? *id : journal::Json(o.raw));
        }
    if (end_ == End::none) relay_->fail_held_requests(message, ends);
    trace_phase("crash_answered");
    if (server_log_) server_log_->note(f.describe());
    const std::string refusal = end_ != End::none ? "the client is gone" : restart_refusal(f);
    // Said and recorded when it changed something for the client: requests answered with it,
    // or a restart. A server that exits between requests ends the session as it always did.
    if (!answered.empty() || refusal.empty()) {
        log(message + "\n");
        journal::Json evidence = f.evidence;
        journal::Json tail = journal::Json::array();
        for (const std::string& line : f.stderr_tail)
            tail.push_back(SensitiveText(line));
        evidence["stderr_tail"] = std::move(tail);
        post_record("session.crash",
                    journal::Json{{"cause", f.cause},
                                  {"summary", SensitiveText(f.describe())},
                                  {"evidence", std::move(evidence)},
                                  {"answered", std::move(answered)},
                                  {"message", SensitiveText(message)},
                                  {"restart", refusal.empty() ? journal::Json("on-failure")
                                                              : journal::Json(refusal)}});
    }
    if (!refusal.empty()) {
        if (f.wait_status) server_status_ = f.wait_status;
        if (end_ == End::none) end_ = End::server_exit;
        return;
    }
    restarting_ = std::move(f);
    restart_teardown_.reset();
    hibernate();  // the keeper tears down what is left; restart_torn_down() follows
}

// Why the server is not started again after `f`; "" when it is.
std::string Session::restart_refusal(const ServerFailure& f) const {
    if (opts_.restart != Restart::OnFailure) return "no";
    if (!f.is_failure()) return "a clean exit";
    if (!hib_ || hib_->state() != Hibernation::State::awake) return "not awake";
    if (!hib_->can_sleep()) return "no handshake to replay";
    return "";
}

// ---- Restart --------------------------------------------------------------------------------

// The crash and the restart are on record off the relay's path (the journal's writer thread
// commits them, as it does the answers): a durable append here would hold the teardown, the
// new server's start and the forwarding of its first answer behind a commit each, which
// costs more than the whole restart does without a journal.
void Session::post_record(const std::string& kind, journal::Json data) {
    if (!journal_ || !journal_->journal()) return;
    journal_->journal()->post(journal::Event{kind, session_id_, 0, std::move(data)});
}

// "hibernated" after a failure: the tree is gone. The start limit decides when the next one
// starts.
void Session::restart_torn_down(const std::string& report_json) {
    trace_phase("restart_torn_down");
    auto teardown = session_end_record(session_id_, "", std::nullopt, report_json).teardown;
    if (!restart_teardown_) restart_teardown_ = std::move(teardown);
    server_status_.reset();
    hib_->set_state(Hibernation::State::asleep);
    if (!start_limit_) start_limit_.emplace(opts_.restart_burst, opts_.restart_interval);
    const auto now = std::chrono::steady_clock::now();
    const auto d = start_limit_->next(now, Faults::from_env().restart_unlimited);
    if (!d.allowed) {
        refused_until_ = d.retry_at;
        const auto ms =
            std::chrono::duration_cast<std::chrono::milliseconds>(d.retry_at - now).count();
        const std::string why = start_limit_message(*start_limit_, std::chrono::milliseconds(ms),
                                                    restarting_->describe());
        log(why + "\n");
        if (server_log_) server_log_->note(why);
        record("session.restart",
               journal::Json{{"cause", restarting_->cause},
                             {"refused", "start limit"},
                             {"starts", start_limit_->recent(now)},
                             {"interval_ms", static_cast<int64_t>(opts_.restart_interval.count())},
                             {"retry_in_ms", static_cast<int64_t>(ms)}});
        if (hib_->wake_wanted()) refuse_held_requests(d.retry_at);
        return;
    }
    restart_at_ = now + d.delay;
    // `status` says until when the session is restarting (a first start is at once).
    if (d.delay > StartLimit::Clock::duration::zero())
        post_record("session.backoff",
                    journal::Json{
                        {"cause", restarting_->cause},
                        {"starts", start_limit_->recent(now)},
                        {"backoff_ms",
                         std::chrono::duration_cast<std::chrono::milliseconds>(d.delay).count()}});
    restart_when_due();
}

// Called at the top of wake(): a wake the restart policy does not allow now is not made.
bool Session::restart_allows_wake() {
    const auto now = std::chrono::steady_clock::now();
    if (restart_at_ && now < *restart_at_) return false;  // restart_when_due() wakes it
    if (refused_until_) {
        if (now < *refused_until_) {
            refuse_held_requests(*refused_until_);
            return false;
        }
        // The interval is over: a request starts the server again, as a restart.
        refused_until_.reset();
        const auto d = start_limit_->next(now, Faults::from_env().restart_unlimited);
        if (!d.allowed) {
            refused_until_ = d.retry_at;
            refuse_held_requests(d.retry_at);
            return false;
        }
    }
    restart_at_.reset();
    return true;
}

void Session::refuse_held_requests(StartLimit::Clock::time_point retry_at) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
        retry_at - std::chrono::steady_clock::now());
    relay_->fail_held_requests(start_limit_message(
        *start_limit_, ms, restarting_ ? restarting_->describe() : std::string()));
    hib_->wake_refused();
}

void Session::restart_when_due() {
    if (!restart_at_ || !hib_ || hib_->state() != Hibernation::State::asleep || end_ != End::none)
        return;
    if (std::chrono::steady_clock::now() < *restart_at_) return;
    restart_at_.reset();
    trace_phase("restart_wake");
    wake();
}

// The relay's poll() timeout: --idle-stop's, or sooner when a restart's backoff ends.
int Session::poll_timeout_ms() const {
    const int idle = idle_timeout_ms();
    if (!restart_at_) return idle;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(*restart_at_ -
                                                                   std::chrono::steady_clock::now())
                          .count();
    const int restart = static_cast<int>(std::clamp<int64_t>(left, 0, 24 * 3600 * 1000));
    return idle < 0 ? restart : std::min(idle, restart);
}

// The new server answered the replayed initialize (wake_done): session.restart.
void Session::restarted(journal::Json wake) {
    trace_phase("restarted");
    const ServerFailure& f = *restarting_;
    journal::Json evidence = f.evidence;
    if (restart_teardown_) evidence["teardown"] = *restart_teardown_;
    const auto now = std::chrono::steady_clock::now();
    wake["cause"] = f.cause;
    wake["summary"] = SensitiveText(f.describe());
    wake["evidence"] = std::move(evidence);
    wake["starts"] = start_limit_ ? start_limit_->recent(now) : 0;
    wake["cold_start_us"] = us_since(wake_started_);
    post_record("session.restart", std::move(wake));
    if (server_log_) server_log_->note(fmt::format("restarted (pid {})", server_.pid));
    restarting_.reset();
    restart_teardown_.reset();
}

}  // namespace warden::shim
