// `mcpwarden demo`: the crash drill on servers that are known to leak, side by side without
// and with mcpwarden. The README's first command.
//
// Rows: the built-in fixture with a setsid() helper, a double-forked daemon and a helper
// that ignores SIGTERM (each holding a TCP port, with a `sleep` call in flight), and — when
// Node.js and server-everything are installed (find_server_everything) — the reference
// server-everything, with its read-only long-running operation in flight. Each row is one drill
// (drill.hpp) with --compare-direct; one temporary journal holds every supervised session and is
// verified at the end.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "drill/drill.hpp"
#include "sys/result.hpp"

namespace warden::drill {

using warden::DemoOptions;  // types.hpp (handle_interrupts and color are the api's)

struct DemoRow {
    std::string server;  // "setsid helper", …
    std::string about;   // what the tree does, one line
    std::vector<std::string> command;
    std::string call;
    std::string skipped;  // why the row did not run
    std::optional<TrialResult> without, with;
};

struct DemoResult {
    std::vector<DemoRow> rows;
    std::string journal_path;
    bool journal_temporary = false;  // removed after a demo that passed (DemoOptions)
    bool verified = false, verify_ok = false;
    int verify_exit = 0;
    int64_t verify_records = 0;
    std::string verify_summary;

    // mcpwarden left nothing in any row, the drill left nothing at all, the journal verifies.
    bool ok() const;
    std::string render(bool color) const;  // fits 80 columns
    nlohmann::json to_json() const;
    static Result<DemoResult> from_json(const nlohmann::json& j);
};

// How server-everything is started with what the user has, never the source tree: an
// `mcp-server-everything` on PATH (npm install -g), else npx resolving the package without
// the network (`npx --offline`: the npm cache, or a node_modules above the working
// directory). Node.js must be on PATH. Error: why the row is skipped and what to install.
struct NodeServer {
    std::vector<std::string> command;
};
Result<NodeServer> find_server_everything();

Result<DemoResult> run_demo(const DemoOptions& opts);

}  // namespace warden::drill
