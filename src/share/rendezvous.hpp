// Where a user's broker and its clients meet: a directory only that user can enter, the
// broker's socket, its lock and its log in it (docs/SHARING.md, "The broker").
//
// The directory is $XDG_RUNTIME_DIR/mcpwarden-share (the user's runtime directory: tmpfs,
// per user, removed at logout), else mcpwarden/share in the state directory
// ($XDG_STATE_HOME, else ~/.local/state). It is made 0700 and checked on every use: a
// directory of ours that is a symlink, belongs to someone else or lets anybody else in is
// refused, never used as it is (sharing would then reach across users). The peer credentials
// of each connection are checked on top (peer_uid): the directory keeps others out, the check
// makes sure.
#pragma once

#include <sys/types.h>

#include <string>

#include "sys/fd.hpp"
#include "sys/result.hpp"

namespace warden::share {

struct Rendezvous {
    std::string dir, socket, lock, log;
    // The paths under `dir` (no check, no creation).
    static Rendezvous at(std::string dir);
};

// The user's directory (see the header), made if missing and checked: owned by us, a
// directory (not a symlink), mode 0700.
Result<Rendezvous> rendezvous();

// The uid and pid of the process at the other end of a Unix socket (SO_PEERCRED).
struct Peer {
    uid_t uid = 0;
    pid_t pid = 0;
};
Result<Peer> peer_of(int socket_fd);

// A connected, non-blocking-free stream socket to `path`.
Result<Fd> connect_unix(const std::string& path);

}  // namespace warden::share
