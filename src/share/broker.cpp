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
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "fault/faults.hpp"
#include "journal/journal.hpp"
#include "proc/process.hpp"
#include "rpc/message.hpp"
#include "share/mux.hpp"
#include "share/taken.hpp"
#include "shim/journal_sink.hpp"
#include "shim/server_log.hpp"
#include "sys/epoll.hpp"
#include "sys/fd_passing.hpp"
#include "sys/pidfd.hpp"

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

namespace {

using Clock = std::chrono::steady_clock;

// Each client session's journal is written by a thread of its own (shim/journal_sink.hpp),
// and glibc gives each new thread that allocates an arena of its own, up to eight per CPU:
// its first pages, its free lists and what it frees and keeps, about 100 kB that every
// further client would add to the broker. The threads allocate little and rarely at once
// (a record each, while the broker's loop waits for its next line), so they share the
// broker's one arena, and what a session's thread frees serves the next one's.
void one_malloc_arena() {
    (void)::mallopt(M_ARENA_MAX, 1);
}

enum Tag : uint64_t { kListen = 1, kConn = 2, kTreeOut = 3, kTreeIn = 4, kTreeExit = 5 };
constexpr uint64_t tagged(Tag t, uint64_t id) {
    return (static_cast<uint64_t>(t) << 56) | id;
}
// The most a client's or a tree's unread line may grow to before its connection is dropped.
constexpr size_t kMaxLine = size_t{256} << 20;

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

struct Conn {
    uint64_t id = 0;
    Fd fd;
    Peer peer;
    std::string in, out;
    uint64_t taken = 0;      // its lines after the hello, acknowledged (read_client)
    TakenCount taken_count;  // where `taken` is told, if the client reads it there
    bool writing = false;    // EPOLLOUT registered
    std::optional<Hello> hello;
    uint64_t tree = 0;
    // Its session on record (empty: --no-journal); session.start given once attached.
    std::string session;
    std::unique_ptr<shim::JournalSink> sink;
    bool begun = false;                                    // session.start given (attached)
    std::map<std::string, shim::Outstanding> outstanding;  // its id → its request
};

struct Tree {
    uint64_t id = 0;
    std::string identity, session, name;
    pid_t pid = 0;
    Pidfd child;
    Fd in, out;
    std::string to_server, from_server;
    bool writing = false;
    std::unique_ptr<Multiplexer> mux;
    std::set<uint64_t> clients;
    std::chrono::milliseconds linger{0};
    std::optional<Clock::time_point> empty_since;
    bool closing = false;  // its stdin closed: the teardown is under way
    bool ended = false;    // its run exited: being removed (tree_exited)
};

class Broker {
  public:
    explicit Broker(const BrokerOptions& o) : o_(o), faults_(Faults::from_env()) {}
    int run();

  private:
    Status take_lock();
    Status listen_socket();
    void serve();
    int timeout_ms() const;
    void expire();
    bool done() const;

    void accept_clients();
    void refuse(Fd fd, const Peer& peer);
    void read_client(Conn& c);
    void hello(Conn& c, const std::string& line);
    void client_line(Conn& c, const std::string& line);
    void refuse(Conn& c, const rpc::Message& m, const Error& why);
    Tree* attach(Conn& c, const std::string& line);
    Tree* start_tree(const Hello& h, const std::string& why);
    void begin_record(Conn& c, Tree& t);
    void client_left(Conn& c, const std::string& cause);
    void end_record(Conn& c, const std::string& reason);

    void read_tree(Tree& t);
    void tree_exited(Tree& t);
    void deliver(Tree& t, MuxOutput& out);
    bool to_client(Conn& c, std::string line);
    bool send_with_fd(Conn& c, const std::string& line, int fd);
    void drop_slow(Conn& c, size_t queued);
    void flush_client(Conn& c);
    void flush_tree(Tree& t);
    void note(const Note& n, Tree& t);

    BrokerOptions o_;
    Faults faults_;
    Fd lock_, listen_;
    std::optional<Epoll> ep_;
    uint64_t next_id_ = 0;
    std::map<uint64_t, Conn> conns_;
    std::map<uint64_t, Tree> trees_;
    bool had_tree_ = false;
    bool activated_ = false;  // the socket is systemd's
    Clock::time_point started_ = Clock::now();
    rpc::Classifier classifier_;
};

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

// ---- Clients ------------------------------------------------------------------------------

void Broker::accept_clients() {
    for (int i = 0; i < 64; ++i) {
        Fd fd(::accept4(listen_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
        if (!fd) return;
        auto peer = peer_of(fd.get());
        if (!peer || (peer->uid != ::geteuid() && !faults_.share_peer_unchecked)) {
            refuse(std::move(fd), peer ? *peer : Peer{static_cast<uid_t>(-1), 0});
            continue;
        }
        const uint64_t id = ++next_id_;
        Conn& c = conns_[id];
        c.id = id;
        c.fd = std::move(fd);
        c.peer = *peer;
        (void)ep_->add(c.fd.get(), EPOLLIN, tagged(kConn, id));
    }
}

// Another user at the socket (the directory should have kept them out): recorded in the
// journal of the broker's own user, then told why and refused.
void Broker::refuse(Fd fd, const Peer& peer) {
    const std::string why = fmt::format(
        "uid {} (pid {}) is not the broker's user (uid {}): sharing never crosses users", peer.uid,
        peer.pid, ::geteuid());
    say("refused: " + why);
    journal::Options jo;
    if (auto j = journal::Journal::open(jo))
        (void)(*j)->append(journal::Event{"share.refused",
                                          "",
                                          0,
                                          {{"peer_uid", static_cast<int64_t>(peer.uid)},
                                           {"peer_pid", static_cast<int64_t>(peer.pid)},
                                           {"broker_pid", static_cast<int64_t>(::getpid())},
                                           {"why", why}}});
    // Told after it is on record: what the refused peer reads is already in the journal.
    std::string line = nlohmann::json{{"share", 1}, {"ok", false}, {"error", why}}.dump() + "\n";
    (void)write_from(fd.get(), line);
}

// The client's lines after its hello are acknowledged before any of them goes on: the `run
// --share` at the other end then knows which of its lines a broker that dies took (a request
// taken is answered with an error: it may have reached the server) and which it never read
// (sent again to the next broker: no server had it). See client.cpp, Link.
void Broker::read_client(Conn& c) {
    const uint64_t id = c.id;
    const bool open = read_into(c.fd.get(), c.in);
    std::vector<std::string> lines = take_lines(c.in);
    size_t i = 0;
    if (!c.hello && !lines.empty()) {
        hello(c, lines[i++]);
        if (!conns_.count(id)) return;  // refused: `c` is no more
    }
    if (i < lines.size()) {
        c.taken += lines.size() - i;
        if (c.taken_count)
            c.taken_count.store(c.taken);
        else if (!to_client(c, fmt::format(R"({{"share":1,"taken":{}}})", c.taken)))
            return;
    }
    for (; i < lines.size(); ++i) {
        client_line(c, lines[i]);
        if (!conns_.count(id)) return;  // its tree is gone: `c` is no more
    }
    if (c.in.size() > kMaxLine) return client_left(c, "line_too_long");
    if (!open) client_left(c, "eof");
}

void Broker::hello(Conn& c, const std::string& line) {
    auto h = Hello::from_json(nlohmann::json::parse(line, nullptr, false));
    if (!h) {
        to_client(c,
                  nlohmann::json{{"share", 1}, {"ok", false}, {"error", h.error().message}}.dump());
        say("client pid " + std::to_string(c.peer.pid) + ": " + h.error().message);
        return client_left(c, "bad_hello");
    }
    c.hello = std::move(*h);
    // The journal opens on a thread of its own while the client writes its first message:
    // a session joining a running tree is recorded without waiting for the whole opening.
    if (!c.hello->journal.empty()) {
        c.session = random_id();
        const bool deny = c.hello->deny_unrecorded && !faults_.share_deny_ignored;
        c.sink = shim::JournalSink::opening(c.hello->journal, JournalSync::Periodic, c.session,
                                            deny ? OnJournalFailure::Deny : OnJournalFailure::Warn,
                                            RecordArgs::Preview, 2, std::nullopt);
    }
    // "acknowledges": this broker says which lines it took (read_client); a `run --share`
    // that meets a broker of an older build, which does not, counts every line it sent as
    // taken. "taken_count": it says so on the page passed with this answer (taken.hpp), to a
    // client that reads it there; else by a line on the socket for each batch it takes.
    nlohmann::json answer{
        {"share", 1}, {"ok", true}, {"broker", ::getpid()}, {"acknowledges", true}};
    if (c.hello->reads_taken_count)
        if (auto count = TakenCount::create()) {
            answer["taken_count"] = true;
            if (send_with_fd(c, answer.dump() + "\n", count->fd())) {
                c.taken_count = std::move(*count);
                return;
            }
            answer.erase("taken_count");
        }
    to_client(c, answer.dump());
}

// `line` as the first bytes of the connection, with `fd` passed along (SCM_RIGHTS); false
// when not one byte of it went (then nothing was passed either). What the socket does not
// take at once is queued as any answer is.
bool Broker::send_with_fd(Conn& c, const std::string& line, int fd) {
    const int fds[] = {fd};
    auto sent = send_passing(c.fd.get(), line, fds, MSG_DONTWAIT);
    if (!sent || *sent == 0) return false;
    c.out = line.substr(*sent);
    flush_client(c);
    return true;
}

void Broker::client_line(Conn& c, const std::string& line) {
    Tree* t = c.tree ? &trees_.at(c.tree) : attach(c, line);
    if (!t) return client_left(c, "no_tree");
    if (c.sink) {
        rpc::Message m = classifier_.classify(line);
        if (m.kind == rpc::Kind::request) {
            // Under deny, a request the journal cannot take is answered here (the tree's run
            // records none of its clients' calls: they are on their sessions' records).
            auto rec = c.sink->on_request(m, line);
            if (!rec) return refuse(c, m, rec.error());
            shim::Outstanding o;
            o.type = m.id.type;
            o.raw = std::string(m.id.raw);
            o.method = std::string(m.method);
            o.tool = std::string(m.tool);
            o.sent = Clock::now();
            o.record = rec ? *rec : 0;
            c.outstanding[o.raw] = std::move(o);
        }
    }
    MuxOutput out;
    t->mux->from_client(c.id, line, out);
    deliver(*t, out);
}

// The refusal is the answer, as `run`'s own under deny (shim/relay_answers.cpp).
void Broker::refuse(Conn& c, const rpc::Message& m, const Error& why) {
    to_client(
        c,
        fmt::format(R"({{"jsonrpc":"2.0","id":{},"error":{{"code":-32000,"message":{}}}}})",
                    m.id.raw, nlohmann::json("mcpwarden: request refused: " + why.message).dump()));
}

// The tree for a client's first message: one of its identity that takes it (mux.hpp,
// refusal: the era its server took, the version of its handshake), one that took the
// message's era before one that took none yet, else a new one.
Tree* Broker::attach(Conn& c, const std::string& line) {
    rpc::Message m = classifier_.classify(line);
    if (m.kind != rpc::Kind::request) m.era = rpc::Era::none;
    std::string why = "no tree of this identity runs";
    bool refused = false;  // a tree of its identity runs, and is not for it
    Tree* chosen = nullptr;
    for (auto& [id, t] : trees_) {
        if (t.identity != c.hello->identity || t.closing) continue;
        if (const std::string no = t.mux->refusal(m); !no.empty()) {
            why = fmt::format("the tree of session {} is not for it: {}", t.session, no);
            refused = true;
            continue;
        }
        const auto era_of = [&m](const Tree* x) { return x->mux->era() == m.era; };
        if (!chosen || (m.era != rpc::Era::none && era_of(&t) && !era_of(chosen))) chosen = &t;
    }
    const bool own = !chosen && refused;
    if (!chosen) chosen = start_tree(*c.hello, why);
    if (!chosen) return nullptr;
    c.tree = chosen->id;
    chosen->clients.insert(c.id);
    chosen->empty_since.reset();
    chosen->linger = std::max(chosen->linger, std::chrono::milliseconds(c.hello->linger_ms));
    chosen->mux->join(c.id);
    begin_record(c, *chosen);
    // Why this session did not join the tree of its identity that runs: on its record.
    if (own && c.sink)
        c.sink->append(journal::Event{
            "share.own_tree", c.session, 0, {{"why", why}, {"shared_tree", chosen->session}}});
    say(fmt::format("client pid {} joined tree {} (session {}), {} client(s)", c.peer.pid,
                    chosen->pid, chosen->session, chosen->clients.size()));
    return chosen;
}

void Broker::begin_record(Conn& c, Tree& t) {
    const Hello& h = *c.hello;
    if (!c.sink) return;
    c.begun = true;
    journal::SessionStart s;
    s.session = c.session;
    s.server_name = h.name;
    if (h.client > 0)
        if (auto id = read_identity(h.client)) s.client = *id;
    auto dashes = std::find(h.argv.begin(), h.argv.end(), "--");
    if (dashes != h.argv.end()) s.server_argv.assign(dashes + 1, h.argv.end());
    s.cwd = h.cwd;
    for (const std::string& kv : h.env)
        s.env_names.push_back(kv.substr(0, kv.find('=')));
    s.layers = {"shared"};
    s.extra = {{"shared_tree", t.session},
               {"share_broker_pid", static_cast<int64_t>(::getpid())},
               {"share_client_pid", static_cast<int64_t>(c.peer.pid)},
               {"share_tree_pid", static_cast<int64_t>(t.pid)}};
    c.sink->begin(std::move(s), -1);
}

void Broker::client_left(Conn& c, const std::string& cause) {
    if (c.tree) {
        Tree& t = trees_.at(c.tree);
        MuxOutput out;
        t.mux->leave(c.id, out);
        t.clients.erase(c.id);
        if (t.clients.empty()) t.empty_since = Clock::now();
        for (const Note& n : out.notes)
            note(n, t);
        out.notes.clear();
        deliver(t, out);
        say(fmt::format("client pid {} left tree {} ({}), {} client(s) left", c.peer.pid, t.pid,
                        cause, t.clients.size()));
    }
    end_record(c, cause == "eof" ? "client_lost" : cause);
    flush_client(c);
    (void)ep_->remove(c.fd.get());
    conns_.erase(c.id);
}

void Broker::end_record(Conn& c, const std::string& reason) {
    if (!c.sink) return;
    if (!c.begun) {
        c.sink.reset();  // never attached: its opening is abandoned, nothing on record
        return;
    }
    std::vector<shim::Outstanding> left;
    for (auto& [id, o] : c.outstanding)
        left.push_back(o);
    c.sink->on_client_lost(shim::ClientLoss::stdin_eof, left);
    journal::SessionEnd e;
    e.session = c.session;
    e.reason = reason;
    c.sink->append(journal::session_end(std::move(e)));
    c.sink->flush(std::chrono::milliseconds(2000));
    c.sink->close();
    c.sink.reset();
}

// A line for a client: queued, and written as far as its socket takes it. A client that does
// not read its answers while its tree keeps answering it would make the broker hold them all:
// once its queue would pass the bound (one line of any size is always taken, so a single large
// answer still reaches a client that reads), the client is dropped, on record, and the other
// clients of the tree never notice. `c` is no more when this returns false.
bool Broker::to_client(Conn& c, std::string line) {
    line += '\n';
    if (!c.out.empty() && c.out.size() + line.size() > o_.client_queue &&
        !faults_.share_client_queue_unbounded) {
        drop_slow(c, c.out.size() + line.size());
        return false;
    }
    if (c.out.empty()) {
        c.out = std::move(line);
    } else {
        c.out += line;
    }
    flush_client(c);
    return true;
}

// The client's answers wait unread beyond the bound: its session ends (`client_too_slow`)
// with its requests in flight abandoned as any leaving client's are, and its connection is
// closed. Its `run --share` reads EOF once it reads again, answers what it had in flight
// with an error and joins anew (client.cpp), as after a broker's death.
void Broker::drop_slow(Conn& c, size_t queued) {
    const std::string why = fmt::format(
        "client pid {} has not read {} bytes of answers (the bound is {}): dropped so that the "
        "broker does not hold them",
        c.peer.pid, queued, o_.client_queue);
    say(why);
    if (c.sink && c.begun) {
        nlohmann::json data{{"queued_bytes", static_cast<int64_t>(queued)},
                            {"bound_bytes", static_cast<int64_t>(o_.client_queue)},
                            {"why", why}};
        if (c.tree) data["shared_tree"] = trees_.at(c.tree).session;
        c.sink->append(journal::Event{"share.client_too_slow", c.session, 0, std::move(data)});
    }
    c.out.clear();
    client_left(c, "client_too_slow");
}

void Broker::flush_client(Conn& c) {
    if (!c.fd) return;
    const bool ok = write_from(c.fd.get(), c.out);
    const bool want = ok && !c.out.empty();
    if (want != c.writing) {
        c.writing = want;
        (void)ep_->modify(c.fd.get(), EPOLLIN | (want ? uint32_t{EPOLLOUT} : 0u),
                          tagged(kConn, c.id));
    }
    if (!ok) c.out.clear();  // gone: its EOF or error comes through read_client
}

// ---- Trees --------------------------------------------------------------------------------

Tree* Broker::start_tree(const Hello& h, const std::string& why) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0) return nullptr;
    if (::pipe2(out, O_CLOEXEC) != 0) {
        ::close(in[0]);
        ::close(in[1]);
        return nullptr;
    }
    Fd child_in(in[0]), our_in(in[1]), our_out(out[0]), child_out(out[1]);
    const std::string session = random_id();
    // Prepared before the fork: the child only calls what is async-signal-safe.
    std::vector<std::string> env;
    for (const std::string& kv : h.env)
        if (kv.rfind(std::string(kTreeVar) + "=", 0) != 0) env.push_back(kv);
    env.push_back(std::string(kTreeVar) + "=" + session);
    std::vector<char*> envp, argv;
    for (std::string& kv : env)
        envp.push_back(kv.data());
    envp.push_back(nullptr);
    std::vector<std::string> args{h.exe};
    args.insert(args.end(), h.argv.begin(), h.argv.end());
    for (std::string& a : args)
        argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t broker = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) return nullptr;
    if (pid == 0) {
        // The tree ends with the broker through what its run watches of any client: EOF on
        // its stdin and a pidfd on its parent, both of which come once the whole broker is
        // gone, its sockets closed. Not PDEATHSIG: that follows the forking thread, and a
        // SIGKILLed broker whose other threads (its journal's) were still exiting told its
        // trees first; a client's request written meanwhile was taken by the dying broker's
        // socket, never read, and answered with an error as if in flight at a server, where
        // the client would have sent it on to the next broker.
        if (::getppid() != broker) ::_exit(125);  // the broker died before we ran
        ::signal(SIGPIPE, SIG_DFL);
        ::dup2(child_in.get(), 0);
        ::dup2(child_out.get(), 1);
        if (::chdir(h.cwd.c_str()) != 0) ::_exit(125);
        ::execve(h.exe.c_str(), argv.data(), envp.data());
        ::_exit(127);
    }
    auto pidfd = Pidfd::open(pid);
    const uint64_t id = ++next_id_;
    Tree& t = trees_[id];
    t.id = id;
    t.identity = h.identity;
    t.session = session;
    t.name = h.name;
    t.pid = pid;
    if (pidfd) t.child = std::move(*pidfd);
    t.in = std::move(our_in);
    t.out = std::move(our_out);
    (void)set_nonblocking(t.in.get());
    (void)set_nonblocking(t.out.get());
    t.mux = std::make_unique<Multiplexer>(
        /*map_ids=*/true, /*check_responses=*/true, /*key_eras=*/!faults_.share_eras_mixed);
    t.linger = std::chrono::milliseconds(h.linger_ms);
    (void)ep_->add(t.out.get(), EPOLLIN, tagged(kTreeOut, id));
    if (t.child) (void)ep_->add(t.child.get(), EPOLLIN, tagged(kTreeExit, id));
    had_tree_ = true;
    say(fmt::format("started tree {} (session {}) for {}: {}", pid, session, h.name, why));
    return &t;
}

void Broker::read_tree(Tree& t) {
    const bool open = read_into(t.out.get(), t.from_server);
    MuxOutput out;
    for (const std::string& line : take_lines(t.from_server))
        t.mux->from_server(line, out);
    for (const Note& n : out.notes)
        note(n, t);
    out.notes.clear();
    deliver(t, out);
    if (!open || t.from_server.size() > kMaxLine) {
        (void)ep_->remove(t.out.get());
        t.out.reset();
        if (!t.child && !t.ended) tree_exited(t);  // no pidfd: its EOF is its end
    }
}

void Broker::tree_exited(Tree& t) {
    t.ended = true;
    if (t.out) read_tree(t);
    int status = 0;
    ::waitpid(t.pid, &status, 0);
    say(fmt::format("tree {} (session {}) ended: {}", t.pid, t.session,
                    WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                                      : "signal " + std::to_string(WTERMSIG(status))));
    for (uint64_t cid : std::set<uint64_t>(t.clients)) {
        auto it = conns_.find(cid);
        if (it == conns_.end()) continue;
        Conn& c = it->second;
        end_record(c, "shared_tree_ended");
        flush_client(c);
        (void)ep_->remove(c.fd.get());
        conns_.erase(it);
    }
    if (t.child) (void)ep_->remove(t.child.get());
    if (t.in) (void)ep_->remove(t.in.get());
    trees_.erase(t.id);
}

void Broker::deliver(Tree& t, MuxOutput& out) {
    bool to_server = false;
    for (Delivery& d : out.lines) {
        if (d.client == 0) {
            if (!t.in) continue;  // closing: the server gets nothing more
            t.to_server += d.line;
            t.to_server += '\n';
            to_server = true;
            continue;
        }
        auto it = conns_.find(d.client);
        if (it == conns_.end()) continue;
        Conn& c = it->second;
        if (c.sink) {
            rpc::Message m = classifier_.classify(d.line);
            if (m.kind == rpc::Kind::response) {
                auto o = c.outstanding.find(std::string(m.id.raw));
                if (o != c.outstanding.end()) {
                    shim::Answer a;
                    a.outcome = m.outcome;
                    a.bytes = d.line.size();
                    c.sink->on_response(a, &o->second);
                    c.outstanding.erase(o);
                }
            }
        }
        to_client(c, std::move(d.line));
    }
    for (const Note& n : out.notes)
        note(n, t);
    if (to_server) flush_tree(t);
}

void Broker::flush_tree(Tree& t) {
    if (!t.in) return;
    if (!write_from(t.in.get(), t.to_server)) {
        t.to_server.clear();  // the tree's run is gone: its exit comes through the pidfd
        return;
    }
    const bool want = !t.to_server.empty();
    if (want == t.writing) return;
    t.writing = want;
    if (want)
        (void)ep_->add(t.in.get(), EPOLLOUT, tagged(kTreeIn, t.id));
    else
        (void)ep_->remove(t.in.get());
}

// A guard that acted: on the record of the client it concerns, else in the broker's log and,
// session-less, in the journal of the tree's clients.
void Broker::note(const Note& n, Tree& t) {
    nlohmann::json data = n.data;
    data["shared_tree"] = t.session;
    say(fmt::format("tree {}: {} {}", t.pid, n.kind, data.dump()));
    auto it = conns_.find(n.client);
    if (it != conns_.end() && it->second.sink) {
        it->second.sink->append(journal::Event{n.kind, it->second.session, 0, std::move(data)});
        return;
    }
    for (uint64_t cid : t.clients) {
        auto c = conns_.find(cid);
        if (c == conns_.end() || !c->second.sink) continue;
        c->second.sink->append(journal::Event{n.kind, "", 0, std::move(data)});
        return;
    }
}

}  // namespace

int run_broker(const BrokerOptions& o) {
    Broker b(o);
    return b.run();
}

}  // namespace warden::share
