// The broker's trees (broker.cpp says what the broker is): each a `run` of the server,
// spawned for the first client of its identity, its output through the multiplexer to the
// clients, its exit, its linger.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "journal/journal.hpp"
#include "proc/process.hpp"
#include "share/broker_impl.hpp"

namespace warden::share::brokering {

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

}  // namespace warden::share::brokering
