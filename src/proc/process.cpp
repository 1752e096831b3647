// Reading one process from /proc.
//
// Every file of a process is opened relative to one open /proc/PID directory fd (as procps
// readproc.c does): once that fd is open, a PID recycled while we read fails with ESRCH or
// ENOENT instead of silently mixing two processes. Files that another user's process hides
// from us (exe, cwd, environ, fd/ → EACCES) leave their fields empty: partial knowledge is
// not an error. A process that vanishes mid-read is, and the error names the file.
#include "proc/process.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <string_view>

#include <fmt/format.h>

#include "proc/fields.hpp"
#include "sys/fd.hpp"
#include "sys/text.hpp"

namespace warden {
namespace {

constexpr std::string_view kMarker = "MCPWARDEN_SESSION";

bool vanished(int err) {
    return err == ESRCH || err == ENOENT;
}

Error read_error(pid_t pid, std::string_view file, int err) {
    // A process that is gone reports ESRCH whichever file we were on; ENOENT from the
    // directory open means the same thing.
    if (err == ENOENT) err = ESRCH;
    return Error{fmt::format("cannot read /proc/{}/{}: {}", pid, file, std::strerror(err)), err};
}

// readlinkat into a string; returns 0 or an errno.
int link_at(int dirfd, const char* name, std::string& out) {
    char buf[4096];
    ssize_t n = ::readlinkat(dirfd, name, buf, sizeof buf);
    if (n < 0) return errno;
    out.assign(buf, static_cast<size_t>(n));
    return 0;
}

template <class T>
bool parse_leading(std::string_view s, T& v) {
    auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    return r.ec == std::errc();
}

using proc_text::next_field;

uint64_t page_size() {
    static const uint64_t size = [] {
        long s = ::sysconf(_SC_PAGESIZE);
        return s > 0 ? static_cast<uint64_t>(s) : 4096;
    }();
    return size;
}

// /proc/PID/stat: "pid (comm) S ppid pgrp session tty_nr ... starttime(22) ...".
// comm may hold spaces and ')', so the fixed fields are parsed from the LAST ')'.
bool parse_stat(std::string_view s, Process& p) {
    size_t open = s.find('(');
    size_t close = s.rfind(')');
    if (open == std::string_view::npos || close == std::string_view::npos || close < open)
        return false;
    p.comm.assign(s.substr(open + 1, close - open - 1));
    std::string_view rest = s.substr(close + 1);
    // Field numbers as in proc(5); field 3 is the state. Fields after starttime (22) are
    // optional here: rss (24) is what status's VmRSS says, in pages.
    for (int field = 3; field <= 24; ++field) {
        std::string_view f = next_field(rest);
        if (f.empty()) return field > 22;
        switch (field) {
            case 3:
                p.state = f[0];
                break;
            case 4:
                parse_leading(f, p.ppid);
                break;
            case 5:
                parse_leading(f, p.pgid);
                break;
            case 6:
                parse_leading(f, p.sid);
                break;
            case 7:
                parse_leading(f, p.tty_nr);
                break;
            case 8:
                parse_leading(f, p.tpgid);
                break;
            case 9:
                parse_leading(f, p.flags);
                break;
            case 20:
                parse_leading(f, p.threads);
                break;
            case 22:
                if (!parse_leading(f, p.id.starttime)) return false;
                break;
            case 24: {
                uint64_t pages = 0;
                if (parse_leading(f, pages)) p.rss_kb = pages * (page_size() / 1024);
                break;
            }
            default:
                break;
        }
    }
    return true;
}

// /proc/PID/status: the real uid (first of four on "Uid:"), VmRSS in kB, Threads.
void parse_status(std::string_view s, Process& p) {
    while (!s.empty()) {
        size_t nl = s.find('\n');
        std::string_view line = s.substr(0, nl);
        s.remove_prefix(nl == std::string_view::npos ? s.size() : nl + 1);
        auto value = [&](std::string_view key) -> std::string_view {
            if (line.size() <= key.size() || line.substr(0, key.size()) != key) return {};
            std::string_view v = line.substr(key.size());
            size_t b = v.find_first_not_of(" \t");
            if (b == std::string_view::npos) return {};
            v.remove_prefix(b);
            return v.substr(0, v.find_first_of(" \t"));
        };
        if (auto v = value("Uid:"); !v.empty()) {
            parse_leading(v, p.uid);
        } else if (auto r = value("VmRSS:"); !r.empty()) {
            parse_leading(r, p.rss_kb);
        } else if (auto t = value("Threads:"); !t.empty()) {
            parse_leading(t, p.threads);
        }
    }
}

// environ holds NAME=VALUE entries separated by NUL. Only names leave this function (when
// `names`), and the one marker value; the buffer is wiped before it is freed.
void parse_environ(std::string& raw, Process& p, bool names) {
    std::string_view s = raw;
    if (names) {
        p.env_names.clear();
        p.env_names.reserve(static_cast<size_t>(std::count(s.begin(), s.end(), '\0')) + 1);
    }
    p.session_marker.reset();
    while (!s.empty()) {
        size_t end = s.find('\0');
        std::string_view entry = s.substr(0, end);
        s.remove_prefix(end == std::string_view::npos ? s.size() : end + 1);
        if (entry.empty()) continue;
        size_t eq = entry.find('=');
        std::string_view name = entry.substr(0, eq);
        if (names) p.env_names.emplace_back(name);
        if (name == kMarker && eq != std::string_view::npos)
            p.session_marker = std::string(entry.substr(eq + 1));
    }
    ::explicit_bzero(raw.data(), raw.size());
    raw.clear();
}

uint64_t inode_in_brackets(std::string_view target) {
    // "pipe:[1234]", "socket:[1234]", "net:[4026531992]"
    size_t b = target.find('[');
    size_t e = target.rfind(']');
    uint64_t ino = 0;
    if (b == std::string_view::npos || e == std::string_view::npos || e < b) return 0;
    parse_leading(target.substr(b + 1, e - b - 1), ino);
    return ino;
}

// Which end of a pipe an fd is: the kernel gives each /proc/PID/fd/N link the access mode
// of its file as permission bits (S_IRUSR for FMODE_READ, S_IWUSR for FMODE_WRITE; see
// tid_fd_update_inode), so one lstat answers what open+read+close of fdinfo/N did. Only
// pipes pay. Returns O_RDONLY, O_WRONLY or O_RDWR, or -1 (gone, or neither, e.g. O_PATH).
int read_fd_mode(int fd_dirfd, const char* fd_name) {
    struct stat st {};
    if (::fstatat(fd_dirfd, fd_name, &st, AT_SYMLINK_NOFOLLOW) != 0) return -1;
    bool r = (st.st_mode & S_IRUSR) != 0, w = (st.st_mode & S_IWUSR) != 0;
    return r && w ? O_RDWR : w ? O_WRONLY : r ? O_RDONLY : -1;
}

// Returns 0, or an errno when fd/ could not be listed (EACCES: not ours, leave empty).
// getdents64 straight on the fd: no DIR (a 32 KiB allocation per process) and no fcntl.
// `modes`: read the access mode of each pipe fd too (read_fd_mode).
int read_fds(int dirfd, Process& p, bool modes) {
    int fdir = ::openat(dirfd, "fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fdir < 0) return errno;
    Fd owner(fdir);
    alignas(8) char buf[8192];
    for (;;) {
        ssize_t n = ::getdents64(fdir, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;  // end, or the process went away meanwhile: what we have stands
        if (p.fds.empty()) p.fds.reserve(static_cast<size_t>(n) / 24);  // >= 24 bytes an entry
        for (ssize_t off = 0; off < n;) {
            auto* e = reinterpret_cast<const dirent64*>(buf + off);
            off += e->d_reclen;
            int num = 0;
            std::string_view name = e->d_name;
            if (!parse_leading(name, num)) continue;  // "." and ".."
            FdInfo info;
            info.fd = num;
            info.flags = -1;
            if (link_at(fdir, e->d_name, info.target) != 0) continue;  // closed meanwhile
            std::string_view t = info.target;
            if (t.starts_with("pipe:[")) {
                info.kind = FdInfo::Kind::Pipe;
                info.inode = inode_in_brackets(t);
                if (modes) info.flags = read_fd_mode(fdir, e->d_name);
            } else if (t.starts_with("socket:[")) {
                info.kind = FdInfo::Kind::Socket;
                info.inode = inode_in_brackets(t);
            } else if (t.starts_with("anon_inode:")) {
                info.kind = FdInfo::Kind::AnonInode;
            } else if (t.starts_with("/")) {
                info.kind = FdInfo::Kind::File;
            }
            p.fds.push_back(std::move(info));
        }
    }
    std::sort(p.fds.begin(), p.fds.end(),
              [](const FdInfo& a, const FdInfo& b) { return a.fd < b.fd; });
    return 0;
}

long clock_ticks() {
    static const long ticks = [] {
        long t = ::sysconf(_SC_CLK_TCK);
        return t > 0 ? t : 100;
    }();
    return ticks;
}

Result<Fd> open_proc_dir(pid_t pid) {
    // "/proc/PID" without printf: a scan opens a thousand of these.
    char path[32] = "/proc/";
    *std::to_chars(path + 6, path + sizeof path - 1, static_cast<int>(pid)).ptr = '\0';
    int fd = ::open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return read_error(pid, "stat", errno);
    return Fd(fd);
}

Status read_stat(int dirfd, pid_t pid, Process& p, std::string& buf) {
    if (int err = slurp_at(dirfd, "stat", buf)) return read_error(pid, "stat", err);
    if (buf.empty()) return read_error(pid, "stat", ESRCH);
    if (!parse_stat(buf, p))
        return Error::msg(fmt::format("cannot parse /proc/{}/stat: unexpected format", pid));
    p.id.pid = pid;
    return {};
}

}  // namespace

// Reads a small /proc file relative to `dirfd` into `out`; returns 0 or an errno. `wipe`
// clears the bounce buffer afterwards (environ holds secrets).
//
// One read() per file, as procps' file2str does: every file read here (stat, status and
// fdinfo are single-record seq_files; cmdline and environ copy page by page up to the
// count) returns all it has when the buffer is larger, so a read shorter than the buffer
// is the end and the EOF read that would follow is skipped. A full buffer reads on.
int slurp_at(int dirfd, const char* name, std::string& out, bool wipe) {
    int fd = ::openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return errno;
    Fd owner(fd);
    out.clear();
    char buf[16384];
    size_t used = 0;  // the bytes of buf written to: all that a wipe has to clear
    int err = 0;
    for (;;) {
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n > 0) {
            used = std::max(used, static_cast<size_t>(n));
            out.append(buf, static_cast<size_t>(n));
            if (static_cast<size_t>(n) < sizeof buf) break;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            err = errno;
            if (wipe) ::explicit_bzero(out.data(), out.size());
            out.clear();
        }
        break;
    }
    if (wipe) ::explicit_bzero(buf, used);
    return err;
}

bool parse_proc_stat(std::string_view text, Process& p) {
    return parse_stat(text, p);
}
void parse_proc_status(std::string_view text, Process& p) {
    parse_status(text, p);
}

const std::string& boot_id() {
    static const std::string id = [] {
        auto r = read_file("/proc/sys/kernel/random/boot_id");
        std::string s = r ? *r : std::string();
        while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
            s.pop_back();
        return s;
    }();
    return id;
}

Result<Process> read_process(pid_t pid, unsigned what) {
    auto dir = open_proc_dir(pid);
    if (!dir) return dir.error();
    const int dfd = dir->get();
    Process p;
    // Scratch reused across calls (a scan reads thousands of processes): no allocation per
    // file. environ's is wiped by parse_environ before it is reused.
    thread_local std::string buf, env;
    if (auto st = read_stat(dfd, pid, p, buf); !st) return st.error();

    if ((what & kUid) && !(what & kStatus)) {
        // A kernel thread runs with the initial credentials (uid 0). Otherwise the owner of
        // /proc/PID: the euid of a dumpable process, which the kernel keeps equal to its
        // ruid (a change of euid, or an exec with euid != ruid, makes a process
        // non-dumpable, and /proc/PID then belongs to root). Root as owner says nothing
        // (uid 0, or not dumpable), and neither does another user as owner for a caller
        // that is root: status says then.
        static const uid_t me = ::getuid();
        struct stat st {};
        if (p.kernel_thread())
            p.uid = 0;
        else if (me != 0 && ::fstat(dfd, &st) == 0 && st.st_uid == me)
            p.uid = me;
        else
            what |= kStatus;
    }
    if (what & kStatus) {
        if (int err = slurp_at(dfd, "status", buf)) {
            if (vanished(err)) return read_error(pid, "status", err);
        } else {
            parse_status(buf, p);
        }
    }
    // A kernel thread has no user memory, open files, environment, exe or network namespace
    // of its own: the reads would find nothing (cwd would say "/"). Half the processes of an
    // idle machine are kernel threads; this saves a dozen syscalls on each.
    if (p.kernel_thread()) what &= kStatus;
    if (what & kCmdline) {
        // Empty for kernel threads and zombies; EACCES is not expected but not fatal.
        if (int err = slurp_at(dfd, "cmdline", p.cmdline); err && vanished(err))
            return read_error(pid, "cmdline", err);
    }
    // The rest may be hidden from us for another user's process (EACCES) and is empty for
    // a zombie (ENOENT): leave those fields empty.
    if (what & kExe) link_at(dfd, "exe", p.exe);
    if (what & kCwd) link_at(dfd, "cwd", p.cwd);
    if (what & (kEnvNames | kEnvMarker)) {
        env.reserve(64 * 1024);  // fewer reallocations leaving unwiped copies behind
        if (slurp_at(dfd, "environ", env, /*wipe=*/true) == 0)
            parse_environ(env, p, (what & kEnvNames) != 0);
    }
    if (what & kFdLinks) read_fds(dfd, p, (what & kPipeModes) != 0);
    if (what & kNetNs) {
        std::string ns;
        if (link_at(dfd, "ns/net", ns) == 0) p.net_ns = inode_in_brackets(ns);
    }
    return p;
}

bool read_details(Process& p, unsigned what) {
    auto dir = open_proc_dir(p.id.pid);
    if (!dir) return false;
    const int dfd = dir->get();
    Process now;
    thread_local std::string buf, env;
    // The open directory fd pins the process it named: a check through it holds for
    // everything read through it too.
    if (!read_stat(dfd, p.id.pid, now, buf) || now.id.starttime != p.id.starttime) return false;
    if (now.kernel_thread()) return true;  // nothing of this kind to read (see read_process)
    if (what & kExe) {
        p.exe.clear();
        link_at(dfd, "exe", p.exe);
    }
    if (what & kCwd) {
        p.cwd.clear();
        link_at(dfd, "cwd", p.cwd);
    }
    if (what & kEnvNames) {
        p.env_names.clear();
        env.reserve(64 * 1024);
        if (slurp_at(dfd, "environ", env, /*wipe=*/true) == 0) parse_environ(env, p, true);
    }
    if (what & kNetNs) {
        std::string ns;
        p.net_ns = link_at(dfd, "ns/net", ns) == 0 ? inode_in_brackets(ns) : 0;
    }
    if (what & kPipeModes) {
        char name[32];
        for (FdInfo& f : p.fds) {
            if (f.kind != FdInfo::Kind::Pipe) continue;
            std::snprintf(name, sizeof name, "fd/%d", f.fd);
            int mode = read_fd_mode(dfd, name);
            // The link after the mode: still the same pipe, so the mode is that pipe's end
            // (the fd was not closed and reused since the scan read it).
            std::string target;
            f.flags = link_at(dfd, name, target) == 0 && target == f.target ? mode : -1;
        }
    }
    return true;
}

bool read_links(Process& p) {
    return read_details(p, kExe | kCwd);
}

Result<ProcessId> read_identity(pid_t pid) {
    auto dir = open_proc_dir(pid);
    if (!dir) return dir.error();
    Process p;
    std::string buf;
    if (auto st = read_stat(dir->get(), pid, p, buf); !st) return st.error();
    return p.id;
}

bool is_alive(const ProcessId& id) {
    if (id.pid <= 0) return false;
    auto dir = open_proc_dir(id.pid);
    if (!dir) return false;
    Process p;
    std::string buf;
    if (!read_stat(dir->get(), id.pid, p, buf)) return false;
    return p.id.starttime == id.starttime && !p.zombie();
}

std::vector<std::string> Process::argv() const {
    std::vector<std::string> out;
    std::string_view s = cmdline;
    while (!s.empty()) {
        size_t end = s.find('\0');
        out.emplace_back(s.substr(0, end));
        if (end == std::string_view::npos) break;
        s.remove_prefix(end + 1);
    }
    return out;
}

std::string Process::display_command() const {
    std::string out;
    if (cmdline.empty()) {
        out.push_back('[');
        append_escaped(out, comm);
        out.push_back(']');
        return out;
    }
    std::string_view s = cmdline;
    // One trailing NUL ends the last argument; it is not an empty argument.
    if (s.back() == '\0') s.remove_suffix(1);
    bool first = true;
    while (true) {
        size_t end = s.find('\0');
        if (!first) out.push_back(' ');
        first = false;
        append_escaped(out, s.substr(0, end));
        if (end == std::string_view::npos) break;
        s.remove_prefix(end + 1);
    }
    return out;
}

double Process::elapsed_seconds() const {
    // starttime counts clock ticks since boot on the boot-time clock (suspend included),
    // which is what CLOCK_BOOTTIME reads: no /proc/uptime or btime round trip needed, and
    // sub-tick precision on the "now" side.
    timespec now{};
    ::clock_gettime(CLOCK_BOOTTIME, &now);
    double up = static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) / 1e9;
    double started = static_cast<double>(id.starttime) / static_cast<double>(clock_ticks());
    double e = up - started;
    return e > 0 ? e : 0;
}

std::string user_name(uid_t uid) {
    passwd pw{};
    passwd* found = nullptr;
    char buf[4096];
    if (::getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found) return found->pw_name;
    return std::to_string(uid);
}

}  // namespace warden
