// Unix socket peers through NETLINK_SOCK_DIAG (UNIX_DIAG_PEER), for our network namespace.
//
// /proc/net/unix names a socket's path but not the socket on its other end. Node-based MCP
// clients (libuv) give a server a socketpair, not a pipe, for its stdio, so "who holds the
// other end of the server's stdin" needs the peer inode; so does "this server talks to an
// ssh-agent". The kernel answers one dump request with (inode, peer inode) for every unix
// socket of the namespace; both directions go into the map.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "sys/result.hpp"

namespace warden::inventory {

// inode -> peer inode, for every connected unix socket of the caller's network namespace.
Result<std::unordered_map<uint64_t, uint64_t>> unix_socket_peers();

}  // namespace warden::inventory
