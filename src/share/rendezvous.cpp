// The broker's directory and socket; see rendezvous.hpp.
#include "share/rendezvous.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "fault/faults.hpp"
#include "journal/journal.hpp"

namespace warden::share {
namespace {

// Makes `path` (one level) 0700 if missing; then checks what is there.
Status own_private_dir(const std::string& path, mode_t mode) {
    if (::mkdir(path.c_str(), mode) != 0 && errno != EEXIST)
        return Error::msg(fmt::format("cannot make {}: {}", path, std::strerror(errno)));
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0)
        return Error::msg(fmt::format("cannot stat {}: {}", path, std::strerror(errno)));
    if (!S_ISDIR(st.st_mode))
        return Error::msg(fmt::format("{} is not a directory (a symlink?): not used", path));
    if (st.st_uid != ::geteuid())
        return Error::msg(fmt::format("{} belongs to uid {}, not to us (uid {}): not used", path,
                                      st.st_uid, ::geteuid()));
    if ((st.st_mode & 07777) != mode && ::chmod(path.c_str(), mode) != 0)
        return Error::msg(fmt::format("{} has mode {:o} and cannot be made {:o}: {}", path,
                                      st.st_mode & 07777, mode, std::strerror(errno)));
    return {};
}

std::string base_directory() {
    const char* run = std::getenv("XDG_RUNTIME_DIR");
    struct stat st {};
    if (run && run[0] == '/' && ::stat(run, &st) == 0 && S_ISDIR(st.st_mode))
        return std::string(run) + "/mcpwarden-share";
    const char* state = std::getenv("XDG_STATE_HOME");
    std::string base =
        state && state[0] == '/' ? std::string(state) : journal::home_directory() + "/.local/state";
    return base + "/mcpwarden/share";
}

}  // namespace

Rendezvous Rendezvous::at(std::string dir) {
    Rendezvous r;
    r.socket = dir + "/broker.sock";
    r.lock = dir + "/broker.lock";
    r.log = dir + "/broker.log";
    r.dir = std::move(dir);
    return r;
}

Result<Rendezvous> rendezvous() {
    std::string dir = base_directory();
    if (dir.rfind("/.local/state", 0) == 0)
        return Error::msg(
            "no $XDG_RUNTIME_DIR, $XDG_STATE_HOME or home directory for the "
            "broker's socket");
    // The state directory's parents may not exist yet; they are the user's own.
    const size_t share = dir.rfind('/');
    const size_t parent = dir.rfind('/', share - 1);
    if (dir.compare(parent, std::string::npos, "/mcpwarden/share") == 0) {
        std::string p = dir.substr(0, parent);
        for (size_t at = 1; at != std::string::npos && at <= p.size();) {
            at = p.find('/', at + 1);
            ::mkdir(p.substr(0, at).c_str(), 0700);
        }
        if (auto st = own_private_dir(dir.substr(0, share), 0700); !st) return st.error();
    }
    // Test condition (a fault, not a guard): the directory lets every user through, so that
    // the peer-credentials check is what stands between another user and the broker.
    const mode_t mode = Faults::from_env().share_dir_open ? 0711 : 0700;
    if (auto st = own_private_dir(dir, mode); !st) return st.error();
    return Rendezvous::at(std::move(dir));
}

Result<Peer> peer_of(int socket_fd) {
    struct ucred cred {};
    socklen_t len = sizeof cred;
    if (::getsockopt(socket_fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
        return Error::msg(fmt::format("getsockopt(SO_PEERCRED): {}", std::strerror(errno)));
    return Peer{cred.uid, cred.pid};
}

Result<Fd> connect_unix(const std::string& path) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof addr.sun_path)
        return Error::msg(fmt::format("{}: path too long for a Unix socket", path));
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) return Error::msg(fmt::format("socket(AF_UNIX): {}", std::strerror(errno)));
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
        return Error::msg(fmt::format("connect {}: {}", path, std::strerror(errno)));
    return fd;
}

}  // namespace warden::share
