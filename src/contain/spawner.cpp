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

// The server's environment: the sandbox's (it already dropped what it does not pass) or ours,
// with each variable the caller sets replacing the inherited one, and last the session marker,
// which is always ours.
bool overridden_by(std::string_view kv, const std::vector<std::string>& env_add,
                   std::string_view marker) {
    if (kv.rfind(marker, 0) == 0) return true;
    for (const auto& a : env_add) {
        auto eq = a.find('=');
        if (eq != std::string::npos && kv.size() > eq &&
            kv.substr(0, eq + 1) == a.substr(0, eq + 1))
            return true;
    }
    return false;
}

std::vector<std::string> server_environment(const Containment& c, const SpawnOptions& o) {
    const std::string marker = "MCPWARDEN_SESSION=";
    std::vector<std::string> env;
    if (o.sandbox && o.sandbox->on()) {
        for (const auto& e : o.sandbox->env())
            if (!overridden_by(e, o.env_add, marker)) env.push_back(e);
    } else {
        for (char** e = environ; e && *e; ++e)
            if (!overridden_by(*e, o.env_add, marker)) env.emplace_back(*e);
    }
    for (const auto& a : o.env_add)
        env.push_back(a);
    env.push_back(marker + c.session_id());
    return env;
}

// argv and envp as execve wants them: null-terminated arrays of pointers into the plan's own
// strings, made once those are final.
void point_exec_arrays(ChildPlan& p) {
    for (auto& s : p.argv_s)
        p.argv.push_back(s.data());
    p.argv.push_back(nullptr);
    for (auto& s : p.env_s)
        p.envp.push_back(s.data());
    p.envp.push_back(nullptr);
}

// The descriptors spawn() holds across the fork: the child's ends, closed in the parent once
// the child has its copies, and the parent's ends of the pipes it hears the child through.
struct ForkFds {
    Fd null, in, out, err;        // the child's stdio ends (/dev/null opened once for all)
    Pipe exec_error;              // close-on-exec: EOF once execve succeeded, else an errno
    Pipe go, status;              // pidns only: the parent's "go"; the server's wait status
    Fd cgroup_procs;              // fork fallback: the session cgroup's cgroup.procs
    std::vector<Fd> limit_procs;  // cgroup.procs of each v1 group of the limits
};

// One of the server's stdio: inherited, /dev/null, or a pipe whose other end the parent keeps.
Status open_stdio_end(Stdio mode, bool child_reads, Fd& parent_end, Fd& child_end, Fd& null) {
    if (mode == Stdio::Inherit) return {};
    if (mode == Stdio::Null) {
        if (!null) {
            auto n = open_file("/dev/null", O_RDWR);
            if (!n) return n.error();
            null = std::move(*n);
        }
        return {};
    }
    auto pp = make_pipe();
    if (!pp) return pp.error();
    parent_end = std::move(child_reads ? pp->write : pp->read);
    child_end = std::move(child_reads ? pp->read : pp->write);
    return {};
}

int stdio_fd_for_child(Stdio mode, const Fd& end, const Fd& null) {
    return mode == Stdio::Null ? null.get() : mode == Stdio::Pipe ? end.get() : -1;
}

// The server's stdin, stdout and stderr as SpawnOptions asks: the parent's ends go to
// `parent_ends`, the child's stay in `f` and are named in the plan.
Status open_stdio(const SpawnOptions& o, Fd* const parent_ends[3], ForkFds& f, ChildPlan& p) {
    const Stdio modes[3] = {o.in, o.out, o.err};
    Fd* const child_ends[3] = {&f.in, &f.out, &f.err};
    int* const planned[3] = {&p.in, &p.out, &p.err};
    for (int i = 0; i < 3; ++i) {
        auto st = open_stdio_end(modes[i], i == 0, *parent_ends[i], *child_ends[i], f.null);
        if (!st) return st;
    }
    for (int i = 0; i < 3; ++i)
        *planned[i] = stdio_fd_for_child(modes[i], *child_ends[i], f.null);
    return {};
}

// The pipes of the handshake: execve's errno back to the parent, and in a new PID namespace
// the parent's "go" (sent once the id maps are written) and the server's wait status, which
// only the namespace's init can collect.
Status open_handshake(bool pidns, ForkFds& f, ChildPlan& p) {
    auto errp = make_pipe();
    if (!errp) return errp.error();
    f.exec_error = std::move(*errp);
    p.err_pipe = f.exec_error.write.get();
    if (!pidns) return {};
    auto g = make_pipe();
    auto s = make_pipe();
    if (!g) return g.error();
    if (!s) return s.error();
    f.go = std::move(*g);
    f.status = std::move(*s);
    p.go_pipe = f.go.read.get();
    p.status_pipe = f.status.write.get();
    return {};
}

// The cgroup.procs files the child writes itself into before anything of the server runs:
// the session cgroup's (for the fork fallback, when clone3 could not place it) and each v1
// group of the limits, which must open (a limit not enforced is an error, not a warning).
Status open_cgroup_joins(const Containment& c, ForkFds& f, ChildPlan& p) {
    if (const Cgroup* cg = c.cgroup()) {
        auto fd = open_at(cg->dir_fd(), "cgroup.procs", O_WRONLY, cg->path() + "/cgroup.procs");
        if (fd) f.cgroup_procs = std::move(*fd);
        p.cgroup_procs = f.cgroup_procs.get();
    }
    for (const std::string& file : c.limits().v1_procs_files()) {
        auto fd = open_file(file, O_WRONLY);
        if (!fd) return fd.error();
        if (f.limit_procs.size() < std::size(p.limit_procs)) {
            p.limit_procs[f.limit_procs.size()] = fd->get();
            f.limit_procs.push_back(std::move(*fd));
        }
    }
    return {};
}

CloneRequest clone_request(const Containment& c, bool pidns) {
    CloneRequest req;
    const Cgroup* cg = c.cgroup();
    req.want_pidfd = c.pidfd_on();
    req.cgroup_fd = cg ? cg->dir_fd() : -1;
    req.autokill = c.layers().autokill.on;
    req.new_pid_ns = pidns;
    req.new_user_ns = pidns && ::geteuid() != 0;
    req.allow_clone3 = c.layers().clone3.on;
    return req;
}

// The child's pidfd: clone3's, else (the pidfd layer on) one opened now. Our own unreaped
// child: its PID cannot be recycled yet, so this is race-free.
Pidfd pidfd_of_child(const Containment& c, CloneResult& r) {
    if (r.pidfd) return Pidfd(std::move(r.pidfd), r.pid);
    if (c.pidfd_on())
        if (auto pf = c.open_pidfd(r.pid); pf) return std::move(*pf);
    return Pidfd();
}

// In the parent, right after the fork: its copies of the child's ends go, so that the
// child's exit reads as EOF on each pipe.
void close_child_ends(ForkFds& f) {
    f.exec_error.write.reset();
    f.in.reset();
    f.out.reset();
    f.err.reset();
    f.go.read.reset();
    f.status.write.reset();
}

// A namespace's init waits for "go": an unprivileged parent first maps its ids into the new
// user namespace. A child that cannot be let go is killed and reaped, never left waiting.
Status let_namespace_go(pid_t pid, bool new_user_ns, ForkFds& f) {
    Status st;
    if (new_user_ns) st = write_id_maps(pid);
    if (st) st = write_all(f.go.write.get(), "g", "go pipe");
    if (!st) {
        ::kill(pid, SIGKILL);
        reap_quietly(pid);
    }
    return st;
}

// execve succeeded when the error pipe reaches EOF (it is close-on-exec); otherwise the
// child sent an errno (negative: it could not join its limits' groups) and is reaped here.
Status await_exec(pid_t pid, bool pidns, ForkFds& f, const ChildPlan& p, const std::string& argv0) {
    int child_errno = 0;
    ssize_t n;
    do {
        n = ::read(f.exec_error.read.get(), &child_errno, sizeof child_errno);
    } while (n < 0 && errno == EINTR);
    if (n != static_cast<ssize_t>(sizeof child_errno)) return {};
    if (pidns) ::kill(pid, SIGKILL);
    reap_quietly(pid);
    if (child_errno < 0)
        return Error{"cannot place the server in its limits' cgroup v1 groups (cgroup.procs): " +
                         std::string(std::strerror(-child_errno)),
                     -child_errno};
    return Error{
        "cannot run '" + argv0 + "': execve(" + p.path + "): " + std::strerror(child_errno),
        child_errno};
}

// The server inside a new namespace: the init's only child, found through /proc.
void find_namespace_server(const Containment& c, pid_t init, ProcessId& id, Pidfd& pidfd) {
    pid_t server = first_child(init);
    if (server <= 0) return;
    if (auto sid = read_identity(server); sid) id = *sid;
    if (c.pidfd_on())
        if (auto pf = c.open_pidfd(server); pf) pidfd = std::move(*pf);
}

}  // namespace

Result<Child> spawn(const Containment& c, const SpawnOptions& o) {
    if (o.argv.empty()) return Error{"spawn: empty command", ENOENT};
    auto path = find_executable(o.argv[0]);
    if (!path) return path.error();

    ChildPlan p;
    p.path = *path;
    p.argv_s = o.argv;
    p.env_s = server_environment(c, o);
    point_exec_arrays(p);
    if (o.sandbox && o.sandbox->on()) p.sandbox = o.sandbox;
    p.parent = ::getpid();
    p.pdeathsig = o.pdeathsig;
    p.own_pgrp = o.own_process_group;
    p.cwd = o.cwd.empty() ? nullptr : o.cwd.c_str();

    Child child;
    ForkFds f;
    Fd* const parent_ends[3] = {&child.in_, &child.out_, &child.err_};
    if (auto st = open_stdio(o, parent_ends, f, p); !st) return st.error();
    const bool pidns = c.layers().pidns.on;
    if (auto st = open_handshake(pidns, f, p); !st) return st.error();
    if (auto st = open_cgroup_joins(c, f, p); !st) return st.error();

    const CloneRequest req = clone_request(c, pidns);
    auto r = clone_child(req);
    if (!r) return r.error();
    if (r->pid == 0) child_main(p, pidns, r->into_cgroup);

    // Parent.
    const pid_t pid = r->pid;
    close_child_ends(f);
    child.via_clone3_ = r->via_clone3;
    child.autokill_ = r->autokill;
    Pidfd first = pidfd_of_child(c, *r);
    if (pidns) {
        if (auto st = let_namespace_go(pid, req.new_user_ns, f); !st) return st.error();
    } else if (o.own_process_group) {
        ::setpgid(pid, pid);  // both sides set it, so neither can act before it holds
    }
    if (auto st = await_exec(pid, pidns, f, p, o.argv[0]); !st) return st.error();

    if (pidns) {
        child.init_pidfd_ = std::move(first);
        child.init_status_ = std::move(f.status.read);
        if (auto id = read_identity(pid); id) child.init_id_ = *id;
        find_namespace_server(c, pid, child.id_, child.pidfd_);
    } else {
        child.pidfd_ = std::move(first);
        if (auto id = read_identity(pid); id) {
            child.id_ = *id;
        } else {
            child.id_.pid = pid;  // exited and already a zombie without stat? keep the pid
        }
    }
    child.in_cgroup_ = c.cgroup() && (r->into_cgroup || f.cgroup_procs.valid());
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
