// The official servers confined: the TypeScript SDK client (tests/e2e/sdk_client.mjs) gets the
// same answers from server-filesystem under `--sandbox workspace` and server-everything under
// `--sandbox strict` as from the same servers unconfined (the negative control is that run,
// `--sandbox off`). Label: e2e (needs node and tests/e2e/node_modules; skipped without them).
#include <sys/stat.h>
#include <sys/wait.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/cli_run.hpp"
#include "common/e2e.hpp"
#include "common/testing.hpp"

namespace warden::testing {
namespace {

// What a client config adds to the wrapped line, and to the environment.
struct Extra {
    std::vector<std::string> flags;
    std::vector<std::pair<std::string, std::string>> env;
    std::string cwd;
    bool must_succeed = true;  // the client exits 0 (false: a negative control)
};

// The SDK client's one JSON line (without "pid") for `server` run through `mcpwarden run
// --sandbox PROFILE`.
nlohmann::json sdk_confined(const std::string& profile, const std::vector<std::string>& calls,
                            const std::vector<std::string>& server, const TempDir& home,
                            const Extra& extra = {}) {
    std::vector<std::string> argv{"node", e2e_dir() + "/sdk_client.mjs"};
    argv.insert(argv.end(), calls.begin(), calls.end());
    argv.insert(argv.end(), {"--", kCli, "run", "--no-journal", "--eof-grace", "500ms", "--sandbox",
                             profile, "--env-allow", kTagVar});
    argv.insert(argv.end(), extra.flags.begin(), extra.flags.end());
    argv.push_back("--");
    argv.insert(argv.end(), server.begin(), server.end());
    ChildOptions o;
    o.env = {
        {"HOME", home.path()}, {"TMPDIR", home.path()}, {"npm_config_update_notifier", "false"}};
    o.env.insert(o.env.end(), extra.env.begin(), extra.env.end());
    o.cwd = extra.cwd;
    TestChild c(argv, o);
    auto line = c.read_line(60s);
    auto st = c.wait_exit(30s);
    EXPECT_TRUE(st.has_value()) << "the client did not exit in time";
    if (extra.must_succeed) {
        EXPECT_TRUE(st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << profile;
    }
    if (extra.must_succeed) {
        EXPECT_TRUE(nothing_tagged_left(c.tag())) << "remnants after close() under " << profile;
    } else {  // a client that gave up exits at once; mcpwarden's teardown follows its EOF
        EXPECT_TRUE(wait_until([&] { return live_tagged(c.tag()).empty(); }, 20s))
            << "remnants after the client gave up under " << profile;
    }
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

// A read-only npm registry on 127.0.0.1 serving tests/e2e/node_modules
// (tests/e2e/local_registry.py), stopped with the object; and a home whose ~/.npmrc names it,
// so that npx fetches from it as it would from the real one, and never from the network.
struct LocalRegistry {
    std::unique_ptr<TestChild> server;
    std::string url;
    LocalRegistry() {
        server = std::make_unique<TestChild>(std::vector<std::string>{
            "python3", e2e_dir() + "/local_registry.py", e2e_dir() + "/node_modules"});
        if (auto port = server->read_line(30s)) url = "http://127.0.0.1:" + *port + "/";
    }
    void use_in(const TempDir& home) const {
        std::ofstream(home.file(".npmrc")) << "registry=" << url << "\n";
    }
    void stop() {
        server->close_stdin();
        if (!server->wait_exit(10s)) server->signal(SIGKILL);
    }
};

// The cache an earlier, unconfined `npx -y SPEC` leaves in `home`: npm's own resolution and
// install, against the local registry.
bool warm_npx_cache(const TempDir& home, const std::string& spec) {
    ChildOptions o;
    o.env = {{"HOME", home.path()}, {"npm_config_update_notifier", "false"}};
    o.capture_stderr = true;
    TestChild npm({"npm", "exec", "--yes", "--package=" + spec, "--", "node", "-e", "0"}, o);
    auto st = npm.wait_exit(100s);
    EXPECT_TRUE(st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << npm.read_stderr(1s);
    return st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0;
}

// `npx -y server-everything` under strict: before anything is cached, refused at once, naming
// the package and --allow-fetch; from a cache an unconfined run filled, offline (the registry
// is gone by then), answering as unconfined. Negative control: with the plan blind to the
// launcher (MCPWARDEN_FAULT=sandbox_launcher), the same command gets no cache rule and the
// client gets no server.
TEST(E2ESandbox, NpxServerEverythingFromTheCacheUnderStrict) {
    if (!have_node_modules()) GTEST_SKIP() << "tests/e2e/node_modules or node absent";
    TempDir home;
    LocalRegistry registry;
    ASSERT_FALSE(registry.url.empty());
    registry.use_in(home);
    const std::string spec = "@modelcontextprotocol/server-everything";
    auto refused = run_cli(
        home, {"run", "--no-journal", "--sandbox", "strict", "--", "npx", "-y", spec, "stdio"},
        30s);
    EXPECT_EQ(refused.code, 125) << refused.err;
    EXPECT_NE(refused.err.find(spec + " is not in its cache"), std::string::npos) << refused.err;
    EXPECT_NE(refused.err.find("--allow-fetch"), std::string::npos) << refused.err;
    ASSERT_TRUE(warm_npx_cache(home, spec));
    registry.stop();
    std::vector<std::string> server{"npx", "-y", spec, "stdio"};
    std::vector<std::string> calls{"--call", "echo", "--args", R"({"message":"hi"})"};
    auto confined = sdk_confined("strict", calls, server, home);
    ASSERT_TRUE(confined.is_object());
    EXPECT_EQ(confined.value("ok", false), true) << confined.dump();
    // Unconfined, from the same cache: offline too, since the registry is gone (online, npm
    // would retry it for a minute).
    auto open =
        sdk_confined("off", calls, server, home, {{}, {{"npm_config_offline", "true"}}, "", true});
    EXPECT_EQ(confined, open);

    Extra blind{{}, {{"MCPWARDEN_FAULT", "sandbox_launcher"}}, "", false};
    // It would hang in npm's retries of the closed registry: the client gives up after 8 s.
    std::vector<std::string> bounded = calls;
    bounded.insert(bounded.end(), {"--timeout", "8000"});
    auto failed = sdk_confined("strict", bounded, server, home, blind);
    EXPECT_NE(failed.value("ok", false), true) << "negative control: " << failed.dump();
}

// `npx -y server-filesystem DIR` under strict with nothing cached: refused at once, naming the
// package and --allow-fetch; with --allow-fetch npx fetches it (from the local registry)
// inside the sandbox and the server answers; after that it runs offline from the cache.
TEST(E2ESandbox, NpxServerFilesystemUncachedIsRefusedThenFetchedWithAllowFetch) {
    if (!have_node_modules()) GTEST_SKIP() << "tests/e2e/node_modules or node absent";
    TempDir home, data;
    LocalRegistry registry;
    ASSERT_FALSE(registry.url.empty());
    registry.use_in(home);
    const std::string spec = "@modelcontextprotocol/server-filesystem";
    const std::string dir = std::filesystem::canonical(data.path()).string();
    auto refused = run_cli(
        home, {"run", "--no-journal", "--sandbox", "strict", "--", "npx", "-y", spec, dir}, 30s);
    EXPECT_EQ(refused.code, 125) << refused.err;
    EXPECT_NE(refused.err.find(spec), std::string::npos) << refused.err;
    EXPECT_NE(refused.err.find("--allow-fetch"), std::string::npos) << refused.err;
    EXPECT_FALSE(std::filesystem::exists(home.file(".npm/_npx"))) << "nothing ran";

    std::vector<std::string> server{"npx", "-y", spec, dir};
    std::vector<std::string> calls{
        "--call", "write_file",
        "--args", nlohmann::json{{"path", dir + "/a.txt"}, {"content", "hello"}}.dump(),
        "--call", "read_text_file",
        "--args", nlohmann::json{{"path", dir + "/a.txt"}}.dump()};
    Extra fetch{{"--allow-write", dir, "--allow-fetch"}, {}, "", true};
    auto fetched = sdk_confined("strict", calls, server, home, fetch);
    ASSERT_TRUE(fetched.is_object());
    EXPECT_EQ(fetched.value("ok", false), true) << fetched.dump();
    registry.stop();
    auto offline =
        sdk_confined("strict", calls, server, home, {{"--allow-write", dir}, {}, "", true});
    ASSERT_TRUE(offline.is_object());
    EXPECT_EQ(offline.value("ok", false), true) << offline.dump();
    EXPECT_EQ(offline["calls"][1]["result"]["content"][0]["text"], "hello");
}

// A minimal MCP server in one file: answers initialize, tools/list (one tool, "where") and
// tools/call (its own path), as a user's script would.
constexpr const char* kPythonServer = R"(import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    r = {}
    if m["method"] == "initialize":
        r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}},
             "serverInfo": {"name": "py", "version": "1"}}
    elif m["method"] == "tools/list":
        r = {"tools": [{"name": "where", "inputSchema": {"type": "object"}}]}
    elif m["method"] == "tools/call":
        r = {"content": [{"type": "text", "text": __file__}]}
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
)";
constexpr const char* kNodeServer =
    R"(const rl = require("readline").createInterface({input: process.stdin});
rl.on("line", (line) => {
  const m = JSON.parse(line);
  if (m.id === undefined) return;
  let r = {};
  if (m.method === "initialize")
    r = {protocolVersion: m.params.protocolVersion, capabilities: {tools: {}},
         serverInfo: {name: "js", version: "1"}};
  else if (m.method === "tools/list")
    r = {tools: [{name: "where", inputSchema: {type: "object"}}]};
  else if (m.method === "tools/call")
    r = {content: [{type: "text", text: __filename}]};
  process.stdout.write(JSON.stringify({jsonrpc: "2.0", id: m.id, result: r}) + "\n");
});
)";

// Scripts named inside a wrapper: `sh -c 'python3 server.py'` (run in the script's
// directory), `bash -c 'cd DIR && node server.js'`, and a virtualenv's console script (as
// pipx or `uv tool install` leave one; `pipx run` itself is below). Each lists and calls its
// tool under strict. Negative control: with the commands inside the line unread
// (MCPWARDEN_FAULT=sandbox_inner_commands), the shell's script is unreadable and the client
// gets no server.
TEST(E2ESandbox, ScriptsNamedInsideShellsAndVenvScriptsRunUnderStrict) {
    if (!have_node_modules()) GTEST_SKIP() << "tests/e2e/node_modules or node absent";
    TempDir home, py, js, venv_parent;
    std::ofstream(py.file("server.py")) << kPythonServer;
    std::ofstream(js.file("server.js")) << kNodeServer;
    const std::vector<std::pair<std::string, std::string>> path{{"PATH", "/usr/bin:/bin"}};
    std::vector<std::string> calls{"--call", "where"};
    auto where = [](const nlohmann::json& j) {
        return j.is_object() && j.value("ok", false)
                   ? j["calls"][0]["result"]["content"][0]["text"].get<std::string>()
                   : "failed: " + j.dump();
    };
    // The script's path as the server reports it, by its directory's name (/tmp may be a link).
    auto in_dir = [](const TempDir& d, const char* file) {
        return std::filesystem::path(d.path()).filename().string() + "/" + file;
    };
    auto sh = sdk_confined("strict", calls, {"sh", "-c", "python3 server.py"}, home,
                           {{}, path, py.path(), true});
    EXPECT_NE(where(sh).find(in_dir(py, "server.py")), std::string::npos) << where(sh);
    auto bash =
        sdk_confined("strict", calls, {"bash", "-c", "cd " + js.path() + " && node server.js"},
                     home, {{}, path, "", true});
    EXPECT_NE(where(bash).find(in_dir(js, "server.js")), std::string::npos) << where(bash);

    // A virtualenv without pip (as fast as it gets) and a console script in its bin/.
    const std::string venv = venv_parent.file("venv");
    TestChild mk({"/usr/bin/python3", "-m", "venv", "--without-pip", venv});
    auto st = mk.wait_exit(60s);
    ASSERT_TRUE(st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << "python3 -m venv";
    std::string site;
    for (const auto& e : std::filesystem::directory_iterator(venv + "/lib"))
        site = e.path().string() + "/site-packages";
    std::ofstream(site + "/mcp_venv_server.py") << kPythonServer;
    std::ofstream(venv + "/bin/mcp-venv-server")
        << "#!" << venv << "/bin/python\nimport runpy\nrunpy.run_module('mcp_venv_server', "
        << "run_name='__main__')\n";
    std::filesystem::permissions(venv + "/bin/mcp-venv-server", std::filesystem::perms::owner_all);
    auto script =
        sdk_confined("strict", calls, {venv + "/bin/mcp-venv-server"}, home, {{}, path, "", true});
    EXPECT_NE(where(script).find("mcp_venv_server.py"), std::string::npos) << where(script);

    Extra blind{{}, path, py.path(), false};
    blind.env.emplace_back("MCPWARDEN_FAULT", "sandbox_inner_commands");
    auto failed = sdk_confined("strict", calls, {"sh", "-c", "python3 server.py"}, home, blind);
    EXPECT_NE(failed.value("ok", false), true) << "negative control: " << failed.dump();
}

// A wheel whose console script is kPythonServer, as `pip wheel` would build it (written by
// hand: a build backend would want an index). argv: the wheel to write, the server's source.
constexpr const char* kWheelBuilder = R"(import base64, hashlib, sys, textwrap, zipfile
server = open(sys.argv[2]).read()
info = "mcp_wheel_server-1.0.dist-info/"
files = {
    "mcp_wheel_server.py": "def main():\n" + textwrap.indent(server, "    "),
    info + "METADATA": "Metadata-Version: 2.1\nName: mcp-wheel-server\nVersion: 1.0\n",
    info + "WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    info + "entry_points.txt": "[console_scripts]\nmcp-wheel-server = mcp_wheel_server:main\n",
}
record = ""
for name, text in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
    record += "%s,sha256=%s,%d\n" % (name, digest.decode(), len(text.encode()))
files[info + "RECORD"] = record + info + "RECORD,,\n"
with zipfile.ZipFile(sys.argv[1], "w") as z:
    for name, text in files.items():
        z.writestr(name, text)
)";

// `pipx run --spec WHEEL` under strict: a Python server a launcher installs from a local wheel,
// with no index (uv, which `uvx` is, is no Debian package, and a test reaches no index: a
// local wheel is what the suite can provide; pipx is Debian's). In a home where pipx never ran
// it installs the wheel offline into the cache the plan made and opened; again, from that
// cache; and in a home an earlier unconfined pipx filled, from that one (pipx before 1.3 keeps
// it in ~/.local/pipx). Negative control: with pipx not told where its home is
// (MCPWARDEN_FAULT=sandbox_launcher_home_untold), it picks its own, and its own bin
// directory, beneath no rule: the client gets no server.
TEST(E2ESandbox, PipxRunOfALocalWheelUnderStrict) {
    if (!have_node_modules()) GTEST_SKIP() << "tests/e2e/node_modules or node absent";
    if (!std::filesystem::exists("/usr/bin/pipx")) GTEST_SKIP() << "pipx absent";
    TempDir fresh, warmed, untold, wheels;
    std::ofstream(wheels.file("build.py")) << kWheelBuilder;
    std::ofstream(wheels.file("server.py")) << kPythonServer;
    const std::string wheel = wheels.file("mcp_wheel_server-1.0-py3-none-any.whl");
    TestChild build({"/usr/bin/python3", wheels.file("build.py"), wheel, wheels.file("server.py")});
    auto st = build.wait_exit(30s);
    ASSERT_TRUE(st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << "the wheel";

    const std::vector<std::pair<std::string, std::string>> path{{"PATH", "/usr/bin:/bin"}};
    const std::vector<std::string> server{"pipx", "run", "--spec", wheel, "mcp-wheel-server"};
    // A first pipx start makes its shared virtualenv and installs the wheel: seconds, more than
    // the client's 30 s bound on a loaded machine; sdk_confined still bounds it at 60 s.
    const std::vector<std::string> calls{"--call", "where", "--timeout", "55000"};
    auto where = [](const nlohmann::json& j) {
        return j.is_object() && j.value("ok", false)
                   ? j["calls"][0]["result"]["content"][0]["text"].get<std::string>()
                   : "failed: " + j.dump();
    };
    auto first = sdk_confined("strict", calls, server, fresh, {{}, path, "", true});
    EXPECT_NE(where(first).find("/.local/share/pipx/.cache/"), std::string::npos) << where(first);
    EXPECT_NE(where(first).find("mcp_wheel_server.py"), std::string::npos) << where(first);
    auto again = sdk_confined("strict", calls, server, fresh, {{}, path, "", true});
    EXPECT_EQ(where(again), where(first)) << "from the cache the first start filled";

    auto offline = path;
    offline.emplace_back("PIP_NO_INDEX", "1");
    auto open = sdk_confined("off", calls, server, warmed, {{}, offline, "", true});
    ASSERT_NE(where(open).find("mcp_wheel_server.py"), std::string::npos) << where(open);
    auto cached = sdk_confined("strict", calls, server, warmed, {{}, path, "", true});
    EXPECT_EQ(where(cached), where(open)) << "from the cache an unconfined pipx filled";

    Extra blind{{}, path, "", false};
    blind.env.emplace_back("MCPWARDEN_FAULT", "sandbox_launcher_home_untold");
    auto failed = sdk_confined("strict", calls, server, untold, blind);
    EXPECT_NE(failed.value("ok", false), true) << "negative control: " << failed.dump();
}

}  // namespace
}  // namespace warden::testing
