// src/share — `run --share`: one server tree for every session of a user's same server.
//
// The folder owns the user's broker (this file), the client side of `run --share`
// (client.hpp), where the two meet (rendezvous.hpp) and the protocol half, one multiplexer
// per shared tree (mux.hpp). docs/SHARING.md is the design; this is its shape:
//
//   client ══stdio══ run --share ══unix socket══╗
//   client ══stdio══ run --share ══unix socket══╣ broker (one per user, `mcpwarden broker`)
//   client ══stdio══ run --share ══unix socket══╝   │ one multiplexer per tree
//                                                   └── mcpwarden run -- SERVER (per tree)
//                                                         └── keeper ── server tree
//
// The broker holds no containment of its own. Each shared tree is an ordinary
// `mcpwarden run -- CMD` child whose stdin and stdout are the broker's end of the multiplexer:
// its relay, keeper, session cgroup, teardown and journal session are those of any run. When
// the broker ends, even by SIGKILL, that child reads EOF on its stdin (and its pidfd on its
// parent, the broker, says so) and tears its tree down as a run does when its client goes.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "share/rendezvous.hpp"
#include "sys/result.hpp"

namespace warden::share {

// The first line a client sends: who it is and what tree it needs. The identity decides the
// tree; the rest is how to start one (the broker starts it as the client would have).
struct Hello {
    std::string identity;           // hex digest (client.hpp, share_identity)
    std::string exe;                // the client's mcpwarden, which runs the tree
    std::vector<std::string> argv;  // `run` and its flags, `--`, the server's command
    std::vector<std::string> env;   // the client's environment, NAME=VALUE
    std::string cwd;
    std::string name;       // the server's display name
    std::string journal;    // the journal's path; "": --no-journal
    int64_t linger_ms = 0;  // --share-linger
    pid_t client = 0;       // the MCP client (the parent of `run --share`)
    // It reads which of its lines the broker took from a page the broker passes (taken.hpp),
    // not from lines on the socket.
    bool reads_taken_count = false;
    // --on-journal-failure=deny: a request its session's journal cannot take is refused.
    bool deny_unrecorded = false;

    nlohmann::json to_json() const;
    static Result<Hello> from_json(const nlohmann::json& j);
};

// The environment variable a shared tree's `run` is started with: its session id. A run that
// has it never shares (it is the tree), and takes it as its session id (shim/session.cpp).
inline constexpr const char* kTreeVar = "MCPWARDEN_SHARE_TREE";

inline constexpr size_t kDefaultClientQueue = size_t{16} << 20;

struct BrokerOptions {
    Rendezvous where;
    // How long a broker that never got a tree waits for its first client.
    std::chrono::milliseconds linger{std::chrono::seconds(60)};
    // The most a client's unread answers may take in the broker before that client is
    // dropped (`--client-queue`; docs/SHARING.md, "A client that does not read").
    size_t client_queue = kDefaultClientQueue;
};

// The broker's life: takes the lock (a second broker exits 0 at once), listens, serves, and
// returns once it holds neither a client nor a tree. Returns the process exit code.
int run_broker(const BrokerOptions& o);

}  // namespace warden::share
