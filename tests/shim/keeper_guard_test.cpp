// The keeper's guards for a relay that cannot finish its session, each with its negative
// control (the guard switched off through MCPWARDEN_FAULT, the bad outcome asserted):
//
//   - a relay killed in the middle of its teardown, the way Claude Code stops a server
//     (SIGINT, SIGTERM 100 ms later, SIGKILL 400 ms after that): the keeper finishes the
//     teardown and records session.end itself (`recorded_by: keeper`), so the session is
//     ended on record with nothing in flight, not left for `journal reconcile` to call
//     orphaned;
//   - a stopped relay (SIGSTOP) whose client then dies: the keeper watches the client too,
//     and tears the tree down by itself once the relay has not acted within the EOF window
//     (plus kRelaySlack);
//   - the keeper hands the server its stdio pipes and keeps no end of them: an end it kept
//     would hide the server's EOF from the relay for the keeper's whole life, and every
//     session's end would wait out the relay's drain bound;
//   - the keeper opens its journal on a thread of its own: in its wait loop, the opening
//     held back the report of the server's exit, and so the whole teardown.
//
// The process-group SIGKILL (relay and keeper killed together unless the keeper has a group
// of its own) is a dimension of the fault matrix (tests/fault/matrix_test.cpp).
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/cli_run.hpp"
#include "common/testing.hpp"
#include "journal/intents.hpp"
#include "journal/query.hpp"
#include "journal/verify.hpp"
#include "shim/keeper.hpp"
#include "sys/pidfd.hpp"

namespace warden::testing::keeper_guard {
namespace {

using Json = nlohmann::json;

// A process found below one the test started, signalled only through a pidfd bound to the
// identity seen when it was found.
struct Found {
    pid_t pid = 0;
    uint64_t starttime = 0;

    bool signal(int sig) const {
        auto fd = Pidfd::open(pid);
        return fd && is_same_live_process(pid, starttime) && fd->send_signal(sig).ok();
    }
    bool alive() const { return pid > 0 && is_same_live_process(pid, starttime); }
};

std::optional<Found> child_named(pid_t parent, std::string_view comm_prefix) {
    for (pid_t c : children_of(parent))
        if (auto st = read_stat(c); st && st->comm.starts_with(comm_prefix))
            return Found{c, st->starttime};
    return std::nullopt;
}

// One `mcpwarden run` of the fixture, its tree built: relay, keeper and server found.
// `client_shell`: started as `sh -c '"$@"; true'` so that the client can die while the test
// keeps the pipes (else the test is the client). The destructor ends what is left: the
// relay first (the keeper then tears down by its lifeline), then anything tagged, then the
// session cgroup.
struct Run {
    TempDir dir;
    std::string db = dir.file("journal.db");
    std::unique_ptr<TestChild> client;
    Found relay, keeper, server;
    uint16_t port = 0;
    std::string session, cgroup;

    ~Run() {
        if (!client) return;
        relay.signal(SIGKILL);
        wait_until([&] { return !keeper.alive(); }, 5s);
        client->tree().kill_all();
        client.reset();
        remove_session_cgroup(cgroup);
    }
};

std::unique_ptr<Run> start_run(bool client_shell, const FixtureOptions& fo,
                               const std::vector<std::string>& flags, const std::string& fault) {
    auto r = std::make_unique<Run>();
    std::vector<std::string> argv;
    if (client_shell) argv = {"/bin/sh", "-c", "\"$@\"; true", "client-sh"};
    argv.insert(argv.end(), {kCli, "run", "--journal", r->db});
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.push_back("--");
    for (auto& a : fixture_argv(fo, r->dir.file("port")))
        argv.push_back(a);
    ChildOptions o;
    o.unset_env = {"MCPWARDEN_JOURNAL", "MCPWARDEN_SESSION", "MCPWARDEN_FAULT"};
    if (!fault.empty()) o.env.emplace_back("MCPWARDEN_FAULT", fault);
    r->client = std::make_unique<TestChild>(argv, o);
    if (!r->client->started() || !wait_for_file(r->dir.file("port"), 10s)) return nullptr;
    r->port = read_port_file(r->dir.file("port")).value_or(0);
    auto relay = client_shell ? child_named(r->client->pid(), "mcpwarden")
                              : std::optional<Found>{Found{r->client->pid(), 0}};
    if (!relay) return nullptr;
    if (!client_shell) relay->starttime = read_stat(relay->pid).value_or(ProcStat{}).starttime;
    auto keeper = child_named(relay->pid, "mcpwarden-keep");
    auto server = keeper ? child_named(keeper->pid, "") : std::nullopt;
    if (!server) return nullptr;
    r->relay = *relay;
    r->keeper = *keeper;
    r->server = *server;
    r->session = env_value(server->pid, "MCPWARDEN_SESSION").value_or("");
    r->cgroup = cgroup_of(server->pid);
    return r;
}

// ---- The relay killed mid-teardown ---------------------------------------------------

struct Ending {
    std::optional<int> relay_status;
    bool tree_gone = false, port_free = false;
    std::optional<journal::SessionRow> row;  // `journal sessions` for the session
    std::optional<Json> end;                 // the session.end record's data
};

// A server that ignores both EOF and SIGTERM, so that the keeper's teardown lasts its whole
// term grace (1 s) and the SIGKILL of Claude Code's stop sequence lands inside it. A slow
// call is in flight when the stop begins.
Ending stop_like_claude_code(const std::string& fault) {
    Ending out;
    FixtureOptions fo;
    fo.on_eof_ignore = true;
    fo.ignore_term = true;
    auto r = start_run(false, fo, {"--eof-grace", "1000ms", "--term-grace", "1000ms"}, fault);
    if (!r) {
        ADD_FAILURE() << "the session did not start";
        return out;
    }
    TestChild& c = *r->client;
    EXPECT_FALSE(port_bindable(r->port));  // the tree holds its port while it runs
    EXPECT_TRUE(c.write_line(rpc_initialize(1)));
    EXPECT_TRUE(read_response(c, 1, 10s));
    EXPECT_TRUE(c.write_line(rpc_tools_call(2, "sleep", {{"seconds", 30}})));
    EXPECT_TRUE(c.write_line(rpc_request(3, "ping")));
    EXPECT_TRUE(read_response(c, 3, 10s));  // the call is in flight

    EXPECT_TRUE(c.signal(SIGINT));
    std::this_thread::sleep_for(100ms);
    EXPECT_TRUE(c.signal(SIGTERM));
    std::this_thread::sleep_for(400ms);
    EXPECT_TRUE(c.signal(SIGKILL));
    out.relay_status = c.wait_exit(10s);

    const std::string& tag = c.tag();
    out.tree_gone = wait_until([&] { return live_tagged(tag).empty(); }, 10s);
    out.port_free = port_bindable(r->port);
    // The keeper has exited (tree_gone): whatever it was going to record is on record.
    journal::Filter f;
    f.session = r->session;
    if (auto rows = journal::list_sessions(r->db, f); rows && rows->size() == 1)
        out.row = rows->front();
    auto st = journal::for_each_record(r->db, 0, [&](const journal::Record& rec) {
        if (rec.session != r->session || rec.kind != "session.end") return true;
        auto body = Json::parse(rec.body, nullptr, false);
        if (body.is_object()) out.end = body.value("data", Json::object());
        return true;
    });
    EXPECT_TRUE(st.ok()) << st.error().message;
    return out;
}

TEST(KeeperGuard, RelayKilledMidTeardownTheKeeperRecordsTheEnd) {
    Ending e = stop_like_claude_code("");
    ASSERT_TRUE(e.relay_status);
    EXPECT_EQ(describe_status(*e.relay_status), "killed by signal 9")
        << "the relay was not killed mid-teardown: the scenario did not happen";
    EXPECT_TRUE(e.tree_gone);
    EXPECT_TRUE(e.port_free);
    ASSERT_TRUE(e.row) << "`journal sessions` does not list the session";
    EXPECT_EQ(e.row->state, "ended");
    EXPECT_EQ(e.row->in_flight, 0);
    ASSERT_TRUE(e.end) << "no session.end";
    EXPECT_EQ(e.end->value("recorded_by", ""), "keeper") << e.end->dump();
    EXPECT_EQ(e.end->value("reason", ""), "client_lost") << e.end->dump();
    // The server ignored SIGTERM: the keeper's report counts it killed.
    EXPECT_GE(
        e.end->value("teardown", Json::object()).value("counts", Json::object()).value("killed", 0),
        1)
        << e.end->dump();
}

TEST(KeeperGuard, NegativeControlWithoutTheKeepersRecordTheSessionHasNoEnd) {
    Ending e = stop_like_claude_code("keeper_session_end");
    ASSERT_TRUE(e.relay_status);
    EXPECT_EQ(describe_status(*e.relay_status), "killed by signal 9");
    EXPECT_TRUE(e.tree_gone);  // the teardown itself is not what the guard adds
    EXPECT_FALSE(e.end) << "session.end: " << e.end->dump();
    ASSERT_TRUE(e.row);
    EXPECT_NE(e.row->state, "ended");
}

// ---- A stopped relay -------------------------------------------------------------------

constexpr Millis kEof = 200ms, kTerm = 300ms;
// The keeper's own wait (EOF window + kRelaySlack), its teardown (term grace), and slack
// for a loaded machine under ASan.
constexpr Millis kStoppedBound = kEof + shim::kRelaySlack + kTerm + 2s;

struct StoppedOutcome {
    bool tree_gone = false, port_free = false, relay_still_stopped = false;
    std::string left;
    double seconds = 0;  // from the client's death to the tree's end (or the bound)
};

// SIGSTOP the relay, SIGKILL the client (a shell: the test keeps the pipes, so only the
// client's exit tells), then watch the tree for kStoppedBound. `opening`: the relay is
// stopped only once the keeper's journal opening is under way.
StoppedOutcome stop_relay_then_kill_client(const std::string& fault, bool opening = false) {
    StoppedOutcome out;
    FixtureOptions fo;
    fo.shape = "setsid";
    auto r = start_run(true, fo,
                       {"--eof-grace", fmt::format("{}ms", kEof.count()), "--term-grace",
                        fmt::format("{}ms", kTerm.count())},
                       fault);
    if (!r) {
        ADD_FAILURE() << "the session did not start";
        return out;
    }
    EXPECT_FALSE(port_bindable(r->port));  // the tree holds its port while it runs
    if (opening) {
        EXPECT_TRUE(wait_until(
            [&] { return thread_nice(r->keeper.pid, "mcpwarden-kopen").has_value(); }, 10s))
            << "the keeper never began to open its journal";
    }
    EXPECT_TRUE(r->relay.signal(SIGSTOP));
    EXPECT_TRUE(
        wait_until([&] { return read_stat(r->relay.pid).value_or(ProcStat{}).state == 'T'; }, 5s));
    EXPECT_TRUE(r->client->signal(SIGKILL));
    // Everything tagged but the stopped relay: the keeper, the server, its setsid helper.
    auto left = [&] {
        std::vector<pid_t> v;
        for (pid_t p : live_tagged(r->client->tag()))
            if (p != r->relay.pid) v.push_back(p);
        return v;
    };
    const auto killed = std::chrono::steady_clock::now();
    out.tree_gone = wait_until([&] { return left().empty(); }, kStoppedBound);
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
    out.port_free = port_bindable(r->port);
    out.relay_still_stopped = read_stat(r->relay.pid).value_or(ProcStat{}).state == 'T';
    for (pid_t p : left())
        out.left += fmt::format(" {} ({})", p, read_stat(p).value_or(ProcStat{}).comm);
    return out;
}

TEST(KeeperGuard, StoppedRelayAndDeadClientTheKeeperTearsDown) {
    StoppedOutcome o = stop_relay_then_kill_client("");
    EXPECT_TRUE(o.tree_gone) << "left after " << o.seconds << " s:" << o.left;
    RecordProperty("seconds_to_gone", std::to_string(o.seconds));
    EXPECT_TRUE(o.port_free);
    EXPECT_TRUE(o.relay_still_stopped) << "the relay ran: the keeper's guard was not tested";
}

TEST(KeeperGuard, NegativeControlWithoutTheClientWatchTheTreeOutlivesTheClient) {
    StoppedOutcome o = stop_relay_then_kill_client("keeper_client_watch");
    EXPECT_FALSE(o.tree_gone);
    EXPECT_FALSE(o.port_free);
    EXPECT_TRUE(o.relay_still_stopped);
}

// The keeper's journal opening hangs (a hung disk) and is still under way when the keeper
// is done: the keeper exits without it, and no journal record was wanted (the relay is
// stopped: the teardown goes unrecorded). An opening that the teardown had lowered to nice
// 19 kept the keeper alive for seconds on a busy machine.
TEST(KeeperGuard, AnOpeningStillUnderWayDoesNotHoldTheKeepersExit) {
    StoppedOutcome o = stop_relay_then_kill_client("keeper_journal_stuck", /*opening=*/true);
    EXPECT_TRUE(o.tree_gone) << "left after " << o.seconds << " s:" << o.left;
    EXPECT_TRUE(o.port_free);
    EXPECT_TRUE(o.relay_still_stopped);
}

TEST(KeeperGuard, NegativeControlAKeeperThatWaitsForItsOpeningOutlivesTheTree) {
    StoppedOutcome o =
        stop_relay_then_kill_client("keeper_journal_stuck,keeper_waits_for_opening", true);
    EXPECT_FALSE(o.tree_gone);
    EXPECT_TRUE(o.port_free) << "the server outlived the client: the keeper did not tear down";
    EXPECT_NE(o.left.find("mcpwarden-keep"), std::string::npos) << o.left;
}

// ---- The keeper keeps no end of the server's pipes ------------------------------------

// What `pid`'s descriptors `fds` (all of them when empty) point at: "pipe:[INODE]" and such.
std::set<std::string> fd_targets(pid_t pid, std::initializer_list<int> fds = {}) {
    namespace fs = std::filesystem;
    std::set<std::string> out;
    std::error_code ec;
    const fs::path dir = fmt::format("/proc/{}/fd", pid);
    auto add = [&](const fs::path& link) {
        if (auto t = fs::read_symlink(link, ec); !ec) out.insert(t.string());
    };
    if (fds.size() > 0) {
        for (int fd : fds)
            add(dir / std::to_string(fd));
    } else {
        for (const auto& e : fs::directory_iterator(dir, ec))
            add(e.path());
    }
    return out;
}

// The pipes of the server's stdio that the keeper holds too.
std::set<std::string> server_pipes_the_keeper_holds(const std::string& fault) {
    auto r = start_run(false, FixtureOptions{}, {}, fault);
    if (!r) {
        ADD_FAILURE() << "the session did not start";
        return {};
    }
    std::set<std::string> server = fd_targets(r->server.pid, {0, 1, 2});
    EXPECT_EQ(server.size(), 3u) << "the server's stdio is not three pipes";
    std::set<std::string> held;
    for (const std::string& t : fd_targets(r->keeper.pid))
        if (server.contains(t)) held.insert(t);
    EXPECT_TRUE(r->keeper.alive()) << "the keeper was gone before its descriptors were read";
    return held;
}

TEST(KeeperGuard, TheKeeperHoldsNoEndOfTheServersPipes) {
    auto held = server_pipes_the_keeper_holds("");
    EXPECT_TRUE(held.empty()) << "the keeper holds " << fmt::format("{}", fmt::join(held, ", "));
}

TEST(KeeperGuard, NegativeControlWithItsLogOnFd2TheKeeperHoldsTheServersStderr) {
    auto held = server_pipes_the_keeper_holds("keeper_stderr");
    EXPECT_EQ(held.size(), 1u) << fmt::format("{}", fmt::join(held, ", "));
}

// ---- The keeper opens its journal off its wait loop ------------------------------------

struct OpeningEnd {
    std::string err;  // the run's stderr, with its MCPWARDEN_PHASES trace
    bool ended = false;
    int64_t signals = 0;  // process.signal records: the keeper's teardown on record
    // The nice value of the keeper's opening thread once the session ended (none: not seen).
    std::optional<int> opening_nice;
};

// The nice value of `pid`'s thread `name` once it is 19, or as it still is after `within`:
// a journal opening yields to the teardown (sys/background_thread.hpp) or does not.
std::optional<int> opening_nice(const std::function<pid_t()>& pid, const std::string& name,
                                std::chrono::milliseconds within) {
    std::optional<int> nice;
    wait_until(
        [&] {
            nice = thread_nice(pid(), name);
            return nice == 19;
        },
        within);
    return nice;
}

// A session that ends while the keeper is still opening its journal, the way a client that
// closes right after its first exchange (`claude mcp list`) ends one, with the opening made
// 2 s long (keeper_journal_slow) so that the end surely falls inside it. The fixture exits
// on EOF and leaves its port-holding helper to the teardown.
// `mcpwarden run --journal DB` of the fixture under MCPWARDEN_FAULT=`fault`, with the phases
// traced on its stderr, initialized.
std::unique_ptr<TestChild> journaled_run(const std::string& db, const std::string& port_file,
                                         const std::string& fault,
                                         const FixtureOptions& fo = FixtureOptions{},
                                         const std::vector<std::string>& run_args = {}) {
    std::vector<std::string> argv = {kCli, "run", "--journal", db, "--eof-grace", "1s"};
    argv.insert(argv.end(), run_args.begin(), run_args.end());
    argv.push_back("--");
    for (auto& a : fixture_argv(fo, port_file))
        argv.push_back(a);
    ChildOptions o;
    o.capture_stderr = true;
    o.unset_env = {"MCPWARDEN_JOURNAL", "MCPWARDEN_SESSION"};
    o.env = {{"MCPWARDEN_PHASES", "1"}, {"MCPWARDEN_FAULT", fault}};
    auto c = std::make_unique<TestChild>(argv, o);
    EXPECT_TRUE(c->started()) << c->error();
    EXPECT_TRUE(c->write_line(rpc_initialize(1)));
    EXPECT_TRUE(read_response(*c, 1, 10s));
    return c;
}

OpeningEnd end_while_the_keeper_opens_its_journal(const std::string& fault) {
    OpeningEnd out;
    TempDir dir;
    const std::string db = dir.file("journal.db");
    auto run = journaled_run(db, dir.file("port"), fault);
    TestChild& c = *run;
    std::this_thread::sleep_for(300ms);  // the keeper has begun its 2 s opening
    c.close_stdin();
    auto keeper = [&] {
        for (pid_t p : children_of(c.pid()))
            if (thread_nice(p, "mcpwarden-kopen")) return p;
        return pid_t{-1};
    };
    out.opening_nice = opening_nice(keeper, "mcpwarden-kopen", 500ms);
    EXPECT_TRUE(c.wait_exit(20s));
    EXPECT_TRUE(wait_until([&] { return live_tagged(c.tag()).empty(); }, 10s));
    out.err = c.read_stderr(5s);
    auto st = journal::for_each_record(db, 0, [&](const journal::Record& rec) {
        if (rec.kind == "session.end") out.ended = true;
        if (rec.kind == "process.signal") ++out.signals;
        return true;
    });
    EXPECT_TRUE(st.ok()) << st.error().message;
    return out;
}

// The opening runs on a thread of the keeper: the server's exit reaches the relay while it
// is still under way, so the relay's EOF window ends with it, and the teardown that follows
// is recorded on the journal the opening made (by a keeper that commits its records itself,
// as it does when it cannot write the session's intent file, keeper_no_intents: one that
// hands them to the relay needs no journal of its own).
// Nor does it hold back the first signal: the teardown signals at once and is recorded
// once the opening is over.
TEST(KeeperGuard, TheKeepersJournalOpeningNeverHoldsBackTheServersExit) {
    auto r = end_while_the_keeper_opens_its_journal("keeper_journal_slow,keeper_no_intents");
    EXPECT_TRUE(phase_before(r.err, "server_exit_reported", "eof_window_over") &&
                phase_before(r.err, "server_exit_reported", "keeper_journal_open"))
        << "the server's exit waited for the keeper's journal\n"
        << r.err;
    EXPECT_TRUE(phase_before(r.err, "first_sigterm", "keeper_journal_open"))
        << "the first signal waited for the keeper's journal\n"
        << r.err;
    EXPECT_TRUE(r.ended) << r.err;
    EXPECT_GE(r.signals, 1) << "the teardown is not on record\n" << r.err;
    EXPECT_EQ(r.opening_nice, 19) << "the opening did not yield the cores to the teardown";
}

// Negative control: an opening that does not yield keeps its priority through the teardown,
// and the teardown is recorded all the same.
TEST(KeeperGuard, NegativeControlAnOpeningThatDoesNotYieldKeepsItsPriority) {
    auto r = end_while_the_keeper_opens_its_journal(
        "keeper_journal_slow,keeper_no_intents,journal_opening_not_yielded");
    EXPECT_EQ(r.opening_nice, 0) << r.err;
    EXPECT_TRUE(r.ended) << r.err;
    EXPECT_GE(r.signals, 1) << r.err;
}

// Negative control: a keeper that records each snapshot and signal before it finishes the
// opening first, and signals only after it.
TEST(KeeperGuard, NegativeControlRecordingFirstHoldsTheSignalsBehindTheOpening) {
    auto r = end_while_the_keeper_opens_its_journal("keeper_journal_slow,keeper_records_first");
    EXPECT_TRUE(phase_before(r.err, "keeper_journal_open", "first_sigterm")) << r.err;
    EXPECT_GE(r.signals, 1) << r.err;
}

// Negative control: the opening made in the wait loop holds the server's exit back, and the
// relay waits out its whole EOF window (1 s) for a server that exited at its start.
TEST(KeeperGuard, NegativeControlOpeningInTheWaitLoopHoldsBackTheServersExit) {
    auto r = end_while_the_keeper_opens_its_journal("keeper_journal_slow,keeper_journal_inline");
    EXPECT_TRUE(phase_before(r.err, "eof_window_over", "server_exit_reported") &&
                phase_before(r.err, "keeper_journal_open", "server_exit_reported"))
        << r.err;
}

// ---- One SIGKILL on record for each target cgroup.kill ended ----------------------------

struct Kills {
    bool nothing_left = false;
    bool cgroup = false;  // the session had its cgroup (session.start's layers)
    std::string err;
    std::map<std::string, int> per_target;  // "pid/starttime" → process.signal SIGKILL rows
    std::set<std::string> via;              // their `via`
    int most() const {
        int m = 0;
        for (const auto& [who, n] : per_target)
            m = std::max(m, n);
        return m;
    }
};

// A server whose every process ignores SIGTERM (a shell and three sleeps, the ignored
// disposition inherited), so the teardown ends it with cgroup.kill; its client leaves at
// once. The process.signal records of SIGKILL, counted per target.
Kills kill_a_tree_that_ignores_term(const std::string& fault) {
    Kills out;
    TempDir dir;
    const std::string db = dir.file("journal.db");
    ChildOptions o;
    o.capture_stderr = true;
    o.unset_env = {"MCPWARDEN_JOURNAL", "MCPWARDEN_SESSION"};
    o.env = {{"MCPWARDEN_FAULT", fault}};
    TestChild c({kCli, "run", "--journal", db, "--eof-grace", "10ms", "--term-grace", "50ms", "--",
                 "/bin/sh", "-c", "trap '' TERM; sleep 300 & sleep 300 & sleep 300 & wait"},
                o);
    EXPECT_TRUE(c.started()) << c.error();
    // All four are up before the client leaves (the shell waits on the sleeps).
    EXPECT_TRUE(wait_until([&] { return live_tagged(c.tag()).size() >= 6; }, 10s));
    c.close_stdin();
    EXPECT_TRUE(c.wait_exit(20s));
    out.nothing_left = wait_until([&] { return live_tagged(c.tag()).empty(); }, 10s);
    out.err = c.read_stderr(5s);
    auto st = journal::for_each_record(db, 0, [&](const journal::Record& rec) {
        auto data = Json::parse(rec.body)["data"];
        if (rec.kind == "session.start")
            for (const auto& l : data.value("layers", Json::array()))
                out.cgroup = out.cgroup || l == "cgroup";
        if (rec.kind != "process.signal") return true;
        if (data.value("signal", 0) != SIGKILL) return true;
        ++out.per_target[fmt::format("{}/{}", data.value("pid", 0),
                                     data.value("starttime", uint64_t{0}))];
        out.via.insert(data.value("via", ""));
        return true;
    });
    EXPECT_TRUE(st.ok()) << st.error().message;
    return out;
}

// cgroup.kill ends every member at once, and each member's record says so (`via:
// cgroup.kill`); a member still dying must not get a second SIGKILL through its pidfd right
// after (teardown_signals.cpp, kill_what_remains), which put two on record for about half of them.
// Negative control: with the members signalled again (cgroup_kill_members_again), one of a few such
// sessions has a target with two.
TEST(KeeperGuard, EachTargetCgroupKillEndedHasOneSigkillOnRecord) {
    auto r = kill_a_tree_that_ignores_term("");
    if (!r.cgroup) GTEST_SKIP() << "no session cgroup here: nothing ends the tree by cgroup.kill";
    EXPECT_TRUE(r.nothing_left) << r.err;
    EXPECT_EQ(r.per_target.size(), 4u) << r.err;
    EXPECT_EQ(r.most(), 1) << fmt::format("{}", fmt::join(r.per_target, ", "));
    EXPECT_EQ(r.via, std::set<std::string>{"cgroup.kill"}) << "the records do not say how";

    int twice = 0;
    for (int round = 0; round < 8 && twice == 0; ++round) {
        auto control = kill_a_tree_that_ignores_term("cgroup_kill_members_again");
        EXPECT_TRUE(control.nothing_left) << control.err;
        if (control.most() > 1) ++twice;
    }
    EXPECT_EQ(twice, 1) << "no session of the control had a target with two SIGKILLs on record";
}

// ---- The teardown signals first, its records follow in order --------------------------

struct LeftInFlight {
    std::string err;  // stderr, with the MCPWARDEN_PHASES trace
    bool port_free = false, nothing_left = false;
};

// `mcpwarden run --journal DIR/journal.db` of the fixture (journaled_run); the client asks a
// tools/call that the fixture will not answer for 30 s and closes stdin. Then whether the
// tree's port is free and nothing of it is left.
LeftInFlight leave_a_call_in_flight(const TempDir& dir, const std::string& fault,
                                    const FixtureOptions& fo = FixtureOptions{},
                                    const std::vector<std::string>& run_args = {}) {
    LeftInFlight out;
    const std::string port_file = dir.file("port");
    auto run = journaled_run(dir.file("journal.db"), port_file, fault, fo, run_args);
    TestChild& c = *run;
    EXPECT_TRUE(wait_for_file(port_file, 10s));
    auto port = read_port_file(port_file);
    EXPECT_TRUE(port && !port_bindable(*port)) << "the tree holds no port: nothing to prove";
    EXPECT_TRUE(c.write_line(rpc_tools_call(2, "sleep", {{"seconds", 30}})));
    c.close_stdin();
    EXPECT_TRUE(c.wait_exit(20s));
    // The keeper outlives a relay that died: its records are written once the tree is gone.
    out.nothing_left = wait_until([&] { return live_tagged(c.tag()).empty(); }, 10s);
    out.port_free = port && wait_until([&] { return port_bindable(*port); }, 5s);
    out.err = c.read_stderr(5s);
    return out;
}

// The log's records, in order.
struct RecordKinds {
    std::vector<std::string> kinds;

    // Index of the first record of `kind` in the log, or npos.
    size_t first(const std::string& kind) const {
        auto it = std::find(kinds.begin(), kinds.end(), kind);
        return it == kinds.end() ? std::string::npos : static_cast<size_t>(it - kinds.begin());
    }
    // True when `a` is on record and comes before any `b` (which must be on record too).
    bool before(const std::string& a, const std::string& b) const {
        return first(a) != std::string::npos && first(b) != std::string::npos &&
               first(a) < first(b);
    }
    // The client's loss, then the teardown (snapshot, signals, exits), then the end.
    bool teardown_in_order() const {
        return before("session.client_lost", "process.snapshot") &&
               before("process.snapshot", "process.signal") &&
               before("process.signal", "process.exit") && before("process.exit", "session.end");
    }
    std::string listed() const { return fmt::format("{}", fmt::join(kinds, " ")); }
};

struct RecordedTeardown : LeftInFlight, RecordKinds {
    int64_t request_seq = 0;         // the in-flight tools/call's activity.request
    std::vector<int64_t> abandoned;  // request_seq of each activity.abandoned
    std::string ended_by = "-";      // session.end's recorded_by ("" for the relay; "-": none)
    bool verified = false;           // the journal verifies (journal::verify)
    int repeated = 0;                // teardown records on record twice (same kind and ts)
};

// The client asks a tools/call that the fixture will not answer for 30 s and closes stdin:
// the relay leaves the client's loss and the abandoned call as evidence, the keeper tears
// the tree down (the fixture exits on EOF, its port holder is signalled) and records it.
// Then the log, in order, and whether it verifies.
RecordedTeardown teardown_on_record(const std::string& fault) {
    RecordedTeardown out;
    TempDir dir;
    const std::string db = dir.file("journal.db");
    static_cast<LeftInFlight&>(out) = leave_a_call_in_flight(dir, fault);
    std::set<std::pair<std::string, int64_t>> seen;
    auto st = journal::for_each_record(db, 0, [&](const journal::Record& rec) {
        out.kinds.push_back(rec.kind);
        if (journal::is_teardown_record(rec.kind) && !seen.insert({rec.kind, rec.ts}).second)
            ++out.repeated;
        auto data = Json::parse(rec.body)["data"];
        if (rec.kind == "activity.request" && data.value("tool", "") == "sleep")
            out.request_seq = rec.seq;
        if (rec.kind == "activity.abandoned") out.abandoned.push_back(data.value("request_seq", 0));
        if (rec.kind == "session.end") out.ended_by = data.value("recorded_by", "");
        return true;
    });
    EXPECT_TRUE(st.ok()) << st.error().message;
    auto v = journal::verify({.path = db});
    out.verified = v.ok;
    EXPECT_TRUE(v.ok) << v.reason;
    return out;
}

// The relay's evidence is in its intent file before it asks, so the keeper signals without
// waiting for its commit (made 500 ms slow here: the first SIGTERM comes before it); the
// keeper's records still follow the relay's: loss, abandoned call, snapshot, signals, exits,
// end; the abandoned record names the request's seq; the journal verifies.
TEST(KeeperGuard, TheTeardownSignalsBeforeTheEvidenceIsCommittedAndRecordsInOrder) {
    auto r = teardown_on_record("journal_slow_writer");
    EXPECT_TRUE(r.port_free && r.nothing_left);
    EXPECT_TRUE(phase_before(r.err, "first_sigterm", "evidence_committed"))
        << "the first signal waited for the relay's commit\n"
        << r.err;
    EXPECT_TRUE(r.teardown_in_order() && r.before("activity.abandoned", "process.snapshot"))
        << r.listed();
    EXPECT_NE(r.request_seq, 0);
    EXPECT_EQ(r.abandoned, std::vector<int64_t>{r.request_seq});
    EXPECT_EQ(r.ended_by, "");
}

// A keeper that commits its records itself (its recorder could not write the intent file:
// keeper_no_intents) waits for the relay's "evidence" first. Negative control: one
// that does not wait writes its records before the relay's slow commit of the client's loss.
TEST(KeeperGuard, NegativeControlNotWaitingForTheEvidencePutsTheSnapshotFirst) {
    auto waits = teardown_on_record("journal_slow_writer,keeper_no_intents");
    EXPECT_TRUE(waits.teardown_in_order()) << waits.listed();

    auto r = teardown_on_record("journal_slow_writer,keeper_no_intents,keeper_evidence_wait");
    EXPECT_TRUE(r.before("process.snapshot", "session.client_lost"))
        << fmt::format("{}", fmt::join(r.kinds, " "));
}

// The keeper, asked by a live relay, leaves its teardown's records in the session's intent
// file, where they are before what each precedes, and hands them over (a "record" line each
// before its report): the relay commits them after its evidence, with its session.end, and
// the keeper commits nothing on the way to its report (the test above: in order, and the
// journal verifies). Negative control: a relay that drops them (relay_drops_keepers_records)
// removes the file at its close and the log holds no teardown: the relay's commit is what
// puts it on record.
TEST(KeeperGuard, NegativeControlARelayThatDropsTheKeepersRecordsLeavesNoTeardown) {
    auto control = teardown_on_record("relay_drops_keepers_records");
    EXPECT_TRUE(control.port_free && control.nothing_left);
    EXPECT_EQ(control.first("process.snapshot"), std::string::npos) << control.listed();
    EXPECT_EQ(control.first("process.signal"), std::string::npos);
    EXPECT_EQ(control.ended_by, "");
}

// A relay killed once it has the report, before it commits anything (relay_dies_at_report):
// the records the keeper handed over are in the intent file, and the keeper, which sees the
// relay die before "ended", recovers the file (the relay's evidence, its own records) and
// records the session's end itself, after them. The relay's writer commits 500 ms late
// (journal_slow_writer): the records it queued as they came, a few ms before the report,
// are surely not committed by it before it dies (on a slow run they were, and the control
// below saw them on record). Negative control: a keeper that does not recover the file
// (keeper_intents) leaves the teardown off the record.
TEST(KeeperGuard, ARelayKilledAfterTheHandOverLeavesTheRecordsToTheKeeper) {
    auto r = teardown_on_record("relay_dies_at_report,journal_slow_writer");
    EXPECT_TRUE(r.port_free && r.nothing_left);
    EXPECT_TRUE(r.teardown_in_order()) << r.listed() << "\n" << r.err;
    EXPECT_EQ(r.ended_by, "keeper");

    auto control = teardown_on_record("relay_dies_at_report,journal_slow_writer,keeper_intents");
    EXPECT_EQ(control.first("process.snapshot"), std::string::npos) << control.listed();
    EXPECT_EQ(control.ended_by, "keeper");
}

// A keeper killed between its records and its report (keeper_dies_before_report): the relay
// has queued the records as they came; it sees the keeper die without a report, commits what
// it queued, recovers from its intent file only the keeper's lines not on record yet, tears
// down what is left itself and ends the session. Each teardown record is on record once.
// Negative control: a recovery that appends every line (recovery_appends_all) puts the
// records the relay was sent on record twice.
TEST(KeeperGuard, AKeeperKilledBetweenItsRecordsAndItsReportLeavesEachRecordOnce) {
    auto r = teardown_on_record("keeper_dies_before_report");
    EXPECT_TRUE(r.port_free && r.nothing_left);
    EXPECT_NE(r.first("process.snapshot"), std::string::npos) << r.listed();
    EXPECT_EQ(r.repeated, 0) << r.listed();
    EXPECT_TRUE(r.teardown_in_order()) << r.listed() << "\n" << r.err;
    EXPECT_EQ(r.ended_by, "");

    auto control = teardown_on_record("keeper_dies_before_report,recovery_appends_all");
    EXPECT_GT(control.repeated, 0) << control.listed() << "\n" << control.err;
}

// A relay that dies right after asking, its writer never having chained a thing: the request
// and the evidence survive in its intent file, and the keeper puts them on record (the
// abandoned call naming the request's seq) before its teardown and the session's end.
// Negative control: a keeper that does not recover the intent file leaves the call and the
// client's loss off the record.
TEST(KeeperGuard, ARelayDeadAfterAskingLeavesItsEvidenceToTheKeeper) {
    auto r = teardown_on_record("relay_dies_at_teardown,journal_hold_intents");
    EXPECT_TRUE(r.port_free && r.nothing_left);
    EXPECT_TRUE(r.before("activity.request", "session.client_lost") &&
                r.before("session.client_lost", "activity.abandoned") &&
                r.before("activity.abandoned", "process.snapshot") &&
                r.before("process.snapshot", "session.end"))
        << fmt::format("{}", fmt::join(r.kinds, " "));
    EXPECT_NE(r.request_seq, 0);
    EXPECT_EQ(r.abandoned, std::vector<int64_t>{r.request_seq});
    EXPECT_EQ(r.ended_by, "keeper");

    auto control = teardown_on_record("relay_dies_at_teardown,journal_hold_intents,keeper_intents");
    EXPECT_EQ(control.first("session.client_lost"), std::string::npos)
        << fmt::format("{}", fmt::join(control.kinds, " "));
    EXPECT_EQ(control.request_seq, 0);
    EXPECT_EQ(control.ended_by, "keeper");
}

// ---- A keeper killed between its first signal and its commit --------------------------

struct KilledKeeper : LeftInFlight {
    std::vector<std::string> trail;  // the log's records, in order: kind, and for the
                                     // teardown's "snapshot PID" / "signal PID SIG"
    int64_t degraded = 0;            // journal.degraded records
    CliRun verify;                   // `mcpwarden audit verify`

    // Whether the keeper's pass is on record: a process snapshotted before a first signal,
    // sent SIGTERM, then snapshotted before a first signal again (the relay's own teardown,
    // which finds it alive: it ignores SIGTERM). The relay's teardown alone snapshots it once.
    bool keepers_pass_on_record() const {
        for (size_t i = 0; i < trail.size(); ++i) {
            if (!trail[i].starts_with("snapshot ")) continue;
            const std::string pid = trail[i].substr(9);
            auto term = std::find(trail.begin() + static_cast<ptrdiff_t>(i), trail.end(),
                                  "signal " + pid + " " + std::to_string(SIGTERM));
            if (term != trail.end() && std::find(term, trail.end(), trail[i]) != trail.end())
                return true;
        }
        return false;
    }
    size_t first(const std::string& kind) const {
        auto it = std::find(trail.begin(), trail.end(), kind);
        return it == trail.end() ? std::string::npos : static_cast<size_t>(it - trail.begin());
    }
};

// The client leaves a call in flight and closes stdin; the keeper snapshots the tree, sends
// its first SIGTERM and is SIGKILLed right after it (keeper_dies_after_signal), before any of
// its records is committed. The relay sees it die and tears down what is left itself (the
// helper ignores SIGTERM: it is still there, and the relay's grace is 200 ms).
KilledKeeper keeper_killed_after_its_first_signal(const std::string& fault) {
    KilledKeeper out;
    TempDir dir;
    const std::string db = dir.file("journal.db");
    FixtureOptions fo;
    fo.shape = "ignore-term";
    static_cast<LeftInFlight&>(out) = leave_a_call_in_flight(
        dir, "keeper_dies_after_signal," + fault, fo, {"--term-grace", "200ms"});
    auto st = journal::for_each_record(db, 0, [&](const journal::Record& rec) {
        auto data = Json::parse(rec.body)["data"];
        const std::string pid = std::to_string(data.value("pid", int64_t{0}));
        if (rec.kind == "process.snapshot" && data.value("reason", "") == "before_first_signal")
            out.trail.push_back("snapshot " + pid);
        else if (rec.kind == "process.signal")
            out.trail.push_back("signal " + pid + " " + std::to_string(data.value("signal", 0)));
        else
            out.trail.push_back(rec.kind);
        if (rec.kind == "journal.degraded") ++out.degraded;
        return true;
    });
    EXPECT_TRUE(st.ok()) << st.error().message;
    out.verify = run_cli(dir, {"audit", "verify", "--journal", db}, 30s);
    return out;
}

// The keeper's snapshot and each signal are in the session's intent file before the signal
// (one write() each, no commit): the relay, which outlives the keeper, commits them before
// its own teardown's records. On record, in order, nothing counted lost, the journal verifies.
// Negative control: a keeper that keeps them in memory only (keeper_no_intents) takes them
// along: the relay's teardown is all the log shows, and nothing counts what is missing.
TEST(KeeperGuard, AKeeperKilledAfterItsFirstSignalLeavesItsRecordsToTheRelay) {
    auto r = keeper_killed_after_its_first_signal("");
    EXPECT_TRUE(r.port_free && r.nothing_left);
    EXPECT_TRUE(r.keepers_pass_on_record())
        << "the keeper's snapshot and first SIGTERM are missing\n"
        << fmt::format("{}", fmt::join(r.trail, " | ")) << "\n"
        << r.err;
    EXPECT_LT(r.first("session.client_lost"), r.first("activity.abandoned"));
    const size_t after_abandoned = r.first("activity.abandoned") + 1;
    EXPECT_TRUE(after_abandoned < r.trail.size() &&
                r.trail[after_abandoned].starts_with("snapshot "))
        << fmt::format("{}", fmt::join(r.trail, " | "));
    EXPECT_TRUE(r.first("session.end") != std::string::npos &&
                after_abandoned < r.first("session.end"))
        << fmt::format("{}", fmt::join(r.trail, " | "));
    EXPECT_EQ(r.degraded, 0);
    EXPECT_EQ(r.verify.code, 0) << r.verify.out << r.verify.err;
    EXPECT_EQ(r.verify.out.find("uncommitted intents"), std::string::npos) << r.verify.out;

    auto control = keeper_killed_after_its_first_signal("keeper_no_intents");
    EXPECT_TRUE(control.port_free && control.nothing_left);
    EXPECT_FALSE(control.keepers_pass_on_record())
        << fmt::format("{}", fmt::join(control.trail, " | "));
    EXPECT_EQ(control.degraded, 0) << "the loss is counted after all";
    EXPECT_EQ(control.verify.code, 0) << control.verify.out << control.verify.err;
}

// ---- A client that leaves during the relay's journal start-up ---------------------------

struct EarlyEnd : LeftInFlight, RecordKinds {
    CliRun verify;                    // `mcpwarden audit verify`
    std::string ended_by = "-";       // session.end's recorded_by ("" for the relay; "-": none)
    std::optional<int> opening_nice;  // of the relay's start-up thread once the client left
};

// `mcpwarden run --journal DB` of the fixture, its journal's start-up made 1 s long
// (journal_slow_open: a slow disk, a lock held), and a client that closes stdin as soon as
// the server is up, without a request: its EOF falls inside the start-up. Then whether the
// tree is gone, the log in order, and `audit verify`.
EarlyEnd leave_during_the_journal_start(const std::string& fault) {
    EarlyEnd out;
    TempDir dir;
    const std::string db = dir.file("journal.db"), port_file = dir.file("port");
    std::vector<std::string> argv = {kCli, "run", "--journal", db, "--eof-grace", "1s", "--"};
    for (auto& a : fixture_argv(FixtureOptions{}, port_file))
        argv.push_back(a);
    ChildOptions o;
    o.capture_stderr = true;
    o.unset_env = {"MCPWARDEN_JOURNAL", "MCPWARDEN_SESSION"};
    o.env = {{"MCPWARDEN_PHASES", "1"}, {"MCPWARDEN_FAULT", "journal_slow_open," + fault}};
    TestChild c(argv, o);
    EXPECT_TRUE(c.started()) << c.error();
    EXPECT_TRUE(wait_for_file(port_file, 10s));
    auto port = read_port_file(port_file);
    EXPECT_TRUE(port && !port_bindable(*port)) << "the tree holds no port: nothing to prove";
    c.close_stdin();
    out.opening_nice = opening_nice([&] { return c.pid(); }, "mcpwarden-jopen", 500ms);
    EXPECT_TRUE(c.wait_exit(20s));
    out.nothing_left = wait_until([&] { return live_tagged(c.tag()).empty(); }, 10s);
    out.port_free = port && wait_until([&] { return port_bindable(*port); }, 5s);
    out.err = c.read_stderr(5s);
    auto st = journal::for_each_record(db, 0, [&](const journal::Record& rec) {
        out.kinds.push_back(rec.kind);
        if (rec.kind == "session.end")
            out.ended_by = Json::parse(rec.body)["data"].value("recorded_by", "");
        return true;
    });
    EXPECT_TRUE(st.ok()) << st.error().message;
    out.verify = run_cli(dir, {"audit", "verify", "--journal", db}, 30s);
    return out;
}

// The relay reads its client while its journal opens (shim/journal_sink.cpp, "The journal's
// start-up"): the EOF is seen, the tree torn down and the port free before the start-up is
// over. The client's loss went to the intent file meanwhile and is committed after
// session.start, before the keeper's records, which wait for it: the log reads start,
// client_lost, snapshot, signal, exit, end, and verifies, with no intent left uncommitted.
// A relay that dies right after asking (relay_dies_at_teardown) leaves no session.start: the
// keeper writes it, recovers the client's loss from the intent file, then its own records.
// Negative control: the start-up done before the relay reads its client (journal_start_inline)
// holds the EOF, and so the first signal, behind it.
TEST(KeeperGuard, AClientLeavingDuringTheJournalsStartUpIsNotHeldBackByIt) {
    auto r = leave_during_the_journal_start("");
    EXPECT_TRUE(r.port_free && r.nothing_left) << r.err;
    EXPECT_TRUE(phase_before(r.err, "client_left", "journal_started") &&
                phase_before(r.err, "first_sigterm", "journal_started"))
        << "the teardown waited for the journal's start-up\n"
        << r.err;
    EXPECT_EQ(r.first("session.start"), 0u) << fmt::format("{}", fmt::join(r.kinds, " "));
    EXPECT_TRUE(r.before("session.start", "session.client_lost") &&
                r.before("session.client_lost", "process.snapshot") &&
                r.before("process.snapshot", "process.signal") &&
                r.before("process.signal", "process.exit") &&
                r.before("process.exit", "session.end"))
        << fmt::format("{}", fmt::join(r.kinds, " "));
    EXPECT_EQ(r.first("journal.degraded"), std::string::npos);
    EXPECT_EQ(r.verify.code, 0) << r.verify.out << r.verify.err;
    EXPECT_EQ(r.verify.out.find("uncommitted intents"), std::string::npos) << r.verify.out;
    EXPECT_EQ(r.ended_by, "");
    EXPECT_EQ(r.opening_nice, 19) << "the start-up did not yield the cores to the teardown";

    auto dead = leave_during_the_journal_start("relay_dies_at_teardown");
    EXPECT_TRUE(dead.port_free && dead.nothing_left) << dead.err;
    EXPECT_EQ(dead.first("session.start"), 0u) << fmt::format("{}", fmt::join(dead.kinds, " "));
    EXPECT_TRUE(dead.before("session.client_lost", "process.snapshot") &&
                dead.before("process.snapshot", "session.end"))
        << fmt::format("{}", fmt::join(dead.kinds, " "));
    EXPECT_EQ(dead.ended_by, "keeper");
    EXPECT_EQ(dead.verify.code, 0) << dead.verify.out << dead.verify.err;
    EXPECT_EQ(dead.verify.out.find("uncommitted intents"), std::string::npos) << dead.verify.out;

    auto control = leave_during_the_journal_start("journal_start_inline");
    EXPECT_TRUE(control.port_free && control.nothing_left) << control.err;
    EXPECT_TRUE(phase_before(control.err, "journal_started", "client_left") &&
                phase_before(control.err, "journal_started", "first_sigterm"))
        << control.err;
    EXPECT_TRUE(control.before("session.start", "session.client_lost") &&
                control.before("session.client_lost", "session.end"))
        << fmt::format("{}", fmt::join(control.kinds, " "));

    // A start-up that does not yield keeps its priority through the teardown.
    auto unyielded = leave_during_the_journal_start("journal_opening_not_yielded");
    EXPECT_TRUE(unyielded.port_free && unyielded.nothing_left) << unyielded.err;
    EXPECT_EQ(unyielded.opening_nice, 0) << unyielded.err;
}

// Where the journal's early start-up runs (shim/session_start.cpp, open_journal_early): a
// run of the fixture with the start-up made 1 s long (journal_slow_open), read while it
// sleeps. The CPUs of the relay, its start-up thread, the keeper and the server.
struct OpeningCpus {
    std::string relay, opening, keeper, server;
};

OpeningCpus cpus_during_the_journal_start(const std::string& fault) {
    OpeningCpus out;
    TempDir dir;
    const std::string db = dir.file("journal.db"), port_file = dir.file("port");
    std::vector<std::string> argv = {kCli, "run", "--journal", db, "--"};
    for (auto& a : fixture_argv(FixtureOptions{}, port_file))
        argv.push_back(a);
    ChildOptions o;
    o.unset_env = {"MCPWARDEN_JOURNAL", "MCPWARDEN_SESSION"};
    o.env = {{"MCPWARDEN_FAULT", "journal_slow_open," + fault}};
    TestChild c(argv, o);
    EXPECT_TRUE(c.started()) << c.error();
    EXPECT_TRUE(wait_until(
        [&] { return !(out.opening = thread_cpus_allowed(c.pid(), "mcpwarden-jopen")).empty(); },
        5s))
        << "no journal start-up thread seen";
    out.relay = cpus_allowed(c.pid());
    EXPECT_TRUE(wait_for_file(port_file, 10s));
    std::vector<pid_t> keepers;  // the relay's children but its run's background worker
    for (pid_t k : children_of(c.pid()))
        if (auto st = read_stat(k); st && st->comm != "mcpwarden-sweep") keepers.push_back(k);
    EXPECT_EQ(keepers.size(), 1u);
    if (keepers.size() == 1) {
        out.keeper = cpus_allowed(keepers[0]);
        auto servers = children_of(keepers[0]);
        if (!servers.empty()) out.server = cpus_allowed(servers[0]);
    }
    c.close_stdin();
    EXPECT_TRUE(c.wait_exit(20s));
    EXPECT_TRUE(wait_until([&] { return live_tagged(c.tag()).empty(); }, 10s));
    return out;
}

// The keeper starts on the relay's CPU and has it once the relay sleeps; the journal's
// start-up, which begins at that moment, runs on the relay's other CPUs, so that the keeper
// does not wait behind it to start the server. The keeper and the server keep the relay's
// whole set. Negative control: journal_opening_beside_keeper leaves the thread the relay's
// whole set (where the run may use one CPU only, nothing is moved either way).
TEST(KeeperGuard, TheJournalsEarlyStartUpRunsOffTheKeepersCpu) {
    cpu_set_t ours;
    CPU_ZERO(&ours);
    ASSERT_EQ(::sched_getaffinity(0, sizeof ours, &ours), 0);
    const bool several = CPU_COUNT(&ours) > 1;

    auto r = cpus_during_the_journal_start("");
    EXPECT_FALSE(r.relay.empty());
    EXPECT_FALSE(r.opening.empty());
    if (several)
        EXPECT_NE(r.opening, r.relay) << "the start-up may share the keeper's CPU";
    else
        EXPECT_EQ(r.opening, r.relay);
    EXPECT_EQ(r.keeper, r.relay);
    EXPECT_EQ(r.server, r.relay);

    auto control = cpus_during_the_journal_start("journal_opening_beside_keeper");
    EXPECT_EQ(control.opening, control.relay);
    EXPECT_EQ(control.server, control.relay);
}

// The client's loss seen during the start-up cannot be committed when the journal is ready
// (early_append_fails: as under the append lock held past its wait by another writer). It
// waits in the intent file, and is committed before the keeper's records and session.end,
// not counted as lost and not recovered after the end (shim/journal_sink.cpp,
// recover_uncommitted). Negative control: session.end first (end_before_recovery); the loss
// is then not on record before the end.
TEST(KeeperGuard, EvidenceWhoseCommitFailedIsOnRecordBeforeTheEnd) {
    auto r = leave_during_the_journal_start("early_append_fails");
    EXPECT_TRUE(r.port_free && r.nothing_left) << r.err;
    EXPECT_TRUE(r.before("session.start", "session.client_lost") &&
                r.before("session.client_lost", "process.snapshot") &&
                r.before("process.exit", "session.end"))
        << fmt::format("{}", fmt::join(r.kinds, " "));
    ASSERT_FALSE(r.kinds.empty());
    EXPECT_EQ(r.kinds.back(), "checkpoint") << fmt::format("{}", fmt::join(r.kinds, " "));
    EXPECT_EQ(r.first("journal.degraded"), std::string::npos)
        << "recovered, yet counted as lost: " << fmt::format("{}", fmt::join(r.kinds, " "));
    EXPECT_EQ(r.verify.code, 0) << r.verify.out << r.verify.err;
    EXPECT_EQ(r.verify.out.find("uncommitted intents"), std::string::npos) << r.verify.out;

    auto control = leave_during_the_journal_start("early_append_fails,end_before_recovery");
    EXPECT_FALSE(control.before("session.client_lost", "session.end"))
        << fmt::format("{}", fmt::join(control.kinds, " "));
}

}  // namespace
}  // namespace warden::testing::keeper_guard
