// The user's broker: one epoll loop over its socket, its clients and its trees.
//
//   take_lock        one broker per user: a second one (two clients starting one at once)
//                    finds the lock held and exits 0; its client connects to the first
//   listen_socket    the socket in the 0700 directory, 0600 itself
//   serve            until it holds neither a client nor a tree:
//     accept         peer credentials first: another uid is refused and recorded
//     hello          the client's identity and how to start its tree
//     attach         at the client's first message: a tree of that identity whose
//                    handshake it can share (mux.hpp, accepts), else a new one
//     relay          client lines → multiplexer → the tree's stdin; the tree's stdout →
//                    multiplexer → the clients' sockets; the client's session on record
//     linger         a tree without clients for its --share-linger gets EOF on its stdin:
//                    its `run` tears it down as it does when its own client goes
//
// Everything is single-threaded and non-blocking: a slow client costs memory (its queue),
// never the others' turn. The journal's records of each client session are made through the
// shim's JournalSink, as a run makes them (the request on record before it is forwarded,
// the answer when it has been written to the client).
#include "share/broker.hpp"

#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "share/broker_impl.hpp"
#include "shim/server_log.hpp"

namespace warden::share {

nlohmann::json Hello::to_json() const {
    return {{"share", 1},
            {"identity", identity},
            {"exe", exe},
            {"argv", argv},
            {"env", env},
            {"cwd", cwd},
            {"name", name},
            {"journal", journal},
            {"linger_ms", linger_ms},
            {"client", client},
            {"taken_count", reads_taken_count},
            {"deny", deny_unrecorded}};
}

Result<Hello> Hello::from_json(const nlohmann::json& j) {
    if (!j.is_object() || j.value("share", 0) != 1)
        return Error::msg("not a share hello (first line of a `run --share` client)");
    Hello h;
    try {
        h.identity = j.at("identity").get<std::string>();
        h.exe = j.at("exe").get<std::string>();
        h.argv = j.at("argv").get<std::vector<std::string>>();
        h.env = j.at("env").get<std::vector<std::string>>();
        h.cwd = j.at("cwd").get<std::string>();
        h.name = j.value("name", "");
        h.journal = j.value("journal", "");
        h.linger_ms = j.value("linger_ms", int64_t{0});
        h.client = j.value("client", pid_t{0});
        h.reads_taken_count = j.value("taken_count", false);
        h.deny_unrecorded = j.value("deny", false);
    } catch (const nlohmann::json::exception& e) {
        return Error::msg(std::string("share hello: ") + e.what());
    }
    if (h.identity.empty() || h.exe.empty() || h.argv.empty() || h.argv.front() != "run")
        return Error::msg("share hello: identity, exe and a `run` command line are required");
    return h;
}

namespace brokering {

namespace {

// Each client session's journal is written by a thread of its own (shim/journal_sink.hpp),
// and glibc gives each new thread that allocates an arena of its own, up to eight per CPU:
// its first pages, its free lists and what it frees and keeps, about 100 kB that every
// further client would add to the broker. The threads allocate little and rarely at once
// (a record each, while the broker's loop waits for its next line), so they share the
// broker's one arena, and what a session's thread frees serves the next one's.
void one_malloc_arena() {
    (void)::mallopt(M_ARENA_MAX, 1);
}

// broker.log, the broker's stderr (client.cpp opens it for the broker it starts), bounded as a
// server's own log is: past kLogFileSize it is rotated to broker.log.1 … broker.log.<kLogFiles-1>
// (shim/server_log.hpp, rotate_log_file), and a new broker.log becomes stderr. A broker whose
// stderr is something else (systemd's journal, a terminal) leaves it alone. One broker per user
// holds the lock, so nobody else rotates it; a second broker only says, once, that it exits.
struct BrokerLog {
    std::string path;  // "": stderr is not broker.log
    bool rotate = true;
};
constexpr size_t kLogFileSize = size_t{1} << 20;
constexpr int kLogFiles = 4;

BrokerLog& broker_log() {
    static BrokerLog log;
    return log;
}

// Rotates broker.log when the line about to be written would take it past its bound.
void bound_log(size_t line) {
    const BrokerLog& log = broker_log();
    struct stat st {};
    if (log.path.empty() || !log.rotate || ::fstat(2, &st) != 0 ||
        static_cast<size_t>(st.st_size) + line <= kLogFileSize)
        return;
    if (!shim::rotate_log_file(log.path, kLogFiles, 2)) return;
    Fd fresh(
        ::open(log.path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (fresh) ::dup2(fresh.get(), 2);
}

}  // namespace

void say(const std::string& text) {
    char when[32];
    std::time_t now = std::time(nullptr);
    std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    const std::string line = fmt::format("{} mcpwarden broker[{}]: {}\n", when, ::getpid(), text);
    bound_log(line.size());
    std::fputs(line.c_str(), stderr);
}

std::string random_id() {
    unsigned char b[8];
    if (::getrandom(b, sizeof b, 0) != static_cast<ssize_t>(sizeof b)) {
        auto t = Clock::now().time_since_epoch().count();
        std::memcpy(b, &t, sizeof b);
    }
    std::string s;
    for (unsigned char c : b)
        s += fmt::format("{:02x}", c);
    return s;
}

// Reads what `fd` has into `buf`; false at EOF or on an error other than EAGAIN. A read that
// did not fill the chunk took what there was: the next read would only say EAGAIN, one
// system call more for every line of a round trip (the epoll is level-triggered: what comes
// meanwhile wakes the loop again, and so does an EOF).
bool read_into(int fd, std::string& buf) {
    char chunk[65536];
    for (int i = 0; i < 16; ++i) {
        ssize_t n = ::read(fd, chunk, sizeof chunk);
        if (n > 0) {
            buf.append(chunk, static_cast<size_t>(n));
            if (static_cast<size_t>(n) < sizeof chunk) return true;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    }
    return true;
}

// Writes what it can of `buf` to `fd`; false on an error other than EAGAIN (EPIPE: gone).
bool write_from(int fd, std::string& buf) {
    size_t done = 0;
    while (done < buf.size()) {
        ssize_t n = ::send(fd, buf.data() + done, buf.size() - done, MSG_NOSIGNAL);
        if (n < 0 && errno == ENOTSOCK) n = ::write(fd, buf.data() + done, buf.size() - done);
        if (n > 0) {
            done += static_cast<size_t>(n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        buf.erase(0, done);
        return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    }
    buf.clear();
    return true;
}

// The complete lines at the front of `buf`, taken out of it.
std::vector<std::string> take_lines(std::string& buf) {
    std::vector<std::string> lines;
    size_t start = 0;
    for (size_t nl; (nl = buf.find('\n', start)) != std::string::npos; start = nl + 1) {
        std::string_view l(buf.data() + start, nl - start);
        if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
        if (!l.empty()) lines.emplace_back(l);
    }
    buf.erase(0, start);
    return lines;
}

int Broker::run() {
    ::signal(SIGPIPE, SIG_IGN);
    one_malloc_arena();
    if (auto st = take_lock(); !st) {
        say(st.error().message);
        return 0;  // another broker serves this user
    }
    // Its log is ours to bound once we hold the lock, if stderr is that file.
    struct stat err {
    }, named{};
    if (::fstat(2, &err) == 0 && ::stat(o_.where.log.c_str(), &named) == 0 &&
        err.st_ino == named.st_ino && err.st_dev == named.st_dev)
        broker_log() = BrokerLog{o_.where.log, !faults_.share_log_unrotated};
    if (auto st = listen_socket(); !st) {
        say(st.error().message);
        return 1;
    }
    say(activated_ ? std::string("listening on the socket systemd passed (fd 3)")
                   : fmt::format("listening on {}", o_.where.socket));
    serve();
    if (!activated_) ::unlink(o_.where.socket.c_str());
    say("no client and no tree left: exiting");
    return 0;
}

Status Broker::take_lock() {
    lock_ = Fd(::open(o_.where.lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!lock_) return Error::msg(fmt::format("open {}: {}", o_.where.lock, std::strerror(errno)));
    if (::flock(lock_.get(), LOCK_EX | LOCK_NB) != 0)
        return Error::msg(fmt::format("another broker holds {}: this one exits", o_.where.lock));
    return {};
}

Status Broker::listen_socket() {
    auto ep = Epoll::create();
    if (!ep) return ep.error();
    ep_.emplace(std::move(*ep));
    // Started by the systemd user unit's socket (packaging/systemd/mcpwarden-broker.socket):
    // the listening socket is fd 3, and stays systemd's when we exit.
    const char* pid = std::getenv("LISTEN_PID");
    const char* fds = std::getenv("LISTEN_FDS");
    if (pid && fds && std::atoi(pid) == ::getpid() && std::atoi(fds) >= 1) {
        listen_ = Fd(3);
        activated_ = true;
        (void)set_nonblocking(listen_.get());
        (void)set_cloexec(listen_.get());
        return ep_->add(listen_.get(), EPOLLIN, tagged(kListen, 0));
    }
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (o_.where.socket.size() >= sizeof addr.sun_path)
        return Error::msg(fmt::format("{}: path too long for a Unix socket", o_.where.socket));
    std::memcpy(addr.sun_path, o_.where.socket.c_str(), o_.where.socket.size() + 1);
    ::unlink(o_.where.socket.c_str());  // a dead broker's: we hold the lock
    listen_ = Fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!listen_) return Error::msg(fmt::format("socket(AF_UNIX): {}", std::strerror(errno)));
    const mode_t old = ::umask(faults_.share_dir_open ? 0 : 0177);
    const int rc = ::bind(listen_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    ::umask(old);
    if (rc != 0)
        return Error::msg(fmt::format("bind {}: {}", o_.where.socket, std::strerror(errno)));
    if (::listen(listen_.get(), 64) != 0)
        return Error::msg(fmt::format("listen {}: {}", o_.where.socket, std::strerror(errno)));
    return ep_->add(listen_.get(), EPOLLIN, tagged(kListen, 0));
}

bool Broker::done() const {
    if (!conns_.empty() || !trees_.empty()) return false;
    return had_tree_ || Clock::now() - started_ >= o_.linger;
}

int Broker::timeout_ms() const {
    auto until = Clock::now() + std::chrono::seconds(60);
    if (!had_tree_) until = std::min(until, started_ + o_.linger);
    for (const auto& [id, t] : trees_)
        if (t.empty_since && !t.closing) until = std::min(until, *t.empty_since + t.linger);
    auto ms = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now()).count();
    return static_cast<int>(std::clamp<int64_t>(ms, 0, 60000));
}

// A tree that held no client for its linger gets EOF on its stdin: its run tears it down.
void Broker::expire() {
    for (auto& [id, t] : trees_) {
        if (t.closing || !t.empty_since || Clock::now() - *t.empty_since < t.linger) continue;
        say(fmt::format("tree {} (session {}): no client for {} ms: ending it", t.pid, t.session,
                        t.linger.count()));
        t.closing = true;
        if (t.in) (void)ep_->remove(t.in.get());
        t.in.reset();
    }
}

void Broker::serve() {
    epoll_event evs[64];
    while (!done()) {
        auto n = ep_->wait(evs, timeout_ms());
        if (!n) {
            say(n.error().message);
            return;
        }
        for (int i = 0; i < *n; ++i) {
            const uint64_t tag = evs[i].data.u64 >> 56, id = evs[i].data.u64 & ((1ull << 56) - 1);
            switch (tag) {
                case kListen:
                    accept_clients();
                    break;
                case kConn:
                    if (auto it = conns_.find(id); it != conns_.end()) {
                        if (evs[i].events & EPOLLOUT) flush_client(it->second);
                        if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR) && conns_.count(id))
                            read_client(conns_.at(id));
                    }
                    break;
                case kTreeOut:
                    if (auto it = trees_.find(id); it != trees_.end()) read_tree(it->second);
                    break;
                case kTreeIn:
                    if (auto it = trees_.find(id); it != trees_.end()) flush_tree(it->second);
                    break;
                case kTreeExit:
                    if (auto it = trees_.find(id); it != trees_.end()) tree_exited(it->second);
                    break;
            }
        }
        expire();
    }
}

}  // namespace brokering

int run_broker(const BrokerOptions& o) {
    brokering::Broker b(o);
    return b.run();
}

}  // namespace warden::share
