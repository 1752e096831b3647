// The drill's MCP client: a small process of its own, so that killing it is a real client
// death — the server (or `mcpwarden run`) sees EOF on its stdin *and* its parent gone.
//
// The drill forks it; it starts the server command with its stdin and stdout on pipes (no
// process group or session of its own: the TypeScript SDK's spawn does not make one),
// speaks newline-delimited JSON-RPC up to the crash point, says so on the report pipe and
// then waits to be SIGKILLed. It dies with the drill (PDEATHSIG), so an interrupted drill
// does not leave a client holding the server's stdin open.
//
// Report lines (one each, on report_fd):
//   spawned <pid>                 the server command started (pid of `run`, or the server)
//   ready <state> <bytes>         crash point reached. state: "quiet" (before-init),
//                                 "idle", "sent" (call written, no answer read),
//                                 "partial" (mid-response: bytes of the answer read so far),
//                                 "answered" (the whole answer was already in)
//   error <message>               the crash point cannot be reached (the client then waits
//                                 to be killed like any other)
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "drill/drill.hpp"

namespace warden::drill {

struct ClientConfig {
    std::vector<std::string> argv;  // what the client spawns
    std::vector<std::string> env;   // NAME=VALUE set (or replaced) in the server's env
    std::vector<std::string> unset_env;
    std::string stderr_path;  // the spawned command's stderr; empty: /dev/null
    // The drill's options, as the trial was asked: its crash point, the call (tool, args), the
    // server's cwd, the settle and start-up bounds. Never null; the forked client reads its
    // copy of them.
    const DrillOptions* drill = nullptr;
};

// The JSON-RPC id of the call made at in-flight and mid-response.
inline constexpr int kCallId = 3;

// Runs in the forked child; never returns.
[[noreturn]] void client_main(const ClientConfig& cfg, int report_fd);

}  // namespace warden::drill
