// The fault matrix: `mcpwarden run` between a client and the fixture server, and one part of
// the session SIGKILLed at a chosen moment. Each cell checks what a user would notice
// afterwards, from outside:
//
//   - nothing of the tree is left: no live process carries the cell's test tag (TreeGuard's
//     oracle: setsid and double-fork escapees included) within kEndBound;
//   - the port the fixture's helper listened on binds again;
//   - the journal holds: `mcpwarden audit verify` exits 0 on the cell's own journal, and the
//     rows are there in the right order (check_rows below): session.start first; each
//     request resolved exactly once, after it (response or abandoned while the relay lives;
//     response or unresolved, by `journal reconcile`, once it died); every resolution the
//     relay wrote before the first signal; for each process a snapshot before any signal to
//     it and its exit after them; session.end last — by the relay, or, when the relay was
//     SIGKILLed and the keeper lived, by the keeper (`recorded_by: keeper`), after which only
//     the `activity.unresolved` rows of reconcile come; and `journal sessions` shows the
//     session ended (orphaned when both died) with nothing in flight.
//
// Dimensions (docs/RELIABILITY.md has the table): the client, the relay, the keeper, or both
// of them SIGKILLed at four points (before initialize was answered, idle, a slow call in
// flight, part-way through reading a 16 MiB answer); each × the fixture's six shapes and an
// `sh -c` wrapper × `--on-eof exit|ignore`. When both are killed nobody is left to tear
// down: the server dies by PDEATHSIG and the user runs `mcpwarden reap --session ID`, which
// is then part of the cell. "group" is how clients and process managers stop a child tree:
// kill(-pgid, SIGKILL) of the client's process group, which holds the client and the relay
// but not the keeper (its own group): the keeper alone tears down, and the tree is gone and
// the port free within the EOF window + the term grace (kGroupBound adds slack for a loaded
// machine).
//
// CI runs a fixed sample (sample_cells: every point, kill and shape at least once);
// WARDEN_FAULT_FULL=N runs every cell N times and prints a table of counts
// (scripts/fault-matrix.sh). The client is a shell, `sh -c '"$@"; true'`, so that it can be
// SIGKILLed while this test keeps the pipes: the relay learns of it through the pidfd on its
// parent, as with a real client that dies with its pipes shared.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/cli_run.hpp"
#include "common/testing.hpp"
#include "journal/query.hpp"
#include "sys/pidfd.hpp"

namespace warden::testing {
namespace {

using Json = nlohmann::json;

constexpr Millis kStartBound = 10s;  // the fixture's tree is built and its port known
constexpr Millis kEndBound = 10s;    // after the kill: every tagged process gone
constexpr Millis kCliBound = 30s;    // one `mcpwarden audit|journal|reap` command
constexpr size_t kBigAnswer = size_t{16} << 20;
constexpr size_t kReadOfBig = size_t{1} << 20;           // what the client reads of it before dying
constexpr Millis kEofGrace = 200ms, kTermGrace = 300ms;  // the session's windows
// A group kill leaves the keeper to tear down alone: the tree is gone and its port free by
// then (EOF window, SIGTERM, grace, SIGKILL), plus slack for a loaded machine under ASan.
constexpr Millis kGroupBound = kEofGrace + kTermGrace + 2s;

enum class Kill { client, relay, keeper, both, group };
enum class Point { before_init, idle, in_flight, mid_response };

const char* to_string(Kill k) {
    static constexpr const char* kNames[] = {"client", "relay", "keeper", "both", "group"};
    return kNames[static_cast<int>(k)];
}

const char* to_string(Point p) {
    static constexpr const char* kNames[] = {"before_init", "idle", "in_flight", "mid_response"};
    return kNames[static_cast<int>(p)];
}

// The fixture's shapes, plus "sh-wrapper": the fixture (normal) under `sh -c '…; true'`, the
// wrapper that keeps its child's pipes and does not pass SIGTERM on.
const std::vector<std::string> kShapes = {"normal", "setsid",     "doublefork", "ignore-term",
                                          "deep",   "fork-storm", "sh-wrapper"};

struct Cell {
    Kill kill = Kill::client;
    Point point = Point::in_flight;
    std::string shape = "normal";
    bool ignore_eof = false;  // the fixture's --on-eof ignore
    std::string fault{};      // MCPWARDEN_FAULT for the session (negative controls)
};

std::string name_of(const Cell& c) {
    std::string n = fmt::format("{}_{}_{}_{}", to_string(c.kill), to_string(c.point), c.shape,
                                c.ignore_eof ? "ignore" : "exit");
    std::replace(n.begin(), n.end(), '-', '_');
    return n;
}

// A bug in src/ that makes cells fail today: what it is, and the failure messages it
// causes. A cell with a known bug runs DISABLED_ in the sample; in the full run a failure
// counts as known only if every message is one of its symptoms.
struct KnownBug {
    std::string what;
    std::vector<std::string> symptoms;  // substrings; "journal rows:" (the dump) always fits
};

// None today; fixed ones are listed in docs/RELIABILITY.md ("Bugs found").
std::optional<KnownBug> known_bug(const Cell&) {
    return std::nullopt;
}

bool explained_by(const KnownBug& bug, const std::vector<std::string>& failures) {
    return std::all_of(failures.begin(), failures.end(), [&](const std::string& f) {
        return f.starts_with("journal rows:") ||
               std::any_of(bug.symptoms.begin(), bug.symptoms.end(),
                           [&](const std::string& s) { return f.find(s) != std::string::npos; });
    });
}

// Every cell: each of the four kills at each of the four points.
std::vector<Cell> all_cells() {
    std::vector<Cell> v;
    for (Kill k : {Kill::client, Kill::relay, Kill::keeper, Kill::both, Kill::group})
        for (Point p : {Point::before_init, Point::idle, Point::in_flight, Point::mid_response}) {
            for (const std::string& shape : kShapes)
                for (bool ignore : {false, true})
                    v.push_back({k, p, shape, ignore});
        }
    return v;
}

// What CI runs: each point, each kill, each shape and both --on-eof modes at least once.
// `with_known_bug`: the sample's cells that a known bug makes fail (instantiated disabled),
// else the others.
std::vector<Cell> sample_cells(bool with_known_bug) {
    const std::vector<Cell> sample = {
        {Kill::client, Point::before_init, "normal", false},
        {Kill::client, Point::before_init, "doublefork", true},
        {Kill::client, Point::idle, "setsid", true},
        {Kill::client, Point::idle, "sh-wrapper", false},
        {Kill::client, Point::in_flight, "ignore-term", false},
        {Kill::client, Point::in_flight, "deep", true},
        {Kill::client, Point::in_flight, "fork-storm", false},
        {Kill::client, Point::mid_response, "normal", true},
        {Kill::client, Point::mid_response, "setsid", false},
        {Kill::relay, Point::before_init, "normal", true},
        {Kill::relay, Point::in_flight, "doublefork", false},
        {Kill::relay, Point::mid_response, "setsid", false},
        {Kill::keeper, Point::before_init, "sh-wrapper", true},
        {Kill::keeper, Point::mid_response, "doublefork", true},
        {Kill::both, Point::before_init, "deep", false},
        {Kill::both, Point::mid_response, "normal", true},
        {Kill::relay, Point::idle, "fork-storm", true},
        {Kill::keeper, Point::idle, "deep", false},
        {Kill::keeper, Point::in_flight, "setsid", true},
        {Kill::both, Point::in_flight, "sh-wrapper", true},
        {Kill::both, Point::idle, "ignore-term", true},
        {Kill::group, Point::before_init, "setsid", false},
        {Kill::group, Point::idle, "doublefork", true},
        {Kill::group, Point::in_flight, "deep", false},
        {Kill::group, Point::mid_response, "sh-wrapper", false},
    };
    std::vector<Cell> v;
    for (const Cell& c : sample)
        if (known_bug(c).has_value() == with_known_bug) v.push_back(c);
    return v;
}

// ---- Processes -------------------------------------------------------------------------

struct Proc {
    pid_t pid = 0;
    uint64_t starttime = 0;
};

std::optional<Proc> child_with_comm(pid_t parent, std::string_view prefix) {
    for (pid_t c : children_of(parent))
        if (auto st = read_stat(c); st && st->comm.starts_with(prefix))
            return Proc{c, st->starttime};
    return std::nullopt;
}

// Through a pidfd, after checking that the pid still names the process we found: never a
// recycled pid.
bool sigkill(const Proc& p) {
    auto fd = Pidfd::open(p.pid);
    return fd && is_same_live_process(p.pid, p.starttime) && fd->send_signal(SIGKILL).ok();
}

std::string describe(const std::vector<pid_t>& pids) {
    std::string out;
    for (pid_t p : pids) {
        auto st = read_stat(p);
        out += fmt::format("{}{} ({})", out.empty() ? "" : ", ", p, st ? st->comm : "?");
    }
    return out;
}

// ---- The CLI ----------------------------------------------------------------------------

// The CLI runs through run_cli (common/cli_run.hpp), in a directory of its own.
CliRun run_cli(std::vector<std::string> args) {
    TempDir home;
    return warden::testing::run_cli(home, std::move(args), kCliBound);
}

// ---- The journal oracle -----------------------------------------------------------------

struct Row {
    int64_t seq = 0;
    std::string kind;
    Json data;
};

// What the cell leads us to expect of its session's rows.
struct Expect {
    bool relay_survives = true;  // else: the keeper ends the session, or nobody does
    // The relay died and its keeper lived: the keeper records session.end, with the relay's
    // reason if the client's loss is on record (client_lost), else relay_died; reconcile
    // then resolves the calls it left unanswered (activity.unresolved, after the end).
    bool keeper_ends = false;
    std::string end_reason;     // session.end reason when relay_survives
    std::string unanswered_id;  // the request no answer was delivered for ("" if none)
    bool unanswered_may_be_answered = false;  // before_init: the answer may have been read
    // both: the keeper is killed first, and the relay may see it die and record its calls
    // abandoned (as when only the keeper dies) before its own SIGKILL lands.
    bool relay_may_abandon_before_dying = false;
    // keeper at mid_response: the answer to this request was read from the server and was
    // being written to a client that stopped reading. Its fate (delivered or abandoned) is
    // known only after the relay's final drain, so its row follows the teardown's signals.
    std::string resolved_after_drain_id;
};

std::string pid_key(const Json& d) {
    return fmt::format("{}/{}", d.value("pid", int64_t{0}), d.value("starttime", uint64_t{0}));
}

// One line of a row for failure messages: the process, the request, or the reason.
std::string summary(const Row& r) {
    const Json& d = r.data;
    if (r.kind.starts_with("process.")) {
        std::string s = pid_key(d);
        if (d.contains("comm")) s += " " + d["comm"].dump() + " state " + d.value("state", "?");
        if (d.contains("signal")) s += fmt::format(" signal {}", d["signal"].get<int>());
        if (d.contains("phase")) s += " " + d["phase"].get<std::string>();
        return s;
    }
    if (r.kind.starts_with("activity.")) {
        std::string s = d.contains("id") ? d["id"].dump() : "";
        if (d.contains("method")) s += " " + d["method"].dump();
        if (d.contains("request_seq"))
            s += fmt::format(" request_seq {}", d["request_seq"].get<int64_t>());
        return s;
    }
    for (const char* k : {"reason", "cause"})
        if (d.contains(k)) return d[k].dump();
    return {};
}

std::string id_text(const Json& typed) {
    if (typed.contains("n")) return typed["n"].dump();
    if (typed.contains("s")) return typed["s"].get<std::string>();
    return typed.dump();
}

// The row-order rules of the file comment, over the session's rows in seq order. Returns
// one message per broken rule.
std::vector<std::string> check_rows(const std::vector<Row>& rows, const Expect& e) {
    std::vector<std::string> bad;
    auto fail = [&](std::string m) { bad.push_back(std::move(m)); };
    if (rows.empty() || rows.front().kind != "session.start")
        return {"the session's first row is not session.start"};

    struct Request {
        std::string id;
        std::vector<std::pair<std::string, int64_t>> resolved;  // (kind, seq)
    };
    std::map<int64_t, Request> requests;  // by request seq
    std::map<std::string, int64_t> snapshot, last_signal, exit;
    int64_t first_signal = 0, last_relay_resolution = 0, end_seq = 0, orphaned_seq = 0;
    int64_t last_process_row = 0;
    for (const Row& r : rows) {
        const bool resolution = r.kind == "activity.response" || r.kind == "activity.abandoned" ||
                                r.kind == "activity.unresolved";
        if (end_seq && r.kind != "checkpoint" &&
            !(e.keeper_ends && r.kind == "activity.unresolved"))
            fail(fmt::format("{} at seq {} after session.end", r.kind, r.seq));
        if (r.kind == "activity.request") {
            requests[r.seq].id = id_text(r.data["id"]);
        } else if (resolution) {
            int64_t req = r.data.value("request_seq", int64_t{0});
            auto it = requests.find(req);
            if (it == requests.end())
                fail(fmt::format("{} at seq {} resolves request seq {}, not an earlier request",
                                 r.kind, r.seq, req));
            else
                it->second.resolved.emplace_back(r.kind, r.seq);
            const bool after_drain = it != requests.end() && !e.resolved_after_drain_id.empty() &&
                                     it->second.id == e.resolved_after_drain_id;
            if (r.kind != "activity.unresolved" && !after_drain) last_relay_resolution = r.seq;
        } else if (r.kind == "process.snapshot") {
            snapshot.emplace(pid_key(r.data), r.seq);
            last_process_row = r.seq;
        } else if (r.kind == "process.signal") {
            auto key = pid_key(r.data);
            if (!snapshot.count(key))
                fail(
                    fmt::format("process.signal {} at seq {} without an earlier process.snapshot "
                                "of that process",
                                key, r.seq));
            if (exit.count(key))
                fail(fmt::format("process.signal {} at seq {} after its process.exit", key, r.seq));
            last_signal[key] = r.seq;
            if (!first_signal) first_signal = r.seq;
            last_process_row = r.seq;
        } else if (r.kind == "process.exit") {
            auto key = pid_key(r.data);
            if (!snapshot.count(key))
                fail(fmt::format("process.exit {} at seq {} without an earlier process.snapshot",
                                 key, r.seq));
            exit.emplace(key, r.seq);
            last_process_row = r.seq;
        } else if (r.kind == "session.end") {
            end_seq = r.seq;
            const std::string reason = r.data.value("reason", "");
            if (e.keeper_ends) {
                if (r.data.value("recorded_by", "") != "keeper")
                    fail("session.end of a SIGKILLed relay not recorded by its keeper");
                if (reason != "client_lost" && reason != "relay_died")
                    fail(fmt::format("session.end reason {}, expected client_lost or relay_died",
                                     reason));
            } else if (reason != e.end_reason) {
                fail(fmt::format("session.end reason {}, expected {}", reason, e.end_reason));
            }
        } else if (r.kind == "session.orphaned") {
            orphaned_seq = r.seq;
        }
    }

    if (snapshot.empty()) fail("no process.snapshot: the teardown is not on record");
    // Every process on record ends on record, signalled or not: one without an exit cannot
    // be told from a survivor.
    for (const auto& [key, seq] : snapshot) {
        if (exit.count(key)) continue;
        if (last_signal.count(key))
            fail(fmt::format("process {} signalled at seq {} has no process.exit", key,
                             last_signal[key]));
        else
            fail(fmt::format("process {} snapshotted at seq {} has no process.exit", key, seq));
    }
    if (first_signal && last_relay_resolution > first_signal)
        fail(fmt::format("a response/abandoned row (seq {}) comes after the first signal (seq {})",
                         last_relay_resolution, first_signal));
    if (e.relay_survives || e.keeper_ends) {
        if (!end_seq) fail("no session.end");
        if (end_seq && end_seq < last_process_row)
            fail("session.end comes before the teardown's rows");
        if (orphaned_seq) fail("session.orphaned although a writer lived to end it");
    } else {
        if (end_seq) fail("session.end although the relay and the keeper were SIGKILLed");
        if (!orphaned_seq) fail("no session.orphaned after `journal reconcile`");
    }

    for (const auto& [seq, req] : requests) {
        if (req.resolved.size() != 1) {
            fail(fmt::format("request {} (seq {}) resolved {} times, expected once", req.id, seq,
                             req.resolved.size()));
            continue;
        }
        const std::string& how = req.resolved.front().first;
        if (how == "activity.unresolved" && e.relay_survives)
            fail(fmt::format("request {} unresolved although the relay survived", req.id));
        if (how == "activity.abandoned" && !e.relay_survives && !e.relay_may_abandon_before_dying)
            fail(fmt::format("request {} abandoned by a relay that was SIGKILLed", req.id));
        if (req.id == e.unanswered_id) {
            if (!e.unanswered_may_be_answered && how == "activity.response")
                fail(fmt::format("request {} recorded as answered: the client never had its answer",
                                 req.id));
        } else if (how == "activity.abandoned") {
            fail(fmt::format("request {} abandoned although its answer was delivered", req.id));
        }
    }
    if (!e.unanswered_id.empty() && !e.unanswered_may_be_answered &&
        std::none_of(requests.begin(), requests.end(),
                     [&](const auto& r) { return r.second.id == e.unanswered_id; }))
        fail("request " + e.unanswered_id + " is not on record");
    return bad;
}

// ---- One cell ---------------------------------------------------------------------------

struct CellResult {
    std::vector<std::string> failures;
    double seconds = 0;
    bool ok() const { return failures.empty(); }
};

// One cell, start to finish; run() reads as the algorithm. Failures are collected as text
// (no gtest macros) so that the full run can count them. The destructor kills whatever is
// left by identity (TestChild's TreeGuard on the tag) and removes an orphaned cgroup, so a
// failing cell leaves nothing behind either.
class CellRun {
  public:
    explicit CellRun(Cell c) : cell_(std::move(c)) {}
    ~CellRun() {
        if (client_) client_->tree().kill_all();
        client_.reset();
        remove_session_cgroup(cgroup_);
    }
    CellRun(const CellRun&) = delete;
    CellRun& operator=(const CellRun&) = delete;

    CellResult run() {
        auto t0 = std::chrono::steady_clock::now();
        if (start_killed()) {
            if (cell_.kill == Kill::both) reap_what_nobody_tore_down();
            expect_nothing_left();
            expect_journal_consistent();
        }
        result_.seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        return result_;
    }

    // The cell up to its kill (false, with failures, when it did not get there).
    bool start_killed() { return start_session() && drive_client_to_the_point() && kill_now(); }
    const CellResult& result() const { return result_; }
    const std::string& tag() const { return client_->tag(); }
    uint16_t port() const { return port_; }

  private:
    bool fail(std::string what) {
        result_.failures.push_back(std::move(what));
        return false;
    }

    std::vector<std::string> server_argv(const std::string& port_file) const {
        FixtureOptions fo;
        fo.shape = cell_.shape == "sh-wrapper" ? "normal" : cell_.shape;
        fo.on_eof_ignore = cell_.ignore_eof;
        auto argv = fixture_argv(fo, port_file);
        if (cell_.shape == "sh-wrapper")
            argv.insert(argv.begin(), {"/bin/sh", "-c", "\"$@\"; true", "sh"});
        return argv;
    }

    bool start_session() {
        const std::string port_file = dir_.file("port");
        std::vector<std::string> argv = {"/bin/sh",
                                         "-c",
                                         "\"$@\"; true",
                                         "client-sh",
                                         kCli,
                                         "run",
                                         "--eof-grace",
                                         fmt::format("{}ms", kEofGrace.count()),
                                         "--term-grace",
                                         fmt::format("{}ms", kTermGrace.count()),
                                         "--journal",
                                         db_,
                                         "--"};
        auto server_cmd = server_argv(port_file);
        argv.insert(argv.end(), server_cmd.begin(), server_cmd.end());
        ChildOptions o;
        o.unset_env = {"MCPWARDEN_JOURNAL", "MCPWARDEN_SESSION", "MCPWARDEN_FAULT"};
        if (!cell_.fault.empty()) o.env.emplace_back("MCPWARDEN_FAULT", cell_.fault);
        // The client leads its own process group, as a client started from a shell or a
        // process manager does: that is the group a Kill::group cell kills.
        o.new_process_group = true;
        client_ = std::make_unique<TestChild>(argv, o);
        if (!client_->started()) return fail("client shell: " + client_->error());
        if (!wait_for_file(port_file, kStartBound))
            return fail("the fixture's tree did not come up within 10 s");
        port_ = read_port_file(port_file).value_or(0);
        auto relay = child_with_comm(client_->pid(), "mcpwarden");
        auto keeper = relay ? child_with_comm(relay->pid, "mcpwarden-keep") : std::nullopt;
        auto server = keeper ? child_with_comm(keeper->pid, "") : std::nullopt;
        if (!server) return fail("relay, keeper or server not found below the client shell");
        relay_ = *relay;
        keeper_ = *keeper;
        server_ = *server;
        session_ = env_value(server_.pid, "MCPWARDEN_SESSION").value_or("");
        cgroup_ = cgroup_of(server_.pid);
        if (session_.empty()) return fail("the server carries no MCPWARDEN_SESSION");
        // Negative control: while the session runs, its tree holds the port.
        if (port_bindable(port_))
            return fail(fmt::format("port {} is free while the tree runs", port_));
        return true;
    }

    bool drive_client_to_the_point() {
        TestChild& c = *client_;
        if (!c.write_line(rpc_initialize(1))) return fail("cannot write initialize");
        if (cell_.point == Point::before_init) return true;  // killed before its answer is read
        if (!read_response(c, 1, 10s)) return fail("initialize was not answered within 10 s");
        if (!c.write_line(rpc_initialized())) return fail("cannot write notifications/initialized");
        switch (cell_.point) {
            case Point::before_init:
                break;
            case Point::idle:
                if (!c.write_line(rpc_request(2, "ping")) || !read_response(c, 2, 10s))
                    return fail("ping was not answered");
                break;
            case Point::in_flight:
                // The ping's answer comes after the server read the call: the call is in flight.
                if (!c.write_line(rpc_tools_call(2, "sleep", {{"seconds", 30}})) ||
                    !c.write_line(rpc_request(3, "ping")) || !read_response(c, 3, 10s))
                    return fail("the server did not take the slow call");
                break;
            case Point::mid_response:
                if (!c.write_line(rpc_tools_call(2, "big", {{"bytes", kBigAnswer}})))
                    return fail("cannot write the big call");
                if (size_t got = read_part_of_stdout(kReadOfBig, 10s); got < kReadOfBig)
                    return fail(fmt::format("read {} bytes of the big answer, expected {}", got,
                                            kReadOfBig));
                break;
        }
        return true;
    }

    // Reads exactly `want` bytes of the client's stdout (less on timeout or EOF): the start
    // of an answer whose rest stays unread.
    size_t read_part_of_stdout(size_t want, Millis timeout) {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        std::vector<char> buf(size_t{64} << 10);
        size_t got = 0;
        while (got < want) {
            auto left =
                std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now());
            if (left.count() <= 0) break;
            pollfd p{client_->stdout_fd(), POLLIN, 0};
            if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
            ssize_t n = ::read(client_->stdout_fd(), buf.data(), std::min(buf.size(), want - got));
            if (n <= 0) break;
            got += static_cast<size_t>(n);
        }
        return got;
    }

    bool kill_now() {
        killed_at_ = std::chrono::steady_clock::now();
        bool ok = true;
        switch (cell_.kill) {
            case Kill::client:
                ok = client_->signal(SIGKILL);
                break;
            case Kill::relay:
                ok = sigkill(relay_);
                break;
            case Kill::keeper:
                ok = sigkill(keeper_);
                break;
            case Kill::both:
                ok = sigkill(keeper_) && sigkill(relay_);
                break;
            case Kill::group:
                // The client shell is our child, not reaped: its group id cannot have been
                // reused. The relay must be in it (a terminal's signals reach it there).
                ok = ::getpgid(relay_.pid) == client_->pid() &&
                     ::kill(-client_->pid(), SIGKILL) == 0;
                break;
        }
        return ok || fail(std::string("could not SIGKILL the ") + to_string(cell_.kill));
    }

    // Relay and keeper are dead: the server dies by PDEATHSIG, and whatever survives carries
    // the session marker; `mcpwarden reap --session ID` is how a user ends it.
    void reap_what_nobody_tore_down() {
        if (!wait_until([&] { return !is_same_live_process(server_.pid, server_.starttime); }, 5s))
            fail("the server survived its keeper (no PDEATHSIG)");
        for (pid_t p : live_tagged(client_->tag())) {
            if (p == client_->pid() || p == relay_.pid || p == keeper_.pid) continue;
            // The run's background worker dies with its relay (PDEATHSIG), a moment after it:
            // not the session's, and gone by the check that nothing is left.
            if (auto st = read_stat(p); st && st->comm == "mcpwarden-sweep") continue;
            auto marker = env_value(p, "MCPWARDEN_SESSION");
            // Dying since the scan: its environ went with its memory (see run_test.cpp).
            if (!marker && env_value(p, kTagVar) != client_->tag()) continue;
            if (marker.value_or("") != session_)
                fail(fmt::format("survivor {} carries no session marker", describe({p})));
        }
        CliRun r =
            run_cli({"reap", "--session", session_, "--yes", "--grace", "300ms", "--journal", db_});
        if (r.code != 0)
            fail(fmt::format("mcpwarden reap --session exited {}: {}{}", r.code, r.out, r.err));
    }

    void expect_nothing_left() {
        const std::string& tag = client_->tag();
        // A group cell's bound counts from the kill, for the tree and the port alike.
        const Millis bound = cell_.kill == Kill::group ? kGroupBound : kEndBound;
        if (!wait_until([&] { return live_tagged(tag).empty(); }, bound))
            fail(fmt::format("{} processes left after {} ms: {}", live_tagged(tag).size(),
                             bound.count(), describe(live_tagged(tag))));
        const Millis port_bound =
            cell_.kill == Kill::group
                ? std::max(0ms, std::chrono::duration_cast<Millis>(
                                    killed_at_ + kGroupBound - std::chrono::steady_clock::now()))
                : 2s;
        if (!wait_until([&] { return port_bindable(port_); }, port_bound))
            fail(fmt::format("port {} still taken", port_));
    }

    void expect_journal_consistent() {
        Expect e;
        e.relay_survives = cell_.kill == Kill::client || cell_.kill == Kill::keeper;
        e.keeper_ends = cell_.kill == Kill::relay || cell_.kill == Kill::group;
        // Kill::group: the relay died with the client; the keeper tore down alone, as when
        // only the relay is killed.
        e.end_reason = cell_.kill == Kill::keeper ? "keeper_died" : "client_lost";
        e.relay_may_abandon_before_dying = cell_.kill == Kill::both;
        if (cell_.point == Point::before_init) {
            e.unanswered_id = "1";
            e.unanswered_may_be_answered = true;  // the relay may have delivered it already
        } else if (cell_.point == Point::in_flight || cell_.point == Point::mid_response) {
            e.unanswered_id = "2";
        }
        if (cell_.kill == Kill::keeper && cell_.point == Point::mid_response)
            e.resolved_after_drain_id = "2";
        if (!e.relay_survives) {
            CliRun r = run_cli({"journal", "reconcile", "--journal", db_});
            if (r.code != 0) fail(fmt::format("journal reconcile exited {}: {}", r.code, r.err));
        }
        CliRun v = run_cli({"audit", "verify", "--journal", db_});
        if (v.code != 0) fail(fmt::format("audit verify exited {}: {}{}", v.code, v.out, v.err));

        std::vector<Row> rows;
        std::string dump;
        auto st = journal::for_each_record(db_, 0, [&](const journal::Record& r) {
            auto body = Json::parse(r.body, nullptr, false);
            if (r.session != session_ || !body.is_object()) return true;
            rows.push_back({r.seq, r.kind, body.value("data", Json::object())});
            dump += fmt::format("  {:>3} {:<20} {}\n", r.seq, r.kind, summary(rows.back()));
            return true;
        });
        if (!st.ok()) {
            fail("cannot read the journal: " + st.error().message);
            return;
        }
        auto bad = check_rows(rows, e);
        for (auto& b : bad)
            fail("journal: " + b);
        if (!bad.empty()) fail("journal rows:\n" + dump);

        journal::Filter f;
        f.session = session_;
        auto sessions = journal::list_sessions(db_, f);
        if (!sessions || sessions->size() != 1) {
            fail("`journal sessions` does not list the session");
            return;
        }
        const auto& s = sessions->front();
        const char* want = e.relay_survives || e.keeper_ends ? "ended" : "orphaned";
        if (s.state != want)
            fail(fmt::format("`journal sessions` says {}, expected {}", s.state, want));
        if (s.in_flight != 0)
            fail(fmt::format("`journal sessions` shows {} call(s) still in flight", s.in_flight));
    }

    Cell cell_;
    TempDir dir_;
    std::string db_ = dir_.file("journal.db");
    std::unique_ptr<TestChild> client_;
    Proc relay_, keeper_, server_;
    uint16_t port_ = 0;
    std::chrono::steady_clock::time_point killed_at_{};
    std::string session_, cgroup_;
    CellResult result_;
};

CellResult run_cell(const Cell& c) {
    return CellRun(c).run();
}

void PrintTo(const Cell& c, std::ostream* os) {
    *os << name_of(c);
}

// ---- Drivers ----------------------------------------------------------------------------

class FaultMatrix : public ::testing::TestWithParam<Cell> {};

TEST_P(FaultMatrix, NothingSurvivesAndTheJournalHolds) {
    CellResult r = run_cell(GetParam());
    for (const auto& f : r.failures)
        ADD_FAILURE() << f;
    RecordProperty("seconds", fmt::format("{:.2f}", r.seconds));
}

std::string param_name(const ::testing::TestParamInfo<Cell>& i) {
    return name_of(i.param);
}

INSTANTIATE_TEST_SUITE_P(Sample, FaultMatrix, ::testing::ValuesIn(sample_cells(false)), param_name);
// Cells that fail by a known bug (named in known_bug) are kept, disabled: while there are
// any, instantiate sample_cells(true) as DISABLED_KnownBug.

// Found by this matrix (fixed): a process the engine snapshots but finds gone when it binds
// the pidfd (the PID moved on between the /proc scan and pidfd_open: here a fork-storm child
// living 50-200 ms) was marked "already gone" without TeardownObserver::on_exit, so the
// journal held its process.snapshot and never a process.exit (src/contain/teardown_plan.cpp,
// bind_and_add). An auditor cannot tell that from a survivor. kTries runs of the fork-storm
// cell; about one run in three hit it.
TEST(FaultMatrixJournal, EveryProcessOnRecordHasAnExit) {
    constexpr int kTries = 6;
    const Cell storm{Kill::client, Point::in_flight, "fork-storm", false};
    for (int i = 0; i < kTries; ++i) {
        CellResult r = CellRun(storm).run();
        for (const auto& f : r.failures)
            ADD_FAILURE() << "run " << i + 1 << ": " << f;
        if (!r.ok()) return;
    }
}

// Negative control for the group cells: with the keeper kept in the client's process group
// (MCPWARDEN_FAULT=keeper_pgrp), the group kill takes relay and keeper at once, nobody tears
// down, and the setsid helper lives on holding its port past the bound the group cells meet.
// The run's own background worker is off too (dead_sessions): started niced at the run's
// start, it can come to look for sessions whose relay and keeper died only after the kill,
// find this one, and end it — the next start's guarantee, kept early, which would hide what
// the keeper's place in the group does.
TEST(FaultMatrixGroup, KeeperInTheClientsGroupLeavesTheSetsidHelperWithItsPort) {
    Cell c{Kill::group, Point::idle, "setsid", false};
    c.fault = "keeper_pgrp,dead_sessions";
    CellRun run(c);
    ASSERT_TRUE(run.start_killed()) << ::testing::PrintToString(run.result().failures);
    EXPECT_FALSE(wait_until([&] { return live_tagged(run.tag()).empty(); }, kGroupBound))
        << "nothing left: the group kill did not take the keeper";
    EXPECT_FALSE(port_bindable(run.port())) << "the setsid helper's port is free";
}

// WARDEN_FAULT_FULL=N: every cell N times, then a table of counts. Skipped without it (its
// run takes minutes: scripts/fault-matrix.sh runs it outside ctest's timeout).
TEST(FaultMatrixFull, EveryCellRepeated) {
    const char* env = std::getenv("WARDEN_FAULT_FULL");
    if (!env || !*env) GTEST_SKIP() << "set WARDEN_FAULT_FULL=N to run every cell N times";
    const int rounds = std::clamp(std::atoi(env), 1, 100);
    const auto cells = all_cells();
    struct Tally {
        int pass = 0, fail = 0, known = 0;  // known: failed, every message a known symptom
        double seconds = 0;
        std::vector<std::string> first_failure;  // the first unexplained one
    };
    std::vector<Tally> tally(cells.size());
    const auto t0 = std::chrono::steady_clock::now();
    for (int round = 1; round <= rounds; ++round)
        for (size_t i = 0; i < cells.size(); ++i) {
            CellResult r = run_cell(cells[i]);
            Tally& t = tally[i];
            const auto bug = known_bug(cells[i]);
            const char* verdict = "pass";
            if (r.ok()) {
                ++t.pass;
            } else if (bug && explained_by(*bug, r.failures)) {
                ++t.known;
                verdict = "known bug";
            } else {
                ++t.fail;
                verdict = "FAIL";
                if (t.first_failure.empty()) t.first_failure = r.failures;
            }
            t.seconds += r.seconds;
            std::printf("[%d/%d %3zu/%zu] %-42s %-9s %5.1f s\n", round, rounds, i + 1, cells.size(),
                        name_of(cells[i]).c_str(), verdict, r.seconds);
            std::fflush(stdout);
        }
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    int passed = 0, failed = 0, known = 0;
    std::printf("\n%-42s %5s %5s %5s %7s\n", "cell", "pass", "fail", "known", "mean s");
    for (size_t i = 0; i < cells.size(); ++i) {
        const Tally& t = tally[i];
        std::printf("%-42s %5d %5d %5d %7.2f\n", name_of(cells[i]).c_str(), t.pass, t.fail, t.known,
                    t.seconds / rounds);
        passed += t.pass;
        failed += t.fail;
        known += t.known;
    }
    std::printf(
        "\n%zu cells x %d = %zu runs in %.0f s: %d passed, %d failed, %d failed by a "
        "known bug\n",
        cells.size(), rounds, cells.size() * static_cast<size_t>(rounds), wall, passed, failed,
        known);
    std::set<std::string> bugs;
    for (size_t i = 0; i < cells.size(); ++i) {
        if (auto bug = known_bug(cells[i]); bug && tally[i].known && bugs.insert(bug->what).second)
            std::printf("known bug: %s\n", bug->what.c_str());
        for (const auto& f : tally[i].first_failure)
            ADD_FAILURE() << name_of(cells[i]) << ": " << f;
    }
    EXPECT_EQ(failed, 0);
}

}  // namespace
}  // namespace warden::testing
