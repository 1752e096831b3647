#include "common/fixture.hpp"

#include "common/paths.hpp"

namespace warden::testing {

std::vector<std::string> fixture_argv(const FixtureOptions& opts, const std::string& port_file,
                                      const std::string& pid_file) {
    std::vector<std::string> a{kFixture, "--shape", opts.shape};
    if (opts.depth > 0) a.insert(a.end(), {"--depth", std::to_string(opts.depth)});
    if (opts.on_eof_ignore) a.insert(a.end(), {"--on-eof", "ignore"});
    if (opts.ignore_term) a.emplace_back("--ignore-term");
    if (opts.fork_rate > 0) a.insert(a.end(), {"--fork-rate", std::to_string(opts.fork_rate)});
    if (!port_file.empty()) a.insert(a.end(), {"--port-file", port_file});
    if (!pid_file.empty()) a.insert(a.end(), {"--pid-file", pid_file});
    a.insert(a.end(), opts.extra_args.begin(), opts.extra_args.end());
    return a;
}

std::optional<RunningFixture> start_fixture(const FixtureOptions& opts, ChildOptions child_opts,
                                            std::chrono::milliseconds timeout) {
    TempDir dir;
    if (dir.path().empty()) return std::nullopt;
    std::string port_file = dir.file("port"), pid_file = dir.file("pid");
    TestChild child(fixture_argv(opts, port_file, pid_file), std::move(child_opts));
    if (!child.started()) return std::nullopt;
    if (!wait_for_file(port_file, timeout)) return std::nullopt;
    auto port = read_port_file(port_file);
    auto holder = read_pid_file(pid_file);
    if (!port || !holder) return std::nullopt;
    RunningFixture f{std::move(dir), std::move(child), *port, *holder};
    return f;
}

}  // namespace warden::testing
