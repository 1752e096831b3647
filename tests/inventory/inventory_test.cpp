// Inventory: real fixture servers under a fake client, classified as a user would see them.
//
// The fake client is a perl one-liner that makes the server's stdin/stdout pipes, starts the
// server and keeps the write end of its stdin, as an MCP client does. Killing it with SIGKILL
// is the crash the incident practice is about.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "clients/discover.hpp"
#include "common/json_doc.hpp"
#include "common/testing.hpp"
#include "inventory/inventory.hpp"
#include "journal/journal.hpp"
#include "journal/query.hpp"

namespace warden {
namespace {

using namespace std::chrono_literals;
using inventory::Inventory;
using inventory::ServerTree;
using inventory::State;
using testing::ChildOptions;
using testing::kCli;
using testing::kFixture;
using testing::schema_doc;
using testing::TempDir;
using testing::TestChild;
using testing::undocumented_keys;

// perl: pipe, fork, exec the server on the pipes, keep the write end, sleep.
const char* kFakeClient =
    "pipe(my $r, my $w) or die; pipe(my $r2, my $w2) or die;"
    "my $pid = fork(); die unless defined $pid;"
    "if ($pid == 0) { open(STDIN, '<&', $r) or die; open(STDOUT, '>&', $w2) or die;"
    " exec @ARGV or die }"
    "close $r; close $w2; sleep 1000;";

TestChild fake_client(const std::vector<std::string>& server_argv, ChildOptions opts = {}) {
    std::vector<std::string> argv{"/usr/bin/perl", "-e", kFakeClient};
    argv.insert(argv.end(), server_argv.begin(), server_argv.end());
    return TestChild(std::move(argv), std::move(opts));
}

// A symlink whose name follows the MCP convention ("…-mcp"), to the fixture.
std::string mcp_named_fixture(const TempDir& dir) {
    std::string link = dir.file("demo-mcp");
    EXPECT_EQ(::symlink(kFixture, link.c_str()), 0);
    return link;
}

inventory::ScanOptions scan_options(const TempDir& dir) {
    inventory::ScanOptions o;
    o.journal_path = dir.file("journal.db");  // absent: no sessions
    return o;
}

Inventory scan(const inventory::ScanOptions& o) {
    auto inv = Inventory::scan(o);
    EXPECT_TRUE(inv.ok()) << (inv.ok() ? "" : inv.error().message);
    return std::move(*inv);
}

pid_t server_of(const TestChild& client) {
    auto kids = testing::children_of(client.pid());
    return kids.empty() ? 0 : kids.front();
}

struct Started {
    TestChild client;
    pid_t server = 0;
    uint16_t port = 0;
};

std::optional<Started> start_under_client(const std::vector<std::string>& server_argv,
                                          const std::string& port_file, ChildOptions opts = {}) {
    Started s{fake_client(server_argv, std::move(opts))};
    if (!s.client.started()) return std::nullopt;
    if (!testing::wait_for_file(port_file, 10s)) return std::nullopt;
    s.port = testing::read_port_file(port_file).value_or(0);
    s.server = server_of(s.client);
    if (!s.server) return std::nullopt;
    return s;
}

// Real names from MCP clients, SDKs and CI images: secrets are flagged; certificate bundles,
// base URLs, paths and vendor-prefixed settings are not (they advised rotating nothing).
TEST(Inventory, CredentialNamesAreSecretsNotBundlesUrlsOrPaths) {
    struct Row {
        const char* name;
        bool secret;
    };
    const Row rows[] = {
        // secrets
        {"GITHUB_TOKEN", true},
        {"GH_TOKEN", true},
        {"GITHUB_PERSONAL_ACCESS_TOKEN", true},
        {"OPENAI_API_KEY", true},
        {"ANTHROPIC_API_KEY", true},
        {"AWS_SECRET_ACCESS_KEY", true},
        {"AWS_ACCESS_KEY_ID", true},
        {"AWS_SESSION_TOKEN", true},
        {"AZURE_CLIENT_SECRET", true},
        {"AZURE_OPENAI_API_KEY", true},
        {"GOOGLE_API_KEY", true},
        {"GEMINI_API_KEY", true},
        {"GOOGLE_APPLICATION_CREDENTIALS", true},
        {"HF_TOKEN", true},
        {"HUGGING_FACE_HUB_TOKEN", true},
        {"NPM_TOKEN", true},
        {"NODE_AUTH_TOKEN", true},
        {"npm_config__auth", true},
        {"SLACK_BOT_TOKEN", true},
        {"STRIPE_SECRET_KEY", true},
        {"DB_PASSWORD", true},
        {"PGPASSWORD", true},
        {"MYSQL_ROOT_PASSWORD", true},
        {"SSH_AUTH_SOCK", true},
        {"VAULT_TOKEN", true},
        {"CLAUDE_CODE_OAUTH_TOKEN", true},
        {"BRAVE_API_KEY", true},
        {"NOTION_API_KEY", true},
        {"JWT_SECRET", true},
        {"SECRET_KEY_BASE", true},
        {"GITHUB_PAT", true},
        {"DOCKER_AUTH_CONFIG", true},
        {"OP_SERVICE_ACCOUNT_TOKEN", true},
        {"TOKEN", true},
        {"my-secret", true},
        // not secrets: bundles, URLs, paths, settings
        {"AWS_CA_BUNDLE", false},
        {"ANTHROPIC_BASE_URL", false},
        {"OPENAI_BASE_URL", false},
        {"REQUESTS_CA_BUNDLE", false},
        {"CURL_CA_BUNDLE", false},
        {"SSL_CERT_FILE", false},
        {"SSL_CERT_DIR", false},
        {"NODE_EXTRA_CA_CERTS", false},
        {"GIT_SSL_CAINFO", false},
        {"PIP_CERT", false},
        {"AWS_REGION", false},
        {"AWS_DEFAULT_REGION", false},
        {"AWS_PROFILE", false},
        {"AWS_SHARED_CREDENTIALS_FILE", false},
        {"AZURE_OPENAI_ENDPOINT", false},
        {"AZURE_TENANT_ID", false},
        {"GITHUB_API_URL", false},
        {"GITHUB_WORKSPACE", false},
        {"OPENAI_ORG_ID", false},
        {"VAULT_ADDR", false},
        {"TOKENIZERS_PARALLELISM", false},
        {"KEYBOARD_LAYOUT", false},
        {"PASSWORD_STORE_DIR", false},
        {"TF_CLI_CONFIG_FILE", false},
        {"PATH", false},
        {"HOME", false},
        {"PWD", false},
        {"LANG", false},
        {"TERM", false},
        {"MCPWARDEN_SESSION", false},
        {"XAUTHORITY", false},
    };
    static_assert(sizeof rows / sizeof rows[0] >= 40);
    for (const Row& r : rows)
        EXPECT_EQ(inventory::credential_like(r.name), r.secret) << r.name;
}

TEST(Inventory, LiveServerNamesItsClientThenBecomesLogicalOrphanWhenClientIsKilled) {
    TempDir dir;
    std::string port_file = dir.file("port");
    auto s = start_under_client({mcp_named_fixture(dir), "--port-file", port_file}, port_file);
    ASSERT_TRUE(s) << "fixture under the fake client did not start";

    Inventory inv = scan(scan_options(dir));
    const ServerTree* t = inv.tree_of(s->server);
    ASSERT_NE(t, nullptr) << "fixture server not found";
    EXPECT_EQ(t->server.pid, s->server);
    EXPECT_EQ(t->state, State::Live) << nlohmann::json(t->state_reasons).dump();
    ASSERT_TRUE(t->client.has_value());
    EXPECT_EQ(t->client->id.pid, s->client.pid());
    EXPECT_FALSE(t->os_orphan.has_value());
    // The evidence is on the row that matched: the server, by heuristic (pipes + "-mcp").
    ASSERT_FALSE(t->evidence.empty());
    EXPECT_EQ(t->evidence.front().kind, inventory::EvidenceKind::heuristic);
    EXPECT_EQ(t->evidence.front().pid, s->server);
    EXPECT_FALSE(t->has_strong_evidence());
    // The client is not part of the tree.
    EXPECT_EQ(t->member(s->client.pid()), nullptr);

    // The port is listed on the process that holds it, not on the server.
    std::vector<pid_t> holders;
    for (const auto& m : t->members)
        for (const auto& l : m.caps.listening)
            if (l.port == s->port) holders.push_back(m.proc->id.pid);
    ASSERT_EQ(holders.size(), 1u);
    EXPECT_NE(holders[0], s->server);
    auto inodes = testing::listening_inodes(s->port);
    ASSERT_FALSE(inodes.empty());
    EXPECT_TRUE(testing::holds_socket(holders[0], inodes.front()));
    EXPECT_EQ(t->member(holders[0])->role, inventory::Role::helper);
    // exe and cwd are read after the scan, for members only, by identity: the server's own.
    const inventory::Member* sm = t->member(s->server);
    ASSERT_NE(sm, nullptr);
    std::error_code ec;
    auto exe = std::filesystem::read_symlink("/proc/" + std::to_string(s->server) + "/exe", ec);
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_EQ(sm->caps.exe, exe.string());
    EXPECT_FALSE(sm->caps.cwd.empty());

    // Crash the client: nobody holds the write end of the server's stdin any more.
    ASSERT_TRUE(s->client.signal(SIGKILL));
    ASSERT_TRUE(s->client.wait_exit(5s).has_value());
    // The fixture exits at stdin EOF by default; ask it not to have is another test. Here it
    // may already be leaving: accept either "gone" or "logical-orphan", never "live".
    Inventory after = scan(scan_options(dir));
    if (const ServerTree* t2 = after.tree_of(s->server)) {
        EXPECT_EQ(t2->state, State::LogicalOrphan) << nlohmann::json(t2->state_reasons).dump();
        EXPECT_FALSE(t2->client.has_value());
    }
}

TEST(Inventory, ServerThatIgnoresEofIsLogicalOrphanWithOsOrphanClue) {
    TempDir dir;
    std::string port_file = dir.file("port");
    auto s = start_under_client(
        {mcp_named_fixture(dir), "--on-eof", "ignore", "--port-file", port_file}, port_file);
    ASSERT_TRUE(s);
    Inventory before = scan(scan_options(dir));
    ASSERT_NE(before.tree_of(s->server), nullptr);
    EXPECT_EQ(before.tree_of(s->server)->state, State::Live);

    ASSERT_TRUE(s->client.signal(SIGKILL));
    ASSERT_TRUE(s->client.wait_exit(5s).has_value());
    ASSERT_TRUE(testing::wait_until(
        [&] {
            auto st = testing::read_stat(s->server);
            return st && st->ppid != s->client.pid();
        },
        5s));
    Inventory inv = scan(scan_options(dir));
    const ServerTree* t = inv.tree_of(s->server);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->state, State::LogicalOrphan) << nlohmann::json(t->state_reasons).dump();
    EXPECT_FALSE(t->client.has_value());
    // Reparented: a clue shown beside the state, not the state.
    auto st = testing::read_stat(s->server);
    ASSERT_TRUE(st);
    if (st->ppid == 1) {
        ASSERT_TRUE(t->os_orphan.has_value());
        EXPECT_EQ(t->os_orphan->parent, 1);
    }
}

TEST(Inventory, DoubleForkedDaemonShowsAsOsOrphan) {
    TempDir dir;
    std::string port_file = dir.file("port");
    std::string marker = "inv-test-" + testing::unique_tag();
    // The marker goes to the server only (env execs it), as `mcpwarden run` does.
    auto s = start_under_client({"/usr/bin/env", "MCPWARDEN_SESSION=" + marker, kFixture, "--shape",
                                 "doublefork", "--port-file", port_file},
                                port_file);
    ASSERT_TRUE(s);
    // The daemon: the process holding the port, in another session, not below the server.
    auto inodes = testing::listening_inodes(s->port);
    ASSERT_FALSE(inodes.empty());
    pid_t daemon = 0;
    for (pid_t p : testing::live_tagged(s->client.tag()))
        if (testing::holds_socket(p, inodes.front())) daemon = p;
    ASSERT_NE(daemon, 0);
    auto st = testing::read_stat(daemon);
    ASSERT_TRUE(st);

    Inventory inv = scan(scan_options(dir));
    const ServerTree* server_tree = inv.tree_of(s->server);
    ASSERT_NE(server_tree, nullptr);
    EXPECT_EQ(server_tree->state, State::Live);
    EXPECT_EQ(server_tree->member(daemon), nullptr) << "the daemon left the server's tree";
    const ServerTree* t = inv.tree_of(daemon);
    ASSERT_NE(t, nullptr) << "the marker should find the double-forked daemon";
    EXPECT_EQ(t->session, marker);
    bool marker_evidence = false;
    for (const auto& e : t->evidence)
        marker_evidence |= e.kind == inventory::EvidenceKind::session_marker && e.pid == daemon;
    EXPECT_TRUE(marker_evidence);
    if (st->ppid == 1) {
        ASSERT_TRUE(t->os_orphan.has_value()) << "daemon reparented to PID 1";
        EXPECT_EQ(t->os_orphan->parent, 1);
    }
    // Its stdin is /dev/null: no client end to follow, so not "live" by pipes. The reason
    // names the file.
    EXPECT_NE(t->state, State::Live);
    bool says_dev_null = false;
    for (const auto& r : t->state_reasons)
        says_dev_null |= r.find("stdin is /dev/null, not a pipe") != std::string::npos;
    EXPECT_TRUE(says_dev_null) << ::testing::PrintToString(t->state_reasons);
    // Its port is listed on it.
    bool port_listed = false;
    for (const auto& l : t->member(daemon)->caps.listening)
        port_listed |= l.port == s->port;
    EXPECT_TRUE(port_listed);
}

TEST(Inventory, PlainProcessWithPipesIsNotAnMcpServer) {
    TempDir dir;
    TestChild cat({"/bin/cat"});
    ASSERT_TRUE(cat.started());
    // Negative control: the same program under an MCP-looking name is listed.
    std::string link = dir.file("notes-mcp");
    ASSERT_EQ(::symlink("/bin/cat", link.c_str()), 0);
    TestChild named({link});
    ASSERT_TRUE(named.started());
    ASSERT_TRUE(testing::wait_until(
        [&] {
            std::ifstream f("/proc/" + std::to_string(named.pid()) + "/cmdline");
            std::string s((std::istreambuf_iterator<char>(f)), {});
            return s.find("notes-mcp") != std::string::npos;
        },
        5s));
    Inventory inv = scan(scan_options(dir));
    EXPECT_EQ(inv.tree_of(cat.pid()), nullptr);
    const ServerTree* t = inv.tree_of(named.pid());
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->state, State::Live);
    ASSERT_TRUE(t->client);
    EXPECT_EQ(t->client->id.pid, ::getpid());
}

// The scan reads pipe access modes, env names, exe and cwd in a second, identity-checked
// look, only where they are asked for. A process that exits between the scan and that look
// is reported from what the first pass saw and nothing more: no writer, no capabilities.
TEST(Inventory, ProcessGoneBeforeTheSecondLookIsNeitherWriterNorCapable) {
    ChildOptions opts;
    opts.env.push_back({"GITHUB_TOKEN", "never-shown"});
    TestChild client = fake_client({"/bin/cat"}, opts);
    ASSERT_TRUE(client.started()) << client.error();
    pid_t cat = 0;
    ASSERT_TRUE(testing::wait_until(
        [&] {
            cat = server_of(client);
            if (!cat) return false;
            std::ifstream f("/proc/" + std::to_string(cat) + "/cmdline");
            std::string s((std::istreambuf_iterator<char>(f)), {});
            return s.rfind("/bin/cat", 0) == 0;
        },
        5s));
    inventory::ScanOptions o;
    o.use_journal = false;

    // Negative control: asked while the client lives, the second look names it and finds
    // its credential name and exe.
    Inventory alive = scan(o);
    const Process* cat_alive = alive.table().find(cat);
    ASSERT_NE(cat_alive, nullptr);
    auto writers = alive.stdin_writers(*cat_alive);
    ASSERT_EQ(writers.size(), 1u);
    EXPECT_EQ(writers[0]->id.pid, client.pid());
    const Process* client_alive = alive.table().find(client.pid());
    ASSERT_NE(client_alive, nullptr);
    auto caps_alive = alive.capabilities(*client_alive);
    EXPECT_NE(std::find(caps_alive.credential_env.begin(), caps_alive.credential_env.end(),
                        "GITHUB_TOKEN"),
              caps_alive.credential_env.end());
    EXPECT_FALSE(caps_alive.exe.empty());

    // The first pass of this scan sees the client; it is gone before anything is asked.
    Inventory before_exit = scan(o);
    const Process* cat_seen = before_exit.table().find(cat);
    const Process* client_seen = before_exit.table().find(client.pid());
    ASSERT_NE(cat_seen, nullptr);
    ASSERT_NE(client_seen, nullptr);
    ASSERT_TRUE(client.signal(SIGKILL));
    ASSERT_TRUE(client.wait_exit(5s).has_value());
    EXPECT_TRUE(before_exit.stdin_writers(*cat_seen).empty());
    auto caps = before_exit.capabilities(*client_seen);
    EXPECT_TRUE(caps.credential_env.empty());
    EXPECT_TRUE(caps.exe.empty());
    EXPECT_TRUE(caps.cwd.empty());
    EXPECT_TRUE(caps.listening.empty());
}

TEST(Inventory, DeclaredCommandIsConfigEvidence) {
    TempDir dir;
    std::string port_file = dir.file("port");
    ASSERT_EQ(::mkdir(dir.file("home").c_str(), 0700), 0);
    ASSERT_EQ(::mkdir(dir.file("home/.cursor").c_str(), 0700), 0);
    nlohmann::json cfg = {
        {"mcpServers",
         {{"fixture", {{"command", kFixture}, {"args", {"--port-file", port_file}}}}}}};
    std::ofstream(dir.file("home/.cursor/mcp.json")) << cfg.dump(2);
    auto s = start_under_client({kFixture, "--port-file", port_file}, port_file);
    ASSERT_TRUE(s);

    const char* old_home = std::getenv("HOME");
    std::string saved = old_home ? old_home : "";
    ::setenv("HOME", dir.file("home").c_str(), 1);
    ::unsetenv("XDG_CONFIG_HOME");
    auto o = scan_options(dir);
    o.declared = clients::declared_servers_here(std::nullopt);
    Inventory inv = scan(o);
    ::setenv("HOME", saved.c_str(), 1);

    const ServerTree* t = inv.tree_of(s->server);
    ASSERT_NE(t, nullptr);
    EXPECT_TRUE(t->has_strong_evidence());
    EXPECT_EQ(t->name, "fixture");
    EXPECT_EQ(t->evidence.front().kind, inventory::EvidenceKind::client_config);
    EXPECT_NE(t->evidence.front().detail.find("cursor"), std::string::npos);
}

// ---- the CLI --------------------------------------------------------------------------------

struct CliRun {
    std::string out, err;
    int status = -1;
};

CliRun run_cli(std::vector<std::string> args, const TempDir& home) {
    args.insert(args.begin(), kCli);
    ChildOptions opts;
    opts.capture_stderr = true;
    opts.env = {{"HOME", home.path()},
                {"XDG_STATE_HOME", home.file("state")},
                {"XDG_CONFIG_HOME", home.file("config")}};
    opts.unset_env = {"MCPWARDEN_JOURNAL", "COLUMNS"};
    TestChild c(std::move(args), std::move(opts));
    CliRun r;
    if (!c.started()) {
        r.err = c.error();
        return r;
    }
    c.close_stdin();
    r.out = c.read_all_stdout(30s);
    r.err = c.read_stderr(5s);
    r.status = c.wait_exit(30s).value_or(-1);
    return r;
}

TEST(InventoryCli, PsListsServerWithStateClientAndCredentialNameButNeverItsValue) {
    TempDir dir;
    std::string port_file = dir.file("port");
    std::string secret = "s3cr3t-" + testing::unique_tag();
    ChildOptions opts;
    opts.env = {{"GITHUB_TOKEN", secret}};
    // The machine's own environment may carry credential-looking names (CI sets AWS_CA_BUNDLE):
    // the server gets exactly one, so the table's CREDS cell names it in full.
    for (char** e = environ; *e; ++e) {
        std::string name(*e, std::strcspn(*e, "="));
        if (name != "GITHUB_TOKEN" && inventory::credential_like(name))
            opts.unset_env.push_back(name);
    }
    auto s =
        start_under_client({mcp_named_fixture(dir), "--port-file", port_file}, port_file, opts);
    ASSERT_TRUE(s);
    TestChild cat({"/bin/cat"});
    ASSERT_TRUE(cat.started());

    CliRun js = run_cli({"ps", "--json"}, dir);
    ASSERT_EQ(js.status, 0) << js.err;
    EXPECT_EQ(js.out.find(secret), std::string::npos);
    auto doc = nlohmann::json::parse(js.out, nullptr, false);
    ASSERT_FALSE(doc.is_discarded());
    EXPECT_EQ(doc["mode"], "mcp");
    const nlohmann::json* server = nullptr;
    for (const auto& p : doc["processes"]) {
        EXPECT_NE(p["pid"], cat.pid()) << "cat with pipes is not an MCP server";
        if (p["pid"] == s->server) server = &p;
    }
    ASSERT_NE(server, nullptr) << js.out.substr(0, 2000);
    EXPECT_EQ((*server)["mcp"]["state"], "live");
    EXPECT_EQ((*server)["mcp"]["role"], "server");
    EXPECT_EQ((*server)["mcp"]["capabilities"]["credential_env"],
              nlohmann::json::array({"GITHUB_TOKEN"}));
    bool client_named = false, port_seen = false;
    pid_t helper = 0;
    for (const auto& t : doc["servers"])
        if (t["server"]["pid"] == s->server) {
            client_named = t["client"]["pid"] == s->client.pid();
            for (const auto& m : t["members"])
                for (const auto& l : m["capabilities"]["listening"])
                    if (l["port"] == s->port && m["role"] == "helper") {
                        port_seen = true;
                        helper = m["pid"].get<pid_t>();
                    }
        }
    EXPECT_TRUE(client_named);
    EXPECT_TRUE(port_seen);

    // The helper's record has a client, evidence and a listening port: every key of it is in
    // the schema document.
    CliRun helper_js = run_cli({"inspect", std::to_string(helper), "--json"}, dir);
    ASSERT_EQ(helper_js.status, 0) << helper_js.err;
    auto record = nlohmann::json::parse(helper_js.out, nullptr, false);
    ASSERT_TRUE(record.is_object()) << helper_js.out;
    EXPECT_EQ(record["schema"], "mcpwarden.inspect");
    EXPECT_FALSE(record["evidence"].empty()) << helper_js.out;
    EXPECT_FALSE(record["capabilities"]["listening"].empty()) << helper_js.out;
    EXPECT_EQ(undocumented_keys(record, {schema_doc("inspect-json.md")}),
              std::vector<std::string>{});

    CliRun table = run_cli({"ps", "--tree"}, dir);
    ASSERT_EQ(table.status, 0) << table.err;
    EXPECT_NE(table.out.find("GITHUB_TOKEN"), std::string::npos) << table.out;
    EXPECT_EQ(table.out.find(secret), std::string::npos);
    EXPECT_NE(table.out.find("live"), std::string::npos);
    EXPECT_NE(table.out.find(std::to_string(s->client.pid()) + " perl"), std::string::npos)
        << table.out;

    for (std::vector<std::string> args :
         {std::vector<std::string>{"inspect", std::to_string(s->server)},
          {"inspect", std::to_string(s->server), "--json"}}) {
        CliRun r = run_cli(args, dir);
        ASSERT_EQ(r.status, 0) << r.err;
        EXPECT_NE(r.out.find("GITHUB_TOKEN"), std::string::npos) << r.out;
        EXPECT_EQ(r.out.find(secret), std::string::npos);
        EXPECT_NE(r.out.find("not revoked"), std::string::npos);
    }

    // --orphans leaves the live server out.
    CliRun orphans = run_cli({"ps", "--orphans", "--json"}, dir);
    ASSERT_EQ(orphans.status, 0) << orphans.err;
    auto od = nlohmann::json::parse(orphans.out, nullptr, false);
    for (const auto& p : od["processes"])
        EXPECT_NE(p["pid"], s->server);
}

TEST(InventoryCli, InspectRecordAppendsASnapshot) {
    TempDir dir;
    std::string port_file = dir.file("port");
    std::string marker = "inspect-" + testing::unique_tag();
    auto s = start_under_client(
        {"/usr/bin/env", "MCPWARDEN_SESSION=" + marker, kFixture, "--port-file", port_file},
        port_file);
    ASSERT_TRUE(s);
    std::string jpath = dir.file("j/journal.db");
    CliRun r = run_cli(
        {"inspect", std::to_string(s->server), "--record", "--json", "--journal", jpath}, dir);
    ASSERT_EQ(r.status, 0) << r.err;
    auto doc = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_FALSE(doc.is_discarded()) << r.out;
    EXPECT_EQ(doc["session"], marker);
    EXPECT_EQ(doc["server"]["pid"], s->server);
    EXPECT_EQ(doc["client"]["pid"], s->client.pid());
    EXPECT_EQ(doc["state"], "live");
    EXPECT_NE(doc["capabilities"]["exe"], "");
    ASSERT_TRUE(doc["recorded"].is_object());
    EXPECT_EQ(undocumented_keys(doc, {schema_doc("inspect-json.md")}), std::vector<std::string>{});

    auto recs = journal::session_records(jpath, marker);
    ASSERT_TRUE(recs.ok()) << recs.error().message;
    int snapshots = 0;
    for (const auto& rec : *recs) {
        if (rec.kind != "process.snapshot") continue;
        auto body = nlohmann::json::parse(rec.body);
        EXPECT_EQ(body["data"]["pid"], s->server);
        EXPECT_EQ(body["data"]["reason"], "inspect");
        EXPECT_NE(body["data"]["exe"].dump(), "\"\"") << "snapshot without exe";
        EXPECT_EQ(body["data"]["fds"].size(), 3u) << body["data"].dump();
        for (const auto& f : body["data"]["fds"])
            EXPECT_NE(f["target"].dump(), "\"\"") << "fd " << f["fd"] << " without its target";
        ++snapshots;
    }
    EXPECT_EQ(snapshots, 1);
    // Negative control: without --record nothing is appended.
    CliRun again = run_cli({"inspect", std::to_string(s->server), "--journal", jpath}, dir);
    ASSERT_EQ(again.status, 0) << again.err;
    auto recs2 = journal::session_records(jpath, marker);
    ASSERT_TRUE(recs2.ok());
    EXPECT_EQ(recs2->size(), recs->size());
}

TEST(InventoryCli, InspectUnknownPidIsAnError) {
    TempDir dir;
    TestChild gone({"/bin/true"});
    ASSERT_TRUE(gone.started());
    ASSERT_TRUE(gone.wait_exit(5s).has_value());
    CliRun r = run_cli({"inspect", std::to_string(gone.pid())}, dir);
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.err.find("no process " + std::to_string(gone.pid())), std::string::npos) << r.err;
}

}  // namespace
}  // namespace warden
