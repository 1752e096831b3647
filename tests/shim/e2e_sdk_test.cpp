// The official TypeScript SDK client (tests/e2e/sdk_client.mjs, StdioClientTransport) against
// servers run directly and through `mcpwarden run`: same answers, nothing left after close().
// Label: e2e (needs node and tests/e2e/node_modules; skipped without them).
#include <sys/stat.h>
#include <sys/wait.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/e2e.hpp"
#include "common/testing.hpp"

namespace warden::testing {
namespace {

// Runs the SDK client against `server`; returns its one JSON line (without "pid") and sets
// `remnants` to the number of live processes of its tree after it exited (they are then killed
// by the TestChild's guard).
nlohmann::json sdk_run(const std::vector<std::string>& calls, std::vector<std::string> server,
                       size_t& remnants) {
    std::vector<std::string> argv{"node", e2e_dir() + "/sdk_client.mjs"};
    argv.insert(argv.end(), calls.begin(), calls.end());
    argv.push_back("--");
    argv.insert(argv.end(), server.begin(), server.end());
    TestChild c(argv);
    auto line = c.read_line(60s);
    auto st = c.wait_exit(30s);
    EXPECT_TRUE(st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0);
    if (!line) return nullptr;
    auto j = nlohmann::json::parse(*line, nullptr, false);
    if (j.is_object()) j.erase("pid");
    remnants = nothing_tagged_left(c.tag()) ? 0 : live_tagged(c.tag()).size();
    return j;
}

std::vector<std::string> shim(std::vector<std::string> server) {
    std::vector<std::string> a{kCli, "run", "--no-journal", "--eof-grace", "500ms", "--"};
    a.insert(a.end(), server.begin(), server.end());
    return a;
}

TEST(E2ESdk, ServerEverythingAnswersTheSameThroughTheShim) {
    if (!have_node_modules()) GTEST_SKIP() << "tests/e2e/node_modules or node absent";
    std::vector<std::string> server{
        "node", e2e_dir() + "/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
        "stdio"};
    std::vector<std::string> calls{"--call", "echo",    "--args", R"({"message":"hi"})",
                                   "--call", "get-sum", "--args", R"({"a":1,"b":2})"};
    size_t r1 = 0, r2 = 0;
    auto direct = sdk_run(calls, server, r1);
    auto shimmed = sdk_run(calls, shim(server), r2);
    ASSERT_TRUE(direct.is_object());
    EXPECT_EQ(direct.value("ok", false), true);
    EXPECT_EQ(direct, shimmed);
    EXPECT_EQ(r2, 0u) << "remnants after close() through the shim";
}

TEST(E2ESdk, LargeResultArrivesWholeThroughTheShim) {
    if (!have_node_modules()) GTEST_SKIP() << "tests/e2e/node_modules or node absent";
    std::vector<std::string> calls{"--call", "big", "--args", R"({"bytes":300000})"};
    size_t remnants = 0;
    auto shimmed = sdk_run(calls, shim({kFixture, "--shape", "setsid"}), remnants);
    ASSERT_TRUE(shimmed.is_object());
    ASSERT_EQ(shimmed["calls"].size(), 1u);
    EXPECT_EQ(shimmed["calls"][0]["result"]["content"][0]["text"].get<std::string>().size(),
              300000u);
    EXPECT_EQ(remnants, 0u) << "the setsid helper outlived the session";
}

}  // namespace
}  // namespace warden::testing
