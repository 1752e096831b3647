// `mcpwarden inspect PID [--json] [--record] [--journal PATH]`: the incident record for one
// process (docs/ARCHITECTURE.md, "The incident practice"), from one inventory scan plus the
// journal. `--record` appends a process.snapshot of it to the journal: evidence preserved before
// anything acts.
#include <sys/types.h>

#include <cstdio>
#include <memory>
#include <string>

#include "command.hpp"
#include "mcpwarden/inventory.hpp"

namespace warden::cli {
namespace {

struct InspectOptions {
    pid_t pid = 0;
    bool json = false;
    bool record = false;
    std::string journal;
};

int run_inspect(const InspectOptions& opt) {
    api::InspectOptions io;
    io.journal_path = opt.journal;
    io.record = opt.record;
    io.on_warning = [](const std::string& w) {
        std::fprintf(stderr, "mcpwarden inspect: warning: %s\n", w.c_str());
    };
    auto incident = api::inspect(opt.pid, io);
    if (!incident) {
        std::fprintf(stderr, "mcpwarden inspect: %s\n", incident.error().message.c_str());
        return 1;
    }
    const std::string& out = opt.json ? incident->json : incident->text;
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
