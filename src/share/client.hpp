// The client side of `mcpwarden run --share` (docs/SHARING.md): what the MCP client launched.
//
//   connect_or_start  the user's broker, started detached if none listens (the one process of
//                     ours that outlives a `run`; it exits by itself once it holds neither a
//                     client nor a tree)
//   hello             the identity of the server and how to start it
//   relay             the client's stdin to the socket, the socket to its stdout, until the
//                     client closes its stdin (then the broker's EOF ends it) or the broker
//                     ends the connection (the tree or the broker ended)
//
// It starts nothing else and holds no child: when it returns, nothing it started is alive but
// the broker.
#pragma once

#include <string>

#include "mcpwarden/types.hpp"
#include "share/broker.hpp"
#include "sys/result.hpp"

namespace warden::share {

// The identity of a shared tree: the lazy catalog's identity of the server (its command line,
// working directory, environment digest and sandbox options: shim/catalog.hpp), the files of
// its code and of this mcpwarden, the user, and `settings`: every other option of the run as
// the caller resolved it (the tree runs with them).
std::string share_identity(const RunOptions& o, const std::string& settings);

// The hello for this process's session: `run_argv` is `run`, its flags and `--` and the
// server's command, as the tree's run is to be started.
Hello make_hello(const RunOptions& o, const std::string& identity,
                 std::vector<std::string> run_argv);

// The session: returns the exit code of `run` (0 once the client closed its stdin and the
// broker let go; 1 when the broker or the tree ended the connection first).
Result<int> run_share_client(const Hello& hello, std::chrono::milliseconds linger);

}  // namespace warden::share
