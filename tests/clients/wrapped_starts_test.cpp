// End to end: a config wrapped by `mcpwarden wrap` really starts its server through the
// shim. The wrapped command + args are read back from the file exactly as a client would
// read them, spawned, and must answer `initialize` from the fixture server behind them.
#include <sys/wait.h>

#include <filesystem>

#include <gtest/gtest.h>
#include <toml++/toml.h>
#include <nlohmann/json.hpp>

#include "clients_test_util.hpp"
#include "common/fixture.hpp"
#include "common/jsonrpc.hpp"

namespace warden::clients {
namespace {

using namespace std::chrono_literals;
using testing::run_cli;
using testing::slurp;
using testing::spit;
using warden::testing::TempDir;

// `mcpwarden run` is the shim (src/shim); until it is registered there is
// nothing to start the wrapped command with.
bool run_exists(const std::string& scratch) {
    return run_cli({"run", "--help"}, scratch, scratch).exit_code == 0;
}

std::vector<std::string> fixture_server(const TempDir& dir) {
    return warden::testing::fixture_argv({}, dir.file("port"));
}

void expect_initialize_answered(const std::vector<std::string>& argv,
                                const std::string& port_file) {
    ASSERT_GE(argv.size(), 6u);
    EXPECT_EQ(argv[1], "run");
    warden::testing::TestChild child(argv);
    ASSERT_TRUE(child.started()) << child.error();
    ASSERT_TRUE(child.write_line(warden::testing::rpc_initialize(1)));
    auto answer = warden::testing::read_response(child, 1, 10s);
    ASSERT_TRUE(answer) << "no answer to initialize through " << argv[0];
    EXPECT_TRUE((*answer)["result"].contains("protocolVersion")) << answer->dump();
    EXPECT_TRUE(warden::testing::wait_for_file(port_file, 10s));  // the server's tree was built

    // The client goes away: the shim ends the session, and with it the server.
    child.close_stdin();
    auto status = child.wait_exit(20s);
    ASSERT_TRUE(status) << "mcpwarden run did not exit after stdin EOF";
}

TEST(WrappedStarts, CursorJsonEntryStartsTheServerThroughTheShim) {
    TempDir dir;
    if (!run_exists(dir.path()))
        GTEST_SKIP() << "`mcpwarden run` (src/shim) is not registered in this build yet";
    std::string home = dir.file("home");
    nlohmann::json server = {{"command", fixture_server(dir)[0]}};
    auto argv = fixture_server(dir);
    server["args"] = std::vector<std::string>(argv.begin() + 1, argv.end());
    server["env"] = {{"FIXTURE_UNUSED", "${env:HOME}"}};
    spit(home + "/.cursor/mcp.json", nlohmann::json{{"mcpServers", {{"fixture", server}}}}.dump(2));

    auto r = run_cli({"wrap", "--client", "cursor"}, home, dir.path());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto cfg = nlohmann::json::parse(slurp(home + "/.cursor/mcp.json"));
    auto& wrapped = cfg["mcpServers"]["fixture"];
    std::vector<std::string> cmd = {wrapped["command"].get<std::string>()};
    for (auto& a : wrapped["args"])
        cmd.push_back(a.get<std::string>());
    EXPECT_EQ(cmd[0], std::filesystem::canonical(warden::testing::kCli).string());
    expect_initialize_answered(cmd, dir.file("port"));
}

TEST(WrappedStarts, CodexTomlEntryStartsTheServerThroughTheShim) {
    TempDir dir;
    if (!run_exists(dir.path()))
        GTEST_SKIP() << "`mcpwarden run` (src/shim) is not registered in this build yet";
    std::string home = dir.file("home");
    auto argv = fixture_server(dir);
    std::string toml_text =
        "# codex\n[mcp_servers.fixture]\ncommand = \"" + argv[0] + "\"\nargs = [";
    for (size_t i = 1; i < argv.size(); ++i)
        toml_text += (i > 1 ? ", \"" : "\"") + argv[i] + "\"";
    toml_text += "]\n";
    spit(home + "/.codex/config.toml", toml_text);

    auto r = run_cli({"wrap", "--client", "codex"}, home, dir.path());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto cfg = toml::parse(slurp(home + "/.codex/config.toml"));
    std::vector<std::string> cmd = {*cfg["mcp_servers"]["fixture"]["command"].value<std::string>()};
    for (auto& a : *cfg["mcp_servers"]["fixture"]["args"].as_array())
        cmd.push_back(*a.value<std::string>());
    expect_initialize_answered(cmd, dir.file("port"));
}

}  // namespace
}  // namespace warden::clients
