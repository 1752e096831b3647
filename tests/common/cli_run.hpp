// Running the built `mcpwarden` from a test (drill, demo, bench, the fault matrix): HOME,
// XDG_STATE_HOME and TMPDIR inside the test's directory, no colour, no inherited journal or
// session marker, stdin closed; stdout, stderr, the exit code (-1 when it did not exit
// normally in time), and what carries the run's tag after it returned.
#pragma once

#include <sys/wait.h>

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
};

// `env`: further variables, set after (and so over) those above.
inline CliRun run_cli(const TempDir& dir, std::vector<std::string> args, Millis timeout = 90s,
                      const std::vector<std::pair<std::string, std::string>>& env = {}) {
    args.insert(args.begin(), kCli);
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
    return r;
}

// Columns a line takes on a terminal: one per UTF-8 code point.
inline size_t columns(const std::string& s) {
    size_t n = 0;
    for (unsigned char ch : s)
        n += (ch & 0xC0) != 0x80;
    return n;
}

}  // namespace warden::testing
