// run_drill(), run_demo(), demo_from_json() and run_teardown_bench(): the crash drills of
// src/drill (drill.hpp, demo.hpp, teardown_bench.hpp), rendered into the public reports.

#include <cerrno>
#include <exception>

#include <nlohmann/json.hpp>

#include "api/internal.hpp"
#include "drill/demo.hpp"
#include "drill/drill.hpp"
#include "drill/tagged.hpp"
#include "drill/teardown_bench.hpp"
#include "mcpwarden/drill.hpp"

namespace warden::api {
namespace {

// Indented JSON; text that is not UTF-8 (a server's command line) is replaced, not thrown.
std::string drill_dump(const nlohmann::json& j) {
    return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

DemoReport demo_report(const drill::DemoResult& d, bool color) {
    DemoReport out;
    out.ok = d.ok();
    out.exit_code = out.ok ? 0 : 1;
    out.text = d.render(color);
    out.json = drill_dump(d.to_json());
    return out;
}

}  // namespace

Result<CrashAt> parse_crash_at(const std::string& text) {
    auto c = drill::parse_crash_at(text);
    if (!c) return c.error();
    return *c;
}

Result<DrillReport> run_drill(const DrillOptions& options) {
    try {
        drill::DrillOptions o;
        static_cast<DrillOptions&>(o) = options;
        if (options.handle_interrupts) drill::handle_interrupts();
        auto r = drill::run_drill(o);
        if (!r) return r.error();
        DrillReport out;
        out.ok = r->ok();
        out.interrupted = options.handle_interrupts && drill::interrupted();
        out.exit_code = out.interrupted ? 130 : out.ok ? 0 : 1;
        out.text = drill::render_text(*r, options.color);
        out.markdown = drill::render_markdown(*r);
        out.json = drill_dump(drill::to_json(*r));
        return out;
    } catch (const std::exception& e) {
        return internal_error("drill", e);
    }
}

Result<DemoReport> run_demo(const DemoOptions& options) {
    try {
        if (options.handle_interrupts) drill::handle_interrupts();
        auto d = drill::run_demo(options);
        if (!d) return d.error();
        DemoReport out = demo_report(*d, options.color);
        out.interrupted = options.handle_interrupts && drill::interrupted();
        if (out.interrupted) out.exit_code = 130;
        return out;
    } catch (const std::exception& e) {
        return internal_error("demo", e);
    }
}

Result<DemoReport> demo_from_json(const std::string& json_text, bool color) {
    try {
        auto j = nlohmann::json::parse(json_text, nullptr, false);
        auto d = drill::DemoResult::from_json(j);
        if (!d) return d.error();
        return demo_report(*d, color);
    } catch (const std::exception& e) {
        return internal_error("demo", e);
    }
}

const std::vector<std::string>& teardown_bench_shapes() {
    return drill::teardown_bench_shapes();
}

const std::vector<std::string>& teardown_bench_strategies() {
    return drill::teardown_bench_strategies();
}

Result<TeardownBenchReport> run_teardown_bench(const TeardownBenchOptions& options) {
    try {
        drill::TeardownBenchOptions o;
        o.trials = options.trials;
        o.shapes = options.shapes;
        o.strategies = options.strategies;
        o.fixture =
            options.fixture.empty() ? drill::sibling_binary("mcpwarden-fixture") : options.fixture;
        o.grace_ms = options.grace_ms;
        o.progress = options.progress;
        auto r = drill::run_teardown_bench(o);
        if (!r) return r.error();
        r->command = options.command;
        TeardownBenchReport out;
        out.errors = r->errors();
        out.table = r->render_table();
        out.json = r->to_json();
        out.svg = r->render_svg();
        return out;
    } catch (const std::exception& e) {
        return internal_error("bench teardown", e);
    }
}

}  // namespace warden::api
