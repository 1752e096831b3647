// The official TypeScript SDK client (tests/e2e/sdk_client.mjs) ×5 at once on one shared
// server-everything through `mcpwarden run --share`: every answer right and its own, one
// server process, one client SIGKILLed while the others go on, nothing left after the linger.
// Two SDK v2 clients pinned to 2026-07-28 share one SDK v2 server: one's call needs its input
// (input_required) and is answered, the other's calls never see it.
// Label: e2e (needs node and tests/e2e/node_modules; skipped without them).
#include <sys/stat.h>

#include <csignal>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/e2e.hpp"
#include "common/journal_rows.hpp"
#include "common/procfs.hpp"
#include "common/testing.hpp"

namespace warden::testing {
namespace {

std::string cmdline_of(pid_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/cmdline");
    std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    for (char& c : s)
        if (c == '\0') c = ' ';
    return s;
}

// A test's own broker and journal: its runtime, state and config directories in `dir`.
ChildOptions private_broker(const TempDir& dir, const std::string& tag) {
    ChildOptions o;
    o.tag = tag;
    o.env = {{"XDG_RUNTIME_DIR", dir.path()},
             {"XDG_STATE_HOME", dir.file("state")},
             {"XDG_CONFIG_HOME", dir.file("config")},
             {"MCPWARDEN_JOURNAL", dir.file("journal.db")}};
    return o;
}

TEST(E2EShare, FiveSdkClientsShareOneServerEverything) {
    if (!have_node_modules()) GTEST_SKIP() << "tests/e2e/node_modules or node absent";
    TempDir dir;
    const std::string tag = unique_tag();
    const std::string server =
        e2e_dir() + "/node_modules/@modelcontextprotocol/server-everything/dist/index.js";
    const ChildOptions o = private_broker(dir, tag);
    std::vector<TestChild> clients;
    for (int i = 0; i < 5; ++i) {
        const std::string msg = "hello-" + std::to_string(i);
        clients.emplace_back(
            std::vector<std::string>{"node",    e2e_dir() + "/sdk_client.mjs",
                                     "--call",  "echo",
                                     "--args",  R"({"message":")" + msg + R"("})",
                                     "--call",  "get-sum",
                                     "--args",  "{\"a\":" + std::to_string(i) + ",\"b\":100}",
                                     "--hold",  "--",
                                     kCli,      "run",
                                     "--share", "--share-linger",
                                     "300ms",   "--eof-grace",
                                     "500ms",   "--",
                                     "node",    server,
                                     "stdio"},
            o);
        ASSERT_TRUE(clients.back().started()) << clients.back().error();
    }
    for (size_t i = 0; i < clients.size(); ++i) {
        auto line = clients[i].read_line(60s);
        ASSERT_TRUE(line) << "client " << i;
        auto j = nlohmann::json::parse(*line, nullptr, false);
        ASSERT_TRUE(j.is_object()) << *line;
        EXPECT_EQ(j.value("ok", false), true) << *line;
        ASSERT_EQ(j["calls"].size(), 2u) << *line;
        EXPECT_NE(j["calls"][0].dump().find("hello-" + std::to_string(i)), std::string::npos)
            << *line;
        EXPECT_NE(j["calls"][1].dump().find(std::to_string(100 + i)), std::string::npos) << *line;
    }
    size_t servers = 0;
    for (pid_t p : live_tagged(tag))
        if (cmdline_of(p).find("server-everything/dist/index.js") != std::string::npos &&
            cmdline_of(p).find("mcpwarden") == std::string::npos)
            ++servers;
    EXPECT_EQ(servers, 1u) << "one server process for five sessions";
    clients[0].signal(SIGKILL);
    for (size_t i = 1; i < clients.size(); ++i) {
        clients[i].close_stdin();
        auto st = clients[i].wait_exit(30s);
        ASSERT_TRUE(st);
        EXPECT_EQ(describe_status(*st), "exited 0") << "client " << i;
    }
    EXPECT_TRUE(wait_until([&] { return nothing_tagged_left(tag); }, 20s))
        << "a process outlived the last client and the linger";
}

bool have_sdk2() {
    struct stat st;
    return have_node_modules() &&
           ::stat((e2e_dir() + "/node_modules/@modelcontextprotocol/client").c_str(), &st) == 0 &&
           ::stat((e2e_dir() + "/node_modules/@modelcontextprotocol/server").c_str(), &st) == 0;
}

// Two SDK v2 clients pinned to 2026-07-28, at once, through one shared SDK v2 server: A calls
// `confirm` (the server answers input_required, A's SDK answers the question and calls again
// with inputResponses) three rounds, B calls `echo` three rounds meanwhile. Each gets what it
// gets directly; on record, A's session holds each input_required answer and the retry linked
// to it, B's session none: the question reached only the client whose call asked it. (With the
// ids unmapped (the multiplexer's map_ids off), the pinned clients' probes collide and connect
// fails: the mapping's own negative control is ShareMux.SameRequestIdFromTwoClientsAtOnce….)
TEST(E2EShare, TwoSdk2ClientsShareATreeAndOnlyOneSeesItsInputRequired) {
    if (!have_sdk2()) GTEST_SKIP() << "the SDK v2 client and server (tests/e2e/node_modules)";
    TempDir dir;
    const std::string tag = unique_tag();
    const std::vector<std::string> server{"node", e2e_dir() + "/sdk2_server.mjs"};
    const std::vector<std::string> confirm{
        "--call", "confirm", "--args", R"({"action":"deploy"})", "--rounds", "3", "--pause", "100"};
    const std::vector<std::string> echo{"--call",   "echo", "--args",  R"({"text":"hi"})",
                                        "--rounds", "3",    "--pause", "100"};
    auto client = [&](const std::vector<std::string>& asks, bool share) {
        std::vector<std::string> argv{"node", e2e_dir() + "/sdk2_client.mjs", "--mode", "pin"};
        argv.insert(argv.end(), asks.begin(), asks.end());
        argv.push_back("--");
        if (share)
            argv.insert(argv.end(), {kCli, "run", "--share", "--share-linger", "300ms",
                                     "--eof-grace", "500ms", "--"});
        argv.insert(argv.end(), server.begin(), server.end());
        return TestChild(argv, private_broker(dir, tag));
    };
    auto rounds = [](TestChild& c) {
        std::vector<nlohmann::json> out;
        for (int i = 0; i < 3; ++i) {
            auto line = c.read_line(60s);
            if (!line) break;
            out.push_back(nlohmann::json::parse(*line, nullptr, false));
        }
        (void)c.wait_exit(30s);
        return out;
    };
    std::vector<nlohmann::json> direct_a, direct_b;
    {
        TestChild a = client(confirm, false), b = client(echo, false);
        direct_a = rounds(a);
        direct_b = rounds(b);
    }
    ASSERT_EQ(direct_a.size(), 3u);
    ASSERT_NE(direct_a[0].dump().find("confirmed deploy"), std::string::npos) << direct_a[0];
    ASSERT_EQ(direct_b.size(), 3u);

    TestChild a = client(confirm, true), b = client(echo, true);
    auto shared_a = rounds(a), shared_b = rounds(b);
    EXPECT_EQ(shared_a, direct_a);
    EXPECT_EQ(shared_b, direct_b);

    // On record: which session is which, by the tool it called.
    const std::string db = dir.file("journal.db");
    std::map<std::string, std::set<std::string>> tools;  // session → tools called
    for (const auto& r : record_data(db, "activity.request"))
        if (r.contains("tool") && r["tool"].is_string())
            tools[r.value("session", "")].insert(r["tool"].get<std::string>());
    std::map<std::string, int> input_required;  // session → input_required answers
    for (const auto& r : record_data(db, "activity.response"))
        if (r.value("outcome", "") == "input_required") ++input_required[r.value("session", "")];
    std::map<std::string, int> retries;
    for (const auto& r : record_data(db, "activity.request"))
        if (r.contains("retry_of_id")) ++retries[r.value("session", "")];
    // Each client's SDK made two sessions: its server/discover probe (answered by the running
    // tree) and its own.
    std::set<std::string> shared_sessions;
    for (const auto& st : record_data(db, "session.start"))
        if (st.contains("shared_tree")) shared_sessions.insert(st.value("session", ""));
    int confirming = 0, echoing = 0;
    for (const std::string& s : shared_sessions) {
        if (tools[s].count("confirm")) {
            ++confirming;
            EXPECT_EQ(input_required[s], 3) << "client A's session " << s;
            EXPECT_EQ(retries[s], 3) << "client A's session " << s;
        } else {
            echoing += tools[s].count("echo") ? 1 : 0;
            EXPECT_EQ(input_required[s], 0) << "a question reached another session, " << s;
        }
    }
    EXPECT_EQ(confirming, 1);
    EXPECT_EQ(echoing, 1);
    EXPECT_TRUE(wait_until([&] { return nothing_tagged_left(tag); }, 20s))
        << "a process outlived the clients and the linger";
}

}  // namespace
}  // namespace warden::testing
