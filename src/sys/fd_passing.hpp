// Passing file descriptors between processes over a Unix socket (SCM_RIGHTS).
//
// The keeper spawns a server again after a hibernation (shim/hibernation.hpp) with fresh
// pipes; the relay's ends travel back to it this way, because the keeper was forked before
// they existed.
#pragma once

#include <span>
#include <vector>

#include "sys/fd.hpp"

namespace warden {

// A connected pair of SOCK_SEQPACKET Unix sockets, both ends close-on-exec.
struct SocketPair {
    Fd a, b;
};
Result<SocketPair> make_socket_pair();

// Sends `fds` (at most 8) in one message with a one-byte payload.
Status send_fds(int sock, std::span<const int> fds);
// Receives one message of exactly `count` fds (close-on-exec). Blocks unless the socket is
// non-blocking (then EAGAIN is an error with code EAGAIN).
Result<std::vector<Fd>> recv_fds(int sock, size_t count);

}  // namespace warden
