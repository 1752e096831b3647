// The official TypeScript SDK client (tests/e2e/sdk_client.mjs) ×5 at once on one shared
// server-everything through `mcpwarden run --share`: every answer right and its own, one
// server process, one client SIGKILLed while the others go on, nothing left after the linger.
// Label: e2e (needs node and tests/e2e/node_modules; skipped without them).
#include <csignal>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/e2e.hpp"
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

TEST(E2EShare, FiveSdkClientsShareOneServerEverything) {
    if (!have_node_modules()) GTEST_SKIP() << "tests/e2e/node_modules or node absent";
    TempDir dir;
    const std::string tag = unique_tag();
    const std::string server =
        e2e_dir() + "/node_modules/@modelcontextprotocol/server-everything/dist/index.js";
    ChildOptions o;
    o.tag = tag;
    o.env = {{"XDG_RUNTIME_DIR", dir.path()},
             {"XDG_STATE_HOME", dir.file("state")},
             {"XDG_CONFIG_HOME", dir.file("config")},
             {"MCPWARDEN_JOURNAL", dir.file("journal.db")}};
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

}  // namespace
}  // namespace warden::testing
