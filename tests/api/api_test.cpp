// libmcpwarden through its public headers only (C++ API and C ABI), linked against the
// shared library: spawn → talk → teardown with nothing left, error codes and messages,
// journal append + verify.
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/testing.hpp"
#include "mcpwarden/mcpwarden.h"
#include "mcpwarden/mcpwarden.hpp"

namespace warden::testing {
namespace {

std::string read_line(int fd) {
    std::string line;
    char c = 0;
    for (int i = 0; i < 1 << 20; ++i) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 10000) <= 0) break;
        if (::read(fd, &c, 1) != 1 || c == '\n') break;
        line.push_back(c);
    }
    return line;
}

void send(int fd, const std::string& line) {
    std::string s = line + "\n";
    ASSERT_EQ(::write(fd, s.data(), s.size()), static_cast<ssize_t>(s.size()));
}

const std::string kInit =
    R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",)"
    R"("capabilities":{},"clientInfo":{"name":"api_test","version":"1"}}})";

TEST(Api, SpawnTalkTeardownLeavesNothing) {
    const std::string tag = unique_tag();
    TreeGuard guard(0, tag);  // kills whatever the library would leave, so a failure is clean
    api::Supervisor sup;
    auto server =
        sup.spawn({WARDEN_FIXTURE, "--shape", "setsid"}, {std::string(kTagVar) + "=" + tag});
    ASSERT_TRUE(server) << server.error().message;
    guard.set_root(server->pid(), /*reap_root=*/false);
    EXPECT_GT(server->pid(), 0);
    EXPECT_FALSE(server->session_id().empty());

    send(server->stdin_fd(), kInit);
    auto init = nlohmann::json::parse(read_line(server->stdout_fd()));
    EXPECT_EQ(init["id"], 1);
    send(server->stdin_fd(),
         R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo",)"
         R"("arguments":{"text":"through the api"}}})");
    EXPECT_NE(read_line(server->stdout_fd()).find("through the api"), std::string::npos);

    // Negative control: the server and its setsid() helper are alive before the teardown.
    ASSERT_TRUE(wait_until([&] { return live_tagged(tag).size() >= 2; }, 5000ms));

    api::TeardownOptions t;
    t.grace = 1000ms;
    api::TeardownReport r = server->teardown(t);
    EXPECT_TRUE(r.ok()) << r.text;
    EXPECT_GE(r.targets, 2) << r.json;
    EXPECT_TRUE(live_tagged(tag).empty());
    guard.refresh();
    EXPECT_TRUE(guard.live_members().empty());
    auto j = nlohmann::json::parse(r.json);
    EXPECT_TRUE(j.is_object());
    EXPECT_TRUE(server->torn_down());
    EXPECT_EQ(server->teardown().json, r.json);  // idempotent
}

TEST(Api, DestroyingAServerTearsItDown) {
    const std::string tag = unique_tag();
    TreeGuard guard(0, tag);
    {
        api::Supervisor sup;
        auto server = sup.spawn({WARDEN_FIXTURE, "--shape", "doublefork"},
                                {std::string(kTagVar) + "=" + tag});
        ASSERT_TRUE(server) << server.error().message;
        ASSERT_TRUE(wait_until([&] { return live_tagged(tag).size() >= 2; }, 5000ms));
    }
    EXPECT_TRUE(live_tagged(tag).empty());
}

TEST(Api, MissingCommandIsAnErrorValue) {
    api::Supervisor sup;
    auto server = sup.spawn({"mcpwarden-no-such-command-xyz"});
    ASSERT_FALSE(server);
    EXPECT_EQ(server.error().code, ENOENT);
    EXPECT_NE(server.error().message.find("mcpwarden-no-such-command-xyz"), std::string::npos);
}

TEST(CAbi, MissingCommandGivesCodeAndMessage) {
    const char* argv[] = {"mcpwarden-no-such-command-xyz", "--stdio", nullptr};
    mcpw_server* s = reinterpret_cast<mcpw_server*>(0x1);
    EXPECT_EQ(mcpw_spawn(argv, nullptr, nullptr, nullptr, &s), MCPW_ENOENT);
    EXPECT_EQ(s, nullptr);
    std::string msg = mcpw_last_error();
    EXPECT_NE(msg.find("mcpwarden-no-such-command-xyz"), std::string::npos) << msg;
    EXPECT_NE(msg.find("not found"), std::string::npos) << msg;
    EXPECT_EQ(mcpw_last_errno(), ENOENT);

    // Bad arguments are codes too, never crashes.
    const char* empty[] = {nullptr};
    EXPECT_EQ(mcpw_spawn(empty, nullptr, nullptr, nullptr, &s), MCPW_EINVAL);
    EXPECT_EQ(mcpw_spawn(argv, nullptr, nullptr, nullptr, nullptr), MCPW_EINVAL);
    EXPECT_EQ(mcpw_teardown(nullptr, nullptr, nullptr, nullptr), MCPW_EINVAL);
    mcpw_spawn_options bad{};  // struct_size 0: not initialised
    const char* ok_argv[] = {WARDEN_FIXTURE, nullptr};
    EXPECT_EQ(mcpw_spawn(ok_argv, nullptr, nullptr, &bad, &s), MCPW_EINVAL);
    EXPECT_NE(std::string(mcpw_last_error()).find("struct_size"), std::string::npos);
}

TEST(CAbi, SpawnEchoTeardownReport) {
    const std::string tag = unique_tag();
    TreeGuard guard(0, tag);
    const std::string env_tag = std::string(kTagVar) + "=" + tag;
    const char* argv[] = {WARDEN_FIXTURE, "--shape", "ignore-term", nullptr};
    const char* env[] = {env_tag.c_str(), nullptr};
    mcpw_spawn_options o;
    mcpw_spawn_options_init(&o);
    o.stderr_mode = MCPW_STDIO_NULL;
    mcpw_server* s = nullptr;
    ASSERT_EQ(mcpw_spawn(argv, env, "/", &o, &s), MCPW_OK) << mcpw_last_error();
    EXPECT_EQ(mcpw_server_stderr(s), -1);
    send(mcpw_server_stdin(s), kInit);
    EXPECT_NE(read_line(mcpw_server_stdout(s)).find("\"id\":1"), std::string::npos);
    ASSERT_TRUE(wait_until([&] { return !live_tagged(tag).empty(); }, 5000ms));

    char* layers = nullptr;
    ASSERT_EQ(mcpw_server_layers(s, &layers), MCPW_OK);
    EXPECT_TRUE(nlohmann::json::parse(layers).contains("subreaper"));
    mcpw_free(layers);

    mcpw_teardown_options t;
    mcpw_teardown_options_init(&t);
    t.grace_ms = 300;
    char* report = nullptr;
    int survivors = -1;
    EXPECT_EQ(mcpw_teardown(s, &t, &report, &survivors), MCPW_OK) << mcpw_last_error();
    ASSERT_NE(report, nullptr);
    auto j = nlohmann::json::parse(report);
    EXPECT_TRUE(j.is_object());
    mcpw_free(report);
    EXPECT_EQ(survivors, 0);
    mcpw_server_free(s);
    EXPECT_TRUE(live_tagged(tag).empty());
}

TEST(CAbi, JournalAppendAndVerify) {
    TempDir dir;
    const std::string db = dir.file("journal.db");
    mcpw_journal* j = nullptr;
    ASSERT_EQ(mcpw_journal_open(db.c_str(), &j), MCPW_OK) << mcpw_last_error();
    int64_t seq = 0;
    EXPECT_EQ(mcpw_journal_append(j, "host.note", "", R"({"n":1})", &seq), MCPW_OK)
        << mcpw_last_error();
    EXPECT_GT(seq, 0);
    EXPECT_EQ(mcpw_journal_append(j, "host.note", "", "not json", &seq), MCPW_EINVAL);
    EXPECT_NE(std::string(mcpw_last_error()).find("not a JSON object"), std::string::npos);
    mcpw_journal_close(j);

    char* report = nullptr;
    EXPECT_EQ(mcpw_journal_verify(db.c_str(), &report), MCPW_OK) << mcpw_last_error();
    ASSERT_NE(report, nullptr);
    EXPECT_TRUE(nlohmann::json::parse(report).is_object());
    mcpw_free(report);

    // Negative control: a journal that is not there is an error, not "OK".
    const std::string missing = dir.file("nope/journal.db");
    EXPECT_NE(mcpw_journal_verify(missing.c_str(), nullptr), MCPW_OK);
}

TEST(CAbi, VersionAndBuildInfo) {
    EXPECT_STREQ(mcpw_version(), MCPW_VERSION_STRING);
    EXPECT_EQ(mcpw_abi_version(), MCPW_ABI_VERSION);
    auto b = nlohmann::json::parse(mcpw_build_info_json());
    EXPECT_EQ(b["version"], MCPW_VERSION_STRING);
    EXPECT_TRUE(b.contains("sanitizers"));
}

}  // namespace
}  // namespace warden::testing
