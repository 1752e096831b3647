// `mcpwarden run --idle-stop`: the server's tree torn down while unused and started again on
// the next request, invisibly to the client (docs/RUN.md, "Hibernation and lazy start").
// The built binary between this test (the client) and the fixture server. "Asleep" is seen
// from outside: of the processes carrying the test's tag only the relay and the keeper are
// alive, and the port the first server's helper held can be bound again.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/cli_run.hpp"
#include "common/testing.hpp"
#include "journal/query.hpp"

namespace warden::testing {
namespace {

// A session under --idle-stop. A test that has not ended it ends it as a client would, by
// closing its stdin: killed by the test child's tag instead, its relay and keeper would die
// together and leave their session cgroup behind.
struct Sleeper {
    TempDir dir;
    std::string db = dir.file("journal.db");
    std::string port_file = dir.file("port");
    std::string fault_file = dir.file("wake-fault");
    std::unique_ptr<TestChild> c;

    ~Sleeper() {
        if (!c || c->exited()) return;
        c->close_stdin();
        EXPECT_TRUE(c->wait_exit(10s)) << "the session did not end on stdin EOF";
    }
};

// `own_copy`: the server is a copy of the fixture in the test's directory, which the test may
// remove while the server sleeps (a server that cannot be started again).
std::unique_ptr<Sleeper> start_sleeper(const std::string& idle_stop, ChildOptions co = {},
                                       bool own_copy = false) {
    auto s = std::make_unique<Sleeper>();
    FixtureOptions fo;
    fo.extra_args = {"--wake-fault", s->fault_file};
    std::vector<std::string> argv{
        kCli,           "run",   "--idle-stop", idle_stop, "--eof-grace", "200ms",
        "--term-grace", "300ms", "--journal",   s->db,     "--"};
    const size_t server_at = argv.size();
    for (auto& a : fixture_argv(fo, s->port_file))
        argv.push_back(a);
    if (own_copy) {
        std::filesystem::copy_file(kFixture, s->dir.file("fixture"));
        argv[server_at] = s->dir.file("fixture");
    }
    s->c = std::make_unique<TestChild>(argv, co);
    return s;
}

void write_fault(const std::string& path, const std::string& what) {
    std::ofstream(path) << what << "\n";
}

// The relay and the keeper, and nothing else of the session: the server's tree is gone.
bool asleep(TestChild& c) {
    return wait_until([&] { return live_tagged_below(c.tag(), c.pid()).size() == 2; }, 8s);
}

std::string text_of(TestChild& c, const nlohmann::json& id) {
    auto r = read_response(c, id, 10s);
    return r ? result_text(*r) : "<no answer>";
}

void handshake(TestChild& c) {
    ASSERT_TRUE(c.write_line(rpc_initialize(1)));
    ASSERT_TRUE(read_response(c, 1, 10s));
    ASSERT_TRUE(c.write_line(rpc_initialized()));
    ASSERT_TRUE(c.write_line(rpc_request(2, "logging/setLevel", {{"level", "debug"}})));
    ASSERT_TRUE(read_response(c, 2, 10s));
}

// The session's records of these kinds, in order.
std::vector<nlohmann::json> records(const std::string& db, const std::vector<std::string>& kinds) {
    std::vector<nlohmann::json> out;
    auto st = journal::for_each_record(db, 0, [&](const journal::Record& r) {
        for (auto& k : kinds)
            if (r.kind == k) {
                auto body = nlohmann::json::parse(r.body, nullptr, false);
                out.push_back(
                    {{"kind", r.kind}, {"data", body.is_object() ? body["data"] : nullptr}});
            }
        return true;
    });
    EXPECT_TRUE(st.ok()) << st.error().message;
    return out;
}

std::string kinds_of(const std::vector<nlohmann::json>& recs) {
    std::string out;
    for (auto& r : recs)
        out += (out.empty() ? "" : " ") + r["kind"].get<std::string>();
    return out;
}

// List, call, idle past DUR: the tree is gone (no process, port free); ping is answered while
// asleep without waking; list and call again give the same answers, from a server that was told
// the whole handshake again; two hibernate/wake pairs are on record, in order.
TEST(Hibernation, SleepsWhenIdleAndWakesWithTheSameAnswers) {
    auto s = start_sleeper("300ms");
    TestChild& c = *s->c;
    ASSERT_TRUE(c.started()) << c.error();
    handshake(c);
    ASSERT_TRUE(c.write_line(rpc_tools_list(3)));
    auto list1 = read_response(c, 3, 10s);
    ASSERT_TRUE(list1);
    ASSERT_TRUE(c.write_line(rpc_tools_call(4, "echo", {{"text", "before"}})));
    EXPECT_EQ(text_of(c, 4), "before");
    auto port1 = read_port_file(s->port_file);
    ASSERT_TRUE(port1);

    ASSERT_TRUE(asleep(c)) << live_tagged_below(c.tag(), c.pid()).size()
                           << " processes of the session alive";
    // A member still in its exit has let go of its memory (its environ, so its tag, reads
    // empty) before its files: the port comes free a moment after it leaves the count.
    EXPECT_TRUE(wait_until([&] { return port_bindable(*port1); }, 2s));
    // `status` and `ps` say it sleeps: no server, no process of its tree.
    auto session = only_status_session(s->dir, s->db);
    EXPECT_EQ(session["state"], "sleeping") << session.dump();
    EXPECT_EQ(session["processes"], 0);
    EXPECT_EQ(session["server"]["pid"], 0);
    auto ps = run_cli(s->dir, {"ps", "--journal", s->db});
    ASSERT_EQ(ps.code, 0) << ps.err;
    EXPECT_NE(ps.out.find("sleeping: mcpwarden-fixture (session "), std::string::npos) << ps.out;
    EXPECT_NE(ps.out.find("no server runs until its next request"), std::string::npos) << ps.out;
    ASSERT_TRUE(c.write_line(rpc_request(5, "ping")));
    auto pong = read_response(c, 5, 10s);
    ASSERT_TRUE(pong);
    EXPECT_EQ((*pong)["result"], nlohmann::json::object());
    EXPECT_EQ(live_tagged_below(c.tag(), c.pid()).size(), 2u) << "a ping woke the server";

    ASSERT_TRUE(c.write_line(rpc_tools_list(6)));
    auto list2 = read_response(c, 6, 10s);
    ASSERT_TRUE(list2);
    EXPECT_EQ((*list2)["result"], (*list1)["result"]);
    ASSERT_TRUE(c.write_line(rpc_tools_call(7, "echo", {{"text", "after"}})));
    EXPECT_EQ(text_of(c, 7), "after");
    ASSERT_TRUE(c.write_line(rpc_tools_call(8, "state")));
    EXPECT_EQ(text_of(c, 8), "initialized=yes level=debug");

    ASSERT_TRUE(asleep(c));
    ASSERT_TRUE(c.write_line(rpc_tools_call(9, "echo", {{"text", "third"}})));
    EXPECT_EQ(text_of(c, 9), "third");
    c.close_stdin();
    auto st = c.wait_exit(10s);
    ASSERT_TRUE(st);
    EXPECT_EQ(describe_status(*st), "exited 0");

    auto recs =
        records(s->db, {"session.start", "session.hibernate", "session.wake", "session.end"});
    auto k = kinds_of(recs);
    EXPECT_EQ(k.rfind("session.start session.hibernate session.wake session.hibernate "
                      "session.wake",
                      0),
              0u)
        << k;
    EXPECT_EQ(recs.back()["kind"], "session.end") << k;
    ASSERT_GE(recs.size(), 5u);
    EXPECT_EQ(recs[0]["data"]["idle_stop_ms"], 300);
    for (auto& r : recs) {
        if (r["kind"] == "session.hibernate") {
            EXPECT_EQ(r["data"]["teardown"]["counts"]["survivors"], 0) << r.dump();
            // The port holder at least (the server itself may have left inside the EOF
            // window, before the plan), and its port verified released.
            EXPECT_GE(r["data"]["teardown"]["counts"]["targets"].get<int>(), 1) << r.dump();
            auto& ports = r["data"]["teardown"]["ports"];
            ASSERT_EQ(ports.size(), 1u) << r.dump();
            EXPECT_TRUE(ports[0]["bindable"].get<bool>()) << r.dump();
            EXPECT_GE(r["data"]["idle_ms"].get<int>(), 300) << r.dump();
        }
        if (r["kind"] == "session.wake") {
            EXPECT_FALSE(r["data"].contains("error")) << r.dump();
            EXPECT_GT(r["data"]["cold_start_us"].get<int64_t>(), 0) << r.dump();
            EXPECT_FALSE(r["data"].contains("initialize_changed")) << r.dump();
        }
    }
    EXPECT_NE(recs[2]["data"]["server"]["pid"], recs[4]["data"]["server"]["pid"]);
}

// Negative control for the replay: with only the initialize replayed
// (MCPWARDEN_FAULT=wake_replay), the woken server never heard notifications/initialized or
// the client's log level, and says so.
TEST(Hibernation, WithoutTheReplayTheWokenServerMissesTheHandshake) {
    ChildOptions co;
    co.env = {{"MCPWARDEN_FAULT", "wake_replay"}};
    auto s = start_sleeper("200ms", co);
    TestChild& c = *s->c;
    ASSERT_TRUE(c.started()) << c.error();
    handshake(c);
    ASSERT_TRUE(c.write_line(rpc_tools_call(3, "state")));
    EXPECT_EQ(text_of(c, 3), "initialized=yes level=debug");
    ASSERT_TRUE(asleep(c));
    ASSERT_TRUE(c.write_line(rpc_tools_call(4, "state")));
    EXPECT_EQ(text_of(c, 4), "initialized=no level=none");
}

// The bad cases of a wake, in one session: a server that refuses the replayed initialize, one
// that dies on it, one whose executable is gone, each answering the held requests with an error
// that says why (and the tree asleep again); then a batch sent while asleep, which wakes a healthy
// server and is forwarded to it whole. Each failed wake is on record with its error.
TEST(Hibernation, AFailedWakeAnswersTheHeldRequestsAndTheNextRequestRetries) {
    auto s = start_sleeper("200ms", {}, /*own_copy=*/true);
    TestChild& c = *s->c;
    ASSERT_TRUE(c.started()) << c.error();
    handshake(c);
    ASSERT_TRUE(asleep(c));

    write_fault(s->fault_file, "refuse");
    ASSERT_TRUE(c.write_line(rpc_tools_call(10, "echo", {{"text", "x"}})));
    auto r10 = read_response(c, 10, 10s);
    ASSERT_TRUE(r10);
    EXPECT_EQ((*r10)["error"]["code"], -32000) << r10->dump();
    EXPECT_EQ((*r10)["error"]["message"],
              "mcpwarden: the server could not be woken: it answered the replayed initialize "
              "with an error: refusing initialize (--wake-fault refuse)");
    ASSERT_TRUE(asleep(c));

    write_fault(s->fault_file, "die");
    ASSERT_TRUE(c.write_line(rpc_tools_call(11, "echo", {{"text", "y"}})));
    auto r11 = read_response(c, 11, 10s);
    ASSERT_TRUE(r11);
    EXPECT_EQ((*r11)["error"]["message"],
              "mcpwarden: the server could not be woken: it exited (exit status 3) before "
              "answering the replayed initialize")
        << r11->dump();
    ASSERT_TRUE(asleep(c));

    ::unlink(s->fault_file.c_str());
    const std::string exe = s->dir.file("fixture");
    std::filesystem::rename(exe, exe + ".away");
    ASSERT_TRUE(c.write_line(rpc_tools_call(12, "echo", {{"text", "z"}})));
    auto r12 = read_response(c, 12, 10s);
    ASSERT_TRUE(r12);
    EXPECT_NE((*r12)["error"]["message"].get<std::string>().find(
                  "mcpwarden: the server could not be woken: it could not be started: "),
              std::string::npos)
        << r12->dump();
    ASSERT_TRUE(asleep(c));
    std::filesystem::rename(exe + ".away", exe);

    ASSERT_TRUE(c.write_line("[" + rpc_tools_call(12, "echo", {{"text", "a"}}) + "," +
                             rpc_tools_call(13, "echo", {{"text", "b"}}) + "]"));
    // The fixture, like many servers, does not take batches: it answers one with a parse error
    // (id null). That answer is the server's, not a refusal of ours: the batch woke it and was
    // forwarded whole after the replay.
    auto batch = c.read_line(10s);
    ASSERT_TRUE(batch);
    auto answer = nlohmann::json::parse(*batch, nullptr, false);
    EXPECT_EQ(answer["error"]["code"], -32700) << *batch;
    ASSERT_TRUE(c.write_line(rpc_tools_call(14, "echo", {{"text", "awake"}})));
    EXPECT_EQ(text_of(c, 14), "awake");
    c.close_stdin();
    ASSERT_TRUE(c.wait_exit(10s));

    auto wakes = records(s->db, {"session.wake"});
    ASSERT_EQ(wakes.size(), 4u);
    EXPECT_EQ(wakes[0]["data"]["error"],
              "it answered the replayed initialize with an error: refusing initialize "
              "(--wake-fault refuse)");
    EXPECT_EQ(wakes[1]["data"]["error"],
              "it exited (exit status 3) before answering the replayed initialize");
    EXPECT_TRUE(wakes[2]["data"].contains("error")) << wakes[2].dump();
    EXPECT_FALSE(wakes[3]["data"].contains("error")) << wakes[3].dump();
    // The refused requests are on record as answered with the refusal.
    int refused = 0;
    for (auto& r : records(s->db, {"activity.response"}))
        if (r["data"].value("error_code", 0) == -32000) ++refused;
    EXPECT_EQ(refused, 3);
}

// The client leaves while its request is waking the server: the session ends the usual way,
// the request is on record as abandoned, and nothing of the half-woken tree is left.
TEST(Hibernation, ClientLeavingMidWakeEndsTheSessionWithNothingLeft) {
    auto s = start_sleeper("200ms");
    TestChild& c = *s->c;
    ASSERT_TRUE(c.started()) << c.error();
    handshake(c);
    ASSERT_TRUE(asleep(c));
    write_fault(s->fault_file, "slow");
    ASSERT_TRUE(c.write_line(rpc_tools_call(20, "echo", {{"text", "never"}})));
    // The new server is up and has the replayed initialize, which it answers 2 s late.
    ASSERT_TRUE(wait_until([&] { return live_tagged_below(c.tag(), c.pid()).size() > 2; }, 8s));
    c.close_stdin();
    ASSERT_TRUE(c.wait_exit(10s));
    EXPECT_TRUE(wait_until([&] { return live_tagged(c.tag()).empty(); }, 8s));
    auto recs = records(s->db, {"activity.abandoned", "session.end"});
    ASSERT_EQ(kinds_of(recs), "activity.abandoned session.end");
    EXPECT_EQ(recs[1]["data"]["teardown"]["counts"]["survivors"], 0);
}

TEST(Hibernation, BadIdleStopValuesAreRefusedWithTheirReason) {
    TestChild c({kCli, "run", "--idle-stop", "soon", "--", "true"}, {{}, {}, {}, true});
    auto out = c.read_stderr(10s);
    auto st = c.wait_exit(10s);
    ASSERT_TRUE(st);
    EXPECT_EQ(describe_status(*st), "exited 2");
    EXPECT_NE(out.find("--idle-stop: cannot parse 'soon' as a duration (e.g. 30s, 5m, 0 for "
                       "after every answer) or off"),
              std::string::npos)
        << out;
    TestChild p(
        {kCli, "run", "--no-journal", "--idle-stop", "1s", "--isolate", "pidns", "--", "true"},
        {{}, {}, {}, true});
    out = p.read_stderr(10s);
    st = p.wait_exit(10s);
    ASSERT_TRUE(st);
    EXPECT_EQ(describe_status(*st), "exited 2");
    EXPECT_NE(out.find("--idle-stop cannot be combined with --isolate=pidns"), std::string::npos)
        << out;
}

}  // namespace
}  // namespace warden::testing
