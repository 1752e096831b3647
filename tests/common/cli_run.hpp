// Running the built `mcpwarden` from a test (drill, demo, bench, the fault matrix): HOME,
// XDG_STATE_HOME and TMPDIR inside the test's directory, no colour, no inherited journal or
// session marker, stdin closed; stdout, stderr, the exit code (-1 when it did not exit
// normally in time), and what carries the run's tag after it returned. Where the test can
// make a cgroup, the command runs in a scratch cgroup of its own, and the cgroup directories
// it left there (session cgroups it made and did not remove) are listed too.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/testing.hpp"

namespace warden::testing {

struct CliRun {
    int code = -1;
    std::string out, err;
    std::string tag;
    std::vector<pid_t> left_after;  // live processes carrying the run's tag after it returned
    bool cgroup_checked = false;    // it ran in a scratch cgroup: cgroups_left is meaningful
    std::vector<std::string> cgroups_left;  // directories it left in its cgroup
};

// `env`: further variables, set after (and so over) those above.
inline CliRun run_cli(const TempDir& dir, std::vector<std::string> args, Millis timeout = 90s,
                      const std::vector<std::pair<std::string, std::string>>& env = {}) {
    args.insert(args.begin(), kCli);
    // The shell moves itself into the scratch cgroup ("0": the writer), then execs the CLI.
    ScratchCgroup cg("wtest-cli-" + unique_tag());
    if (cg.valid())
        args.insert(args.begin(),
                    {"/bin/sh", "-c", "echo 0 > \"$0/cgroup.procs\" && exec \"$@\"", cg.path()});
    ChildOptions o;
    o.capture_stderr = true;
    o.env = {{"HOME", dir.path()},
             {"XDG_STATE_HOME", dir.file("state")},
             {"TMPDIR", dir.path()},
             {"NO_COLOR", "1"}};
    o.env.insert(o.env.end(), env.begin(), env.end());
    o.unset_env = {"MCPWARDEN_JOURNAL", "MCPWARDEN_SESSION"};
    TestChild c(args, o);
    CliRun r;
    if (!c.started()) {
        r.err = c.error();
        return r;
    }
    r.tag = c.tag();
    c.close_stdin();
    r.out = c.read_all_stdout(timeout);
    r.err = c.read_stderr(5s);
    auto st = c.wait_exit(5s);
    if (st && WIFEXITED(*st)) r.code = WEXITSTATUS(*st);
    r.left_after = live_tagged(r.tag);
    r.cgroup_checked = cg.valid();
    r.cgroups_left = cg.children();
    return r;
}

// "" when the run left no cgroup directory, else their names, for a failure message.
inline std::string cgroups_left_text(const CliRun& r) {
    std::string s;
    for (const auto& c : r.cgroups_left)
        s += " " + c;
    return s;
}

// Columns a line takes on a terminal: one per UTF-8 code point.
inline size_t columns(const std::string& s) {
    size_t n = 0;
    for (unsigned char ch : s)
        n += (ch & 0xC0) != 0x80;
    return n;
}

// `mcpwarden status --json` on the journal `db`: its one session (a test failure, and null,
// when it shows another number).
inline nlohmann::json only_status_session(const TempDir& dir, const std::string& db) {
    auto status = run_cli(dir, {"status", "--json", "--journal", db});
    EXPECT_EQ(status.code, 0) << status.err;
    auto sj = nlohmann::json::parse(status.out, nullptr, false);
    if (!sj.is_object() || !sj["sessions"].is_array() || sj["sessions"].size() != 1) {
        ADD_FAILURE() << "not one session: " << status.out;
        return nullptr;
    }
    return sj["sessions"][0];
}

// True when the step `first` is traced before `then` in the stderr `err` of a run made with
// MCPWARDEN_PHASES=1 (src/shim/keeper.cpp, trace_phase: relay and keeper on one clock), by
// the phases' CLOCK_MONOTONIC times, not their lines' order: the keeper writes some phases
// (first_sigterm, grace_over…) once its teardown is over, with the time each happened.
inline bool phase_before(const std::string& err, const std::string& first,
                         const std::string& then) {
    auto at = [&](const std::string& phase) -> std::optional<long long> {
        const std::string key = "mcpwarden-phase " + phase + " ";
        auto p = err.find(key);
        if (p == std::string::npos) return std::nullopt;
        return std::strtoll(err.c_str() + p + key.size(), nullptr, 10);
    };
    auto a = at(first), b = at(then);
    return a && b && *a < *b;
}

}  // namespace warden::testing
