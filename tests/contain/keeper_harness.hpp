// The test harness of tests/contain: every teardown runs in a forked "keeper" process.
//
// Why a keeper and not the test process itself: the engine is designed for the shim's
// keeper — a single-threaded process that is the parent of the server, a child subreaper,
// and the sole parent of everything it reaps (waitpid(-1) ECHILD is part of verification).
// A gtest process is none of these safely: making it a subreaper would let orphans of
// *other* tests reparent to it, and waitpid(-1) would reap children the test still owns
// (decoys). So each scenario forks a keeper that sets up Containment, spawns the fixture,
// tears it down and sends its report back as JSON; the test process then checks from the
// outside, as a user would: no live process carries the test's tag, the port binds again.
// The test owns a TreeGuard on the tag, so a failing scenario still leaves nothing behind.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/paths.hpp"
#include "common/procfs.hpp"
#include "common/util.hpp"
#include "contain/spawner.hpp"
#include "contain/teardown.hpp"
#include "sys/pipe.hpp"

namespace warden::testing {

// Runs `body` in a forked keeper; returns what it returned, or nullopt (with `err`) when
// the keeper crashed or exceeded `timeout` (then it is SIGKILLed and reaped).
inline std::optional<nlohmann::json> run_in_keeper(const std::function<nlohmann::json()>& body,
                                                   std::string& err,
                                                   Millis timeout = std::chrono::seconds(30)) {
    auto p = make_pipe();
    if (!p) {
        err = p.error().message;
        return std::nullopt;
    }
    std::fflush(nullptr);
    pid_t pid = ::fork();
    if (pid < 0) {
        err = "fork failed";
        return std::nullopt;
    }
    if (pid == 0) {
        p->read.reset();
        std::string out;
        try {
            out = body().dump();
        } catch (const std::exception& e) {
            out = nlohmann::json{{"error", std::string("keeper threw: ") + e.what()}}.dump();
        }
        (void)write_all(p->write.get(), out, "keeper pipe");
        ::_exit(0);  // no gtest teardown, no atexit handlers of the test process
    }
    p->write.reset();
    std::string buf;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    bool eof = false;
    while (!eof) {
        auto left = std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) break;
        pollfd pf{p->read.get(), POLLIN, 0};
        int r = ::poll(&pf, 1, static_cast<int>(left.count()));
        if (r <= 0) continue;
        char tmp[65536];
        ssize_t n = ::read(p->read.get(), tmp, sizeof tmp);
        if (n > 0)
            buf.append(tmp, static_cast<size_t>(n));
        else if (n == 0 || errno != EINTR)
            eof = true;
    }
    if (!eof) {
        ::kill(pid, SIGKILL);  // our own unreaped child: the pid cannot be recycled yet
        err = "keeper timed out";
    }
    int st = 0;
    while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (!eof) return std::nullopt;
    auto j = nlohmann::json::parse(buf, nullptr, false);
    if (j.is_discarded()) {
        err = "keeper sent no report (" + std::to_string(st) + "): " + buf;
        return std::nullopt;
    }
    return j;
}

struct Scenario {
    std::string shape = "normal";
    std::vector<std::string> extra_args{};  // more fixture flags
    ContainOptions contain{};
    TeardownOptions teardown{};
    bool close_stdin = false;
    // Edits the scope before the teardown (e.g. drop the marker for a negative control).
    std::function<void(TeardownScope&)> edit_scope{};
    // The plan made ahead (Teardown::prepare), as a keeper makes it while idle, and what
    // happens in the keeper between it and the teardown (a fork, a member's end).
    bool plan_ahead = false;
    std::function<void()> after_plan_ahead{};
};

// Inside the keeper: spawn the fixture under `c`, tagged, and wait until its tree is built
// (the fixture writes the port file only then). Returns the port, or 0.
inline uint16_t start_fixture(const Containment& c, const Scenario& sc, const std::string& tag,
                              const TempDir& dir, std::optional<Child>& child, std::string& err) {
    SpawnOptions so;
    so.argv = {kFixture, "--shape", sc.shape, "--port-file", dir.file("port")};
    so.argv.insert(so.argv.end(), sc.extra_args.begin(), sc.extra_args.end());
    so.env_add = {std::string(kTagVar) + "=" + tag};
    so.err = Stdio::Null;
    auto ch = spawn(c, so);
    if (!ch) {
        err = ch.error().message;
        return 0;
    }
    child.emplace(std::move(*ch));
    if (!wait_for_file(dir.file("port"), std::chrono::seconds(10))) {
        err = "fixture wrote no port file";
        return 0;
    }
    return read_port_file(dir.file("port")).value_or(0);
}

// The whole scenario, in a keeper: {error?, layers, report, port, server, in_cgroup}.
inline nlohmann::json run_scenario(const Scenario& sc, const std::string& tag, const TempDir& dir) {
    std::string err;
    auto j = run_in_keeper(
        [&]() -> nlohmann::json {
            auto c = Containment::setup("test-" + tag, sc.contain);
            if (!c) return {{"error", c.error().message}};
            std::optional<Child> child;
            std::string e;
            uint16_t port = start_fixture(**c, sc, tag, dir, child, e);
            nlohmann::json out;
            out["layers"] = nlohmann::json::parse((*c)->layers().to_json_string());
            out["port"] = port;
            out["server"] = child ? child->pid() : 0;
            out["in_cgroup"] = child ? child->in_cgroup() : false;
            out["via_clone3"] = child ? child->via_clone3() : false;
            if (port == 0) out["error"] = e;
            if (sc.close_stdin && child) child->stdin_fd().reset();
            TeardownScope scope = (*c)->scope(child ? &*child : nullptr);
            if (sc.edit_scope) sc.edit_scope(scope);
            Teardown teardown(std::move(scope), sc.teardown);
            if (sc.plan_ahead) teardown.prepare();
            if (sc.after_plan_ahead) sc.after_plan_ahead();
            TeardownReport r = teardown.run();
            out["report"] = nlohmann::json::parse(r.to_json_string(&unredacted_text));
            out["text"] = r.render_text();
            return out;
        },
        err);
    if (!j) return {{"error", err}};
    return *j;
}

// Forks a child of the calling keeper (a member as subreaper: its parent is the keeper),
// carrying the test's tag, that listens on a loopback port once `go` is readable (at once
// when go < 0), writes "<pid> <port>" to `file` and becomes `sleep 600`, the listener carried
// across exec. Returns its pid; the caller waits for `file` when it needs the port bound.
// Writes `text` to `file` whole: to FILE.part, then renamed, so that a reader waiting for
// the file never sees it half written. Async-signal-safe but for the string's allocation.
inline bool write_file(const std::string& file, const std::string& text) {
    const std::string part = file + ".part";
    int f = ::open(part.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (f < 0) return false;
    const bool whole = ::write(f, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    return ::close(f) == 0 && whole && ::rename(part.c_str(), file.c_str()) == 0;
}

// A TCP listener on 127.0.0.1:`port` (0: any free port): its fd and the port it got, or
// {-1, 0}. Async-signal-safe, for the children the tests fork.
struct LoopbackSocket {
    int fd = -1;
    uint16_t port = 0;
};
inline LoopbackSocket listen_on_loopback(uint16_t port = 0) {
    int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (s < 0 || ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(s, 4) != 0 ||
        ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
        if (s >= 0) ::close(s);
        return {};
    }
    return {s, ntohs(a.sin_port)};
}

inline pid_t fork_tagged_listener(const std::string& tag, const std::string& file, int go = -1) {
    const std::string tag_env = std::string(kTagVar) + "=" + tag;
    pid_t c = ::fork();
    if (c != 0) return c;
    char b = 0;
    if (go >= 0 && ::read(go, &b, 1) != 1) ::_exit(1);
    // Carried across exec (not close-on-exec): the listener is sleep's from then on.
    LoopbackSocket l = listen_on_loopback();
    if (l.fd < 0 || ::fcntl(l.fd, F_SETFD, 0) != 0 ||
        !write_file(file, std::to_string(::getpid()) + " " + std::to_string(l.port)))
        ::_exit(1);
    char* const argv[] = {const_cast<char*>("sleep"), const_cast<char*>("600"), nullptr};
    char* const envp[] = {const_cast<char*>(tag_env.c_str()), nullptr};
    ::execve("/bin/sleep", argv, envp);
    ::_exit(127);
}

// What fork_tagged_listener wrote: its pid and port.
struct Listener {
    pid_t pid = 0;
    uint16_t port = 0;
};
inline std::optional<Listener> read_listener(const std::string& file) {
    auto text = read_file(file);
    Listener l;
    int port = 0;
    if (!text || std::sscanf(text->c_str(), "%d %d", &l.pid, &port) != 2 || l.pid <= 0 ||
        port <= 0 || port > 65535)
        return std::nullopt;
    l.port = static_cast<uint16_t>(port);
    return l;
}

// Short windows keep the suite fast; they are not timing assertions.
inline TeardownOptions quick_teardown() {
    TeardownOptions t;
    t.eof_window = std::chrono::milliseconds(0);
    t.grace = std::chrono::milliseconds(300);
    t.kill_wait = std::chrono::milliseconds(3000);
    return t;
}

// Targets of a report with the given outcome ("killed", ...), by command substring.
inline int count_how(const nlohmann::json& report, const std::string& how,
                     const std::string& cmd_part = "") {
    int n = 0;
    for (const auto& t : report["targets"])
        if (t["how"] == how && t["role"] != "namespace-init" &&
            (cmd_part.empty() ||
             t["command"].get<std::string>().find(cmd_part) != std::string::npos))
            ++n;
    return n;
}

}  // namespace warden::testing
