// End to end: a config wrapped by `mcpwarden wrap` really starts its server through the
// shim. The wrapped command + args are read back from the file exactly as a client would
// read them, spawned, and must answer `initialize` from the fixture server behind them.
#include <sys/wait.h>
#include <unistd.h>

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

// `wrap --sandbox strict` starts each server it would wrap once in the profile first. A server
// the profile breaks (it reads a file of the home directory, named only through $HOME, so no
// rule gives it) fails its dry start: the config is not written, and the report names the
// read it was denied with its --allow-read. --force writes it anyway, and a server that
// answers (the fixture) is written without it: the guard refuses only what fails.
TEST(WrappedStarts, WrapUnderStrictRefusesAConfigWhoseServerFailsItsDryStart) {
    TempDir dir;
    std::string home = dir.file("home");
    spit(home + "/settings.txt", "needed\n");
    nlohmann::json broken = {{"command", "/bin/sh"},
                             {"args",
                              {"-c", "cat \"$HOME/settings.txt\" >/dev/null && exec " +
                                         std::string(warden::testing::kFixture)}}};
    nlohmann::json fine = {{"command", std::string(warden::testing::kFixture)}};
    const std::string cfg = home + "/.cursor/mcp.json";
    spit(cfg, nlohmann::json{{"mcpServers", {{"broken", broken}}}}.dump(2));
    const std::string before = slurp(cfg);

    auto refused = run_cli({"wrap", "--client", "cursor", "--sandbox", "strict"}, home, dir.path());
    EXPECT_EQ(refused.exit_code, 1) << refused.out << refused.err;
    EXPECT_NE(refused.out.find("dry start: FAILED"), std::string::npos) << refused.out;
    if (::access("/usr/bin/strace", X_OK) == 0) {
        EXPECT_NE(refused.out.find("--allow-read " + home + "/settings.txt"), std::string::npos)
            << refused.out;
    }
    EXPECT_NE(refused.err.find("not written"), std::string::npos) << refused.err;
    EXPECT_EQ(slurp(cfg), before) << "nothing written";

    auto forced =
        run_cli({"wrap", "--client", "cursor", "--sandbox", "strict", "--force"}, home, dir.path());
    EXPECT_EQ(forced.exit_code, 0) << forced.err;
    EXPECT_NE(slurp(cfg), before) << "--force writes it";

    spit(cfg, nlohmann::json{{"mcpServers", {{"fine", fine}}}}.dump(2));
    auto written = run_cli({"wrap", "--client", "cursor", "--sandbox", "strict"}, home, dir.path());
    EXPECT_EQ(written.exit_code, 0) << written.out << written.err;
    EXPECT_NE(written.out.find("initialize and tools/list answered"), std::string::npos)
        << written.out;
    auto wrapped = nlohmann::json::parse(slurp(cfg));
    EXPECT_EQ(wrapped["mcpServers"]["fine"]["command"].get<std::string>(),
              std::filesystem::canonical(warden::testing::kCli).string());
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
