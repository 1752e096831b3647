// `mcpwarden reap`: remove MCP server trees that other clients left behind, safely and on
// record (docs/REAP.md). The command reads as its algorithm: check_usage → plan → show_plan
// → confirm → act → show_results; --watch repeats plan → act until SIGTERM/SIGINT.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "mcpwarden/inventory.hpp"  // display_bytes
#include "mcpwarden/reap.hpp"
#include "mcpwarden/settings.hpp"
#include "table.hpp"

namespace warden::cli {
namespace {

using nlohmann::json;

constexpr const char* kNoTty =
    "mcpwarden reap: no terminal to confirm on: pass --yes to act without asking, or "
    "--dry-run to only print the plan";
constexpr const char* kWatchNeedsYes =
    "mcpwarden reap: --watch needs --yes: nobody is there to confirm each pass";
constexpr const char* kWatchDryRun =
    "mcpwarden reap: --watch with --dry-run: a watch that only plans would print the same plan "
    "until stopped and act never; run --dry-run alone to see the plan once";

struct ReapOptions {
    // The selectors the flags set as they are; --older-than and --user are parsed into it
    // once the command line is read (run_reap).
    api::ReapSelection selection;
    std::string older_than, user;
    // Empty when not given: the [reap] settings (or built-in defaults) then apply.
    std::string journal, revoke_cmd, revoke_timeout, interval, grace;
    bool yes = false, dry_run = false, json_out = false, force = false;
    bool watch = false;
};

int usage_error(const std::string& msg) {
    std::fprintf(stderr, "mcpwarden reap: %s\n", msg.c_str());
    return 2;
}

std::string age_text(double seconds) {
    auto s = static_cast<long long>(seconds);
    char buf[64];
    if (s >= 86400)
        std::snprintf(buf, sizeof buf, "%lldd%lldh", s / 86400, s / 3600 % 24);
    else if (s >= 3600)
        std::snprintf(buf, sizeof buf, "%lldh%02lldm", s / 3600, s / 60 % 60);
    else if (s >= 60)
        std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
    else
        std::snprintf(buf, sizeof buf, "%llds", s);
    return buf;
}

// Kilobytes as megabytes with one decimal: "81.2M".
std::string megabytes(uint64_t kb) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1fM", static_cast<double>(kb) / 1024.0);
    return buf;
}

json plan_json(const api::ReapPlan& plan) {
    json trees = json::array();
    for (const api::ReapTree& t : plan.trees) {
        json members = json::array();
        for (const api::ReapMember& m : t.members)
            members.push_back({{"pid", m.id.pid},
                               {"starttime", m.id.starttime},
                               {"ppid", m.ppid},
                               {"uid", m.uid},
                               {"rss_kb", m.rss_kb},
                               {"command", m.command}});
        json roots = json::array();
        for (const api::ProcessRef& r : t.roots)
            roots.push_back({{"pid", r.pid}, {"starttime", r.starttime}});
        trees.push_back({{"root", {{"pid", t.root().pid}, {"starttime", t.root().starttime}}},
                         {"roots", roots},
                         {"selected_as", t.selected_as},
                         {"reasons", t.reasons},
                         {"session", t.session},
                         {"cgroup", t.cgroup},
                         {"uid", t.uid},
                         {"age_seconds", static_cast<int64_t>(t.age_seconds)},
                         {"rss_kb", t.rss_kb},
                         {"members", members},
                         {"capabilities", json::parse(t.capabilities_json)}});
    }
    json refused = json::array();
    for (const api::ReapRefusal& r : plan.refused)
        refused.push_back({{"pid", r.id.pid},
                           {"starttime", r.id.starttime},
                           {"command", r.command},
                           {"why", r.why}});
    return {{"trees", trees},
            {"refused", refused},
            {"scanned", plan.scanned},
            {"empty_cgroups", plan.empty_cgroups}};
}

json results_json(const api::ReapReport& rep) {
    json out = json::array();
    for (const api::ReapTreeResult& r : rep.trees) {
        json j{{"root", {{"pid", r.root.pid}, {"starttime", r.root.starttime}}},
               {"command", r.command},
               {"outcome", r.outcome},
               {"detail", r.detail},
               {"ports_free", r.ports_free}};
        if (r.revoke_ran)
            j["revoke"] = {
                {"ok", r.revoke_ok}, {"result", r.revoke_result}, {"output", r.revoke_output}};
        if (r.torn_down) {
            json procs = json::array();
            for (const api::ReapProcess& t : r.processes)
                procs.push_back({{"pid", t.id.pid},
                                 {"starttime", t.id.starttime},
                                 {"command", t.command},
                                 {"outcome", t.outcome}});
            j["processes"] = procs;
            j["survivors"] = r.survivors;
        }
        if (!r.cgroup.empty()) j["cgroup"] = r.cgroup;
        out.push_back(std::move(j));
    }
    return out;
}

std::string plan_text(const api::ReapPlan& plan) {
    std::string out;
    if (plan.trees.empty() && plan.empty_cgroups.empty()) {
        out += "Nothing to reap.\n";
    } else if (!plan.trees.empty()) {
        Table t({{"PID", Column::Align::Right},
                 {"PROCS", Column::Align::Right},
                 {"RSS", Column::Align::Right},
                 {"AGE", Column::Align::Right},
                 {"SELECTED AS"},
                 {"SESSION"},
                 {"COMMAND", Column::Align::Left, true}});
        for (const api::ReapTree& tree : plan.trees)
            t.add_row({std::to_string(tree.root().pid), std::to_string(tree.members.size()),
                       megabytes(tree.rss_kb), age_text(tree.age_seconds), tree.selected_as,
                       tree.session.empty() ? "-" : api::display_bytes(tree.session.substr(0, 16)),
                       tree.command()});
        out += t.render(output_width(STDOUT_FILENO));
    }
    if (!plan.empty_cgroups.empty()) {
        out += "Session cgroups with nothing left in them (removed once empty):\n";
        for (const std::string& d : plan.empty_cgroups)
            out += "  " + d + "\n";
    }
    if (!plan.refused.empty()) {
        out += "Refused (left alone):\n";
        for (const api::ReapRefusal& r : plan.refused)
            out +=
                "  " + std::to_string(r.id.pid) + " (" + fit(r.command, 60) + "): " + r.why + "\n";
    }
    return out;
}

std::string results_text(const api::ReapReport& rep) {
    Table t({{"PID", Column::Align::Right}, {"OUTCOME"}, {"DETAIL", Column::Align::Left, true}});
    for (const api::ReapTreeResult& r : rep.trees)
        t.add_row({std::to_string(r.root.pid), r.outcome, r.detail});
    std::string out = rep.trees.empty() ? "" : t.render(output_width(STDOUT_FILENO));
    for (const std::string& l : rep.cgroups)
        out += l + "\n";
    return out;
}

bool confirm(const api::ReapPlan& plan) {
    size_t procs = 0;
    for (const auto& t : plan.trees)
        procs += t.members.size();
    std::fprintf(stderr, "Reap %zu tree(s), %zu process(es)? [y/N] ", plan.trees.size(), procs);
    std::fflush(stderr);
    std::string answer;
    if (!std::getline(std::cin, answer)) return false;
    return answer == "y" || answer == "Y" || answer == "yes";
}

// One pass: plan, show, (confirm), act, show; returns the exit code.
int one_pass(const ReapOptions& o, api::Reaper& reaper, bool interactive) {
    auto plan = reaper.plan();
    if (!plan) return usage_error(plan.error().message);
    for (const std::string& w : plan->warnings)
        std::fprintf(stderr, "mcpwarden reap: warning: %s\n", w.c_str());
    if (!o.json_out && !o.watch) std::fputs(plan_text(*plan).c_str(), stdout);
    if (o.dry_run || (plan->trees.empty() && plan->empty_cgroups.empty())) {
        reaper.record_plan(*plan, o.dry_run);
        if (o.json_out)
            std::puts(json{{"schema", "mcpwarden.reap"},
                           {"schema_version", 1},
                           {"dry_run", o.dry_run},
                           {"plan", plan_json(*plan)},
                           {"results", json::array()}}
                          .dump(2)
                          .c_str());
        return 0;
    }
    if (interactive && !confirm(*plan)) {
        std::fprintf(stderr, "mcpwarden reap: not confirmed: nothing done\n");
        return 1;
    }
    api::ReapReport rep = reaper.act(*plan);
    if (o.json_out)
        std::puts(json{{"schema", "mcpwarden.reap"},
                       {"schema_version", 1},
                       {"dry_run", false},
                       {"plan", plan_json(*plan)},
                       {"results", results_json(rep)},
                       {"cgroups", rep.cgroups}}
                      .dump(2)
                      .c_str());
    else if (!o.watch)
        std::fputs(results_text(rep).c_str(), stdout);
    if (o.watch) {
        int reaped = 0, failed = 0;
        for (const auto& r : rep.trees)
            (r.outcome == "reaped" ? reaped : failed) += 1;
        std::fprintf(stderr, "mcpwarden reap: pass: %zu planned, %d reaped, %d not, %zu refused\n",
                     plan->trees.size(), reaped, failed, plan->refused.size());
    }
    std::fflush(stdout);
    return rep.ok ? 0 : 1;
}

// Until SIGTERM/SIGINT/SIGHUP: a pass, then a wait for one of them for one interval.
int watch(const ReapOptions& o, api::Reaper& reaper, std::chrono::milliseconds every) {
    for (long pass = 1;; ++pass) {
        std::fprintf(stderr, "mcpwarden reap: watch pass %ld\n", pass);
        (void)one_pass(o, reaper, false);
        if (auto signo = reaper.wait_for_stop(every)) {
            std::fprintf(stderr, "mcpwarden reap: stopped by signal %d after %ld pass(es)\n",
                         *signo, pass);
            return 0;
        }
    }
}

int run_reap(const ReapOptions& o) {
    api::ReapOptions ro;
    ro.selection = o.selection;
    api::ReapSelection& sel = ro.selection;
    if (!o.older_than.empty()) {
        auto d = api::parse_duration(o.older_than);
        if (!d) return usage_error("--older-than: " + d.error().message);
        sel.older_than = *d;
    }
    if (!o.user.empty()) {
        auto uid = api::user_id(o.user);
        if (!uid) return usage_error("--user " + uid.error().message);
        sel.user = *uid;
    }
    if (auto err = api::reap_check(sel)) return usage_error(err->message);

    // A broken settings file stops reap (unlike run): a revoke hook meant to run before any
    // signal must not be skipped because its file had a typo elsewhere.
    api::ReapSettings settings = api::reap_settings();
    if (!settings.problems.empty()) {
        for (const api::SettingsProblem& p : settings.problems)
            std::fprintf(stderr, "mcpwarden reap: settings: %s\n", p.text.c_str());
        return usage_error("settings file broken: nothing done (mcpwarden config check)");
    }
    auto given_or_set = [&](const std::string& flag, const std::string& key) {
        return flag.empty() ? settings.value(key) : flag;
    };
    const std::string interval_text = given_or_set(o.interval, "interval");
    auto interval = api::parse_duration(interval_text);
    if (!interval || interval->count() < 1000)
        return usage_error("--interval " + interval_text + ": expected a duration of 1s or more");
    auto grace = api::parse_duration(given_or_set(o.grace, "grace"));
    if (!grace) return usage_error("--grace: " + grace.error().message);
    if (o.watch && o.dry_run) {
        std::fprintf(stderr, "%s\n", kWatchDryRun);
        return 2;
    }
    if (o.watch && !o.yes) {
        std::fprintf(stderr, "%s\n", kWatchNeedsYes);
        return 2;
    }
    const bool interactive = !o.yes && !o.dry_run;
    if (interactive && !::isatty(STDIN_FILENO)) {
        std::fprintf(stderr, "%s\n", kNoTty);
        return 2;
    }

    ro.revoke_cmd = given_or_set(o.revoke_cmd, "revoke-cmd");
    if (!ro.revoke_cmd.empty()) {
        auto d = api::parse_duration(given_or_set(o.revoke_timeout, "revoke-timeout"));
        if (!d) return usage_error("--revoke-timeout: " + d.error().message);
        ro.revoke_timeout = *d;
    }
    ro.force = o.force;
    ro.grace = *grace;
    ro.journal_path = o.journal;
    ro.journal_required = !o.dry_run;
    ro.stop_signals = o.watch;
    auto reaper = api::Reaper::open(ro);
    if (!reaper) return usage_error(reaper.error().message);
    int rc = o.watch ? watch(o, *reaper, *interval) : one_pass(o, *reaper, interactive);
    if (auto err = reaper->close())
        std::fprintf(stderr, "mcpwarden reap: journal: %s\n", err->message.c_str());
    return rc;
}

const Command reap_cmd(60, [](CLI::App& app) {
    auto opt = std::make_shared<ReapOptions>();
    auto* sub =
        app.add_subcommand("reap",
                           "Remove MCP server trees other clients left behind: snapshot, revoke, "
                           "terminate, verify, record (docs/REAP.md)");
    sub->add_flag("--orphans", opt->selection.orphans,
                  "Select the orphans `mcpwarden ps` shows: servers nobody can write to any more");
    sub->add_flag("--include-suspects", opt->selection.include_suspects,
                  "With --orphans, also the suspects ps shows (an MCP-looking name alone)");
    sub->add_option("--session", opt->selection.sessions,
                    "Select a session's remnants (session cgroup and MCPWARDEN_SESSION marker)");
    sub->add_option("--pid", opt->selection.pids, "Select this process and its whole tree");
    sub->add_option("--older-than", opt->older_than, "Only trees at least this old (10m, 1h)");
    sub->add_option("--match", opt->selection.match,
                    "Only trees with a command line matching this regex (never alone)");
    sub->add_option("--user", opt->user, "Only this user's trees (others: root + --all-users)");
    sub->add_flag("--all-users", opt->selection.all_users,
                  "Root only: other users' trees may be reaped");
    sub->add_option("--revoke-cmd", opt->revoke_cmd,
                    "Run before any signal via /bin/sh -c, target JSON on stdin");
    sub->add_option("--revoke-timeout", opt->revoke_timeout,
                    "Bound on the revoke hook (30s; [reap] revoke-timeout)");
    sub->add_flag("--force", opt->force, "Go on with teardown when the revoke hook fails");
    sub->add_option("--grace", opt->grace, "SIGTERM → SIGKILL window (2s; [reap] grace)");
    sub->add_flag("-y,--yes", opt->yes, "Act without asking (required without a terminal)");
    sub->add_flag("-n,--dry-run", opt->dry_run, "Only print the plan");
    sub->add_flag("--json", opt->json_out, "JSON output");
    sub->add_option("--journal", opt->journal,
                    "Journal path (default: MCPWARDEN_JOURNAL, "
                    "$XDG_STATE_HOME/mcpwarden/journal.db)");
    sub->add_flag("--watch", opt->watch, "Repeat every --interval until SIGTERM/SIGINT");
    sub->add_option("--interval", opt->interval,
                    "Pause between --watch passes (5m; [reap] interval)");
    return Bound{sub, [opt] { return run_reap(*opt); }};
});

}  // namespace
}  // namespace warden::cli
