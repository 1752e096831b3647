// libmcpwarden — the crash drills: `mcpwarden drill` (SIGKILL a server's client at a chosen
// point and measure from outside what the server tree did), `mcpwarden demo` (the drill on
// servers known to leak, without and with mcpwarden) and `mcpwarden bench teardown` (each
// teardown strategy on each tree shape). docs/DRILL.md describes what is measured.
//
//     warden::api::DrillOptions o;
//     o.command = {"my-server", "--stdio"};
//     o.journal = "/tmp/drill/journal.db";
//     o.mcpwarden = "/usr/bin/mcpwarden";   // the `run` the supervised trials go through
//     auto r = warden::api::run_drill(o);
//     if (r) fputs(r->text.c_str(), stdout);   // r->exit_code as `mcpwarden drill`
//
// Everything a drill starts is cleaned up by identity before it returns, whatever the result.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "mcpwarden/export.h"
#include "mcpwarden/result.hpp"
#include "mcpwarden/types.hpp"

namespace warden::api {

// ---- Drill -----------------------------------------------------------------------------

using warden::CrashAt;  // types.hpp
// "before-init" | "idle" | "in-flight" | "mid-response"; the error names the choices.
MCPW_API Result<CrashAt> parse_crash_at(const std::string& text);

using warden::DrillOptions;  // types.hpp

struct DrillReport {
    bool ok = false;           // every supervised trial contained, journal verifies, nothing left
    bool interrupted = false;  // a handled signal cut the drill short
    int exit_code = 1;         // as `mcpwarden drill`: 0 ok, 1 not, 130 interrupted
    std::string text;          // the report for a terminal
    std::string markdown;      // the same as Markdown
    std::string json;          // the full record, indented (no final newline)
};

// Error only when the drill cannot run at all (no command, no journal); a trial that fails
// is reported in the report and the drill goes on.
MCPW_API Result<DrillReport> run_drill(const DrillOptions& options);

// ---- Demo ------------------------------------------------------------------------------

using warden::DemoOptions;  // types.hpp

struct DemoReport {
    bool ok = false;  // mcpwarden left nothing in any row, nothing left at all, journal verifies
    bool interrupted = false;
    int exit_code = 1;  // as `mcpwarden demo`: 0 ok, 1 not, 130 interrupted
    std::string text;   // the side-by-side table (80 columns)
    std::string json;   // indented, no final newline; demo_from_json() reads it back
};

MCPW_API Result<DemoReport> run_demo(const DemoOptions& options);
// The report of a saved `demo --json` run. Error: why the document is not one.
MCPW_API Result<DemoReport> demo_from_json(const std::string& json_text, bool color = false);

// ---- Teardown bench ---------------------------------------------------------------------

struct TeardownBenchOptions {
    int trials = 3;
    std::vector<std::string> shapes;      // empty: all (teardown_bench_shapes())
    std::vector<std::string> strategies;  // empty: all (teardown_bench_strategies())
    // mcpwarden-fixture; empty: next to this executable, else ../libexec/mcpwarden/ (where
    // the install puts it).
    std::string fixture;
    int grace_ms = 500;
    std::function<void(const std::string&)> progress;  // one line per trial
    std::string command;                               // how it was run, for the record
};

struct TeardownBenchReport {
    int errors = 0;     // trials that could not be measured, over every cell
    std::string table;  // for a terminal
    std::string json;   // indented, no final newline
    std::string svg;    // port-release times
};

MCPW_API const std::vector<std::string>& teardown_bench_shapes();
MCPW_API const std::vector<std::string>& teardown_bench_strategies();
MCPW_API Result<TeardownBenchReport> run_teardown_bench(const TeardownBenchOptions& options);

}  // namespace warden::api
