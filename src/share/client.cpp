// The client side of `run --share`; see client.hpp.
#include "share/client.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <deque>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fault/faults.hpp"
#include "journal/journal.hpp"
#include "rpc/answer.hpp"
#include "rpc/message.hpp"
#include "share/taken.hpp"
#include "shim/catalog.hpp"
#include "sys/exec_path.hpp"
#include "sys/fd_passing.hpp"

extern char** environ;

namespace warden::share {
namespace {

// Variables a client gives every server it starts a new value of, per session, that say nothing
// of the server (Claude Code's session id, its messaging socket and token for that session, the
// sessions that launched it, its notes directory). Were they part of the identity, no two
// sessions of that client would ever share a tree. A tree's server keeps the values of the
// session that started it (docs/SHARING.md, "Identity").
constexpr std::array<std::string_view, 5> kPerSessionVars{
    "CLAUDE_CODE_SESSION_ID", "CLAUDE_CODE_MESSAGING_SOCKET", "CLAUDE_CODE_MESSAGING_TOKEN",
    "CLAUDE_CODE_LAUNCHED_BY_SESSION_IDS", "CLAUDE_CODE_CHILD_NOTES_DIR"};

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

// A line from `fd` within `bound` (the hello's answer), and the file descriptor passed with
// it, if any, into `passed`.
Result<std::string> read_reply(int fd, std::string& rest, std::chrono::milliseconds bound,
                               Fd& passed) {
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
        auto n = recv_passing(fd, buf, sizeof buf, passed);
        if (n && *n == 0) return Error::msg("the broker closed the connection before answering");
        if (!n && n.error().code != EAGAIN)
            return Error::msg("read from the broker: " + n.error().message);
        if (n) rest.append(buf, *n);
    }
}

// How a broker says which lines of the connection it took (Link).
struct Acknowledgement {
    bool given = false;  // it does: by lines on the socket, or on the page of `count`
    TakenCount count;
};

// Connected to the user's broker and greeted, starting one when none listens. A broker
// about to exit may close a connection it accepted before answering: tried again then.
Result<Fd> connect_or_start(const Rendezvous& where, const Hello& hello,
                            std::chrono::milliseconds linger, std::string& rest,
                            Acknowledgement& ack) {
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
        Fd passed;
        auto reply = read_reply(fd->get(), rest, kHelloWait, passed);
        if (!reply) {
            last = reply.error().message;
            started = false;  // it may have been exiting: start the next one
            continue;
        }
        auto j = nlohmann::json::parse(*reply, nullptr, false);
        if (!j.is_object() || !j.value("ok", false))
            return Error::msg("the broker refused this session: " +
                              (j.is_object() ? j.value("error", *reply) : *reply));
        ack = Acknowledgement{j.value("acknowledges", false), TakenCount()};
        // Its count on a page: a page that cannot be read is no acknowledgement (every line
        // sent then counts as taken: answered with an error, never sent twice).
        if (j.value("taken_count", false)) {
            auto count = TakenCount::map(std::move(passed));
            ack.given = static_cast<bool>(count);
            if (count) ack.count = std::move(*count);
        }
        return std::move(*fd);
    }
    return Error::msg(
        fmt::format("no broker to share the server through ({}): {}", where.socket, last));
}

// stdin → socket and socket → stdout, line by line, until the client closes its stdin and
// the broker lets go. When the connection ends first (the broker died, or the tree ended), the
// requests in flight get an error, and the session goes on through a new connection: a new
// broker if need be, the tree's handshake replayed under an id of ours whose answer is
// swallowed, as a wake after --idle-stop replays it. Bounded: kMaxRejoins in a row without
// an answer between them, then the session ends (exit 1).
//
// In flight means taken by the broker. A broker that is being killed may still have its
// socket open (its other threads exiting) after it read its last line: a line written then is
// accepted by the socket and never read. The broker counts the lines it takes, before it
// passes them on (N counted from the connection's first line after the hello), on a page
// passed with its answer to the hello (taken.hpp), read here once the connection ends; a
// broker of an older build says it on the socket instead ({"share":1,"taken":N}, swallowed
// here). A request it took and never answered gets the error, since it may have reached the
// server; a line it never counted goes to the next broker, since no server had it. A broker
// that does not say which lines it took (an older build's) is taken to have taken every line
// sent: a line is never sent twice.
class Link {
  public:
    Link(const Rendezvous& where, const Hello& hello, std::chrono::milliseconds linger)
        : where_(where), hello_(hello), linger_(linger) {}

    int run(Fd sock, std::string pending, Acknowledgement ack) {
        sock_ = std::move(sock);
        ack_ = std::move(ack);
        from_broker_ = std::move(pending);
        if (!deliver()) return 1;
        char buf[65536];
        for (;;) {
            pollfd p[2] = {{sock_.get(), POLLIN, 0}, {stdin_open_ ? 0 : -1, POLLIN, 0}};
            if (::poll(p, 2, -1) < 0) {
                if (errno == EINTR) continue;
                return 1;
            }
            if (p[1].revents) {
                ssize_t n = ::read(0, buf, sizeof buf);
                if (n > 0) {
                    from_client_.append(buf, static_cast<size_t>(n));
                    if (!forward()) continue;  // the connection broke: its EOF comes next
                } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
                    stdin_open_ = false;
                    ::shutdown(sock_.get(), SHUT_WR);  // the client left: the broker answers EOF
                }
            }
            if (p[0].revents) {
                ssize_t n = ::read(sock_.get(), buf, sizeof buf);
                if (n > 0) {
                    from_broker_.append(buf, static_cast<size_t>(n));
                    if (!deliver()) return 1;  // nobody reads the answers
                } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
                    if (!stdin_open_) return 0;
                    if (!rejoin()) return 1;
                }
            }
        }
    }

  private:
    // Complete client lines to the broker, each noted once written (in flight, the handshake).
    // A line the broker's socket refuses (it has just died, its EOF not read yet) stays, with
    // those after it, to be sent through the next connection once rejoined: it never reached
    // a server, so it is neither lost nor answered with an error.
    bool forward() {
        if (ack_.count) taken(ack_.count.load());  // what is counted needs keeping no more
        size_t start = 0;
        for (size_t nl; (nl = from_client_.find('\n', start)) != std::string::npos;
             start = nl + 1) {
            std::string_view line(from_client_.data() + start, nl - start);
            if (!write_all(sock_.get(), std::string(line) + "\n", "socket")) {
                from_client_.erase(0, start);
                return false;
            }
            note_client(line);
            if (ack_.given) unacknowledged_.push_back(std::string(line));
        }
        from_client_.erase(0, start);
        return true;
    }

    void note_client(std::string_view line) {
        rpc::Message m = classifier_.classify(line);
        if (m.kind == rpc::Kind::request) {
            in_flight_.insert(std::string(m.id.raw));
            if (m.method == "initialize" && initialize_.empty()) initialize_ = std::string(line);
        } else if (m.kind == rpc::Kind::notification && m.method == "notifications/initialized") {
            initialized_ = true;
        }
    }

    // Complete broker lines to the client; the answer to our replayed initialize swallowed.
    bool deliver() {
        size_t start = 0;
        std::string out;
        for (size_t nl; (nl = from_broker_.find('\n', start)) != std::string::npos;
             start = nl + 1) {
            std::string_view line(from_broker_.data() + start, nl - start);
            if (line.rfind(kTaken, 0) == 0) {
                acknowledged(line);
                continue;
            }
            rpc::Message m = classifier_.classify(line);
            if (m.kind == rpc::Kind::response) {
                if (m.id.raw == kReplayId) continue;
                in_flight_.erase(std::string(m.id.raw));
                rejoins_ = 0;
            }
            out.append(line).append("\n");
        }
        from_broker_.erase(0, start);
        return out.empty() || static_cast<bool>(write_all(1, out, "stdout"));
    }

    // {"share":1,"taken":N}: the broker's first N lines of this connection are taken.
    void acknowledged(std::string_view line) {
        uint64_t n = 0;
        const std::string_view digits = line.substr(kTaken.size());
        std::from_chars(digits.data(), digits.data() + digits.size(), n);
        taken(n);
    }

    void taken(uint64_t n) {
        for (; taken_ < n && !unacknowledged_.empty(); ++taken_)
            unacknowledged_.pop_front();
    }

    // The lines the dying broker never took, out of flight, to go first to the next one.
    std::string untaken() {
        std::string lines;
        if (Faults::from_env().share_untaken_failed) return lines;
        for (const std::string& line : unacknowledged_) {
            rpc::Message m = classifier_.classify(line);
            if (m.kind == rpc::Kind::request && m.id.raw == kReplayId) continue;  // replayed anew
            if (m.kind == rpc::Kind::request) in_flight_.erase(std::string(m.id.raw));
            lines.append(line).append("\n");
        }
        return lines;
    }

    bool rejoin() {
        if (++rejoins_ > kMaxRejoins) {
            std::fputs("mcpwarden run --share: the shared tree or its broker ended the session\n",
                       stderr);
            return false;
        }
        if (ack_.count) taken(ack_.count.load());  // what the broker counted before it ended
        from_client_.insert(0, untaken());
        unacknowledged_.clear();
        taken_ = 0;
        std::string errors;
        for (const std::string& id : in_flight_) {
            rpc::append_error_answer(errors, id, rpc::kInternalErrorCode,
                                     "mcpwarden --share: the shared tree ended before answering "
                                     "(its broker or server ended); the session goes on with a "
                                     "new one");
            errors += '\n';
        }
        in_flight_.clear();
        if (!errors.empty() && !write_all(1, errors, "stdout")) return false;
        from_broker_.clear();
        std::string rest;
        auto sock = connect_or_start(where_, hello_, linger_, rest, ack_);
        if (!sock) {
            std::fprintf(stderr, "mcpwarden run --share: %s\n", sock.error().message.c_str());
            return false;
        }
        sock_ = std::move(*sock);
        from_broker_ = std::move(rest);
        std::string replay;
        if (!initialize_.empty()) {
            auto j = nlohmann::ordered_json::parse(initialize_, nullptr, false);
            if (j.is_object()) {
                j["id"] = nlohmann::ordered_json::parse(kReplayId);
                replay += j.dump() + "\n";
            }
        }
        if (initialized_)
            replay += R"({"jsonrpc":"2.0","method":"notifications/initialized"})"
                      "\n";
        if (!replay.empty() && !write_all(sock_.get(), replay, "socket")) return true;
        for (size_t at = 0, nl; ack_.given && (nl = replay.find('\n', at)) != std::string::npos;
             at = nl + 1)
            unacknowledged_.push_back(replay.substr(at, nl - at));
        (void)forward();  // what the dead connection refused; a failure: its EOF comes next
        return true;
    }

    static constexpr std::string_view kReplayId = R"("mcpwarden-share-rejoin")";
    static constexpr std::string_view kTaken = R"({"share":1,"taken":)";
    static constexpr int kMaxRejoins = 3;

    const Rendezvous& where_;
    const Hello& hello_;
    std::chrono::milliseconds linger_;
    Fd sock_;
    rpc::Classifier classifier_;
    std::string from_client_, from_broker_;
    std::set<std::string> in_flight_;
    Acknowledgement ack_;                     // how the broker says which lines it took
    std::deque<std::string> unacknowledged_;  // written, not yet taken, in order
    uint64_t taken_ = 0;                      // lines of this connection the broker took
    std::string initialize_;
    bool initialized_ = false;
    bool stdin_open_ = true;
    int rejoins_ = 0;
};

}  // namespace

namespace {

std::string identity_of(const RunOptions& o, const std::string& settings) {
    const shim::ServerIdentity server = shim::server_identity(
        o, Faults::from_env().share_session_vars_kept ? std::span<const std::string_view>()
                                                      : std::span(kPerSessionVars));
    nlohmann::json what{{"server", server.key},
                        {"files", server.files},
                        {"uid", static_cast<int64_t>(::geteuid())},
                        {"settings", settings}};
    return journal::to_hex(journal::sha256(what.dump()));
}

}  // namespace

// The identity's digests are made by OpenSSL, whose start (its default provider and the
// tables of its algorithms, ~140 kB of heap) would stay in this process for the whole
// session, which has no other use for it: a child makes them and exits. Should the child
// fail, they are made here.
std::string share_identity(const RunOptions& o, const std::string& settings) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) return identity_of(o, settings);
    Fd in(p[0]), out(p[1]);
    const pid_t pid = ::fork();
    if (pid < 0) return identity_of(o, settings);
    if (pid == 0) {
        const std::string id = identity_of(o, settings);
        ::_exit(write_all(out.get(), id, "pipe") ? 0 : 1);
    }
    out.reset();
    auto id = read_all(in.get(), "the identity's pipe");
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!id || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || id->size() != 64)
        return identity_of(o, settings);
    return *id;
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
    h.reads_taken_count = true;
    h.deny_unrecorded = o.on_journal_failure == OnJournalFailure::Deny;
    return h;
}

Result<int> run_share_client(const Hello& hello, std::chrono::milliseconds linger) {
    auto where = rendezvous();
    if (!where) return Error::msg("--share: " + where.error().message);
    std::string rest;
    Acknowledgement ack;
    auto sock = connect_or_start(*where, hello, linger, rest, ack);
    if (!sock) return Error::msg("--share: " + sock.error().message);
    // A write to a broker that has just died (or to a client gone from our stdout) is an
    // error to handle, not a signal to die of: the session rejoins through a new broker.
    ::signal(SIGPIPE, SIG_IGN);
    Link link(*where, hello, linger);
    return link.run(std::move(*sock), std::move(rest), std::move(ack));
}

}  // namespace warden::share
