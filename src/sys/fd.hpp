// src/sys — RAII over Linux.
//
// This folder owns thin, policy-free wrappers over the kernel interfaces the rest of
// mcpwarden stands on: file descriptors, pipes, epoll, signalfd, pidfds, prctl, clone3 and
// cgroup files. Every failure is an Error naming the syscall, its target and errno
// (`pidfd_open(4711): No such process`). Nothing here decides *what* to do; the layers
// above decide.
#pragma once

#include <string>
#include <utility>

#include "sys/result.hpp"

namespace warden {

// Owns one file descriptor; closes it on destruction. Move-only.
class Fd {
public:
    Fd() = default;
    explicit Fd(int fd) : fd_(fd) {}
    Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
    Fd& operator=(Fd&& o) noexcept {
        if (this != &o) reset(std::exchange(o.fd_, -1));
        return *this;
    }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    ~Fd() { reset(); }

    int get() const { return fd_; }
    bool valid() const { return fd_ >= 0; }
    explicit operator bool() const { return valid(); }
    int release() { return std::exchange(fd_, -1); }
    void reset(int fd = -1);

private:
    int fd_ = -1;
};

// open(2) with O_CLOEXEC added; error names the path.
Result<Fd> open_file(const std::string& path, int flags, int mode = 0);
// openat(2) relative to a directory fd; error names `what` (e.g. "/proc/4711/stat").
Result<Fd> open_at(int dirfd, const char* name, int flags, std::string_view what);

// Reads the whole of a (small, e.g. /proc) file through an fd. Error names `what`.
Result<std::string> read_all(int fd, std::string_view what);
Result<std::string> read_file(const std::string& path);
Result<std::string> read_file_at(int dirfd, const char* name, std::string_view what);

// Writes all bytes, retrying on EINTR and short writes (blocking fds only).
Status write_all(int fd, std::string_view data, std::string_view what);

Status set_nonblocking(int fd, bool on = true);
Status set_cloexec(int fd, bool on = true);

}  // namespace warden
