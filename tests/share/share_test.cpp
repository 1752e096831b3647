// `mcpwarden run --share` with real processes: clients of the fixture through the user's
// broker (docs/SHARING.md). Each test has a runtime directory, journal and tag of its own, so
// its broker is its own; every process it starts carries the tag and is killed by the
// children's guards if a test fails.
#include <limits.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/child.hpp"
#include "common/journal_rows.hpp"
#include "common/jsonrpc.hpp"
#include "common/paths.hpp"
#include "common/procfs.hpp"
#include "common/tmpfs.hpp"
#include "common/util.hpp"
#include "share/rendezvous.hpp"
#include "share/taken.hpp"
#include "sys/fd.hpp"
#include "sys/fd_passing.hpp"

namespace warden::testing {
namespace {

using nlohmann::json;

std::string cmdline(pid_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/cmdline");
    std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    for (char& c : s)
        if (c == '\0') c = ' ';
    return s;
}

struct Share {
    TempDir dir;
    std::string tag = unique_tag();
    std::string db() const { return dir.file("journal.db"); }
    mutable bool long_linger = false;  // a client asked for more than the default linger

    // The broker and its trees end by themselves after the linger (the clients' TestChild
    // kills only its own run, not the tag: see ChildOptions::kill_tagged), each tree's keeper
    // removing its session cgroup. What has not ended 5 s later failed the test (unless it
    // asked for a longer linger than the default); it is killed then, and the session cgroups
    // its killed keepers could not remove go with it.
    ~Share() {
        // A failed test shows what the brokers said (they write to broker.log, rotated).
        if (::testing::Test::HasFailure())
            for (const char* suffix : {".1", ""}) {
                std::ifstream log(dir.file("mcpwarden-share/broker.log") + suffix);
                std::string text((std::istreambuf_iterator<char>(log)),
                                 std::istreambuf_iterator<char>());
                if (!text.empty()) std::fprintf(stderr, "broker.log%s:\n%s", suffix, text.c_str());
            }
        const bool ended = wait_until([&] { return live_tagged(tag).empty(); }, 5s, 20ms);
        if (!ended) {
            if (!long_linger)
                ADD_FAILURE() << "the broker or a shared tree outlived the linger by 5 s";
            TreeGuard(0, tag).kill_all();
        }
        const auto left = remove_recorded_session_cgroups(db());
        if (ended) {
            EXPECT_TRUE(left.empty()) << ::testing::PrintToString(left) << " left";
        }
    }
    Share() = default;
    Share(const Share&) = delete;
    Share& operator=(const Share&) = delete;

    ChildOptions options(std::vector<std::pair<std::string, std::string>> extra = {}) const {
        ChildOptions o;
        o.tag = tag;
        o.kill_tagged = false;
        o.env = {{"XDG_RUNTIME_DIR", dir.path()},
                 {"XDG_STATE_HOME", dir.file("state")},
                 {"XDG_CONFIG_HOME", dir.file("config")},
                 {"MCPWARDEN_JOURNAL", db()}};
        o.env.insert(o.env.end(), extra.begin(), extra.end());
        return o;
    }
    TestChild client(std::vector<std::pair<std::string, std::string>> extra = {},
                     const std::string& linger = "300ms",
                     std::vector<std::string> server_args = {}) const {
        long_linger = long_linger || linger != "300ms";
        std::vector<std::string> argv{kCli,          "run",   "--share", "--share-linger", linger,
                                      "--eof-grace", "500ms", "--",      kFixture};
        argv.insert(argv.end(), server_args.begin(), server_args.end());
        return TestChild(std::move(argv), options(std::move(extra)));
    }
    // What `mcpwarden ARGS…` writes on stdout, run with the test's environment (under a tag
    // of its own: its guard, when it goes, kills what carries its tag).
    std::string cli(std::vector<std::string> args) const {
        args.insert(args.begin(), kCli);
        ChildOptions o = options();
        o.tag = unique_tag();
        TestChild c(std::move(args), o);
        std::string out = c.read_all_stdout(20s);
        (void)c.wait_exit(20s);
        return out;
    }
    // The live processes of the test's tag whose command line contains `word`.
    std::vector<pid_t> live(const std::string& word) const {
        std::vector<pid_t> out;
        for (pid_t p : live_tagged(tag))
            if (cmdline(p).find(word) != std::string::npos) out.push_back(p);
        return out;
    }
    // The servers: fixture processes (argv[0], not the runs that name it) whose parent is
    // not one (the fixture's port-holding helper is of its tree).
    std::vector<pid_t> servers() const {
        auto fixture = [](pid_t p) {
            return cmdline(p).rfind(std::string(kFixture) + " ", 0) == 0;
        };
        std::vector<pid_t> out;
        for (pid_t p : live_tagged(tag)) {
            auto st = read_stat(p);
            if (fixture(p) && st && !fixture(st->ppid)) out.push_back(p);
        }
        return out;
    }
    std::vector<pid_t> brokers() const { return live(" broker --linger"); }
    // The records of `kind` in the journal, once there is one (within 10 s; none: empty).
    std::vector<json> records(const std::string& kind) const {
        std::vector<json> found;
        wait_until([&] { return !(found = record_data(db(), kind)).empty(); }, 10s);
        return found;
    }
};

// initialize + initialized; true when answered.
bool handshake(TestChild& c, const json& id = 1) {
    if (!c.write_line(rpc_initialize(id)) || !c.write_line(rpc_initialized())) return false;
    auto r = read_response(c, id, 20s);
    return r && r->contains("result");
}

// Five clients on one tree: one server process; the same request id from every client at
// once, each answered with its own text; one client SIGKILLed mid-call while the others go
// on. Each call on record once, in its client's session (the tree's session has none of
// them). The broker SIGKILLed: its server is gone, the call in flight gets an error, the
// sessions go on with a fresh tree. A `run --share` returning leaves nothing but the
// broker's, which ends after the linger.
TEST(Share, ClientsShareOneTreeAndOutliveTheBrokersDeathWithAFreshOne) {
    Share s;
    std::vector<TestChild> clients;
    for (int i = 0; i < 5; ++i) {
        clients.push_back(s.client());
        ASSERT_TRUE(clients.back().started()) << clients.back().error();
    }
    for (TestChild& c : clients)
        ASSERT_TRUE(handshake(c));
    for (size_t i = 0; i < clients.size(); ++i)
        ASSERT_TRUE(clients[i].write_line(
            rpc_tools_call(7, "echo", {{"text", "client-" + std::to_string(i)}})));
    for (size_t i = 0; i < clients.size(); ++i) {
        auto r = read_response(clients[i], 7, 20s);
        ASSERT_TRUE(r) << "client " << i;
        EXPECT_EQ(result_text(*r), "client-" + std::to_string(i));
    }
    EXPECT_EQ(s.servers().size(), 1u) << "one server for five sessions";
    auto brokers = s.brokers();
    ASSERT_EQ(brokers.size(), 1u);
    // The journal: five client sessions, each naming the one tree's session.
    ASSERT_TRUE(wait_until([&] { return record_data(s.db(), "session.start").size() >= 6; }, 10s));
    std::set<std::string> trees;
    int shared = 0;
    for (const json& start : record_data(s.db(), "session.start"))
        if (start.contains("shared_tree")) {
            ++shared;
            trees.insert(start["shared_tree"].get<std::string>());
        }
    EXPECT_EQ(shared, 5);
    ASSERT_EQ(trees.size(), 1u);
    // Each call on record once, in the session of the client that made it, its answer too:
    // the tree's own session records none of the calls it served again.
    const std::string tree = *trees.begin();
    std::map<std::string, int> calls, answers;  // session → its echo calls, its answers
    ASSERT_TRUE(wait_until(
        [&] {
            calls.clear();
            answers.clear();
            for (const json& r : record_data(s.db(), "activity.request"))
                if (r.contains("tool") && r["tool"] == "echo") ++calls[r.value("session", "")];
            for (const json& r : record_data(s.db(), "activity.response"))
                ++answers[r.value("session", "")];
            int answered = 0;  // client sessions with their initialize and echo answered
            for (const auto& [session, n] : answers)
                answered += session != tree && n == 2;
            return answered == 5;
        },
        10s))
        << ::testing::PrintToString(answers);
    EXPECT_EQ(calls.size(), 5u) << "each client's call in its own session";
    for (const auto& [session, n] : calls)
        EXPECT_EQ(n, 1) << "session " << session << (session == tree ? " (the tree's)" : "");
    EXPECT_EQ(calls.count(tree) + answers.count(tree), 0u)
        << "the tree's session records its clients' calls again";

    // A client SIGKILLed mid-call: the others go on.
    ASSERT_TRUE(clients[0].write_line(rpc_tools_call(8, "sleep", {{"seconds", 30}})));
    std::this_thread::sleep_for(200ms);
    clients[0].signal(SIGKILL);
    ASSERT_TRUE(clients[1].write_line(rpc_tools_call(9, "echo", {{"text", "after"}})));
    auto after = read_response(clients[1], 9, 20s);
    ASSERT_TRUE(after);
    EXPECT_EQ(result_text(*after), "after");
    ASSERT_TRUE(wait_until([&] { return !record_data(s.db(), "activity.abandoned").empty(); }, 10s))
        << "the killed client's call is not on record as abandoned";

    // The broker SIGKILLed (verified by its command line and our tag) with a call in flight:
    // the tree's server is gone, the call gets an error, and the sessions go on through a new
    // broker and a fresh tree with their handshake replayed.
    // The old tree: its server and what the server started (the fixture's port holder).
    ASSERT_EQ(s.servers().size(), 1u);
    const pid_t old_server = s.servers()[0];
    std::vector<std::pair<pid_t, uint64_t>> old;
    for (pid_t p : descendants_of(old_server))
        if (auto st = read_stat(p)) old.emplace_back(p, st->starttime);
    if (auto st = read_stat(old_server)) old.emplace_back(old_server, st->starttime);
    ASSERT_TRUE(clients[1].write_line(rpc_tools_call(10, "sleep", {{"seconds", 30}})));
    std::this_thread::sleep_for(200ms);
    ASSERT_EQ(::kill(brokers[0], SIGKILL), 0);
    auto old_gone = [&] {
        return std::none_of(old.begin(), old.end(),
                            [](const auto& p) { return is_same_live_process(p.first, p.second); });
    };
    EXPECT_TRUE(wait_until(old_gone, 15s)) << "the server's tree outlived its broker";
    auto failed = read_response(clients[1], 10, 20s);
    ASSERT_TRUE(failed);
    EXPECT_NE(failed->dump().find("ended before answering"), std::string::npos) << failed->dump();
    for (size_t i = 2; i < clients.size(); ++i) {
        ASSERT_TRUE(clients[i].write_line(rpc_tools_call(11, "echo", {{"text", "again"}})));
        auto again = read_response(clients[i], 11, 20s);
        ASSERT_TRUE(again) << "client " << i << " was not served after the broker's death";
        EXPECT_EQ(result_text(*again), "again") << "client " << i << ": " << again->dump();
    }
    auto fresh = s.servers();
    ASSERT_EQ(fresh.size(), 1u) << "one fresh tree for the sessions that went on: "
                                << ::testing::PrintToString(fresh);
    EXPECT_NE(fresh[0], old_server);

    // The next client joins that tree (while the others are on it: a tree without clients
    // ends after the linger); every `run --share` returning leaves nothing of its own.
    TestChild next = s.client();
    ASSERT_TRUE(handshake(next));
    EXPECT_EQ(s.servers(), fresh);
    auto broker = s.brokers();
    ASSERT_EQ(broker.size(), 1u);
    for (size_t i = 1; i < clients.size(); ++i) {
        clients[i].close_stdin();
        auto st = clients[i].wait_exit(15s);
        ASSERT_TRUE(st) << "client " << i;
        EXPECT_EQ(describe_status(*st), "exited 0");
    }
    next.close_stdin();
    auto st = next.wait_exit(15s);
    ASSERT_TRUE(st);
    EXPECT_EQ(describe_status(*st), "exited 0");
    // Nothing the clients' runs started is alive but the broker (and its tree, lingering).
    // The dead broker's tree may still be on its way out (its run tearing down since the
    // broker's death): waited for, bounded.
    auto strays = [&] {
        std::vector<pid_t> out;
        auto d = descendants_of(broker[0]);
        for (pid_t p : live_tagged(s.tag))
            if (p != broker[0] && std::find(d.begin(), d.end(), p) == d.end()) out.push_back(p);
        return out;
    };
    wait_until([&] { return strays().empty(); }, 5s, 20ms);
    for (pid_t p : strays())
        ADD_FAILURE() << "left behind: " << p << " " << cmdline(p);
    EXPECT_TRUE(wait_until([&] { return nothing_tagged_left(s.tag); }, 15s))
        << "the broker or its tree outlived the linger";
}

// Requests a dying broker never read are served by the next one. A SIGKILLed broker may still
// have its socket open (its other threads exiting) after its last read: a request written then
// is taken by the socket and never read. Here the broker is stopped (SIGSTOP) while each client
// writes a request, then killed: it never acknowledged those lines, so each `run --share` sends
// its request on to the next broker, after the fresh tree's replayed handshake (answered 2 s
// late by the fresh server: the requests wait behind it), and each is answered its own by one
// fresh tree. Negative control (MCPWARDEN_FAULT=share_untaken_failed): each is answered with
// the error of a request in flight, though no server had it.
TEST(Share, RequestsADyingBrokerNeverReadAreServedByTheNextOne) {
    for (bool guarded : {true, false}) {
        SCOPED_TRACE(guarded ? "untaken lines sent on" : "negative control: share_untaken_failed");
        Share s;
        const std::string fault = s.dir.file("wake-fault");
        std::vector<std::pair<std::string, std::string>> env;
        if (!guarded) env.emplace_back("MCPWARDEN_FAULT", "share_untaken_failed");
        std::vector<TestChild> clients;
        for (int i = 0; i < 3; ++i) {
            clients.push_back(s.client(env, "300ms", {"--wake-fault", fault}));
            ASSERT_TRUE(clients.back().started()) << clients.back().error();
        }
        for (TestChild& c : clients)
            ASSERT_TRUE(handshake(c));
        auto brokers = s.brokers();
        ASSERT_EQ(brokers.size(), 1u);
        ASSERT_EQ(s.servers().size(), 1u);
        const pid_t old_server = s.servers()[0];
        const auto old_start = read_stat(old_server);
        ASSERT_TRUE(old_start);
        {
            std::ofstream f(fault);
            f << "slow\n";  // read by the next server at its start-up
        }
        ASSERT_EQ(::kill(brokers[0], SIGSTOP), 0);
        for (size_t i = 0; i < clients.size(); ++i)
            ASSERT_TRUE(clients[i].write_line(
                rpc_tools_call(11, "echo", {{"text", "again-" + std::to_string(i)}})));
        // Each `run --share` read its line and wrote it to the stopped broker's socket: its
        // stdin drained, and it waits in poll(2) again.
        auto relayed = [](const TestChild& c) {
            int queued = -1;
            std::ifstream sc("/proc/" + std::to_string(c.pid()) + "/syscall");
            std::string nr;
            sc >> nr;
            return ::ioctl(c.stdin_fd(), FIONREAD, &queued) == 0 && queued == 0 &&
                   (nr == std::to_string(SYS_poll) || nr == std::to_string(SYS_ppoll));
        };
        for (const TestChild& c : clients)
            ASSERT_TRUE(wait_until([&] { return relayed(c); }, 10s, 5ms));
        ASSERT_EQ(::kill(brokers[0], SIGKILL), 0);
        EXPECT_TRUE(wait_until(
            [&] { return !is_same_live_process(old_server, old_start->starttime); }, 15s));
        for (size_t i = 0; i < clients.size(); ++i) {
            auto again = read_response(clients[i], 11, 20s);
            ASSERT_TRUE(again) << "client " << i;
            if (guarded) {
                EXPECT_EQ(result_text(*again), "again-" + std::to_string(i))
                    << "client " << i << ": " << again->dump();
            } else {
                EXPECT_NE(again->dump().find("ended before answering"), std::string::npos)
                    << again->dump();
            }
        }
        if (guarded) {
            auto fresh = s.servers();
            EXPECT_EQ(fresh.size(), 1u) << ::testing::PrintToString(fresh);
        }
        for (TestChild& c : clients) {
            c.close_stdin();
            auto st = c.wait_exit(15s);
            ASSERT_TRUE(st);
            EXPECT_EQ(describe_status(*st), "exited 0");
        }
    }
}

// 2026-07-28 requests need no handshake: two stateless clients share a tree, the same id at
// once, each answered its own. A server's connection speaks one era (share/mux.hpp, "Eras"):
// the legacy client's tree is not theirs, and the first of them records why it got its own.
// Negative control (MCPWARDEN_FAULT=share_eras_mixed): all three on the legacy client's tree.
TEST(Share, StatelessClientsShareATreeOfTheirEraAndLegacyOnesAnother) {
    for (bool guarded : {true, false}) {
        SCOPED_TRACE(guarded ? "eras kept apart" : "negative control: share_eras_mixed");
        Share s;
        std::vector<std::pair<std::string, std::string>> env;
        if (!guarded) env.emplace_back("MCPWARDEN_FAULT", "share_eras_mixed");
        TestChild a = s.client(env), b = s.client(env), legacy = s.client(env);
        ASSERT_TRUE(handshake(legacy));
        ASSERT_TRUE(a.write_line(
            rpc_stateless(4, "tools/call", {{"name", "echo"}, {"arguments", {{"text", "A"}}}})));
        auto ra = read_response(a, 4, 20s);
        ASSERT_TRUE(b.write_line(
            rpc_stateless(4, "tools/call", {{"name", "echo"}, {"arguments", {{"text", "B"}}}})));
        ASSERT_TRUE(legacy.write_line(rpc_tools_call(4, "echo", {{"text", "L"}})));
        auto rb = read_response(b, 4, 20s), rl = read_response(legacy, 4, 20s);
        ASSERT_TRUE(ra && rb && rl);
        EXPECT_EQ(result_text(*ra), "A");
        EXPECT_EQ(result_text(*rb), "B");
        EXPECT_EQ(result_text(*rl), "L");
        EXPECT_EQ(s.servers().size(), guarded ? 2u : 1u);
        if (!guarded) continue;
        const std::vector<json> own = s.records("share.own_tree");
        ASSERT_FALSE(own.empty());
        EXPECT_EQ(own.size(), 1u) << "the second stateless client joined the first one's tree";
        EXPECT_NE(own[0]["why"].get<std::string>().find("took the legacy (initialize) era"),
                  std::string::npos)
            << own[0].dump();
    }
}

// The resident memory of `pid` in KiB (VmRSS), 0 when it cannot be read.
uint64_t rss_kib(pid_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(f, line);)
        if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6));
    return 0;
}

// The data of the records of `kind` in session `session`.
std::vector<json> session_records(const Share& s, const std::string& kind,
                                  const std::string& session) {
    std::vector<json> out;
    for (json& d : record_data(s.db(), kind))
        if (d.value("session", "") == session) out.push_back(std::move(d));
    return out;
}

// A client that never reads its answers while its tree keeps answering it (here with a 1 MiB
// bound, MCPWARDEN_SHARE_CLIENT_QUEUE, which the broker inherits from the run that starts
// it): once its unread answers would pass the bound it is dropped, its session ends
// `client_too_slow` with `share.client_too_slow` on its record, and another client of the
// same tree is answered throughout. Negative control (share_client_queue_unbounded): the
// client that does not read is never dropped, and the broker holds every answer it was sent.
//
// Its requests go in one write, so that its `run --share` reads them all at once: a `run
// --share` whose stdout is full stops reading its stdin (what it cannot deliver it does not
// ask for), so requests written one by one, on a loaded machine, would reach the broker only
// until the first answers fill the pipe, and no more answers than the pipe and sockets take
// would ever wait in the broker. The test then waits for what shows the outcome, the
// records of the slow client's session, not for a time.
TEST(Share, AClientThatNeverReadsIsDroppedWhileAnotherGoesOn) {
    for (bool bounded : {true, false}) {
        SCOPED_TRACE(bounded ? "bounded" : "negative control: share_client_queue_unbounded");
        Share s;
        std::vector<std::pair<std::string, std::string>> env{
            {"MCPWARDEN_SHARE_CLIENT_QUEUE", "1MiB"}};
        if (!bounded) env.emplace_back("MCPWARDEN_FAULT", "share_client_queue_unbounded");
        TestChild slow = s.client(env), busy = s.client(env);
        ASSERT_TRUE(handshake(slow));
        ASSERT_TRUE(handshake(busy));
        std::string slow_session;
        ASSERT_TRUE(wait_until(
            [&] {
                for (const json& st : record_data(s.db(), "session.start"))
                    if (st.value("share_client_pid", int64_t{0}) == slow.pid())
                        slow_session = st.value("session", "");
                return !slow_session.empty();
            },
            10s));
        // The broker the second run started, if both started one, finds the lock held and
        // exits: the one left is the clients'.
        std::vector<pid_t> brokers;
        ASSERT_TRUE(wait_until([&] { return (brokers = s.brokers()).size() == 1; }, 10s))
            << brokers.size() << " brokers";
        const uint64_t before = rss_kib(brokers[0]);
        // 6 MiB of answers to a client that reads none of them: 24 requests of 256 KiB each,
        // in one write (under PIPE_BUF, so its run reads them in one read).
        constexpr int kBig = 24;
        std::string requests;
        for (int i = 0; i < kBig; ++i)
            requests += rpc_tools_call(100 + i, "big", {{"bytes", 262144}}) + "\n";
        ASSERT_LT(requests.size(), size_t{PIPE_BUF});
        ASSERT_TRUE(slow.write(requests));
        auto big_requests = [&] {
            size_t n = 0;
            for (const json& r : session_records(s, "activity.request", slow_session))
                n += r.value("tool", "") == "big";
            return n;
        };
        // The other client is answered all along, until the slow one is dropped (bounded) or
        // the broker holds several MiB of its answers (unbounded). Bounded in calls and time
        // only so that a broken build ends; the outcome does not depend on either.
        bool dropped = false, grown = false;
        int calls = 0;
        const auto start = std::chrono::steady_clock::now();
        for (; calls < 3000 && !(bounded ? dropped : grown) &&
               std::chrono::steady_clock::now() < start + 120s;
             ++calls) {
            ASSERT_TRUE(busy.write_line(rpc_tools_call(calls + 10, "echo", {{"text", "busy"}})));
            auto r = read_response(busy, calls + 10, 20s);
            ASSERT_TRUE(r) << "call " << calls << " of the client that reads";
            EXPECT_EQ(result_text(*r), "busy");
            dropped = !session_records(s, "share.client_too_slow", slow_session).empty();
            grown = rss_kib(brokers[0]) > before + 3 * 1024;
            std::this_thread::sleep_for(20ms);
        }
        const std::string state = fmt::format(
            "after {} calls in {} ms: the broker's RSS went from {} to {} KiB, {} of the {} "
            "requests of the slow client on its record",
            calls,
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                  start)
                .count(),
            before, rss_kib(brokers[0]), big_requests(), kBig);
        if (bounded) {
            ASSERT_TRUE(dropped) << "the client that never reads was never dropped, " << state;
            auto why = session_records(s, "share.client_too_slow", slow_session);
            EXPECT_EQ(why[0].value("bound_bytes", int64_t{0}), 1 << 20) << why[0].dump();
            auto end = session_records(s, "session.end", slow_session);
            ASSERT_TRUE(wait_until(
                [&] { return !(end = session_records(s, "session.end", slow_session)).empty(); },
                10s));
            EXPECT_EQ(end[0].value("reason", ""), "client_too_slow");
            ASSERT_TRUE(busy.write_line(rpc_tools_call(99, "echo", {{"text", "after"}})));
            auto after = read_response(busy, 99, 20s);
            ASSERT_TRUE(after);
            EXPECT_EQ(result_text(*after), "after");
            EXPECT_EQ(s.servers().size(), 1u) << "the tree goes on for the client that reads";
        } else {
            // Unbounded, the broker holds what the client does not read: several MiB.
            EXPECT_TRUE(grown) << state;
            EXPECT_FALSE(dropped);
            // All of them taken: the journal records them after the broker took them.
            EXPECT_TRUE(wait_until([&] { return big_requests() == size_t{kBig}; }, 20s, 50ms))
                << big_requests() << " of the " << kBig << " requests on record";
        }
    }
}

// broker.log is bounded as a server's log is: a broker that finds it full (here filled
// beforehand, with three older files beside it) rotates it before its first line, so the
// log never spans more than broker.log and three older files, the oldest dropped; what it
// says goes to a fresh broker.log. Negative control (share_log_unrotated): it grows on.
TEST(Share, TheBrokersLogIsRotatedAndBounded) {
    for (bool rotated : {true, false}) {
        SCOPED_TRACE(rotated ? "rotated" : "negative control: share_log_unrotated");
        Share s;
        const std::string dir = s.dir.file("mcpwarden-share");
        ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
        const std::string log = dir + "/broker.log";
        const std::string full(size_t{1} << 20, 'x');
        for (const std::string& name : {log, log + ".1", log + ".2", log + ".3"}) {
            std::ofstream f(name);
            f << name.substr(name.rfind('/') + 1) << "\n" << full;
        }
        TestChild c = rotated ? s.client() : s.client({{"MCPWARDEN_FAULT", "share_log_unrotated"}});
        ASSERT_TRUE(handshake(c));
        c.close_stdin();
        ASSERT_TRUE(c.wait_exit(15s));
        ASSERT_TRUE(wait_until([&] { return nothing_tagged_left(s.tag); }, 15s));
        auto first_line = [](const std::string& path) {
            std::ifstream f(path);
            std::string line;
            std::getline(f, line);
            return line;
        };
        auto live = read_file(log);
        ASSERT_TRUE(live);
        if (rotated) {
            EXPECT_LT(live->size(), size_t{64} << 10) << "broker.log was not started anew";
            EXPECT_NE(live->find("listening on"), std::string::npos) << *live;
            EXPECT_EQ(first_line(log + ".1"), "broker.log");
            EXPECT_EQ(first_line(log + ".2"), "broker.log.1");
            EXPECT_EQ(first_line(log + ".3"), "broker.log.2");
            EXPECT_NE(::access((log + ".4").c_str(), F_OK), 0) << "a fifth file";
        } else {
            EXPECT_GT(live->size(), full.size()) << "the full log was rotated after all";
            EXPECT_EQ(first_line(log + ".1"), "broker.log.1");
        }
    }
}

// `ps` shows the broker, its tree and the client sessions joined to it, and a tree lingering
// without clients; `reap --orphans` (suspects included) selects nothing of either: the tree's
// stdin is the live broker's. Negative control: a plain `run` (its parent is the test, not a
// broker) is listed as no broker's tree.
TEST(Share, PsShowsTheBrokerAndItsTreeAndReapLeavesThem) {
    Share s;
    TestChild a = s.client({}, "20s"), b = s.client({}, "20s");
    ASSERT_TRUE(handshake(a));
    ASSERT_TRUE(handshake(b));
    TestChild plain({kCli, "run", "--", kFixture}, s.options());
    ASSERT_TRUE(handshake(plain));
    auto brokers = s.brokers();
    ASSERT_EQ(brokers.size(), 1u);
    const auto servers = s.servers();
    ASSERT_EQ(servers.size(), 2u) << "the shared tree's server and the plain run's";
    std::set<std::string> joined;
    ASSERT_TRUE(wait_until(
        [&] {
            joined.clear();
            for (const json& st : record_data(s.db(), "session.start"))
                if (st.contains("shared_tree")) joined.insert(st.value("session", ""));
            return joined.size() == 2;
        },
        10s));
    auto ps = [&] {
        json j = json::parse(s.cli({"ps", "--json", "--journal", s.db()}), nullptr, false);
        return j.is_object() ? j.value("brokers", json::array()) : json::array();
    };
    json listed = ps();
    ASSERT_EQ(listed.size(), 1u) << listed.dump();
    EXPECT_EQ(listed[0]["broker"]["pid"].get<pid_t>(), brokers[0]);
    ASSERT_EQ(listed[0]["trees"].size(), 1u) << "the plain run is no broker's tree";
    const json& tree = listed[0]["trees"][0];
    const pid_t shared_server = tree["server"]["pid"].get<pid_t>();
    EXPECT_NE(std::find(servers.begin(), servers.end(), shared_server), servers.end());
    std::set<std::string> clients;
    for (const json& c : tree["clients"])
        clients.insert(c.value("session", ""));
    EXPECT_EQ(clients, joined);
    const std::string text = s.cli({"ps", "--journal", s.db()});
    EXPECT_NE(text.find("broker " + std::to_string(brokers[0]) + " (run --share)"),
              std::string::npos)
        << text;

    // Every process of the broker and its tree: none is an orphan to reap.
    auto reaped = [&] {
        std::vector<pid_t> mine = descendants_of(brokers[0]);
        mine.push_back(brokers[0]);
        json plan = json::parse(s.cli({"reap", "--orphans", "--include-suspects", "--dry-run",
                                       "--json", "--journal", s.db()}),
                                nullptr, false);
        std::vector<pid_t> hit;
        const std::string dump = plan.dump();
        for (pid_t p : mine)
            if (dump.find("\"pid\":" + std::to_string(p) + ",") != std::string::npos ||
                dump.find("\"pid\":" + std::to_string(p) + "}") != std::string::npos)
                hit.push_back(p);
        return hit;
    };
    EXPECT_TRUE(reaped().empty());

    // Both clients gone: the tree lingers, still the broker's, still no orphan.
    a.close_stdin();
    b.close_stdin();
    ASSERT_TRUE(a.wait_exit(15s));
    ASSERT_TRUE(b.wait_exit(15s));
    ASSERT_TRUE(wait_until(
        [&] {
            listed = ps();
            return listed.size() == 1 && listed[0]["trees"].size() == 1 &&
                   listed[0]["trees"][0]["clients"].empty();
        },
        10s))
        << listed.dump();
    EXPECT_EQ(listed[0]["trees"][0]["server"]["pid"].get<pid_t>(), shared_server);
    EXPECT_NE(s.cli({"ps", "--journal", s.db()}).find("no client joined, lingering"),
              std::string::npos);
    EXPECT_TRUE(reaped().empty());
}

// A client that gives every server a new value of its per-session variables (Claude Code's
// CLAUDE_CODE_SESSION_ID, its messaging socket and token) still shares the tree: those are left
// out of the identity. Negative control (share_session_vars_kept): every session gets a tree.
TEST(Share, AClientsPerSessionVariablesDoNotSplitTheTree) {
    for (bool left_out : {true, false}) {
        SCOPED_TRACE(left_out ? "left out" : "negative control: share_session_vars_kept");
        Share s;
        auto env = [&](const std::string& n) {
            std::vector<std::pair<std::string, std::string>> e{
                {"CLAUDE_CODE_SESSION_ID", "session-" + n},
                {"CLAUDE_CODE_MESSAGING_SOCKET", "/tmp/claude-" + n + ".sock"},
                {"CLAUDE_CODE_MESSAGING_TOKEN", "token-" + n}};
            if (!left_out) e.emplace_back("MCPWARDEN_FAULT", "share_session_vars_kept");
            return e;
        };
        TestChild a = s.client(env("a")), b = s.client(env("b"));
        ASSERT_TRUE(handshake(a));
        ASSERT_TRUE(handshake(b));
        EXPECT_EQ(s.servers().size(), left_out ? 1u : 2u);
    }
}

// --on-journal-failure=deny through a shared tree, on a journal whose disk fills in the
// middle of the session: the call made before is served; once the journal can take no
// request, one is refused with the journal's reason and never reaches the server. The broker
// refuses it: it records the client's calls (the tree's run records none of them again). Control
// share_deny_ignored: the broker records under warn, and the second call is served unrecorded.
TEST(Share, UnderDenyACallTheFullJournalCannotTakeIsRefusedByTheBroker) {
    for (bool guard : {true, false}) {
        SCOPED_TRACE(guard ? "deny honoured" : "negative control: share_deny_ignored");
        Share s;
        const std::string disk = s.dir.file("disk");
        ASSERT_EQ(::mkdir(disk.c_str(), 0700), 0);
        TmpfsMount fs(disk, "2m");
        if (!fs.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here: " << fs.error();
        std::vector<std::pair<std::string, std::string>> env;
        if (!guard) env.emplace_back("MCPWARDEN_FAULT", "share_deny_ignored");
        TestChild c(
            {kCli, "run", "--share", "--share-linger", "300ms", "--eof-grace", "500ms", "--journal",
             disk + "/journal.db", "--on-journal-failure", "deny", "--", kFixture},
            s.options(env));
        ASSERT_TRUE(handshake(c));
        ASSERT_TRUE(c.write_line(rpc_tools_call(2, "echo", {{"text", "before"}})));
        auto before = read_response(c, 2, 20s);
        ASSERT_TRUE(before);
        EXPECT_EQ(result_text(*before), "before") << before->dump();
        ASSERT_TRUE(fill_up(disk + "/filler"));
        // Calls until one is refused: a request still fits in its intent file's last block
        // (on record there, recovered later) until the disk takes not one byte more.
        std::optional<json> refused;
        int served = 0;
        for (int id = 3; id < 43 && !refused; ++id) {
            ASSERT_TRUE(c.write_line(rpc_tools_call(id, "echo", {{"text", "after"}})));
            auto r = read_response(c, id, 20s);
            ASSERT_TRUE(r);
            if (r->contains("error"))
                refused = *r;
            else if (result_text(*r) == "after")
                ++served;
        }
        if (guard) {
            ASSERT_TRUE(refused) << served << " calls served on a full disk";
            EXPECT_EQ((*refused)["error"]["code"], -32000) << refused->dump();
            EXPECT_EQ((*refused)["error"]["message"].get<std::string>().rfind(
                          "mcpwarden: request refused: ", 0),
                      0u)
                << refused->dump();
        } else {
            EXPECT_FALSE(refused) << refused->dump();
            EXPECT_EQ(served, 40);
        }
        ASSERT_EQ(::unlink((disk + "/filler").c_str()), 0);
        c.close_stdin();
        EXPECT_TRUE(c.wait_exit(10s));
    }
}

// A client whose environment differs by one variable gets a tree of its own.
TEST(Share, AnEnvironmentDifferingByOneVariableGetsItsOwnTree) {
    Share s;
    TestChild a = s.client(), b = s.client(), c = s.client({{"SHARE_TEST_ONE_MORE", "1"}});
    ASSERT_TRUE(handshake(a));
    ASSERT_TRUE(handshake(b));
    ASSERT_TRUE(handshake(c));
    EXPECT_EQ(s.servers().size(), 2u);
    EXPECT_EQ(s.brokers().size(), 1u);
}

// A client asking another protocol version than the tree negotiated gets a tree of its own;
// one asking the same version joins it.
TEST(Share, AnotherProtocolVersionGetsItsOwnTree) {
    Share s;
    TestChild a = s.client(), b = s.client(), c = s.client();
    ASSERT_TRUE(handshake(a));
    ASSERT_TRUE(handshake(b));
    ASSERT_TRUE(c.write_line(rpc_initialize(1, "2025-03-26")));
    auto r = read_response(c, 1, 20s);
    ASSERT_TRUE(r && r->contains("result"));
    EXPECT_EQ(s.servers().size(), 2u);
    const std::vector<json> own = s.records("share.own_tree");
    ASSERT_FALSE(own.empty());
    EXPECT_NE(own[0]["why"].get<std::string>().find("asks protocol 2025-03-26"), std::string::npos)
        << own[0].dump();
}

// The broker started by socket activation (as the systemd user unit starts it): it serves
// on the socket it is given, and exits once it holds neither a client nor a tree.
TEST(Share, ASocketActivatedBrokerServes) {
    if (::access("/usr/bin/systemd-socket-activate", X_OK) != 0)
        GTEST_SKIP() << "needs systemd-socket-activate";
    Share s;
    const std::string dir = s.dir.file("mcpwarden-share");
    ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
    ChildOptions o = s.options();
    o.capture_stderr = true;
    TestChild activator(
        {"/usr/bin/systemd-socket-activate", "-l", dir + "/broker.sock", "-E", "XDG_RUNTIME_DIR",
         "-E", "MCPWARDEN_JOURNAL", "-E", kTagVar, kCli, "broker", "--linger", "2s"},
        o);
    ASSERT_TRUE(
        wait_until([&] { return ::access((dir + "/broker.sock").c_str(), F_OK) == 0; }, 5s));
    TestChild c = s.client();
    ASSERT_TRUE(handshake(c));
    EXPECT_EQ(s.servers().size(), 1u);
    c.close_stdin();
    ASSERT_TRUE(c.wait_exit(15s));
    auto st = activator.wait_exit(15s);
    ASSERT_TRUE(st) << "the activated broker did not exit once idle";
    EXPECT_NE(activator.read_stderr(1s).find("systemd passed"), std::string::npos);
    EXPECT_TRUE(nothing_tagged_left(s.tag));
}

// The broker says which of a client's lines it took as the client asks: `run --share` asks
// for the count on a page passed with the answer to its hello (share/taken.hpp), which no line
// on the socket repeats; a client of an older build, whose hello does not ask, gets a line for
// each batch the broker takes ({"share":1,"taken":N}), as before.
TEST(Share, TheBrokerSaysWhichLinesItTookAsTheClientAsks) {
    Share s;
    TestChild first = s.client();  // the broker
    ASSERT_TRUE(first.started()) << first.error();
    ASSERT_TRUE(handshake(first));
    for (bool page : {true, false}) {
        SCOPED_TRACE(page ? "a hello that asks for the page" : "an older client's hello");
        auto sock = share::connect_unix(s.dir.file("mcpwarden-share/broker.sock"));
        ASSERT_TRUE(sock) << sock.error().message;
        json hello{{"share", 1},  {"identity", "the acknowledgement's test"},
                   {"exe", kCli}, {"argv", {"run", "--eof-grace", "500ms", "--", kFixture}},
                   {"cwd", "/"},  {"linger_ms", 300}};
        const char* path = std::getenv("PATH");
        json env = json::array({std::string("PATH=") + (path ? path : "/usr/bin:/bin"),
                                std::string(kTagVar) + "=" + s.tag});
        for (const auto& [name, value] : s.options().env)
            env.push_back(name + "=" + value);
        hello["env"] = env;
        if (page) hello["taken_count"] = true;
        std::string lines = hello.dump() + "\n" + rpc_initialize(1) + "\n" + rpc_initialized() +
                            "\n" + rpc_tools_call(2, "echo", {{"text", "taken"}}) + "\n";
        ASSERT_TRUE(write_all(sock->get(), lines, "the broker's socket"));
        // Its lines until the echo's answer, and the descriptor passed with them.
        std::string got;
        Fd passed;
        const auto until = std::chrono::steady_clock::now() + 20s;
        while (got.find(R"("text":"taken")") == std::string::npos &&
               std::chrono::steady_clock::now() < until) {
            pollfd p{sock->get(), POLLIN, 0};
            if (::poll(&p, 1, 1000) <= 0) continue;
            char buf[4096];
            auto n = recv_passing(sock->get(), buf, sizeof buf, passed);
            ASSERT_TRUE(n && *n > 0) << "the broker closed the connection: " << got;
            got.append(buf, *n);
        }
        ASSERT_NE(got.find(R"("text":"taken")"), std::string::npos) << got;
        const json answer = json::parse(got.substr(0, got.find('\n')), nullptr, false);
        EXPECT_EQ(answer.value("taken_count", false), page) << got;
        EXPECT_EQ(got.find(R"({"share":1,"taken":)") != std::string::npos, !page) << got;
        if (page) {
            ASSERT_TRUE(passed) << "no page passed with the answer";
            auto count = share::TakenCount::map(std::move(passed));
            ASSERT_TRUE(count) << count.error().message;
            EXPECT_EQ(count->load(), 3u) << "initialize, initialized and the call";
        }
    }
}

// Another local user at the socket: refused, and on record. The directory (0700) keeps
// them out; with it opened (share_dir_open, a test condition) the peer check refuses them.
// Negative control: with the check off too (share_peer_unchecked), they are served.
TEST(Share, AnotherUserIsRefusedAtTheSocket) {
    if (::geteuid() != 0 || ::access("/usr/bin/setpriv", X_OK) != 0 ||
        ::access("/usr/bin/python3", X_OK) != 0)
        GTEST_SKIP() << "needs root, setpriv and python3";
    auto passwd = read_file("/etc/passwd");
    if (!passwd || passwd->find("\nmcpwarden-test:") == std::string::npos)
        GTEST_SKIP() << "needs the user mcpwarden-test (scripts/deps.sh)";
    for (bool check : {true, false}) {
        SCOPED_TRACE(check ? "checked" : "negative control: share_peer_unchecked");
        Share s;
        ::chmod(s.dir.path().c_str(), 0711);
        TestChild own =
            s.client({{"MCPWARDEN_FAULT",
                       check ? "share_dir_open" : "share_dir_open,share_peer_unchecked"}});
        ASSERT_TRUE(handshake(own));
        const std::string hello = R"({"share":1,"identity":"x","exe":")" + std::string(kCli) +
                                  R"(","argv":["run","--",")" + kFixture +
                                  R"("],"env":[],"cwd":"/","linger_ms":100})";
        const std::string script =
            "import socket,sys\ns=socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1])\n"
            "s.sendall(sys.argv[2].encode()+b'\\n')\nprint(s.makefile().readline().strip())\n";
        ChildOptions o = s.options();
        TestChild other({"/usr/bin/setpriv", "--reuid", "mcpwarden-test", "--regid",
                         "mcpwarden-test", "--clear-groups", "/usr/bin/python3", "-c", script,
                         s.dir.file("mcpwarden-share/broker.sock"), hello},
                        o);
        auto line = other.read_line(10s);
        ASSERT_TRUE(line);
        json reply = json::parse(*line, nullptr, false);
        ASSERT_TRUE(reply.is_object()) << *line;
        EXPECT_EQ(reply.value("ok", true), !check) << *line;
        if (check) {
            EXPECT_NE(reply.value("error", "").find("not the broker's user"), std::string::npos);
            auto refused = record_data(s.db(), "share.refused");
            ASSERT_EQ(refused.size(), 1u);
            EXPECT_NE(refused[0]["peer_uid"].get<int64_t>(), 0);
        }
    }
}

}  // namespace
}  // namespace warden::testing
