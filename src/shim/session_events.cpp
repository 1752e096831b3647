// What wakes the Session's loop (handle): the client's loss, the stdout guard's verdict, the
// hibernation gate, a signal, the keeper's reports and its death; and the teardown the
// relay does itself when the keeper is gone (we are a subreaper too).
#include <signal.h>
#include <sys/wait.h>

#include <optional>
#include <utility>

#include <fmt/format.h>

#include "contain/layers.hpp"
#include "contain/teardown.hpp"
#include "record/teardown_record.hpp"
#include "shim/keeper.hpp"
#include "shim/session.hpp"
#include "sys/cgroup.hpp"

namespace warden::shim {

namespace {

// "exit status 3", "signal 9": for messages.
std::string describe_wait_status(int st) {
    if (WIFEXITED(st)) return fmt::format("exit status {}", WEXITSTATUS(st));
    if (WIFSIGNALED(st)) return fmt::format("signal {}", WTERMSIG(st));
    return fmt::format("wait status {}", st);
}

}  // namespace

// ---- Events -----------------------------------------------------------------------------

void Session::handle(const Relay::Wake& w) {
    using What = Relay::Wake::What;
    switch (w.what) {
        case What::client_lost:
            loss_ = w.loss;
            if (end_ == End::none) end_ = End::client_lost;
            return;
        case What::guard_failed:
            log("mcpwarden: the server wrote a non-JSON line to stdout, which --stdout-guard=fail "
                "does not allow: ending the session (exit " +
                std::to_string(kStdoutGuardExit) + ")\n");
            // The guard's verdict, whatever ends the session around it: the relay may read
            // the client's EOF, or the server's exit on it, before the line the server wrote.
            if (end_ == End::none || end_ == End::client_lost || end_ == End::server_exit)
                end_ = End::stdout_guard;
            return;
        case What::gate:
            on_gate();
            return;
        case What::server_closed:
            // While waking, only the new server's streams count (the last one's close too).
            if (hib_ && hib_->state() == Hibernation::State::waking && attached_)
                wake_failed("it closed its stdout before answering the replayed initialize");
            return;
        case What::timeout:
            return;
        case What::watched:
            break;
    }
    switch (w.token) {
        case kSignals:
            read_signals();
            return;
        case kParent:
            (void)relay_->unwatch(parent_pidfd_.get());
            parent_pidfd_.reset();
            relay_->client_lost(ClientLoss::client_exit);
            loss_ = ClientLoss::client_exit;
            if (end_ == End::none) end_ = End::client_lost;
            return;
        case kReport:
            read_reports();
            return;
        case kKeeper:
            keeper_gone();
            return;
        case kDenials:
            record_denials();
            return;
    }
}

void Session::read_signals() {
    while (auto s = signals_->read()) {
        if (!s->has_value()) break;
        int sig = static_cast<int>((*s)->ssi_signo);
        if (sig == SIGCHLD) continue;  // the keeper's end is seen through its pidfd
        signal_ = sig;
        relay_->client_lost(ClientLoss::signal);
        if (loss_ == ClientLoss::none) loss_ = ClientLoss::signal;
        if (end_ == End::none) end_ = End::client_lost;
    }
}

void Session::read_reports() {
    reports_->fill();
    while (auto line = reports_->next_line()) {
        auto m = parse_keeper_message(*line);
        using Kind = KeeperMessage::Kind;
        const bool awake = !hib_ || hib_->state() == Hibernation::State::awake;
        if (m.kind == Kind::exited && !awake) {
            // Expected when going to sleep (EOF); a failed wake when waking.
            if (hib_->state() == Hibernation::State::waking)
                wake_failed(fmt::format("it exited ({}) before answering the replayed initialize",
                                        describe_wait_status(m.status)));
        } else if (m.kind == Kind::exited) {
            trace_phase("server_exit_reported");
            if (end_ == End::none)
                exit_to_handle_ = m.status;  // after these lines (server_exit_handled)
            else
                server_status_ = m.status;
        } else if (m.kind == Kind::report) {
            report_json_ = m.json;
        } else if (m.kind == Kind::record) {
            keeper_records_.push_back(std::move(m.json));
        } else if (m.kind == Kind::hibernated) {
            hibernated(m.json);
        } else if (m.kind == Kind::spawned) {
            server_woken(m);
        } else if ((m.kind == Kind::spawn_failed || m.kind == Kind::wake_failed) && hib_ &&
                   hib_->state() == Hibernation::State::waking) {
            wake_failed("it could not be started: " + m.message);
        }
    }
    if (auto st = std::exchange(exit_to_handle_, std::nullopt); st && !server_exit_handled(*st)) {
        server_status_ = *st;
        if (end_ == End::none) end_ = End::server_exit;
    }
    if (reports_->eof()) {
        (void)relay_->unwatch(report_.get());
        if (!report_json_) keeper_gone();
    }
}

void Session::keeper_gone() {
    if (keeper_dead_) return;
    // A report may still sit in the pipe.
    reports_->fill();
    while (auto line = reports_->next_line()) {
        auto m = parse_keeper_message(*line);
        if (m.kind == KeeperMessage::Kind::exited) server_status_ = m.status;
        if (m.kind == KeeperMessage::Kind::report) report_json_ = m.json;
        if (m.kind == KeeperMessage::Kind::record) keeper_records_.push_back(std::move(m.json));
    }
    if (keeper_pidfd_.valid()) {
        if (!keeper_pidfd_.is_exited()) return;  // the report pipe closed early: not dead yet
        (void)relay_->unwatch(keeper_pidfd_.get());
    }
    int st = 0;
    if (::waitpid(keeper_pid_, &st, 0) == keeper_pid_) keeper_status_ = st;
    keeper_dead_ = true;
    if (end_ == End::none) end_ = report_json_ ? End::server_exit : End::keeper_died;
}

void Session::tear_down_ourselves() {
    if (!keeper_dead_) keeper_gone();
    end_helpers();  // not the server's: our child, and a teardown as subreaper would take it
    if (journal_) journal_->recover_keepers_records();
    TeardownScope s;
    if (server_.pid > 0) s.roots.push_back(server_);
    s.subreaper = true;
    s.sole_parent = true;  // our only child was the keeper, reaped: the rest is its tree
    s.session_marker = session_id_;
    s.use_pidfd = pidfd_supported();
    std::optional<Cgroup> cg;
    if (!cgroup_dir_.empty())
        if (auto c = Cgroup::open(cgroup_dir_ + "/payload")) {
            cg.emplace(std::move(*c));
            s.cgroup = &*cg;
        }
    std::unique_ptr<TeardownObserver> observer;
    if (!opts_.no_journal)
        if (auto o = make_teardown_journal(session_id_, opts_.journal, nullptr, opts_.journal_sync))
            observer = std::move(*o);
    TeardownOptions t;
    t.eof_window = std::chrono::milliseconds(0);  // stdin is closed; the server is PDEATHSIG'd
    t.grace = opts_.term_grace;
    t.observer = observer.get();
    TeardownReport r = Teardown(std::move(s), t).run();
    if (!r.ok()) log("mcpwarden: " + r.verdict().error().message + "\n");
    report_json_ = journal::teardown_report_json(r);
    if (!server_status_ && r.root_status) server_status_ = r.root_status;
    cg.reset();
    if (!cgroup_dir_.empty()) remove_session_cgroup(cgroup_dir_);
    if (limits_ && !Faults::from_env().limit_groups_left)
        limits_->remove_found();  // the keeper's v1 groups, empty now
}

}  // namespace warden::shim
