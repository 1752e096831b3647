// The report of a teardown: its verdict, its JSON (integers only) and its text.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "contain/teardown.hpp"

namespace warden {

// ---------------------------------------------------------------------------------------
// The report

Status TeardownReport::verdict() const {
    if (survivors.empty()) return {};
    std::string msg = fmt::format("{} process{} survived teardown:", survivors.size(),
                                  survivors.size() == 1 ? "" : "es");
    for (size_t i = 0; i < survivors.size(); ++i) {
        std::string cmd;
        for (const Target& t : targets)
            if (t.id == survivors[i]) cmd = t.command.unredacted();
        if (cmd.empty())
            if (auto p = read_process(survivors[i].pid, kCmdline); p) cmd = p->display_command();
        msg += fmt::format("{} {} ({})", i ? "," : "", survivors[i].pid, cmd);
    }
    return Error::msg(msg);
}

namespace {

// The report's times in the JSON: integer microseconds (journal bodies hold integers only),
// -1 for "not seen".
int64_t whole_us(double ms) {
    return ms < 0 ? -1 : static_cast<int64_t>(std::llround(ms * 1000));
}

}  // namespace

std::string TeardownReport::to_json_string(TextOut text) const {
    using nlohmann::json;
    json j;
    j["ok"] = ok();
    j["counts"] = {{"targets", targets.size()},          {"exited_in_eof", exited_in_eof},
                   {"exited_in_grace", exited_in_grace}, {"killed", killed},
                   {"already_gone", already_gone},       {"identity_changed", identity_changed},
                   {"survivors", survivors.size()}};
    json ts = json::array();
    for (const Target& t : targets)
        ts.push_back({{"pid", t.id.pid},
                      {"starttime", t.id.starttime},
                      {"ppid", t.ppid},
                      {"uid", t.uid},
                      {"command", text(t.command)},
                      {"role", to_string(t.role)},
                      {"how", to_string(t.how)},
                      {"ended_us", whole_us(t.ended_ms)},
                      {"round", t.round},
                      {"signals", t.signals}});
    j["targets"] = ts;
    json sv = json::array();
    for (const ProcessId& s : survivors)
        sv.push_back({{"pid", s.pid}, {"starttime", s.starttime}});
    j["survivors"] = sv;
    j["rounds"] = rounds;
    j["phases_us"] = {
        {"plan", whole_us(phases.plan_ms)},        {"eof", whole_us(phases.eof_ms)},
        {"grace", whole_us(phases.grace_ms)},      {"kill", whole_us(phases.kill_ms)},
        {"verify", whole_us(phases.verify_ms)},    {"total", whole_us(phases.total_ms)},
        {"plan_cpu", whole_us(phases.plan_cpu_ms)}};
    j["layers"] = layers.to_json();
    json ps = json::array();
    for (const PortCheck& p : ports)
        ps.push_back({{"proto", p.proto},
                      {"address", p.address},
                      {"port", p.port},
                      {"bindable", p.bindable},
                      {"released_us", whole_us(p.released_ms)}});
    j["ports"] = ps;
    j["cgroup_empty"] = cgroup_empty;
    j["reaped_all"] = reaped_all;
    if (root_status) j["root_status"] = *root_status;
    json ns = json::array();
    for (const SensitiveText& n : notes)
        ns.push_back(text(n));
    j["notes"] = std::move(ns);
    return j.dump();
}

std::string TeardownReport::render_text() const {
    std::string out = fmt::format(
        "teardown: {} targets, {} exited in EOF window, {} exited after SIGTERM, {} killed, "
        "{} already gone, {} identity changed, {} survivors ({:.1f} ms, {} rounds)\n",
        targets.size(), exited_in_eof, exited_in_grace, killed, already_gone, identity_changed,
        survivors.size(), phases.total_ms, rounds);
    for (const Target& t : targets)
        out += fmt::format("  {:>7} {:<15} {:<22} {:>8.1f} ms  {}\n", t.id.pid, to_string(t.role),
                           to_string(t.how), t.ended_ms, t.command.unredacted());
    for (const PortCheck& p : ports)
        out += fmt::format("  port {}:{}/{} {}\n", p.address, p.port, p.proto,
                           p.bindable ? "released" : "STILL HELD");
    out += fmt::format(
        "  phases: plan {:.1f} ms, EOF {:.1f} ms, grace {:.1f} ms, kill {:.1f} ms, "
        "verify {:.1f} ms\n",
        phases.plan_ms, phases.eof_ms, phases.grace_ms, phases.kill_ms, phases.verify_ms);
    for (const SensitiveText& n : notes)
        out += "  note: " + n.unredacted() + "\n";
    if (auto v = verdict(); !v) out += "  " + v.error().message + "\n";
    return out;
}

}  // namespace warden
