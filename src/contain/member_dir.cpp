#include "contain/member_dir.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "proc/children.hpp"

namespace warden {
namespace {

Error read_error(pid_t pid, const char* file, int err) {
    if (err == ENOENT) err = ESRCH;  // gone, whichever file we were on
    return Error{fmt::format("cannot read /proc/{}/{}: {}", pid, file, std::strerror(err)), err};
}

// Calls f(name) for each numeric entry of the directory `dirfd` (getdents64 straight on a
// fresh fd: no DIR and its 32 KiB buffer).
template <class F>
void for_each_number(int dirfd, const char* sub, F f) {
    int d = ::openat(dirfd, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d < 0) return;
    Fd owner(d);
    alignas(8) char buf[4096];
    for (;;) {
        ssize_t n = ::getdents64(d, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        for (ssize_t off = 0; off < n;) {
            auto* e = reinterpret_cast<const dirent64*>(buf + off);
            off += e->d_reclen;
            if (e->d_name[0] >= '0' && e->d_name[0] <= '9') f(d, e->d_name);
        }
    }
}

}  // namespace

Result<MemberDir> MemberDir::open(pid_t pid) {
    char path[32] = "/proc/";
    *std::to_chars(path + 6, path + sizeof path - 1, static_cast<int>(pid)).ptr = '\0';
    int fd = ::open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return read_error(pid, "stat", errno);
    MemberDir m{Fd(fd), Process{}};
    auto proc = m.read(pid);
    if (!proc) return proc.error();
    m.proc = std::move(*proc);
    return m;
}

bool MemberDir::refresh() {
    auto now = read(proc.id.pid);
    if (!now || now->id.starttime != proc.id.starttime) return false;
    proc = std::move(*now);
    return true;
}

Result<Process> MemberDir::read(pid_t pid) const {
    const int fd = dir.get();
    Process p;
    thread_local std::string text;
    if (int err = slurp_at(fd, "stat", text)) return read_error(pid, "stat", err);
    if (!parse_proc_stat(text, p))
        return Error::msg(fmt::format("cannot parse /proc/{}/stat: unexpected format", pid));
    p.id.pid = pid;
    // The uid as read_process's kUid reads it: the owner of /proc/PID when that is our own
    // uid and we are not root (the euid of a dumpable process, which the kernel keeps equal
    // to its ruid), else the real uid from status.
    static const uid_t me = ::getuid();
    struct stat st {};
    if (p.kernel_thread()) {
        p.uid = 0;
        return p;
    }
    if (me != 0 && ::fstat(fd, &st) == 0 && st.st_uid == me) {
        p.uid = me;
    } else if (int err = slurp_at(fd, "status", text)) {
        return read_error(pid, "status", err);
    } else {
        parse_proc_status(text, p);
    }
    if (int err = slurp_at(fd, "cmdline", p.cmdline); err == ESRCH || err == ENOENT)
        return read_error(pid, "cmdline", err);
    return p;
}

bool MemberDir::still_there() const {
    thread_local std::string text;
    Process now;
    return slurp_at(dir.get(), "stat", text) == 0 && parse_proc_stat(text, now) &&
           now.id.starttime == proc.id.starttime;
}

std::vector<pid_t> MemberDir::children() const {
    std::vector<pid_t> out;
    thread_local std::string text;
    if (proc.threads == 1) {
        const std::string name = fmt::format("task/{}/children", proc.id.pid);
        if (slurp_at(dir.get(), name.c_str(), text) == 0) append_children(text, out);
        return out;
    }
    // A child is listed under the thread that forked it: every thread's list.
    for_each_number(dir.get(), "task", [&](int task, const char* tid) {
        const std::string name = std::string(tid) + "/children";
        if (slurp_at(task, name.c_str(), text) == 0) append_children(text, out);
    });
    return out;
}

std::vector<std::pair<int, uint64_t>> MemberDir::sockets() const {
    return sockets_of(dir.get());
}

std::vector<std::pair<int, uint64_t>> sockets_of(int proc_dir) {
    std::vector<std::pair<int, uint64_t>> out;
    for_each_number(proc_dir, "fd", [&](int fds, const char* num) {
        char link[64];
        ssize_t n = ::readlinkat(fds, num, link, sizeof link - 1);
        if (n <= 8 || std::strncmp(link, "socket:[", 8) != 0) return;
        link[n] = '\0';
        out.emplace_back(std::atoi(num), std::strtoull(link + 8, nullptr, 10));
    });
    return out;
}

}  // namespace warden
