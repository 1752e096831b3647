// run_session() in a forked child, as `mcpwarden run` runs it: the session relays the
// process's own stdin and stdout, so a test gives it a pipe holding the client's lines (then
// EOF) and a file for the server's answers, and reads its exit code from waitpid.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include "common/testing.hpp"
#include "mcpwarden/session.hpp"

namespace warden::testing {

struct SessionChild {
    std::optional<int> exit_code;  // nullopt: did not exit in time (killed) or not started
    pid_t pid = 0;
};

// `input` (a few lines, less than a pipe buffer) is what the client says before it closes
// its end. Every process of the session carries kTagVar=tag. Waits at most `timeout`; a
// child still running then is SIGKILLed (it is ours) and reaped.
inline SessionChild run_session_in_child(const api::RunOptions& options, const std::string& tag,
                                         const std::string& input, const std::string& out_file,
                                         std::chrono::milliseconds timeout) {
    SessionChild r;
    int in[2];
    if (::pipe(in) != 0) return r;
    if (!input.empty() &&
        ::write(in[1], input.data(), input.size()) != static_cast<ssize_t>(input.size())) {
        ::close(in[0]);
        ::close(in[1]);
        return r;
    }
    ::close(in[1]);  // the client is done: EOF after its lines
    pid_t pid = ::fork();
    if (pid < 0) {
        ::close(in[0]);
        return r;
    }
    if (pid == 0) {
        int out = ::open(out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (out < 0 || ::dup2(in[0], 0) < 0 || ::dup2(out, 1) < 0) ::_exit(120);
        ::setenv(kTagVar, tag.c_str(), 1);
        auto rc = api::run_session(options);
        ::_exit(rc ? *rc : 121);
    }
    ::close(in[0]);
    r.pid = pid;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        int st = 0;
        pid_t w = ::waitpid(pid, &st, WNOHANG);
        if (w == pid) {
            if (WIFEXITED(st)) r.exit_code = WEXITSTATUS(st);
            return r;
        }
        if (w < 0 || std::chrono::steady_clock::now() > deadline) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::kill(pid, SIGKILL);  // our own child, not reaped yet: its pid cannot have been reused
    ::waitpid(pid, nullptr, 0);
    return r;
}

// The fixture of `shape` under run_session (port file dir/port, answers in dir/out): the
// client says initialize and calls echo "hi", then EOF. `journal` empty: nothing recorded.
inline SessionChild echo_session_in_child(const std::string& shape, const std::string& journal,
                                          const TempDir& dir, const std::string& tag) {
    FixtureOptions fo;
    fo.shape = shape;
    api::RunOptions o;
    o.journal = journal;
    o.no_journal = journal.empty();
    o.eof_grace = std::chrono::milliseconds(500);
    o.term_grace = std::chrono::milliseconds(300);
    o.command = fixture_argv(fo, dir.file("port"));
    std::string input =
        rpc_initialize(1) + "\n" + rpc_tools_call(2, "echo", {{"text", "hi"}}) + "\n";
    return run_session_in_child(o, tag, input, dir.file("out"), std::chrono::seconds(20));
}

}  // namespace warden::testing
