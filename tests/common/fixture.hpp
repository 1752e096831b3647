// Starting the fixture MCP server (tests/fixtures) in a test: its argv, and a running
// instance whose tree is built and whose port is known.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/child.hpp"
#include "common/util.hpp"

namespace warden::testing {

struct FixtureOptions {
    std::string shape = "normal";  // normal|setsid|doublefork|ignore-term|deep|fork-storm
    int depth = 0;                 // deep: chain length (0: the fixture's default, 3)
    bool on_eof_ignore = false;    // --on-eof ignore
    bool ignore_term = false;      // the server itself ignores SIGTERM
    int fork_rate = 0;             // fork-storm: forks per second (0: default, 50)
    std::vector<std::string> extra_args{};
};

// [kFixture, --shape ..., --port-file port_file, --pid-file pid_file, ...]: prepend a
// wrapper (e.g. {kCli, "run", "--"}) to run it under mcpwarden.
std::vector<std::string> fixture_argv(const FixtureOptions& opts, const std::string& port_file,
                                      const std::string& pid_file = {});

// A fixture started directly by the test, its tree built: port and holder pid known.
struct RunningFixture {
    TempDir dir;
    TestChild child;
    uint16_t port = 0;
    pid_t holder = 0;  // the process holding the port
};

// Starts the fixture (tagged, stderr captured when asked) and waits for its port file.
// nullopt when it did not start or report within `timeout`.
std::optional<RunningFixture> start_fixture(
    const FixtureOptions& opts, ChildOptions child_opts = {},
    std::chrono::milliseconds timeout = std::chrono::seconds(10));

}  // namespace warden::testing
