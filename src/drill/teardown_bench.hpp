// `mcpwarden bench teardown`: the published teardown study, reproduced with the fixture.
//
// Each trial starts one fixture tree of a given shape, tags it (MCPWARDEN_SESSION=<trial>),
// waits until it is built, then ends it with one strategy and measures from outside: the
// orphans alive right after the strategy returns (live, non-zombie processes carrying the
// trial's tag), whether the tree's port was still held at that moment, the strategy's own
// time, and when the port could be bound again (a prober thread binds it every 0.5 ms from
// the start of the call). Whatever a classic strategy left behind is then killed by
// identity (pidfd, starttime checked), so the machine is clean before the next trial.
//
// Strategies: the classic ones run in this process (as an MCP client would), the warden
// ones in a forked keeper (as `mcpwarden run` does), each with the same 500 ms grace.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "sys/result.hpp"

namespace warden::drill {

struct TeardownBenchOptions {
    int trials = 3;
    std::vector<std::string> shapes;      // empty: all
    std::vector<std::string> strategies;  // empty: all
    std::string fixture;                  // path of mcpwarden-fixture
    int grace_ms = 500;
    std::function<void(const std::string&)> progress;  // one line per trial (stderr)
};

struct TeardownCell {
    std::string strategy, shape;
    int trials = 0;
    int orphan_trials = 0;                // trials with >= 1 live tree process at return
    int orphans = 0;                      // live tree processes at return, summed over trials
    int port_held_trials = 0;             // trials whose port was still held at return
    std::vector<double> teardown_ms;      // per trial
    std::vector<double> release_ms;       // per trial that released (ms since the call began)
    int never_released = 0;               // port still held 1 s after return (until cleanup)
    int exited_in_grace = 0, killed = 0;  // summed (classic: from before/after snapshots)
    std::string skipped;                  // why the cell did not run (e.g. pidns not allowed)
    std::map<std::string, std::vector<double>> phases_ms;  // warden: engine phases, per trial
    int errors = 0;     // trials that could not be measured; not in `trials`
    std::string error;  // the first of them
};

struct TeardownBenchResult {
    std::vector<TeardownCell> cells;
    std::string command;  // how it was run, for the record
    std::string render_table() const;
    std::string to_json() const;
    std::string render_svg() const;
    int errors() const;  // trials that could not be measured, over every cell
};

const std::vector<std::string>& teardown_bench_shapes();
const std::vector<std::string>& teardown_bench_strategies();

Result<TeardownBenchResult> run_teardown_bench(const TeardownBenchOptions& opts);

}  // namespace warden::drill
