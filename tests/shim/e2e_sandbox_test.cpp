// The official servers confined: the TypeScript SDK client (tests/e2e/sdk_client.mjs) gets the
// same answers from server-filesystem under `--sandbox workspace` and server-everything under
// `--sandbox strict` as from the same servers unconfined (the negative control is that run,
// `--sandbox off`). Label: e2e (needs node and tests/e2e/node_modules; skipped without them).
#include <sys/stat.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/e2e.hpp"
#include "common/testing.hpp"

namespace warden::testing {
namespace {

// The SDK client's one JSON line (without "pid") for `server` run through `mcpwarden run
// --sandbox PROFILE`.
nlohmann::json sdk_confined(const std::string& profile, const std::vector<std::string>& calls,
                            const std::vector<std::string>& server, const TempDir& home) {
    std::vector<std::string> argv{"node", e2e_dir() + "/sdk_client.mjs"};
    argv.insert(argv.end(), calls.begin(), calls.end());
    argv.insert(argv.end(), {"--", kCli, "run", "--no-journal", "--eof-grace", "500ms", "--sandbox",
                             profile, "--env-allow", kTagVar, "--"});
    argv.insert(argv.end(), server.begin(), server.end());
    ChildOptions o;
    o.env = {{"HOME", home.path()}, {"TMPDIR", home.path()}};
    TestChild c(argv, o);
    auto line = c.read_line(60s);
    auto st = c.wait_exit(30s);
    EXPECT_TRUE(st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << profile;
    EXPECT_TRUE(nothing_tagged_left(c.tag())) << "remnants after close() under " << profile;
    if (!line) return nullptr;
    auto j = nlohmann::json::parse(*line, nullptr, false);
    if (j.is_object()) j.erase("pid");
    return j;
}

TEST(E2ESandbox, ServerFilesystemUnderWorkspaceServesItsDirectoryOnly) {
    if (!have_node_modules()) GTEST_SKIP() << "tests/e2e/node_modules or node absent";
    TempDir home, data;
    std::ofstream(home.file("secret.txt")) << "not yours\n";
    const std::string dir = std::filesystem::canonical(data.path()).string();
    std::vector<std::string> server{
        "node", e2e_dir() + "/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js",
        dir};
    auto calls = [&](const std::string& name) {
        return std::vector<std::string>{
            "--call", "write_file",
            "--args", nlohmann::json{{"path", dir + "/" + name}, {"content", "hello"}}.dump(),
            "--call", "read_text_file",
            "--args", nlohmann::json{{"path", dir + "/" + name}}.dump(),
            "--call", "read_text_file",
            "--args", nlohmann::json{{"path", home.file("secret.txt")}}.dump()};
    };
    auto confined = sdk_confined("workspace", calls("a.txt"), server, home);
    auto open = sdk_confined("off", calls("a.txt"), server, home);
    ASSERT_TRUE(confined.is_object());
    EXPECT_EQ(confined.value("ok", false), true) << confined.dump();
    EXPECT_EQ(confined, open) << "the same answers confined and not";
    ASSERT_EQ(confined["calls"].size(), 3u);
    EXPECT_EQ(confined["calls"][1]["result"]["content"][0]["text"], "hello");
    // Outside its directory the server's own check answers first; the sandbox stands behind
    // it (tests/shim/sandbox_run_test.cpp shows the kernel's EACCES for such a read).
    EXPECT_EQ(confined["calls"][2]["result"].value("isError", false), true) << confined.dump();
}

TEST(E2ESandbox, ServerEverythingUnderStrictAnswersAsUnconfined) {
    if (!have_node_modules()) GTEST_SKIP() << "tests/e2e/node_modules or node absent";
    TempDir home;
    std::vector<std::string> server{
        "node", e2e_dir() + "/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
        "stdio"};
    std::vector<std::string> calls{"--call", "echo",    "--args", R"({"message":"hi"})",
                                   "--call", "get-sum", "--args", R"({"a":1,"b":2})"};
    auto confined = sdk_confined("strict", calls, server, home);
    auto open = sdk_confined("off", calls, server, home);
    ASSERT_TRUE(confined.is_object());
    EXPECT_EQ(confined.value("ok", false), true) << confined.dump();
    EXPECT_EQ(confined, open);
}

}  // namespace
}  // namespace warden::testing
