#include "sys/fd.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>

#include <fmt/format.h>

namespace warden {

Error Error::sys(std::string_view syscall, std::string_view target, int err) {
    if (target.empty()) return Error{fmt::format("{}: {}", syscall, std::strerror(err)), err};
    return Error{fmt::format("{}({}): {}", syscall, target, std::strerror(err)), err};
}

void Fd::reset(int fd) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
}

Result<Fd> open_file(const std::string& path, int flags, int mode) {
    int fd = ::open(path.c_str(), flags | O_CLOEXEC, mode);
    if (fd < 0) return Error::sys("open", path, errno);
    return Fd(fd);
}

Result<Fd> open_at(int dirfd, const char* name, int flags, std::string_view what) {
    int fd = ::openat(dirfd, name, flags | O_CLOEXEC);
    if (fd < 0) return Error::sys("open", what, errno);
    return Fd(fd);
}

Result<std::string> read_all(int fd, std::string_view what) {
    std::string out;
    char buf[8192];
    for (;;) {
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n > 0) {
            out.append(buf, static_cast<size_t>(n));
            continue;
        }
        if (n == 0) return out;
        if (errno == EINTR) continue;
        return Error::sys("read", what, errno);
    }
}

Result<std::string> read_file(const std::string& path) {
    auto fd = open_file(path, O_RDONLY);
    if (!fd) return fd.error();
    return read_all(fd->get(), path);
}

Result<std::string> read_file_at(int dirfd, const char* name, std::string_view what) {
    auto fd = open_at(dirfd, name, O_RDONLY, what);
    if (!fd) return fd.error();
    return read_all(fd->get(), what);
}

Status write_all(int fd, std::string_view data, std::string_view what) {
    while (!data.empty()) {
        ssize_t n = ::write(fd, data.data(), data.size());
        if (n < 0) {
            if (errno == EINTR) continue;
            return Error::sys("write", what, errno);
        }
        data.remove_prefix(static_cast<size_t>(n));
    }
    return {};
}

Status set_nonblocking(int fd, bool on) {
    int fl = ::fcntl(fd, F_GETFL);
    if (fl < 0) return Error::sys("fcntl(F_GETFL)", std::to_string(fd), errno);
    fl = on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK);
    if (::fcntl(fd, F_SETFL, fl) < 0) return Error::sys("fcntl(F_SETFL)", std::to_string(fd), errno);
    return {};
}

Status set_cloexec(int fd, bool on) {
    int fl = ::fcntl(fd, F_GETFD);
    if (fl < 0) return Error::sys("fcntl(F_GETFD)", std::to_string(fd), errno);
    fl = on ? (fl | FD_CLOEXEC) : (fl & ~FD_CLOEXEC);
    if (::fcntl(fd, F_SETFD, fl) < 0) return Error::sys("fcntl(F_SETFD)", std::to_string(fd), errno);
    return {};
}

}  // namespace warden
