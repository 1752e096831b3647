// `mcpwarden inspect PID [--json] [--record] [--journal PATH]`: the incident record for one
// process (incident-practice.md), from one inventory scan plus the journal. `--record`
// appends a process.snapshot of it to the journal: evidence preserved before anything acts.
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/command.hpp"
#include "inventory/inventory.hpp"
#include "journal/journal.hpp"

namespace warden::cli {
namespace {

struct InspectOptions {
    pid_t pid = 0;
    bool json = false;
    bool record = false;
    std::string journal;
};

int fail(const std::string& msg) {
    std::fprintf(stderr, "mcpwarden inspect: %s\n", msg.c_str());
    return 1;
}

int run_inspect(const InspectOptions& opt) {
    inventory::ScanOptions so;
    so.all_users = true;
    so.journal_path = opt.journal;
    auto inv = inventory::Inventory::scan(so);
    if (!inv) return fail(inv.error().message);
    for (const auto& w : inv->warnings())
        std::fprintf(stderr, "mcpwarden inspect: warning: %s\n", w.c_str());
    if (!inv->table().find(opt.pid)) return fail(fmt::format("no process {}", opt.pid));
    auto rec = inventory::incident_record(*inv, opt.pid);
    if (!rec) return fail(rec.error().message);

    std::optional<int64_t> recorded_seq;
    std::string recorded_in;
    if (opt.record) {
        auto ev = inventory::snapshot_event(*inv, opt.pid, "inspect");
        if (!ev) return fail(ev.error().message);
        auto j = journal::Journal::open({.path = opt.journal});
        if (!j) return fail("cannot record the snapshot: " + j.error().message);
        auto a = (*j)->append(*ev);
        if (!a) return fail("cannot record the snapshot: " + a.error().message);
        recorded_seq = a->seq;
        recorded_in = (*j)->paths().db;
        if (auto st = (*j)->close(); !st) return fail(st.error().message);
    }

    std::string out;
    if (opt.json) {
        nlohmann::json doc = inventory::incident_json(*rec);
        doc["recorded"] = recorded_seq
                              ? nlohmann::json{{"seq", *recorded_seq}, {"journal", recorded_in}}
                              : nlohmann::json(nullptr);
        out = doc.dump(2) + "\n";
    } else {
        out = inventory::incident_text(*rec);
        if (recorded_seq)
            out += fmt::format("{:<22}process.snapshot seq {} in {}\n", "recorded:", *recorded_seq,
                               recorded_in);
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    return std::fflush(stdout) == 0 ? 0 : 1;
}

const Command inspect_cmd(21, [](CLI::App& app) {
    auto opt = std::make_shared<InspectOptions>();
    auto* sub = app.add_subcommand("inspect",
                                   "The incident record of one process (server, "
                                   "client, session, state, capabilities, journal)");
    sub->add_option("pid", opt->pid, "Process to inspect")->required();
    sub->add_flag("--json", opt->json, "JSON output");
    sub->add_flag("--record", opt->record, "Append a process.snapshot to the journal");
    sub->add_option("--journal", opt->journal, "Journal path (default: the user's journal)");
    return Bound{sub, [opt] { return run_inspect(*opt); }};
});

}  // namespace
}  // namespace warden::cli
