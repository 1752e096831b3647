// The Session's limits and health: what a supervisor adds to a session beyond relaying and
// tearing down (docs/RUN.md, "Limits" and "Wedged").
//
// The keeper makes the limit groups and places the server in them (contain/limits.hpp); the
// relay finds the same groups beneath its own (find_limits), and reads them three times:
// for session.start and --explain (where each limit is enforced), when the server exits (was
// it the memory cap? explain_exit, which the crash explanation asks), and before the teardown (what
// the caps refused or killed: session.limits; and session.health, how many pings went out and were
// answered). The health check (shim/health.hpp) stands in the relay's path as a gate in front of
// hibernation's, and supervise() acts on its verdict after each wake.
//
// A death by the memory cap is told from any other by the kernel's own count of OOM kills in
// the session's group, which grows before the victim is gone: when the server's exit comes
// with the count grown, the OOM killer took it. Every request in flight is then answered with
// an error that says so, and session.oom names the victim: the server when it died by
// SIGKILL, else a process of the tree that the server reaped itself (only its count is known).
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "contain/layers.hpp"
#include "contain/oom_victim.hpp"
#include "proc/children.hpp"
#include "shim/session.hpp"
#include "sys/fd.hpp"

namespace warden::shim {

void Session::find_limits() {
    if (!opts_.memory_max && !opts_.tasks_max && !opts_.cpu_max) return;
    limits_.emplace(SessionLimits::find(session_id_, ::getpid()));
}

void Session::start_health() {
    if (!opts_.health && !opts_.request_timeout) return;
    HealthOptions ho;
    ho.every = opts_.health;
    ho.answer_within = opts_.health_timeout;
    ho.request_timeout = opts_.request_timeout;
    ho.judge = !Faults::from_env().wedged_unjudged;
    ho.ping_is_activity = Faults::from_env().ping_is_activity;
    health_ = std::make_unique<Health>(*relay_, hib_.get(), ho, [this] { return tree_members(); });
    relay_->set_gate(health_.get());
}

int Session::next_wake_ms() const {
    const int idle = poll_timeout_ms();  // --idle-stop's, or a restart's backoff
    const int health = health_ && end_ == End::none ? health_->timeout_ms() : -1;
    if (idle < 0) return health;
    if (health < 0) return idle;
    return std::min(idle, health);
}

void Session::supervise() {
    if (!health_ || end_ != End::none) return;
    const bool awake = !hib_ || hib_->state() == Hibernation::State::awake;
    if (auto w = health_->check(awake)) end_tree_for("wedged", w->why, std::move(w->evidence));
}

std::vector<pid_t> Session::tree_members() const {
    std::vector<pid_t> out;
    if (!cgroup_dir_.empty())
        if (auto g = Cgroup::open(cgroup_dir_ + "/payload"))
            if (auto procs = g->procs(); procs && !procs->empty()) return *procs;
    // No session cgroup: the server and its descendants, by /proc (bounded).
    if (server_.pid > 0) out.push_back(server_.pid);
    for (size_t i = 0; i < out.size() && out.size() < 256; ++i)
        for (pid_t c : read_children(out[i]))
            out.push_back(c);
    return out;
}

void Session::end_tree_for(std::string_view cause, const std::string& why, journal::Json evidence) {
    log(fmt::format("mcpwarden: the server is {}: {}; ending its tree\n", cause, why));
    evidence["why"] = why;
    record("session." + std::string(cause), evidence);
    // Under --restart on-failure a wedged server is a failure like a crash: the restart's
    // teardown ends the live tree, and the next request is served by a new server.
    if (opts_.restart == Restart::OnFailure && end_ == End::none) {
        ServerFailure f;
        f.cause = std::string(cause);
        f.summary = fmt::format("the server is {} ({})", cause, why);
        f.evidence = journal::Json{{std::string(cause), std::move(evidence)}};
        server_failed(std::move(f));
        if (end_ == End::server_exit) end_ = End::wedged;  // refused by the start limit
        return;
    }
    relay_->fail_held_requests(
        fmt::format("mcpwarden: the server is {} ({}); its tree was ended", cause, why));
    if (end_ == End::none) end_ = End::wedged;
}

// What the wait status alone cannot say (session_supervise.cpp, server_exit_handled): the
// memory cap's kill, told by the group's OOM count having grown since the last exit.
void Session::explain_exit(ServerFailure& f) {
    if (!f.wait_status) return;
    const int wait_status = *f.wait_status;
    if (!limits_ || Faults::from_env().oom_untold) return;
    const LimitUsage u = limits_->usage();
    if (u.oom_kills <= oom_kills_seen_) return;  // not the memory cap
    const uint64_t kills = u.oom_kills - std::exchange(oom_kills_seen_, u.oom_kills);
    std::string cap = "?", group;
    for (const LimitPlacement& p : limits_->placements())
        if (p.controller == Controller::memory) {
            cap = size_text(p.value);
            group = p.group.substr(p.group.rfind('/') + 1);
        }
    const auto [victim, who] = oom_victim(wait_status, group);
    const std::string why =
        fmt::format("out of memory: the kernel's OOM killer ended {} at --memory-max {}", who, cap);
    log("mcpwarden: " + why + "\n");
    journal::Json data{{"victim", victim},
                       {"oom_kills", static_cast<int64_t>(kills)},
                       {"memory_max", cap},
                       {"server_wait_status", wait_status}};
    if (u.memory_peak) data["memory_peak_bytes"] = static_cast<int64_t>(*u.memory_peak);
    record("session.oom", data);
    f.cause = "oom_kill";
    f.summary = "the server was killed: " + why;
    f.evidence["oom"] = data;
}

// The process the OOM killer ended: the kernel log names it (contain/oom_victim.hpp), the
// server's own SIGKILL says it was the server when the log cannot be read; else it is a
// process of the tree, and the record says why it is not named.
std::pair<journal::Json, std::string> Session::oom_victim(int wait_status,
                                                          const std::string& group) const {
    auto found = Faults::from_env().oom_victim_unnamed
                     ? Result<std::optional<OomVictim>>(std::optional<OomVictim>())
                     : find_oom_victim(group);
    if (found && *found) {
        const OomVictim& v = **found;
        const bool server = v.pid == server_.pid;
        journal::Json j{{"pid", v.pid},
                        {"command", server ? opts_.command[0] : v.comm},
                        {"server", server},
                        {"named_by", "kernel log"}};
        return {std::move(j),
                server ? fmt::format("the server (pid {})", v.pid)
                       : fmt::format("{} (pid {}), a process of the server's tree", v.comm, v.pid)};
    }
    if (WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGKILL)
        return {journal::Json{{"pid", server_.pid},
                              {"command", opts_.command[0]},
                              {"server", true},
                              {"named_by", "its SIGKILL"}},
                fmt::format("the server (pid {})", server_.pid)};
    const std::string unnamed =
        found ? "the kernel log names no victim in " + group : found.error().message;
    return {journal::Json{{"server", false}, {"unnamed", unnamed}},
            "a process of its tree (not named: " + unnamed + ")"};
}

void Session::record_supervision() {
    if (health_)
        record("session.health", {{"pings", static_cast<int64_t>(health_->pings())},
                                  {"answered", static_cast<int64_t>(health_->answered())}});
    if (!limits_ || limits_->placements().empty()) return;
    journal::Json data{{"limits", limits_->to_json()}, {"usage", limits_->usage().to_json()}};
    const LimitUsage u = limits_->usage();
    if (u.tasks_refused > 0)
        log(fmt::format("mcpwarden: the tasks cap refused {} fork(s) of the server's tree\n",
                        u.tasks_refused));
    record("session.limits", std::move(data));
}

journal::Json Session::supervision_record() const {
    journal::Json j = journal::Json::object();
    if (limits_) j["limits"] = limits_->to_json();
    if (opts_.health) j["health_ms"] = static_cast<int64_t>(opts_.health->count());
    if (opts_.health) j["health_timeout_ms"] = static_cast<int64_t>(opts_.health_timeout.count());
    if (opts_.request_timeout)
        j["request_timeout_ms"] = static_cast<int64_t>(opts_.request_timeout->count());
    return j;
}

void Session::explain_supervision() const {
    if (limits_) {
        const std::string now = limits_->summary();
        log("limits          " + (now.empty() ? std::string("none found") : now) + "\n");
    }
    if (opts_.health || opts_.request_timeout)
        log(fmt::format("health          {}; request timeout {}\n",
                        opts_.health
                            ? fmt::format("ping every {} ms, answer within {} ms",
                                          opts_.health->count(), opts_.health_timeout.count())
                            : std::string("no ping"),
                        opts_.request_timeout ? fmt::format("{} ms", opts_.request_timeout->count())
                                              : std::string("off")));
}

}  // namespace warden::shim
