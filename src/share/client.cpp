// The client side of `run --share`; see client.hpp.
#include "share/client.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "journal/journal.hpp"
#include "shim/catalog.hpp"
#include "sys/exec_path.hpp"

extern char** environ;

namespace warden::share {
namespace {

// How long a client waits for a broker it started (or one another client started) to listen.
constexpr std::chrono::milliseconds kBrokerStartWait{5000};
constexpr std::chrono::milliseconds kHelloWait{10000};

// The broker, detached on purpose: its own session, reparented away from us, stdin and
// stdout on /dev/null, stderr to its log. It outlives this run; it exits by itself.
Status start_broker(const Rendezvous& where, const std::string& exe,
                    std::chrono::milliseconds linger) {
    const std::string linger_arg = std::to_string(linger.count()) + "ms";
    std::vector<std::string> args{exe, "broker", "--linger", linger_arg};
    std::vector<char*> argv;
    for (std::string& a : args)
        argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) return Error::msg(fmt::format("fork: {}", std::strerror(errno)));
    if (pid == 0) {
        ::setsid();
        if (::fork() != 0) ::_exit(0);
        const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
        const int log = ::open(where.log.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
        ::dup2(null, 0);
        ::dup2(null, 1);
        ::dup2(log >= 0 ? log : null, 2);
        if (::chdir("/") != 0) ::_exit(125);
        ::execv(exe.c_str(), argv.data());
        ::_exit(127);
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return {};
}

// A line from `fd` within `bound` (the hello's answer).
Result<std::string> read_reply(int fd, std::string& rest, std::chrono::milliseconds bound) {
    const auto until = std::chrono::steady_clock::now() + bound;
    for (;;) {
        if (size_t nl = rest.find('\n'); nl != std::string::npos) {
            std::string line = rest.substr(0, nl);
            rest.erase(0, nl + 1);
            return line;
        }
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            until - std::chrono::steady_clock::now());
        if (left.count() <= 0) return Error::msg("the broker did not answer the hello in time");
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(left.count())) < 0 && errno != EINTR)
            return Error::msg(fmt::format("poll: {}", std::strerror(errno)));
        char buf[4096];
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n == 0) return Error::msg("the broker closed the connection before answering");
        if (n < 0 && errno != EINTR && errno != EAGAIN)
            return Error::msg(fmt::format("read from the broker: {}", std::strerror(errno)));
        if (n > 0) rest.append(buf, static_cast<size_t>(n));
    }
}

// Connected to the user's broker and greeted, starting one when none listens. A broker
// about to exit may close a connection it accepted before answering: tried again then.
Result<Fd> connect_or_start(const Rendezvous& where, const Hello& hello,
                            std::chrono::milliseconds linger, std::string& rest) {
    const auto until = std::chrono::steady_clock::now() + kBrokerStartWait;
    bool started = false;
    std::string last = "no broker";
    for (int attempt = 0; std::chrono::steady_clock::now() < until && attempt < 500; ++attempt) {
        auto fd = connect_unix(where.socket);
        if (!fd) {
            last = fd.error().message;
            if (!started) {
                if (auto st = start_broker(where, hello.exe, linger); !st) return st.error();
                started = true;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
            continue;
        }
        std::string line = hello.to_json().dump() + "\n";
        if (auto st = write_all(fd->get(), line, "the broker's socket"); !st) {
            last = st.error().message;
            continue;
        }
        rest.clear();
        auto reply = read_reply(fd->get(), rest, kHelloWait);
        if (!reply) {
            last = reply.error().message;
            started = false;  // it may have been exiting: start the next one
            continue;
        }
        auto j = nlohmann::json::parse(*reply, nullptr, false);
        if (!j.is_object() || !j.value("ok", false))
            return Error::msg("the broker refused this session: " +
                              (j.is_object() ? j.value("error", *reply) : *reply));
        return std::move(*fd);
    }
    return Error::msg(
        fmt::format("no broker to share the server through ({}): {}", where.socket, last));
}

// stdin → socket and socket → stdout until the broker's EOF. Returns 0 when the client
// closed its stdin first, 1 when the broker ended the connection.
int relay(int sock, std::string pending) {
    if (!pending.empty() && !write_all(1, pending, "stdout")) return 1;
    bool stdin_open = true;
    char buf[65536];
    for (;;) {
        pollfd p[2] = {{sock, POLLIN, 0}, {stdin_open ? 0 : -1, POLLIN, 0}};
        if (::poll(p, 2, -1) < 0) {
            if (errno == EINTR) continue;
            return 1;
        }
        if (p[1].revents) {
            ssize_t n = ::read(0, buf, sizeof buf);
            if (n > 0) {
                if (!write_all(sock, std::string_view(buf, static_cast<size_t>(n)), "socket"))
                    return 1;
            } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
                stdin_open = false;
                ::shutdown(sock, SHUT_WR);  // the client left: the broker answers with EOF
            }
        }
        if (p[0].revents) {
            ssize_t n = ::read(sock, buf, sizeof buf);
            if (n > 0) {
                if (!write_all(1, std::string_view(buf, static_cast<size_t>(n)), "stdout")) {
                    return 1;  // nobody reads the answers: the connection closes with us
                }
            } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
                if (stdin_open)
                    std::fputs(
                        "mcpwarden run --share: the shared tree or its broker ended "
                        "the session\n",
                        stderr);
                return stdin_open ? 1 : 0;
            }
        }
    }
}

}  // namespace

std::string share_identity(const RunOptions& o, const std::string& settings) {
    const shim::ServerIdentity server = shim::server_identity(o);
    nlohmann::json what{{"server", server.key},
                        {"files", server.files},
                        {"uid", static_cast<int64_t>(::geteuid())},
                        {"settings", settings}};
    return journal::to_hex(journal::sha256(what.dump()));
}

Hello make_hello(const RunOptions& o, const std::string& identity,
                 std::vector<std::string> run_argv) {
    Hello h;
    h.identity = identity;
    auto self = self_executable();
    h.exe = self ? *self : "/proc/self/exe";
    h.argv = std::move(run_argv);
    for (char** e = environ; e && *e; ++e)
        h.env.emplace_back(*e);
    char cwd[4096];
    h.cwd = ::getcwd(cwd, sizeof cwd) ? cwd : "/";
    h.name = o.name.empty() && !o.command.empty() ? o.command[0].substr(o.command[0].rfind('/') + 1)
                                                  : o.name;
    if (!o.no_journal) {
        auto path = journal::resolve_path(o.journal);
        if (path) h.journal = *path;
    }
    h.linger_ms = o.share_linger.count();
    h.client = ::getppid();
    return h;
}

Result<int> run_share_client(const Hello& hello, std::chrono::milliseconds linger) {
    auto where = rendezvous();
    if (!where) return Error::msg("--share: " + where.error().message);
    std::string rest;
    auto sock = connect_or_start(*where, hello, linger, rest);
    if (!sock) return Error::msg("--share: " + sock.error().message);
    return relay(sock->get(), std::move(rest));
}

}  // namespace warden::share
