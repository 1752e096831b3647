// `mcpwarden reap`: remove MCP server trees that other clients left behind, safely and on
// record (docs/REAP.md). The command reads as its algorithm: check_usage → plan → show_plan
// → confirm → act → show_results; --watch repeats plan → act until SIGTERM/SIGINT.
#include <poll.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/command.hpp"
#include "cli/table.hpp"
#include "journal/journal.hpp"
#include "reap/reap.hpp"
#include "sys/signalfd.hpp"

namespace warden::cli {
namespace {

using nlohmann::json;

constexpr const char* kNoTty =
    "mcpwarden reap: no terminal to confirm on: pass --yes to act without asking, or "
    "--dry-run to only print the plan";
constexpr const char* kWatchNeedsYes =
    "mcpwarden reap: --watch needs --yes: nobody is there to confirm each pass";

struct ReapOptions {
    bool orphans = false;
    std::vector<std::string> sessions;
    std::vector<pid_t> pids;
    std::string older_than, match, user, journal, revoke_cmd, revoke_timeout, interval = "5m";
    std::string grace = "2s";
    bool all_users = false, yes = false, dry_run = false, json_out = false, force = false;
    bool watch = false;
};

int usage_error(const std::string& msg) {
    std::fprintf(stderr, "mcpwarden reap: %s\n", msg.c_str());
    return 2;
}

std::string age_text(double seconds) {
    auto s = static_cast<long long>(seconds);
    if (s >= 86400) return fmt::format("{}d{}h", s / 86400, s / 3600 % 24);
    if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, s / 60 % 60);
    if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
    return fmt::format("{}s", s);
}

std::string first_command(const reap::TargetTree& t) {
    const reap::Member* m = t.member(t.root().pid);
    return m ? m->command : std::string("?");
}

json plan_json(const reap::Plan& plan) {
    json trees = json::array();
    for (const reap::TargetTree& t : plan.trees) {
        json members = json::array();
        for (const reap::Member& m : t.members)
            members.push_back({{"pid", m.id.pid},
                               {"starttime", m.id.starttime},
                               {"ppid", m.ppid},
                               {"uid", m.uid},
                               {"rss_kb", m.rss_kb},
                               {"command", m.command}});
        json roots = json::array();
        for (const ProcessId& r : t.roots)
            roots.push_back({{"pid", r.pid}, {"starttime", r.starttime}});
        trees.push_back({{"root", {{"pid", t.root().pid}, {"starttime", t.root().starttime}}},
                         {"roots", roots},
                         {"selected_as", t.selected_as},
                         {"reasons", t.reasons},
                         {"session", t.session},
                         {"cgroup", t.cgroup},
                         {"uid", t.uid},
                         {"age_seconds", static_cast<int64_t>(t.age_seconds)},
                         {"rss_kb", t.rss_kb()},
                         {"members", members},
                         {"capabilities", t.capabilities}});
    }
    json refused = json::array();
    for (const reap::Refusal& r : plan.refused)
        refused.push_back({{"pid", r.id.pid},
                           {"starttime", r.id.starttime},
                           {"command", r.command},
                           {"why", r.why}});
    return {{"trees", trees}, {"refused", refused}, {"scanned", plan.scanned}};
}

json results_json(const reap::ActReport& rep) {
    json out = json::array();
    for (const reap::TreeResult& r : rep.trees) {
        json j{{"root", {{"pid", r.root.pid}, {"starttime", r.root.starttime}}},
               {"command", r.command},
               {"outcome", reap::to_string(r.outcome)},
               {"detail", r.detail},
               {"ports_free", r.ports_free}};
        if (r.revoke)
            j["revoke"] = {{"ok", r.revoke->ok()},
                           {"result", r.revoke->describe()},
                           {"output", r.revoke->output}};
        if (r.report) {
            json procs = json::array();
            for (const Target& t : r.report->targets)
                procs.push_back({{"pid", t.id.pid},
                                 {"starttime", t.id.starttime},
                                 {"command", t.command},
                                 {"outcome", to_string(t.how)}});
            j["processes"] = procs;
            j["survivors"] = r.report->survivors.size();
        }
        out.push_back(std::move(j));
    }
    return out;
}

std::string plan_text(const reap::Plan& plan) {
    std::string out;
    if (plan.trees.empty()) {
        out += "Nothing to reap.\n";
    } else {
        Table t({{"PID", Column::Align::Right},
                 {"PROCS", Column::Align::Right},
                 {"RSS", Column::Align::Right},
                 {"AGE", Column::Align::Right},
                 {"SELECTED AS"},
                 {"SESSION"},
                 {"COMMAND", Column::Align::Left, true}});
        for (const reap::TargetTree& tree : plan.trees)
            t.add_row({std::to_string(tree.root().pid), std::to_string(tree.members.size()),
                       fmt::format("{:.1f}M", static_cast<double>(tree.rss_kb()) / 1024.0),
                       age_text(tree.age_seconds), tree.selected_as,
                       tree.session.empty() ? "-" : tree.session.substr(0, 16),
                       first_command(tree)});
        out += t.render(output_width(STDOUT_FILENO));
    }
    if (!plan.refused.empty()) {
        out += "Refused (left alone):\n";
        for (const reap::Refusal& r : plan.refused)
            out += fmt::format("  {} ({}): {}\n", r.id.pid, fit(r.command, 60), r.why);
    }
    return out;
}

std::string results_text(const reap::ActReport& rep) {
    Table t({{"PID", Column::Align::Right}, {"OUTCOME"}, {"DETAIL", Column::Align::Left, true}});
    for (const reap::TreeResult& r : rep.trees)
        t.add_row({std::to_string(r.root.pid), reap::to_string(r.outcome), r.detail});
    return t.render(output_width(STDOUT_FILENO));
}

bool confirm(const reap::Plan& plan) {
    size_t procs = 0;
    for (const auto& t : plan.trees)
        procs += t.members.size();
    std::fprintf(stderr, "Reap %zu tree(s), %zu process(es)? [y/N] ", plan.trees.size(), procs);
    std::fflush(stderr);
    std::string answer;
    if (!std::getline(std::cin, answer)) return false;
    return answer == "y" || answer == "Y" || answer == "yes";
}

struct Context {
    reap::Selection sel;
    reap::PlanOptions plan;
    reap::ActOptions act;
    std::unique_ptr<journal::Journal> journal;
};

// One pass: plan, show, (confirm), act, show; returns the exit code.
int one_pass(const ReapOptions& o, Context& ctx, bool interactive) {
    auto plan = reap::plan(ctx.sel, ctx.plan);
    if (!plan) return usage_error(plan.error().message);
    for (const std::string& w : plan->warnings)
        std::fprintf(stderr, "mcpwarden reap: warning: %s\n", w.c_str());
    if (!o.json_out && !o.watch) std::fputs(plan_text(*plan).c_str(), stdout);
    if (o.dry_run || plan->trees.empty()) {
        if (ctx.journal)
            (void)ctx.journal->append(reap::pass_event(ctx.sel, *plan, nullptr, o.dry_run));
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
    reap::ActReport rep = reap::act(*plan, ctx.act);
    (void)ctx.journal->append(reap::pass_event(ctx.sel, *plan, &rep, false));
    if (o.json_out)
        std::puts(json{{"schema", "mcpwarden.reap"},
                       {"schema_version", 1},
                       {"dry_run", false},
                       {"plan", plan_json(*plan)},
                       {"results", results_json(rep)}}
                      .dump(2)
                      .c_str());
    else if (!o.watch)
        std::fputs(results_text(rep).c_str(), stdout);
    if (o.watch) {
        int reaped = 0, failed = 0;
        for (const auto& r : rep.trees)
            (r.outcome == reap::TreeOutcome::Reaped ? reaped : failed) += 1;
        std::fprintf(stderr, "mcpwarden reap: pass: %zu planned, %d reaped, %d not, %zu refused\n",
                     plan->trees.size(), reaped, failed, plan->refused.size());
    }
    std::fflush(stdout);
    return rep.ok() ? 0 : 1;
}

// Until SIGTERM/SIGINT/SIGHUP: a pass, then a wait on the signalfd for one interval.
int watch(const ReapOptions& o, Context& ctx, SignalFd& sigs, std::chrono::milliseconds every) {
    for (long pass = 1;; ++pass) {
        std::fprintf(stderr, "mcpwarden reap: watch pass %ld\n", pass);
        (void)one_pass(o, ctx, false);
        pollfd p{sigs.fd(), POLLIN, 0};
        int rc = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(every.count(), INT32_MAX)));
        if (rc > 0) {
            auto s = sigs.read();
            int signo = s && *s ? static_cast<int>((*s)->ssi_signo) : 0;
            std::fprintf(stderr, "mcpwarden reap: stopped by signal %d after %ld pass(es)\n", signo,
                         pass);
            return 0;
        }
    }
}

int run_reap(const ReapOptions& o) {
    Context ctx;
    reap::Selection& sel = ctx.sel;
    sel.orphans = o.orphans;
    sel.sessions = o.sessions;
    sel.pids = o.pids;
    sel.match = o.match;
    sel.all_users = o.all_users;
    if (!o.older_than.empty()) {
        auto d = reap::parse_duration(o.older_than);
        if (!d) return usage_error("--older-than: " + d.error().message);
        sel.older_than = *d;
    }
    if (!o.user.empty()) {
        passwd pw{};
        passwd* found = nullptr;
        char buf[4096];
        if (::getpwnam_r(o.user.c_str(), &pw, buf, sizeof buf, &found) == 0 && found) {
            sel.user = found->pw_uid;
        } else {
            char* end = nullptr;
            long n = std::strtol(o.user.c_str(), &end, 10);
            if (*end != '\0' || n < 0) return usage_error("--user " + o.user + ": no such user");
            sel.user = static_cast<uid_t>(n);
        }
    }
    if (auto st = reap::validate(sel); !st) return usage_error(st.error().message);

    auto interval = reap::parse_duration(o.interval);
    if (!interval || interval->count() < 1000)
        return usage_error("--interval " + o.interval + ": expected a duration of 1s or more");
    auto grace = reap::parse_duration(o.grace);
    if (!grace) return usage_error("--grace: " + grace.error().message);
    if (o.watch && !o.yes && !o.dry_run) {
        std::fprintf(stderr, "%s\n", kWatchNeedsYes);
        return 2;
    }
    const bool interactive = !o.yes && !o.dry_run;
    if (interactive && !::isatty(STDIN_FILENO)) {
        std::fprintf(stderr, "%s\n", kNoTty);
        return 2;
    }

    auto cfg = reap::load_config();
    if (!cfg) return usage_error(cfg.error().message);
    std::string hook = !o.revoke_cmd.empty() ? o.revoke_cmd : cfg->revoke_cmd.value_or("");
    if (!hook.empty()) {
        reap::RevokeHook h{hook, cfg->revoke_timeout.value_or(std::chrono::seconds(30))};
        if (!o.revoke_timeout.empty()) {
            auto d = reap::parse_duration(o.revoke_timeout);
            if (!d) return usage_error("--revoke-timeout: " + d.error().message);
            h.timeout = *d;
        }
        ctx.act.revoke = h;
    }
    ctx.act.force = o.force;
    ctx.act.grace = *grace;
    ctx.plan.journal_path = o.journal;  // the sessions `mcpwarden ps --journal` would read

    // The signals are blocked before the journal starts its writer thread, so that thread
    // inherits the mask and a SIGTERM always reaches the signalfd, never a default action.
    std::optional<SignalFd> sigs;
    if (o.watch) {
        auto s = SignalFd::create({SIGTERM, SIGINT, SIGHUP});
        if (!s) return usage_error(s.error().message);
        sigs.emplace(std::move(*s));
    }
    auto path = journal::resolve_path(o.journal);
    if (!path) return usage_error(path.error().message);
    auto j = journal::Journal::open({.path = *path});
    if (!j) {
        if (!o.dry_run)
            return usage_error("cannot open the journal, and nothing is reaped off the record: " +
                               j.error().message);
    } else {
        ctx.journal = std::move(*j);
        ctx.act.journal = ctx.journal.get();
    }
    int rc = o.watch ? watch(o, ctx, *sigs, *interval) : one_pass(o, ctx, interactive);
    if (ctx.journal) {
        if (auto st = ctx.journal->close(); !st)
            std::fprintf(stderr, "mcpwarden reap: journal: %s\n", st.error().message.c_str());
    }
    return rc;
}

const Command reap_cmd(60, [](CLI::App& app) {
    auto opt = std::make_shared<ReapOptions>();
    auto* sub =
        app.add_subcommand("reap",
                           "Remove MCP server trees other clients left behind: snapshot, revoke, "
                           "terminate, verify, record (docs/REAP.md)");
    sub->add_flag("--orphans", opt->orphans,
                  "Select the orphans `mcpwarden ps` shows: servers nobody can write to any more");
    sub->add_option("--session", opt->sessions,
                    "Select a session's remnants (session cgroup and MCPWARDEN_SESSION marker)");
    sub->add_option("--pid", opt->pids, "Select this process and its whole tree");
    sub->add_option("--older-than", opt->older_than, "Only trees at least this old (10m, 1h)");
    sub->add_option("--match", opt->match,
                    "Only trees with a command line matching this regex (never alone)");
    sub->add_option("--user", opt->user, "Only this user's trees (others: root + --all-users)");
    sub->add_flag("--all-users", opt->all_users, "Root only: other users' trees may be reaped");
    sub->add_option("--revoke-cmd", opt->revoke_cmd,
                    "Run before any signal via /bin/sh -c, target JSON on stdin");
    sub->add_option("--revoke-timeout", opt->revoke_timeout, "Bound on the revoke hook (30s)");
    sub->add_flag("--force", opt->force, "Go on with teardown when the revoke hook fails");
    sub->add_option("--grace", opt->grace, "SIGTERM → SIGKILL window (2s)");
    sub->add_flag("-y,--yes", opt->yes, "Act without asking (required without a terminal)");
    sub->add_flag("-n,--dry-run", opt->dry_run, "Only print the plan");
    sub->add_flag("--json", opt->json_out, "JSON output");
    sub->add_option("--journal", opt->journal,
                    "Journal path (default: MCPWARDEN_JOURNAL, "
                    "$XDG_STATE_HOME/mcpwarden/journal.db)");
    sub->add_flag("--watch", opt->watch, "Repeat every --interval until SIGTERM/SIGINT");
    sub->add_option("--interval", opt->interval, "Pause between --watch passes (5m)");
    return Bound{sub, [opt] { return run_reap(*opt); }};
});

}  // namespace
}  // namespace warden::cli
