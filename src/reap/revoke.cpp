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

namespace {

constexpr size_t kOutputKept = 64 * 1024;

// The hook's environment: ours without any MCPWARDEN_REAP_ variable of an outer hook, and
// the target's identity.
std::vector<std::string> hook_environment(const TargetTree& t) {
    std::vector<std::string> env;
    for (char** e = environ; e && *e; ++e)
        if (std::strncmp(*e, "MCPWARDEN_REAP_", 15) != 0) env.emplace_back(*e);
    env.push_back(fmt::format("MCPWARDEN_REAP_PID={}", t.root().pid));
    env.push_back(fmt::format("MCPWARDEN_REAP_STARTTIME={}", t.root().starttime));
    env.push_back("MCPWARDEN_REAP_SESSION=" + t.session);
    return env;
}

// `/bin/sh -c COMMAND` in its own process group, stdin and stdout+stderr on the pipes, with
// an empty signal mask and the terminating signals at their defaults (see the top).
Result<pid_t> spawn_hook(const std::string& command, std::vector<std::string> env, const Pipe& in,
                         const Pipe& out) {
    std::vector<char*> envp;
    for (auto& s : env)
        envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string sh = "sh", dash_c = "-c", cmd = command;
    char* argv[] = {sh.data(), dash_c.data(), cmd.data(), nullptr};

    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_adddup2(&fa, in.read.get(), 0);
    posix_spawn_file_actions_adddup2(&fa, out.write.get(), 1);
    posix_spawn_file_actions_adddup2(&fa, out.write.get(), 2);
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
    if (rc != 0) return Error::sys("posix_spawn", "/bin/sh -c " + command, rc);
    return pid;
}

// A hook that exits without reading its stdin turns our write into EPIPE; with SIGPIPE at
// its default that would end mcpwarden itself. Ignored from here on (the child got the
// default back through POSIX_SPAWN_SETSIGDEF).
void ignore_sigpipe() {
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    struct sigaction old {};
    if (::sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL)
        ::sigaction(SIGPIPE, &ign, nullptr);
}

// The parent's ends of the hook's pipes, and how far the conversation is: the input written
// as the hook reads it, the output kept up to kOutputKept until EOF.
struct HookPipes {
    Fd input;   // the hook's stdin; closed once all is written (or the hook stops reading)
    Fd output;  // its stdout and stderr
    std::string text;
    size_t written = 0;
    bool output_open = true;
};

void read_hook_output(HookPipes& io, RevokeResult& r) {
    char buf[8192];
    ssize_t got = ::read(io.output.get(), buf, sizeof buf);
    if (got > 0) {
        r.output_bytes += static_cast<size_t>(got);
        if (r.output.size() < kOutputKept)
            r.output.append(buf, std::min(static_cast<size_t>(got), kOutputKept - r.output.size()));
    } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
        io.output_open = false;
    }
}

void write_hook_input(HookPipes& io) {
    ssize_t put = ::write(io.input.get(), io.text.data() + io.written, io.text.size() - io.written);
    if (put > 0)
        io.written += static_cast<size_t>(put);
    else if (put < 0 && errno != EAGAIN && errno != EINTR)
        io.input.reset();  // the hook does not read its stdin: that is its choice
}

// Feeds the input and collects the output until the hook is reaped with its output at EOF,
// or until the deadline (r.timed_out). Bounded: every turn either makes progress or waits at
// most until the deadline. Returns whether the hook was reaped, its wait status in `status`.
bool converse_with_hook(pid_t pid, HookPipes& io, std::chrono::steady_clock::time_point deadline,
                        RevokeResult& r, int& status) {
    using Clock = std::chrono::steady_clock;
    bool reaped = false;
    for (int turn = 0; turn < 1'000'000; ++turn) {
        if (io.input && io.written == io.text.size()) io.input.reset();
        if (!reaped && ::waitpid(pid, &status, WNOHANG) == pid) reaped = true;
        if (reaped && !io.output_open) break;
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        if (left.count() <= 0) {
            r.timed_out = true;
            break;
        }
        pollfd fds[2];
        nfds_t n = 0;
        if (io.output_open) fds[n++] = {io.output.get(), POLLIN, 0};
        if (io.input) fds[n++] = {io.input.get(), POLLOUT, 0};
        // Once the output is closed, only the exit is left to wait for: short naps, bounded
        // by the deadline (a hook that closed its stdout but keeps running is rare).
        int wait_ms = n ? static_cast<int>(std::min<int64_t>(left.count(), 100))
                        : static_cast<int>(std::min<int64_t>(left.count(), 10));
        int pr = n ? ::poll(fds, n, wait_ms) : ::poll(nullptr, 0, wait_ms);
        if (pr < 0 && errno != EINTR) break;
        for (nfds_t i = 0; i < n; ++i) {
            if (fds[i].fd == io.output.get() && fds[i].revents)
                read_hook_output(io, r);
            else if (io.input && fds[i].fd == io.input.get() && fds[i].revents)
                write_hook_input(io);
        }
    }
    return reaped;
}

// A hook still running, or one that timed out, loses its whole process group; the wait
// status of one that ended in time is its result.
void end_hook(pid_t pid, bool reaped, int status, RevokeResult& r) {
    if (!reaped) {
        ::kill(-pid, SIGKILL);
        while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
    } else if (r.timed_out) {
        ::kill(-pid, SIGKILL);  // what it left in its group
    }
    if (r.timed_out) return;
    if (WIFEXITED(status)) r.exit_status = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) r.term_signal = WTERMSIG(status);
}

}  // namespace

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
    auto pid = spawn_hook(hook.command, hook_environment(t), *in, *out);
    if (!pid) {
        r.error = pid.error().message;
        return done();
    }
    in->read.reset();
    out->write.reset();

    ignore_sigpipe();
    HookPipes io{std::move(in->write), std::move(out->read), revoke_input(t).dump() + "\n"};
    (void)set_nonblocking(io.input.get());
    (void)set_nonblocking(io.output.get());
    int status = 0;
    const bool reaped = converse_with_hook(*pid, io, t0 + hook.timeout, r, status);
    end_hook(*pid, reaped, status, r);
    return done();
}

}  // namespace warden::reap
