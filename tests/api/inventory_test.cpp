// mcpwarden/inventory.hpp through the shared library: a fake MCP client starts a wrapper +
// server pair on pipes; while the client lives the tree is live and names it, once it is
// SIGKILLed the same tree is a logical orphan. The incident record of the server, recorded
// into a journal of the test's own. Credential-looking variables show by name, never value.
#include <unistd.h>

#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/testing.hpp"
#include "mcpwarden/mcpwarden.hpp"
#include "reap/reap_test_util.hpp"

namespace warden::testing {
namespace {

// The tree whose root is `root`, from a scan without client configs (HOME is not ours).
std::optional<api::ServerTree> tree_rooted_at(pid_t root) {
    api::ScanOptions o;
    o.use_client_configs = false;
    o.use_journal = false;
    auto inv = api::scan_inventory(o);
    EXPECT_TRUE(inv) << inv.error().message;
    if (!inv) return std::nullopt;
    for (const auto& t : inv->servers)
        if (t.root.pid == root) return t;
    return std::nullopt;
}

TEST(ApiInventory, ServerOfAKilledClientIsALogicalOrphan) {
    const std::string tag = unique_tag();
    FakeClient client(1, tag, pair_argv(tag), {"GITHUB_TOKEN=s3cr3t-value"});
    ASSERT_TRUE(client.ready());
    const pid_t wrapper = client.wrappers().front();
    auto st = read_stat(wrapper);
    ASSERT_TRUE(st);
    const pid_t client_pid = st->ppid;

    // Negative control: the same tree while its client holds the pipe is live, and the
    // client is named.
    auto live = tree_rooted_at(wrapper);
    ASSERT_TRUE(live) << "no tree rooted at the wrapper " << wrapper;
    EXPECT_EQ(live->state, api::ServerState::Live);
    EXPECT_STREQ(api::state_name(live->state), "live");
    ASSERT_TRUE(live->client);
    EXPECT_EQ(live->client->id.pid, client_pid);
    EXPECT_TRUE(live->client->alive);

    client.kill();
    auto orphan = tree_rooted_at(wrapper);
    ASSERT_TRUE(orphan);
    EXPECT_EQ(orphan->state, api::ServerState::LogicalOrphan) << orphan->json;
    EXPECT_FALSE(orphan->state_reasons.empty());
    ASSERT_GE(orphan->members.size(), 3u);  // sh, the server, its helper
    EXPECT_EQ(orphan->members.front().id.pid, wrapper);
    EXPECT_EQ(orphan->members.front().depth, 0);
    const api::TreeMember* server = orphan->member(orphan->server.pid);
    ASSERT_NE(server, nullptr);
    EXPECT_EQ(server->role, "server");
    EXPECT_EQ(orphan->members.back().role, "helper");
    EXPECT_FALSE(orphan->evidence.empty());

    // Credential variables: the name is there, the value nowhere (struct nor JSON).
    const auto& creds = server->caps.credential_env;
    EXPECT_NE(std::find(creds.begin(), creds.end(), "GITHUB_TOKEN"), creds.end());
    EXPECT_EQ(orphan->json.find("s3cr3t-value"), std::string::npos);
    EXPECT_EQ(server->caps.json.find("s3cr3t-value"), std::string::npos);
    auto j = nlohmann::json::parse(orphan->json);
    EXPECT_EQ(j["state"], "logical-orphan");
    EXPECT_EQ(j["root"]["pid"], wrapper);
}

TEST(ApiInventory, ProcessesKnowTheirTreeAndChildren) {
    const std::string tag = unique_tag();
    CrashedClient crashed(tag);
    ASSERT_TRUE(crashed.ready());
    api::ScanOptions o;
    o.use_client_configs = false;
    o.use_journal = false;
    auto inv = api::scan_inventory(o);
    ASSERT_TRUE(inv) << inv.error().message;
    const api::ProcessInfo* root = inv->find(crashed.wrapper());
    ASSERT_NE(root, nullptr);
    const api::ServerTree* tree = inv->tree_of(crashed.wrapper());
    ASSERT_NE(tree, nullptr);
    EXPECT_EQ(tree->root.pid, crashed.wrapper());
    EXPECT_EQ(root->starttime, tree->root.starttime);
    ASSERT_EQ(root->children.size(), 1u);  // sh → the fixture
    EXPECT_NE(tree->member(root->children.front()), nullptr);
    EXPECT_EQ(inv->tree_of(root->children.front()), tree);
    EXPECT_EQ(root->argv.front(), "/bin/sh");
    EXPECT_NE(root->command.find(tag), std::string::npos);
    EXPECT_EQ(root->uid, ::getuid());
    // Its descendants: every member below the root, each once; the tree's processes and no
    // other. A pid outside the scan has none.
    std::vector<const api::ProcessInfo*> below = inv->descendants(crashed.wrapper());
    EXPECT_EQ(below.size(), tree->members.size() - 1);
    for (const api::ProcessInfo* p : below) {
        EXPECT_NE(tree->member(p->pid), nullptr) << p->pid << " " << p->command;
        EXPECT_NE(p->pid, crashed.wrapper());
    }
    EXPECT_TRUE(inv->descendants(0).empty());
    // A process outside every tree: ours.
    const api::ProcessInfo* self = inv->find(::getpid());
    ASSERT_NE(self, nullptr);
    EXPECT_EQ(self->server_tree, -1);
    EXPECT_EQ(inv->tree_of(::getpid()), nullptr);
    EXPECT_FALSE(inv->boot_id.empty());
    EXPECT_GT(inv->clock_ticks, 0);
}

TEST(ApiInventory, InspectRecordsTheIncidentIntoTheJournal) {
    const std::string tag = unique_tag();
    CrashedClient crashed(tag);
    ASSERT_TRUE(crashed.ready());
    TempDir dir;
    const std::string journal = dir.file("journal.db");

    api::InspectOptions o;
    o.journal_path = journal;
    auto plain = api::inspect(crashed.wrapper(), o);
    ASSERT_TRUE(plain) << plain.error().message;
    EXPECT_FALSE(plain->recorded_seq);
    EXPECT_EQ(nlohmann::json::parse(plain->json)["recorded"], nullptr);

    o.record = true;
    auto rec = api::inspect(crashed.wrapper(), o);
    ASSERT_TRUE(rec) << rec.error().message;
    EXPECT_EQ(rec->target.pid, crashed.wrapper());
    EXPECT_EQ(rec->state, api::ServerState::LogicalOrphan);
    ASSERT_TRUE(rec->recorded_seq);
    EXPECT_EQ(rec->recorded_in, journal);
    auto j = nlohmann::json::parse(rec->json);
    EXPECT_EQ(j["recorded"]["seq"], *rec->recorded_seq);
    EXPECT_NE(rec->text.find("process.snapshot seq " + std::to_string(*rec->recorded_seq)),
              std::string::npos)
        << rec->text;
    // The snapshot is a verifiable record of that journal.
    api::VerifyResult v = api::journal_verify(journal);
    EXPECT_TRUE(v.ok) << v.json;
    EXPECT_GE(v.records, *rec->recorded_seq);
}

TEST(ApiInventory, InspectOfAMissingProcessSaysWhich) {
    // pid_max itself is never a pid.
    std::ifstream f("/proc/sys/kernel/pid_max");
    long pid_max = 0;
    ASSERT_TRUE(f >> pid_max);
    TempDir dir;
    api::InspectOptions o;
    o.journal_path = dir.file("journal.db");
    o.record = true;
    auto r = api::inspect(static_cast<pid_t>(pid_max), o);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().message, "no process " + std::to_string(pid_max));
    // Nothing was recorded for it.
    EXPECT_FALSE(std::ifstream(dir.file("journal.db")).good());
}

}  // namespace
}  // namespace warden::testing
