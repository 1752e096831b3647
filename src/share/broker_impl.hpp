// The broker's parts (broker.cpp: its loop; broker_clients.cpp: the client connections;
// broker_trees.cpp: the trees), and what they share. Private to src/share.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fault/faults.hpp"
#include "rpc/message.hpp"
#include "share/broker.hpp"
#include "share/mux.hpp"
#include "share/taken.hpp"
#include "shim/journal_sink.hpp"
#include "sys/epoll.hpp"
#include "sys/fd.hpp"
#include "sys/pidfd.hpp"

namespace warden::share::brokering {

using Clock = std::chrono::steady_clock;

enum Tag : uint64_t { kListen = 1, kConn = 2, kTreeOut = 3, kTreeIn = 4, kTreeExit = 5 };
constexpr uint64_t tagged(Tag t, uint64_t id) {
    return (static_cast<uint64_t>(t) << 56) | id;
}
// The most a client's or a tree's unread line may grow to before its connection is dropped.
constexpr size_t kMaxLine = size_t{256} << 20;

// A line of broker.log (bounded: broker.cpp).
void say(const std::string& text);
std::string random_id();
// Reads what `fd` has into `buf`; false at EOF or on an error other than EAGAIN.
bool read_into(int fd, std::string& buf);
// Writes what it can of `buf` to `fd`; false on an error other than EAGAIN (EPIPE: gone).
bool write_from(int fd, std::string& buf);
// The complete lines at the front of `buf`, taken out of it.
std::vector<std::string> take_lines(std::string& buf);

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
    void refuse_request(Conn& c, const rpc::Message& m, const Error& why);
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

}  // namespace warden::share::brokering
