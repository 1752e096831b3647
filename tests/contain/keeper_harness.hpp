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

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
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
            TeardownReport r = Teardown(std::move(scope), sc.teardown).run();
            out["report"] = nlohmann::json::parse(r.to_json_string());
            out["text"] = r.render_text();
            return out;
        },
        err);
    if (!j) return {{"error", err}};
    return *j;
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
