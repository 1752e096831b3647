// The revoke hook: the operator's command that withdraws the authority a leftover server
// still holds (a session token, a remote job) before it is terminated.
//
// It runs as `/bin/sh -c COMMAND` in its own process group with the target as JSON on stdin
// and MCPWARDEN_REAP_PID / _STARTTIME / _SESSION in its environment. Its stdout and stderr
// are captured (the first 64 KiB) for the journal. It is bounded: at the timeout its whole
// process group is SIGKILLed and the hook counts as failed. posix_spawn, not fork: the
// journal's writer thread is running, and the child must start with a clean signal mask
// even when --watch blocked SIGTERM/SIGINT for its signalfd.
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>

#include <fmt/format.h>

#include "reap/reap.hpp"
#include "sys/pipe.hpp"

extern char** environ;

namespace warden::reap {

namespace {
constexpr size_t kOutputKept = 64 * 1024;
}

std::string RevokeResult::describe() const {
    if (!error.empty()) return "could not run: " + error;
    if (timed_out) return "timed out (killed)";
    if (exit_status) return fmt::format("exited {}", *exit_status);
    if (term_signal) return fmt::format("killed by signal {}", *term_signal);
    return "unknown";
}

nlohmann::json revoke_input(const TargetTree& t) {
    nlohmann::json members = nlohmann::json::array();
    for (const Member& m : t.members)
        members.push_back({{"pid", m.id.pid},
                           {"starttime", m.id.starttime},
                           {"ppid", m.ppid},
                           {"uid", m.uid},
                           {"command", m.command}});
    const Member* root = t.member(t.root().pid);
    return {{"schema", "mcpwarden.reap.revoke"},
            {"schema_version", 1},
            {"target",
             {{"pid", t.root().pid},
              {"starttime", t.root().starttime},
              {"boot_id", boot_id()},
              {"uid", t.uid},
              {"command", root ? root->command : std::string()}}},
            {"session", t.session},
            {"selected_as", t.selected_as},
            {"reasons", t.reasons},
            {"members", members},
            {"capabilities", t.capabilities}};
}

RevokeResult run_revoke_hook(const RevokeHook& hook, const TargetTree& t) {
    using Clock = std::chrono::steady_clock;
    RevokeResult r;
    const auto t0 = Clock::now();
    auto done = [&]() -> RevokeResult& {
        r.duration_ns =
            std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
        return r;
    };
    auto in = make_pipe();
    auto out = make_pipe();
    if (!in || !out) {
        r.error = (!in ? in.error() : out.error()).message;
        return done();
    }

    std::vector<std::string> env_store;
    for (char** e = environ; e && *e; ++e)
        if (std::strncmp(*e, "MCPWARDEN_REAP_", 15) != 0) env_store.emplace_back(*e);
    env_store.push_back(fmt::format("MCPWARDEN_REAP_PID={}", t.root().pid));
    env_store.push_back(fmt::format("MCPWARDEN_REAP_STARTTIME={}", t.root().starttime));
    env_store.push_back("MCPWARDEN_REAP_SESSION=" + t.session);
    std::vector<char*> envp;
    for (auto& s : env_store)
        envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string sh = "sh", dash_c = "-c", cmd = hook.command;
    char* argv[] = {sh.data(), dash_c.data(), cmd.data(), nullptr};

    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_adddup2(&fa, in->read.get(), 0);
    posix_spawn_file_actions_adddup2(&fa, out->write.get(), 1);
    posix_spawn_file_actions_adddup2(&fa, out->write.get(), 2);
    sigset_t empty, defaults;
    sigemptyset(&empty);
    sigemptyset(&defaults);
    for (int s : {SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGQUIT})
        sigaddset(&defaults, s);
    posix_spawnattr_setsigmask(&attr, &empty);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(
        &attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
    pid_t pid = -1;
    int rc = posix_spawn(&pid, "/bin/sh", &fa, &attr, argv, envp.data());
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
        r.error = Error::sys("posix_spawn", "/bin/sh -c " + hook.command, rc).message;
        return done();
    }
    in->read.reset();
    out->write.reset();

    // A hook that exits without reading its stdin turns our write into EPIPE; with SIGPIPE at
    // its default that would end mcpwarden itself. Ignored from here on (the child got the
    // default back through POSIX_SPAWN_SETSIGDEF).
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    struct sigaction old {};
    if (::sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL)
        ::sigaction(SIGPIPE, &ign, nullptr);
    std::string input = revoke_input(t).dump() + "\n";
    size_t written = 0;
    (void)set_nonblocking(in->write.get());
    (void)set_nonblocking(out->read.get());
    const auto deadline = t0 + hook.timeout;
    bool out_open = true;
    int status = 0;
    bool reaped = false;
    // Bounded: every turn either makes progress or waits at most until the deadline; the
    // loop ends when the output reached EOF and the hook was reaped, or at the deadline.
    for (int turn = 0; turn < 1'000'000; ++turn) {
        if (in->write && written == input.size()) in->write.reset();
        if (!reaped) {
            pid_t w = ::waitpid(pid, &status, WNOHANG);
            if (w == pid) reaped = true;
        }
        if (reaped && !out_open) break;
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        if (left.count() <= 0) {
            r.timed_out = true;
            break;
        }
        pollfd fds[2];
        nfds_t n = 0;
        if (out_open) fds[n++] = {out->read.get(), POLLIN, 0};
        if (in->write) fds[n++] = {in->write.get(), POLLOUT, 0};
        // Once the output is closed, only the exit is left to wait for: short naps, bounded
        // by the deadline (a hook that closed its stdout but keeps running is rare).
        int wait_ms = n ? static_cast<int>(std::min<int64_t>(left.count(), 100))
                        : static_cast<int>(std::min<int64_t>(left.count(), 10));
        int pr = n ? ::poll(fds, n, wait_ms) : ::poll(nullptr, 0, wait_ms);
        if (pr < 0 && errno != EINTR) break;
        for (nfds_t i = 0; i < n; ++i) {
            if (fds[i].fd == out->read.get() && fds[i].revents) {
                char buf[8192];
                ssize_t got = ::read(out->read.get(), buf, sizeof buf);
                if (got > 0) {
                    r.output_bytes += static_cast<size_t>(got);
                    if (r.output.size() < kOutputKept)
                        r.output.append(
                            buf, std::min(static_cast<size_t>(got), kOutputKept - r.output.size()));
                } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
                    out_open = false;
                }
            } else if (in->write && fds[i].fd == in->write.get() && fds[i].revents) {
                ssize_t put =
                    ::write(in->write.get(), input.data() + written, input.size() - written);
                if (put > 0)
                    written += static_cast<size_t>(put);
                else if (put < 0 && errno != EAGAIN && errno != EINTR)
                    in->write.reset();  // the hook does not read its stdin: that is its choice
            }
        }
    }
    if (!reaped) {
        ::kill(-pid, SIGKILL);
        while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
    } else if (r.timed_out) {
        ::kill(-pid, SIGKILL);  // what it left in its group
    }
    if (!r.timed_out) {
        if (WIFEXITED(status)) r.exit_status = WEXITSTATUS(status);
        if (WIFSIGNALED(status)) r.term_signal = WTERMSIG(status);
    }
    return done();
}

}  // namespace warden::reap
