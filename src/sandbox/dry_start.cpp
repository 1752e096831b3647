#include "sandbox/dry_start.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <string_view>

#include "sandbox/fs_probe.hpp"
#include "sys/exec_path.hpp"
#include "sys/fd.hpp"

extern char** environ;

namespace warden::sandbox {

namespace {

using Clock = std::chrono::steady_clock;

struct PipePair {
    Fd read, write;
};

Result<PipePair> pipe_pair() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return Error::sys("pipe2", "dry start", errno);
    return PipePair{Fd(fds[0]), Fd(fds[1])};
}

// The argv/envp arrays a forked child passes to execve, built before the fork.
std::vector<char*> c_strings(const std::vector<std::string>& v) {
    std::vector<char*> out;
    for (const auto& s : v)
        out.push_back(const_cast<char*>(s.c_str()));
    out.push_back(nullptr);
    return out;
}

// Reads `fd` into `buf` until a line holding `want` (the whole line) or `deadline`; "" then.
std::string line_with(int fd, std::string& buf, std::string_view want, Clock::time_point deadline) {
    for (;;) {
        for (size_t nl; (nl = buf.find('\n')) != std::string::npos;) {
            std::string line = buf.substr(0, nl);
            buf.erase(0, nl + 1);
            if (line.find(want) != std::string::npos) return line;
        }
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        if (left.count() <= 0) return "";
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
        char chunk[8192];
        ssize_t n = ::read(fd, chunk, sizeof chunk);
        if (n <= 0) return "";
        buf.append(chunk, static_cast<size_t>(n));
    }
}

std::string without_spaces(std::string s) {
    std::erase_if(s, [](char c) { return c == ' ' || c == '\t'; });
    return s;
}

// The answer to request `id` among the server's lines: its line, or "" by the deadline.
std::string answer_to(int fd, std::string& buf, int id, Clock::time_point deadline) {
    const std::string a = fmt::format("\"id\":{},", id), b = fmt::format("\"id\":{}}}", id);
    for (;;) {
        std::string line = line_with(fd, buf, "id", deadline);
        if (line.empty()) return "";
        std::string flat = without_spaces(line);
        if (flat.find(a) != std::string::npos || flat.find(b) != std::string::npos) return flat;
    }
}

std::vector<std::string> tool_names(const std::string& flat) {
    std::vector<std::string> out;
    const std::string key = "\"name\":\"";
    for (size_t at = flat.find(key); at != std::string::npos; at = flat.find(key, at + 1)) {
        size_t from = at + key.size(), end = flat.find('"', from);
        if (end == std::string::npos) break;
        out.push_back(flat.substr(from, end - from));
    }
    return out;
}

// strace, attached to `pid` and following its forks, failed calls only, into `log`: its pid
// once it says it has attached, or -1 (no strace here, or it could not attach), and its stderr,
// which must stay open while it runs: it says "attached" again for each fork it follows, and
// a closed pipe would end it there with SIGPIPE, before the forked process's calls.
struct Tracer {
    pid_t pid = -1;
    Fd said;
};

Tracer attach_strace(pid_t pid, const std::string& log) {
    auto strace = find_executable("strace");
    auto err = pipe_pair();
    if (!strace || !err) return {};
    std::vector<std::string> args{
        *strace, "-f", "-Z", "-s", "4096", "-o", log, "-p", std::to_string(pid)};
    auto argv = c_strings(args);
    pid_t t = ::fork();
    if (t < 0) return {};
    if (t == 0) {
        ::dup2(err->write.get(), 2);
        int null = ::open("/dev/null", O_RDWR);
        ::dup2(null, 0);
        ::dup2(null, 1);
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    err->write.reset();
    std::string buf;
    std::string said =
        line_with(err->read.get(), buf, "attached", Clock::now() + std::chrono::seconds(5));
    if (said.empty()) {
        ::kill(t, SIGKILL);
        ::waitpid(t, nullptr, 0);
        return {};
    }
    return {t, std::move(err->read)};
}

void end_process_group(pid_t pid) {
    for (int i = 0; i < 50; ++i) {  // 500 ms for the server to leave on EOF
        if (::waitpid(pid, nullptr, WNOHANG) == pid) {
            ::kill(-pid, SIGKILL);  // what it left in its group
            return;
        }
        ::usleep(10'000);
    }
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
}

void end_strace(pid_t t) {
    if (t <= 0) return;
    for (int i = 0; i < 200; ++i) {  // it leaves once its tracees are gone: 2 s at most
        if (::waitpid(t, nullptr, WNOHANG) == t) return;
        ::usleep(10'000);
    }
    ::kill(t, SIGKILL);
    ::waitpid(t, nullptr, 0);
}

std::string tail_of(int fd, size_t keep) {
    std::string out;
    ::fcntl(fd, F_SETFL, O_NONBLOCK);
    char chunk[4096];
    for (ssize_t n; (n = ::read(fd, chunk, sizeof chunk)) > 0;)
        out.append(chunk, static_cast<size_t>(n));
    return out.size() > keep ? out.substr(out.size() - keep) : out;
}

// One line of `strace -f -Z`: "PID call(args) = -1 ERRNO (text)".
struct Failed {
    std::string call, args, err;
};

std::optional<Failed> failed_call(std::string_view line) {
    size_t sp = line.find(' ');
    if (sp == std::string_view::npos) return std::nullopt;
    line.remove_prefix(sp + 1);
    while (!line.empty() && line.front() == ' ')
        line.remove_prefix(1);
    size_t open = line.find('('), eq = line.rfind(" = -1 ");
    if (open == std::string_view::npos || eq == std::string_view::npos || eq < open)
        return std::nullopt;
    std::string_view err = line.substr(eq + 6);
    err = err.substr(0, err.find(' '));
    return Failed{std::string(line.substr(0, open)), std::string(line.substr(open + 1, eq - open)),
                  std::string(err)};
}

std::string first_quoted(const std::string& s) {
    size_t a = s.find('"');
    if (a == std::string::npos) return "";
    size_t b = s.find('"', a + 1);
    return b == std::string::npos ? "" : s.substr(a + 1, b - a - 1);
}

bool writes(const Failed& f) {
    static const char* const calls[] = {
        "mkdir",   "mkdirat",   "unlink", "unlinkat", "rmdir", "rename",   "renameat", "renameat2",
        "symlink", "symlinkat", "link",   "linkat",   "creat", "truncate", "mknod",    "mknodat"};
    if (std::any_of(std::begin(calls), std::end(calls), [&](const char* c) { return f.call == c; }))
        return true;
    return f.args.find("O_WRONLY") != std::string::npos ||
           f.args.find("O_RDWR") != std::string::npos ||
           f.args.find("O_CREAT") != std::string::npos;
}

// A path the same user reaches unconfined: the EACCES was the sandbox's, not the file mode's.
bool reachable(const std::string& path, bool write) {
    if (path.empty() || path[0] != '/') return false;
    if (!write) return ::access(path.c_str(), R_OK) == 0;
    if (fs_probe::exists(path)) return ::access(path.c_str(), W_OK) == 0;
    return ::access(fs_probe::parent_of(path).c_str(), W_OK) == 0;
}

std::optional<Denial> denial_of(const Failed& f, const Plan& plan) {
    if (f.call == "connect" && f.err == "EACCES") {
        auto at = f.args.find("htons(");
        if (at == std::string::npos) return std::nullopt;
        std::string port = f.args.substr(at + 6, f.args.find(')', at) - at - 6);
        return Denial{"connect", "TCP port " + port, "--allow-connect " + port};
    }
    if (f.call == "bind" && f.err == "EACCES" && f.args.find("AF_INET") != std::string::npos)
        return Denial{"bind", "a chosen TCP port", "--net any"};
    if (f.call == "socket" && (f.err == "EACCES" || f.err == "EAFNOSUPPORT"))
        return Denial{"socket", "socket(" + f.args.substr(0, f.args.rfind(')')) + ")", "--net any"};
    if (f.err == "EPERM") {
        const auto& refused = plan.refused_syscalls();
        bool listed = std::find(refused.begin(), refused.end(), f.call) != refused.end() ||
                      ((f.call == "clone" || f.call == "unshare") &&
                       f.args.find("CLONE_NEW") != std::string::npos);
        if (listed) return Denial{"call", f.call, "no flag: refused by every profile"};
        return std::nullopt;
    }
    if (f.err != "EACCES") return std::nullopt;
    std::string path = first_quoted(f.args);
    bool w = writes(f);
    if (!reachable(path, w)) return std::nullopt;
    if (!w) return Denial{"read", path, "--allow-read " + path};
    return Denial{"write", path,
                  "--allow-write " + (fs_probe::exists(path) ? path : fs_probe::parent_of(path))};
}

}  // namespace

std::vector<Denial> denials_in_trace(const std::string& trace, const Plan& plan) {
    std::vector<Denial> out;
    size_t at = 0;
    while (at < trace.size()) {
        size_t nl = trace.find('\n', at);
        std::string_view line(trace.data() + at,
                              (nl == std::string::npos ? trace.size() : nl) - at);
        at = nl == std::string::npos ? trace.size() : nl + 1;
        auto f = failed_call(line);
        if (!f) continue;
        auto d = denial_of(*f, plan);
        if (!d) continue;
        bool seen = std::any_of(out.begin(), out.end(), [&](const Denial& x) {
            return x.what == d->what && x.target == d->target;
        });
        if (!seen) out.push_back(std::move(*d));
    }
    return out;
}

Result<DryStart> dry_start(const Plan& plan, const std::vector<std::string>& argv,
                           const std::string& executable, std::chrono::milliseconds bound) {
    auto in = pipe_pair(), out = pipe_pair(), err = pipe_pair(), go = pipe_pair();
    for (auto* p : {&in, &out, &err, &go})
        if (!*p) return p->error();
    std::string log = (plan.private_tmp().empty() ? std::string("/tmp")
                                                  : fs_probe::parent_of(plan.private_tmp())) +
                      "/mcpwarden-dry-start-XXXXXX";
    int log_fd = ::mkstemp(log.data());
    if (log_fd < 0) return Error::sys("mkstemp", log, errno);
    ::close(log_fd);
    auto c_argv = c_strings(argv);
    std::vector<std::string> env = plan.env();
    if (!plan.on())  // no plan: the environment as it is
        for (char** e = environ; e && *e; ++e)
            env.emplace_back(*e);
    auto c_env = c_strings(env);

    pid_t pid = ::fork();
    if (pid < 0) return Error::sys("fork", "dry start", errno);
    if (pid == 0) {
        ::setpgid(0, 0);
        ::prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);  // strace is no ancestor of ours
        ::dup2(in->read.get(), 0);
        ::dup2(out->write.get(), 1);
        ::dup2(err->write.get(), 2);
        char c;
        while (::read(go->read.get(), &c, 1) < 0 && errno == EINTR) {
        }
        if (plan.apply_in_child() != 0) ::_exit(126);
        ::execve(executable.c_str(), c_argv.data(), c_env.data());
        ::_exit(127);
    }
    ::setpgid(pid, pid);
    in->read.reset();
    out->write.reset();
    err->write.reset();
    go->read.reset();
    DryStart d;
    Tracer tracer = attach_strace(pid, log);
    d.traced = tracer.pid > 0;
    (void)write_all(go->write.get(), "g", "dry start");
    go->write.reset();

    const auto deadline = Clock::now() + bound;
    std::string buf;
    (void)write_all(in->write.get(),
                    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
                    "\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{"
                    "\"name\":\"mcpwarden-dry-start\",\"version\":\"1\"}}}\n",
                    "dry start");
    std::string init = answer_to(out->read.get(), buf, 1, deadline);
    if (init.empty() || init.find("\"result\"") == std::string::npos) {
        d.failure = init.empty() ? "no answer to initialize" : "initialize answered with an error";
    } else {
        (void)write_all(in->write.get(),
                        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n"
                        "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}\n",
                        "dry start");
        std::string list = answer_to(out->read.get(), buf, 2, deadline);
        if (list.empty() || list.find("\"result\"") == std::string::npos)
            d.failure =
                list.empty() ? "no answer to tools/list" : "tools/list answered with an error";
        else
            d.tools = tool_names(list);
    }
    d.answered = d.failure.empty();
    in->write.reset();
    end_process_group(pid);
    end_strace(tracer.pid);
    d.server_stderr = tail_of(err->read.get(), 2048);
    if (auto trace = read_file(log)) d.denials = denials_in_trace(*trace, plan);
    ::unlink(log.c_str());
    return d;
}

std::string render_dry_start(const DryStart& d) {
    std::string out;
    if (d.answered) {
        std::string names;
        for (const auto& t : d.tools)
            names += (names.empty() ? "" : ", ") + t;
        out += fmt::format("dry start: initialize and tools/list answered ({} tools{}{})\n",
                           d.tools.size(), names.empty() ? "" : ": ", names);
    } else {
        out += "dry start: FAILED: " + d.failure + "\n";
    }
    if (!d.traced)
        out += "  denials not observed: strace is not installed here or could not attach\n";
    else if (d.denials.empty())
        out += "  no denial observed\n";
    for (const auto& x : d.denials)
        out += fmt::format("  denied {:<7} {}  → {}\n", x.what, x.target, x.allow);
    if (!d.answered && !d.server_stderr.empty()) {
        out += "  the server's stderr ended with:\n";
        std::string_view s = d.server_stderr;
        while (!s.empty()) {
            size_t nl = s.find('\n');
            out += "    " + std::string(s.substr(0, nl)) + "\n";
            if (nl == std::string_view::npos) break;
            s.remove_prefix(nl + 1);
        }
    }
    return out;
}

}  // namespace warden::sandbox
