// libmcpwarden — `run --share`: one server tree for every session of a user's same server,
// through the user's broker (docs/SHARING.md).
//
//     auto s = warden::api::run_settings(flags, command);
//     if (s->options.share && !warden::api::inside_shared_tree())
//         return *warden::api::run_shared(*s, flags);   // the exit code of `run --share`
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "mcpwarden/export.h"
#include "mcpwarden/result.hpp"
#include "mcpwarden/settings.hpp"

namespace warden::api {

// Whether this process is the `run` of a shared tree (the broker started it): it never
// shares again, whatever its options say.
MCPW_API bool inside_shared_tree();

// The session of `mcpwarden run --share`: joins the tree of this server (`s`, resolved from
// `flags`, the flags as given) that the user's broker runs, starting the broker and the tree
// when needed. Returns the exit code (0 once the client closed its stdin; 1 when the tree or
// the broker ended the session). Error when no broker could be reached or it refused.
MCPW_API Result<int> run_shared(const RunSettings& s,
                                const std::vector<std::pair<std::string, std::string>>& flags);

// `mcpwarden broker` (started by run_shared, or by the systemd user unit): serves until it
// holds neither a client nor a tree; `linger`: how long it waits for its first client;
// `client_queue`: a size ("16MiB"; "" the default, or MCPWARDEN_SHARE_CLIENT_QUEUE), the most
// a client's unread answers may take before it is dropped. Returns the exit code (2: a bad
// size).
MCPW_API int run_broker(std::chrono::milliseconds linger, const std::string& client_queue = "");

}  // namespace warden::api
