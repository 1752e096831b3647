// Passing file descriptors between processes over a Unix socket (SCM_RIGHTS).
//
// The keeper spawns a server again after a hibernation (shim/hibernation.hpp) with fresh
// pipes; the relay's ends travel back to it this way, because the keeper was forked before
// they existed.
#pragma once

#include <span>
#include <string_view>
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
// Sends `bytes` in one sendmsg(2) with `fds` (at most 8) passed along: how many of the bytes
// went (the descriptors with them; none went when it fails). `flags` are sendmsg's
// (MSG_NOSIGNAL always added): on a non-blocking socket, EAGAIN is an error with that code.
Result<size_t> send_passing(int sock, std::string_view bytes, std::span<const int> fds,
                            int flags = 0);
// Reads what `sock` has, at most `size` bytes into `buf`, and takes a descriptor passed with
// them into `passed` (close-on-exec): how many bytes were read, 0 when the sender closed the
// socket.
Result<size_t> recv_passing(int sock, char* buf, size_t size, Fd& passed);
// Receives one message of exactly `count` fds (close-on-exec). Blocks unless the socket is
// non-blocking (then EAGAIN is an error with code EAGAIN).
Result<std::vector<Fd>> recv_fds(int sock, size_t count);

}  // namespace warden
