#include "contain/spawner.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <iterator>

#include "proc/process_table.hpp"
#include "sys/clone3.hpp"
#include "sys/exec_path.hpp"
#include "sys/pipe.hpp"

extern char** environ;

namespace warden {

int spawn_error_exit_code(const Error& e) {
    return (e.code == EACCES || e.code == ENOEXEC || e.code == EISDIR) ? 126 : 127;
}

namespace {

// Everything the child needs, prepared before the fork.
struct ChildPlan {
    std::string path;
    std::vector<std::string> argv_s, env_s;
    std::vector<char*> argv, envp;
    int in = -1, out = -1, err = -1;  // fds to become 0, 1, 2 (-1: inherit)
    int err_pipe = -1;                // write end: errno if execve fails
    int go_pipe = -1;                 // read end (pidns): parent's "go", EOF = parent died
    int status_pipe = -1;             // write end (pidns init): the server's wait status
    int cgroup_procs = -1;            // fork fallback: write "0" to join the session cgroup
    // The v1 groups of the session's limits (contain/limits.hpp): cgroup.procs of each, to
    // join with "0" before anything of the server runs; -1: none.
    int limit_procs[3] = {-1, -1, -1};
    pid_t parent = 0;
    int pdeathsig = 0;
    bool own_pgrp = true;
    const char* cwd = nullptr;
    const sandbox::Plan* sandbox = nullptr;
};

void write_errno(int fd, int e) {
    if (fd >= 0) {
        ssize_t n = ::write(fd, &e, sizeof e);
        (void)n;
    }
}

// Makes `from` fd number `to`, clearing close-on-exec (dup2 onto itself would keep it).
void move_fd(int from, int to) {
    if (from < 0) return;
    if (from == to) {
        ::fcntl(to, F_SETFD, 0);
        return;
    }
    ::dup2(from, to);
}

// In the child: async-signal-safe calls only.
[[noreturn]] void exec_server(const ChildPlan& p, pid_t expected_parent) {
    // Signal state is inherited across exec: the keeper's blocked or ignored signals
    // (SIGPIPE, SIGCHLD for a signalfd) must not leak into the server.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; ++s)
        if (s != SIGKILL && s != SIGSTOP) ::sigaction(s, &dfl, nullptr);
    if (p.pdeathsig > 0) {
        ::prctl(PR_SET_PDEATHSIG, static_cast<unsigned long>(p.pdeathsig), 0UL, 0UL, 0UL);
        // PDEATHSIG only covers a parent that dies *after* prctl: check it did not already.
        if (::getppid() != expected_parent) ::_exit(1);
    }
    if (p.own_pgrp) ::setpgid(0, 0);
    // Lift the descriptors above 2 first so that dup2 never clobbers one still needed.
    int in = p.in >= 0 && p.in < 3 ? ::fcntl(p.in, F_DUPFD_CLOEXEC, 3) : p.in;
    int out = p.out >= 0 && p.out < 3 ? ::fcntl(p.out, F_DUPFD_CLOEXEC, 3) : p.out;
    int err = p.err >= 0 && p.err < 3 ? ::fcntl(p.err, F_DUPFD_CLOEXEC, 3) : p.err;
    move_fd(in, 0);
    move_fd(out, 1);
    move_fd(err, 2);
    if (p.cwd && ::chdir(p.cwd) != 0) {
        write_errno(p.err_pipe, errno);
        ::_exit(127);
    }
    // Last, so that everything above ran with the keeper's reach; nothing after it but exec.
    if (p.sandbox) {
        if (int e = p.sandbox->apply_in_child(); e != 0) {
            write_errno(p.err_pipe, e);
            ::_exit(126);
        }
    }
    ::execve(p.path.c_str(), p.argv.data(), p.envp.data());
    write_errno(p.err_pipe, errno);
    ::_exit(127);
}

// PID 1 of the session's namespace: forks the server as PID 2, then reaps whatever the
// namespace orphans until it is killed. It never exits by itself: its exit would SIGKILL
// the whole namespace at once and leave no room for the polite phase.
[[noreturn]] void namespace_init(const ChildPlan& p) {
    ::prctl(PR_SET_NAME, "mcpwarden-init", 0UL, 0UL, 0UL);
    long r = ::syscall(SYS_clone, static_cast<unsigned long>(SIGCHLD), 0UL, nullptr, nullptr, 0UL);
    if (r < 0) {
        write_errno(p.err_pipe, errno);
        ::_exit(127);
    }
    if (r == 0) exec_server(p, 1);
    const pid_t server = static_cast<pid_t>(r);
    // Only the server keeps the error pipe now: its EOF tells the keeper execve succeeded.
    ::close(p.err_pipe);
    for (;;) {
        int st = 0;
        pid_t w = ::waitpid(-1, &st, 0);
        if (w == server) {
            ssize_t n = ::write(p.status_pipe, &st, sizeof st);
            (void)n;
        } else if (w < 0 && errno == ECHILD) {
            ::pause();  // nothing left to reap; wait for the keeper's SIGKILL
        }
    }
}

// A limit the server was not placed under is not enforced: the child dies rather than run
// without it, and says why through the error pipe (as -errno: not execve's).
void join_limit_groups(const ChildPlan& p) {
    for (int fd : p.limit_procs)
        if (fd >= 0 && ::write(fd, "0", 1) != 1) {
            write_errno(p.err_pipe, -errno);
            ::_exit(126);
        }
}

[[noreturn]] void child_main(const ChildPlan& p, bool pidns, bool joined_cgroup) {
    if (p.cgroup_procs >= 0 && !joined_cgroup) {
        // fork() fallback: join the session cgroup before running anything of the server.
        ssize_t n = ::write(p.cgroup_procs, "0", 1);
        (void)n;
    }
    join_limit_groups(p);
    if (!pidns) exec_server(p, p.parent);
    // Inside the new namespace getppid() is 0, so PDEATHSIG cannot be re-checked against
    // the parent's pid; the go pipe does it: EOF means the parent died before saying go.
    ::prctl(PR_SET_PDEATHSIG, static_cast<unsigned long>(SIGKILL), 0UL, 0UL, 0UL);
    char go = 0;
    ssize_t n;
    do {
        n = ::read(p.go_pipe, &go, 1);
    } while (n < 0 && errno == EINTR);
    if (n != 1) ::_exit(1);
    namespace_init(p);
}

Status write_id_maps(pid_t pid) {
    const std::string base = "/proc/" + std::to_string(pid) + "/";
    // Map our own ids onto themselves, so the tree keeps the uid the rest of the engine
    // checks; setgroups must be denied before an unprivileged gid_map is accepted.
    if (auto fd = open_file(base + "setgroups", O_WRONLY); fd) {
        if (auto st = write_all(fd->get(), "deny", base + "setgroups"); !st) return st;
    }
    for (auto [file, id] : {std::pair{"uid_map", ::getuid()}, std::pair{"gid_map", ::getgid()}}) {
        auto fd = open_file(base + file, O_WRONLY);
        if (!fd) return fd.error();
        std::string line = std::to_string(id) + " " + std::to_string(id) + " 1\n";
        if (auto st = write_all(fd->get(), line, base + file); !st) return st;
    }
    return {};
}

// The first child of `init`, from /proc (its only child right after the fork).
pid_t first_child(pid_t init) {
    auto s =
        read_file("/proc/" + std::to_string(init) + "/task/" + std::to_string(init) + "/children");
    if (!s) return 0;
    return static_cast<pid_t>(std::atoi(s->c_str()));
}

void reap_quietly(pid_t pid) {
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
}

}  // namespace

Result<Child> spawn(const Containment& c, const SpawnOptions& o) {
    if (o.argv.empty()) return Error{"spawn: empty command", ENOENT};
    auto path = find_executable(o.argv[0]);
    if (!path) return path.error();

    ChildPlan p;
    p.path = *path;
    p.argv_s = o.argv;
    const std::string marker = "MCPWARDEN_SESSION=";
    auto overridden = [&](const char* e) {
        std::string_view v(e);
        if (v.rfind(marker, 0) == 0) return true;
        for (const auto& a : o.env_add) {
            auto eq = a.find('=');
            if (eq != std::string::npos && v.size() > eq &&
                v.substr(0, eq + 1) == a.substr(0, eq + 1))
                return true;
        }
        return false;
    };
    const bool confined = o.sandbox && o.sandbox->on();
    if (confined) {
        for (const auto& e : o.sandbox->env())
            if (!overridden(e.c_str())) p.env_s.push_back(e);
        p.sandbox = o.sandbox;
    } else {
        for (char** e = environ; e && *e; ++e)
            if (!overridden(*e)) p.env_s.emplace_back(*e);
    }
    for (const auto& a : o.env_add)
        p.env_s.push_back(a);
    p.env_s.push_back(marker + c.session_id());
    for (auto& s : p.argv_s)
        p.argv.push_back(s.data());
    p.argv.push_back(nullptr);
    for (auto& s : p.env_s)
        p.envp.push_back(s.data());
    p.envp.push_back(nullptr);

    Child child;
    Fd null_fd, in_child, out_child, err_child;
    auto stdio = [&](Stdio mode, bool child_reads, Fd& parent_end, Fd& child_end) -> Status {
        if (mode == Stdio::Inherit) return {};
        if (mode == Stdio::Null) {
            if (!null_fd) {
                auto n = open_file("/dev/null", O_RDWR);
                if (!n) return n.error();
                null_fd = std::move(*n);
            }
            return {};
        }
        auto pp = make_pipe();
        if (!pp) return pp.error();
        parent_end = std::move(child_reads ? pp->write : pp->read);
        child_end = std::move(child_reads ? pp->read : pp->write);
        return {};
    };
    if (auto st = stdio(o.in, true, child.in_, in_child); !st) return st.error();
    if (auto st = stdio(o.out, false, child.out_, out_child); !st) return st.error();
    if (auto st = stdio(o.err, false, child.err_, err_child); !st) return st.error();
    auto pick = [&](Stdio mode, const Fd& end) {
        return mode == Stdio::Null ? null_fd.get() : mode == Stdio::Pipe ? end.get() : -1;
    };
    p.in = pick(o.in, in_child);
    p.out = pick(o.out, out_child);
    p.err = pick(o.err, err_child);

    auto errp = make_pipe();
    if (!errp) return errp.error();
    p.err_pipe = errp->write.get();

    const bool pidns = c.layers().pidns.on;
    Pipe go, status;
    if (pidns) {
        auto g = make_pipe();
        auto s = make_pipe();
        if (!g) return g.error();
        if (!s) return s.error();
        go = std::move(*g);
        status = std::move(*s);
        p.go_pipe = go.read.get();
        p.status_pipe = status.write.get();
    }
    const Cgroup* cg = c.cgroup();
    Fd procs;
    if (cg) {
        auto f = open_at(cg->dir_fd(), "cgroup.procs", O_WRONLY, cg->path() + "/cgroup.procs");
        if (f) procs = std::move(*f);
        p.cgroup_procs = procs.get();
    }
    std::vector<Fd> limit_procs;
    for (const std::string& file : c.limits().v1_procs_files()) {
        auto f = open_file(file, O_WRONLY);
        if (!f) return f.error();
        if (limit_procs.size() < std::size(p.limit_procs)) {
            p.limit_procs[limit_procs.size()] = f->get();
            limit_procs.push_back(std::move(*f));
        }
    }
    p.parent = ::getpid();
    p.pdeathsig = o.pdeathsig;
    p.own_pgrp = o.own_process_group;
    p.cwd = o.cwd.empty() ? nullptr : o.cwd.c_str();

    CloneRequest req;
    req.want_pidfd = c.pidfd_on();
    req.cgroup_fd = cg ? cg->dir_fd() : -1;
    req.autokill = c.layers().autokill.on;
    req.new_pid_ns = pidns;
    req.new_user_ns = pidns && ::geteuid() != 0;
    req.allow_clone3 = c.layers().clone3.on;
    auto r = clone_child(req);
    if (!r) return r.error();
    if (r->pid == 0) child_main(p, pidns, r->into_cgroup);

    // Parent.
    const pid_t pid = r->pid;
    errp->write.reset();
    in_child.reset();
    out_child.reset();
    err_child.reset();
    child.via_clone3_ = r->via_clone3;
    child.autokill_ = r->autokill;
    Pidfd first = r->pidfd ? Pidfd(std::move(r->pidfd), pid) : Pidfd();
    if (!first && c.pidfd_on()) {
        // Our own unreaped child: its PID cannot be recycled yet, so this is race-free.
        if (auto pf = c.open_pidfd(pid); pf) first = std::move(*pf);
    }
    if (pidns) {
        go.read.reset();
        status.write.reset();
        if (req.new_user_ns) {
            if (auto st = write_id_maps(pid); !st) {
                ::kill(pid, SIGKILL);
                reap_quietly(pid);
                return st.error();
            }
        }
        if (auto st = write_all(go.write.get(), "g", "go pipe"); !st) {
            ::kill(pid, SIGKILL);
            reap_quietly(pid);
            return st.error();
        }
    } else if (o.own_process_group) {
        ::setpgid(pid, pid);  // both sides set it, so neither can act before it holds
    }

    // execve succeeded when the error pipe reaches EOF (it is close-on-exec).
    int child_errno = 0;
    ssize_t n;
    do {
        n = ::read(errp->read.get(), &child_errno, sizeof child_errno);
    } while (n < 0 && errno == EINTR);
    if (n == static_cast<ssize_t>(sizeof child_errno)) {
        if (pidns) ::kill(pid, SIGKILL);
        reap_quietly(pid);
        if (child_errno < 0)
            return Error{
                "cannot place the server in its limits' cgroup v1 groups (cgroup.procs): " +
                    std::string(std::strerror(-child_errno)),
                -child_errno};
        return Error{
            "cannot run '" + o.argv[0] + "': execve(" + p.path + "): " + std::strerror(child_errno),
            child_errno};
    }

    if (pidns) {
        child.init_pidfd_ = std::move(first);
        child.init_status_ = std::move(status.read);
        if (auto id = read_identity(pid); id) child.init_id_ = *id;
        pid_t server = first_child(pid);
        if (server > 0) {
            if (auto id = read_identity(server); id) child.id_ = *id;
            if (c.pidfd_on())
                if (auto pf = c.open_pidfd(server); pf) child.pidfd_ = std::move(*pf);
        }
    } else {
        child.pidfd_ = std::move(first);
        if (auto id = read_identity(pid); id) {
            child.id_ = *id;
        } else {
            child.id_.pid = pid;  // exited and already a zombie without stat? keep the pid
        }
    }
    child.in_cgroup_ = cg && (r->into_cgroup || procs.valid());
    return child;
}

std::optional<int> Child::try_reap() {
    if (status_) return status_;
    if (init_status_) {
        int st = 0;
        pollfd pf{init_status_.get(), POLLIN, 0};
        if (::poll(&pf, 1, 0) > 0 && ::read(init_status_.get(), &st, sizeof st) == sizeof st)
            status_ = st;
        return status_;
    }
    if (id_.pid <= 0) return status_;
    int st = 0;
    pid_t w = ::waitpid(id_.pid, &st, WNOHANG);
    if (w == id_.pid) status_ = st;
    return status_;
}

std::optional<int> Child::wait(int timeout_ms) {
    if (try_reap()) return status_;
    int fd = init_status_ ? init_status_.get() : pidfd_.get();
    if (fd >= 0) {
        pollfd pf{fd, POLLIN, 0};
        int r;
        do {
            r = ::poll(&pf, 1, timeout_ms);
        } while (r < 0 && errno == EINTR);
        return try_reap();
    }
    // No pidfd: the one place that polls, in 5 ms steps, bounded by the timeout.
    for (int waited = 0; timeout_ms < 0 || waited < timeout_ms; waited += 5) {
        if (try_reap()) return status_;
        ::usleep(5000);
    }
    return try_reap();
}

}  // namespace warden
