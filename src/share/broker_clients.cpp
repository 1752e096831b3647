// The broker's client connections (broker.cpp says what the broker is): accepted on peer
// credentials, the hello, each line read and taken, the client's session on record, its
// answers queued and bounded.
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "journal/journal.hpp"
#include "rpc/answer.hpp"
#include "share/broker_impl.hpp"
#include "sys/fd_passing.hpp"

namespace warden::share::brokering {

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
            if (!rec) return refuse_request(c, m, rec.error());
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
void Broker::refuse_request(Conn& c, const rpc::Message& m, const Error& why) {
    to_client(c, rpc::error_answer(m.id.raw, rpc::kRefusedCode,
                                   "mcpwarden: request refused: " + why.message));
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

}  // namespace warden::share::brokering
