// The drill's outputs: the text report (80 columns), Markdown, and JSON (which the demo also
// reads back, so the table can be re-printed from a saved run).
#include <fmt/format.h>

#include "drill/drill.hpp"
#include "journal/redact.hpp"

namespace warden::drill {
namespace {

std::string good(bool c, const std::string& s) {
    return paint(c, "32", s);
}
std::string bad(bool c, const std::string& s) {
    return paint(c, "31", s);
}
std::string bold(bool c, const std::string& s) {
    return paint(c, "1", s);
}

// Pads by display width (colour codes excluded).
std::string pad(const std::string& shown, size_t plain_len, size_t width) {
    return plain_len >= width ? shown : shown + std::string(width - plain_len, ' ');
}

std::string helpers_text(const TrialResult& t) {
    if (t.helpers == 0) return "none";
    if (t.mode == Mode::direct) {
        int left = 0;
        for (const auto& p : t.left)
            if (!p.server) ++left;
        return left ? fmt::format("{} still running", left) : fmt::format("{} ended", t.helpers);
    }
    std::string s;
    auto add = [&](int n, const char* what) {
        if (n) s += (s.empty() ? "" : ", ") + fmt::format("{} {}", n, what);
    };
    add(t.helpers_eof, "EOF");
    add(t.helpers_term, "TERM");
    add(t.helpers_kill, "KILL");
    return s.empty() ? fmt::format("{} ended", t.helpers) : s;
}

std::string left_text(const TrialResult& t) {
    if (t.left.empty()) return "0";
    return fmt::format("{}, {} MB", t.left.size(), format_mb(t.left_mb));
}

std::string port_text(const TrialResult& t) {
    if (t.ports.empty()) return "-";
    return t.port_held ? "held" : "free";
}

std::string call_phrase(const DrillResult& r) {
    switch (r.crash_at) {
        case CrashAt::BeforeInit:
            return "before initialize";
        case CrashAt::Idle:
            return "while idle (initialized, tools listed)";
        case CrashAt::InFlight:
            return "with " + r.call + " in flight";
        case CrashAt::MidResponse:
            return "in the middle of the answer to " + r.call;
    }
    return "";
}

}  // namespace

std::string render_text(const DrillResult& r, bool color) {
    std::string out;
    out += bold(color,
                fmt::format("mcpwarden drill: {}\nclient SIGKILLed {}", r.label, call_phrase(r))) +
           "\n\n";
    const size_t w[] = {10, 15, 22, 12, 6, 9};
    out += fmt::format("{:<10} {:<15} {:<22} {:<12} {:<6} {}\n", "trial", "server", "helpers",
                       "left", "port", "released");
    for (const auto& t : r.trials) {
        std::string trial =
            fmt::format("{} {}", t.index, t.mode == Mode::shim ? "with" : "without");
        if (!t.error.empty()) {
            out += fmt::format("{:<10} {}\n", trial, bad(color, "error: " + t.error));
            continue;
        }
        const bool clean = t.left.empty() && !t.port_held;
        std::string left = left_text(t), port = port_text(t), rel = format_ms(t.released_ms);
        out += pad(trial, trial.size(), w[0]) + " " +
               pad(t.server_fate, t.server_fate.size(), w[1]) + " " +
               pad(helpers_text(t), helpers_text(t).size(), w[2]) + " " +
               pad(clean ? good(color, left) : bad(color, left), left.size(), w[3]) + " " +
               pad(t.port_held ? bad(color, port) : port, port.size(), w[4]) + " " +
               (t.released_ms >= 0 ? good(color, rel) : bad(color, rel)) + "\n";
    }
    out +=
        "\nserver: how the started process ended after its stdin closed; helpers: the rest\n"
        "of its tree (EOF: ended by itself, TERM: after SIGTERM, KILL: SIGKILL needed);\n"
        "left: alive when the watch ended (without mcpwarden: after eof + term grace);\n"
        "released: every process gone and every port bindable, after the kill.\n";

    for (const auto& t : r.trials) {
        if (!t.notes.empty() || (!t.left.empty() && t.mode == Mode::direct)) {
            out += fmt::format("\ntrial {} {}:\n", t.index, to_string(t.mode));
            for (const auto& p : t.left)
                out += fmt::format("  left: pid {} {:.1f} MB {}\n", p.id.pid, p.rss_mb,
                                   p.command.substr(0, 50));
            for (const auto& n : t.notes)
                out += "  note: " + n + "\n";
        }
    }

    if (const TrialResult* s = r.first(Mode::shim); s && s->journal) {
        const auto& j = *s->journal;
        out += "\n" + bold(color, fmt::format("journal, session {}:", s->tag)) + "\n";
        for (const auto& line : j.excerpt)
            out += "  " + (line.size() > 76 ? line.substr(0, 75) + "~" : line) + "\n";
        out += "\nchecks:\n";
        auto check = [&](bool ok, const std::string& what, const std::string& detail = {}) {
            out += "  " + (ok ? good(color, "ok  ") : bad(color, "FAIL")) + " " + what +
                   (detail.empty() ? "" : " (" + detail + ")") + "\n";
        };
        // A call whose answer is on record was answered before the kill (whether or not the
        // client read it): a finding about the server, too quick to be caught in flight, not a
        // failure of containment.
        if (j.abandoned && !*j.abandoned)
            out += "  " + bold(color, "note") + " " + s->call +
                   " was answered before the crash: no call was in flight\n";
        else if (j.abandoned)
            check(*j.abandoned, "the in-flight call is on record as abandoned");
        check(j.order_ok, "snapshot -> signal -> exit, in that order", j.order_detail);
        check(s->run_exit_ms >= 0, "mcpwarden run exited",
              s->run_exit_ms >= 0 ? format_ms(s->run_exit_ms) + " after the kill" : "it did not");
        if (r.verified) check(r.verify_ok, "audit verify", r.verify_summary);
    }

    int cleaned = 0;
    bool all_clean = true;
    for (const auto& t : r.trials) {
        cleaned += t.cleaned_up;
        all_clean = all_clean && t.clean_after;
    }
    out += "\n";
    if (cleaned > 0)
        out += fmt::format("The drill SIGKILLed {} leftover process(es) by identity afterwards.\n",
                           cleaned);
    out += all_clean ? good(color, "Nothing of any trial is left running.") + "\n"
                     : bad(color, "Processes of a trial are still running.") + "\n";
    if (!r.journal_path.empty()) {
        out += fmt::format("journal: {}\n", r.journal_path);
        if (const TrialResult* s = r.first(Mode::shim))
            out +=
                fmt::format("  mcpwarden journal show {} --journal {}\n", s->tag, r.journal_path);
    }
    out += r.ok() ? good(color, "drill passed") + "\n" : bad(color, "drill FAILED") + "\n";
    return out;
}

std::string render_markdown(const DrillResult& r) {
    std::string out =
        fmt::format("## mcpwarden drill: {}\n\nClient SIGKILLed {}.\n\n", r.label, call_phrase(r));
    out += "| trial | server | helpers | left | port | released |\n";
    out += "|---|---|---|---|---|---|\n";
    for (const auto& t : r.trials) {
        if (!t.error.empty()) {
            out += fmt::format("| {} {} | error: {} | | | | |\n", t.index,
                               t.mode == Mode::shim ? "with" : "without", t.error);
            continue;
        }
        out += fmt::format("| {} {} | {} | {} | {} | {} | {} |\n", t.index,
                           t.mode == Mode::shim ? "with mcpwarden" : "without mcpwarden",
                           t.server_fate, helpers_text(t), left_text(t), port_text(t),
                           format_ms(t.released_ms));
    }
    if (const TrialResult* s = r.first(Mode::shim); s && s->journal) {
        out += fmt::format("\nJournal, session `{}`:\n\n```\n", s->tag);
        for (const auto& line : s->journal->excerpt)
            out += line + "\n";
        out += "```\n";
        out += fmt::format(
            "\n- in-flight call abandoned: {}\n",
            s->journal->abandoned ? (*s->journal->abandoned ? "yes" : "no (answered)") : "n/a");
        out += fmt::format("- snapshot -> signal -> exit: {}\n",
                           s->journal->order_ok ? "yes" : "no: " + s->journal->order_detail);
    }
    if (r.verified) out += fmt::format("- audit verify: {}\n", r.verify_summary);
    out += fmt::format("\nResult: **{}**\n", r.ok() ? "passed" : "FAILED");
    return out;
}

nlohmann::json to_json(const TrialResult& t) {
    using nlohmann::json;
    auto procs = [](const std::vector<TreeProcess>& v) {
        json a = json::array();
        for (const auto& p : v)
            a.push_back({{"pid", p.id.pid},
                         {"starttime", p.id.starttime},
                         {"ppid", p.ppid},
                         {"command", p.command},
                         {"rss_mb", p.rss_mb},
                         {"server", p.server},
                         {"ended_ms", p.ended_ms}});
        return a;
    };
    json ports = json::array();
    for (const auto& p : t.ports)
        ports.push_back({{"addr", p.addr}, {"port", p.port}, {"free_ms", p.free_ms}});
    json j{{"mode", t.mode == Mode::shim ? "shim" : "direct"},
           {"crash_at", std::string(to_string(t.crash_at))},
           {"trial", t.index},
           {"tag", t.tag},
           {"call", t.call},
           {"call_id", t.call_id},
           {"answered", t.answered},
           {"notes", t.notes},
           {"tree", procs(t.tree)},
           {"tree_processes", t.tree.size()},
           {"tree_mb", t.tree_mb},
           {"ports", ports},
           {"server_fate", t.server_fate},
           {"helpers", t.helpers},
           {"helpers_ended_on_eof", t.helpers_eof},
           {"helpers_needed_sigterm", t.helpers_term},
           {"helpers_needed_sigkill", t.helpers_kill},
           {"left", procs(t.left)},
           {"processes_left", t.left.size()},
           {"mb_left", t.left_mb},
           {"port_held", t.port_held},
           {"gone_ms", t.gone_ms},
           {"ports_free_ms", t.ports_free_ms},
           {"released_ms", t.released_ms},
           {"watched_ms", t.watched_ms},
           {"run_exit_ms", t.run_exit_ms},
           {"cleaned_up", t.cleaned_up},
           {"clean_after", t.clean_after},
           {"contained", t.contained()}};
    if (!t.error.empty()) j["error"] = t.error;
    if (t.journal) {
        const auto& f = *t.journal;
        j["journal"] = {{"session_found", f.session_found},
                        {"client_lost", f.client_lost},
                        {"cause", f.cause},
                        {"abandoned", f.abandoned ? json(*f.abandoned) : json(nullptr)},
                        {"end_reason", f.end_reason},
                        {"snapshots", f.snapshots},
                        {"signals", f.signals},
                        {"exits", f.exits},
                        {"order_ok", f.order_ok},
                        {"order_detail", f.order_detail},
                        {"excerpt", f.excerpt}};
    }
    return j;
}

TrialResult trial_from_json(const nlohmann::json& j) {
    TrialResult t;
    auto procs = [](const nlohmann::json& a) {
        std::vector<TreeProcess> v;
        if (!a.is_array()) return v;
        for (const auto& p : a) {
            TreeProcess tp;
            tp.id.pid = p.value("pid", 0);
            tp.id.starttime = p.value("starttime", uint64_t{0});
            tp.ppid = p.value("ppid", 0);
            tp.command = p.value("command", "");
            tp.rss_mb = p.value("rss_mb", 0.0);
            tp.server = p.value("server", false);
            tp.ended_ms = p.value("ended_ms", -1.0);
            v.push_back(tp);
        }
        return v;
    };
    t.mode = j.value("mode", "shim") == "shim" ? Mode::shim : Mode::direct;
    if (auto c = parse_crash_at(j.value("crash_at", "in-flight"))) t.crash_at = *c;
    t.index = j.value("trial", 0);
    t.error = j.value("error", "");
    t.tag = j.value("tag", "");
    t.call = j.value("call", "");
    t.call_id = j.value("call_id", "");
    t.answered = j.value("answered", false);
    t.notes = j.value("notes", std::vector<std::string>{});
    t.tree = procs(j.value("tree", nlohmann::json::array()));
    t.tree_mb = j.value("tree_mb", 0.0);
    if (j.contains("ports"))
        for (const auto& p : j["ports"])
            t.ports.push_back(
                {p.value("addr", ""), p.value("port", uint16_t{0}), p.value("free_ms", -1.0)});
    t.server_fate = j.value("server_fate", "");
    t.helpers = j.value("helpers", 0);
    t.helpers_eof = j.value("helpers_ended_on_eof", 0);
    t.helpers_term = j.value("helpers_needed_sigterm", 0);
    t.helpers_kill = j.value("helpers_needed_sigkill", 0);
    t.left = procs(j.value("left", nlohmann::json::array()));
    t.left_mb = j.value("mb_left", 0.0);
    t.port_held = j.value("port_held", false);
    t.gone_ms = j.value("gone_ms", -1.0);
    t.ports_free_ms = j.value("ports_free_ms", -1.0);
    t.released_ms = j.value("released_ms", -1.0);
    t.watched_ms = j.value("watched_ms", 0.0);
    t.run_exit_ms = j.value("run_exit_ms", -1.0);
    t.cleaned_up = j.value("cleaned_up", 0);
    t.clean_after = j.value("clean_after", false);
    if (j.contains("journal") && j["journal"].is_object()) {
        const auto& f = j["journal"];
        JournalFindings jf;
        jf.session_found = f.value("session_found", false);
        jf.client_lost = f.value("client_lost", false);
        jf.cause = f.value("cause", "");
        if (f.contains("abandoned") && f["abandoned"].is_boolean())
            jf.abandoned = f["abandoned"].get<bool>();
        jf.end_reason = f.value("end_reason", "");
        jf.snapshots = f.value("snapshots", 0);
        jf.signals = f.value("signals", 0);
        jf.exits = f.value("exits", 0);
        jf.order_ok = f.value("order_ok", false);
        jf.order_detail = f.value("order_detail", "");
        jf.excerpt = f.value("excerpt", std::vector<std::string>{});
        t.journal = jf;
    }
    return t;
}

nlohmann::json to_json(const DrillResult& r) {
    nlohmann::json trials = nlohmann::json::array();
    for (const auto& t : r.trials)
        trials.push_back(to_json(t));
    return {{"schema", "mcpwarden.drill"},
            {"schema_version", 1},
            {"drill", r.label},
            {"command", journal::redact_argv(r.command)},
            {"crash_at", std::string(to_string(r.crash_at))},
            {"call", r.call},
            {"journal", r.journal_path},
            {"trials", trials},
            {"verify",
             {{"ran", r.verified},
              {"ok", r.verify_ok},
              {"exit_code", r.verify_exit},
              {"records", r.verify_records},
              {"summary", r.verify_summary}}},
            {"ok", r.ok()}};
}

}  // namespace warden::drill
