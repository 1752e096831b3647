// A 2026-07-28 conformance check of our own (the official conformance suite has no scenario for
// that revision): the official SDK v2 client (tests/e2e/sdk2_client.mjs) in each of its modes —
// legacy (initialize), auto (server/discover on a sibling copy of the server, then the era it
// found) and pinned to 2026-07-28 — against a dual-era SDK v2 server (tests/e2e/sdk2_server.mjs:
// a tool, a resource, an input_required tool, a listen stream) and an SDK v1 one
// (server-everything), directly and through `mcpwarden run`: plain, `--idle-stop 0` (the
// server torn down after every answer), and `--lazy` with a cold catalog and with warm ones
// that legacy sessions built and that 2026 sessions built, and `--share` (one tree for every
// mode's client, through the user's broker). Every way must give the client the
// answers it gets directly, failures included (a pinned client against a legacy server).
// Label: e2e (needs node and tests/e2e/node_modules; skipped without them).
#include <sys/stat.h>
#include <sys/wait.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/cli_run.hpp"
#include "common/e2e.hpp"
#include "common/journal_rows.hpp"
#include "common/testing.hpp"

namespace warden::testing {
namespace {

const std::vector<std::string> kModes{"legacy", "auto", "pin"};

bool have_sdk2() {
    struct stat st;
    return have_node_modules() &&
           ::stat((e2e_dir() + "/node_modules/@modelcontextprotocol/client").c_str(), &st) == 0 &&
           ::stat((e2e_dir() + "/node_modules/@modelcontextprotocol/server").c_str(), &st) == 0;
}

struct Peer {
    std::vector<std::string> server;  // its command line
    std::vector<std::string> asks;    // the client's calls and reads
    bool dual_era = false;            // it serves 2026-07-28 clients too
};

// The dual-era SDK v2 server, its answers cacheable for a minute by anyone (so that a warm
// catalog can answer a 2026 client).
Peer sdk2_peer() {
    return {
        {"node", e2e_dir() + "/sdk2_server.mjs", "--ttl-ms", "60000", "--cache-scope", "public"},
        {"--call", "echo", "--args", R"({"text":"hi"})", "--call", "confirm", "--args",
         R"({"action":"deploy"})", "--read", "memo://note", "--listen", "memo://note"},
        true};
}

Peer everything_peer() {
    return {
        {"node", e2e_dir() + "/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
         "stdio"},
        {"--call", "echo", "--args", R"({"message":"hi"})", "--call", "get-sum", "--args",
         R"({"a":1,"b":2})"}};
}

// The client's one line for `mode` against `server` (with `asks`), and whether nothing of its
// tree outlived it.
struct Outcome {
    nlohmann::json answer;
    bool clean = false;
};

Outcome sdk2_run(const std::string& mode, const std::vector<std::string>& asks,
                 const std::vector<std::string>& server, ChildOptions opts = {}) {
    std::vector<std::string> argv{"node", e2e_dir() + "/sdk2_client.mjs", "--mode", mode};
    argv.insert(argv.end(), asks.begin(), asks.end());
    argv.push_back("--");
    argv.insert(argv.end(), server.begin(), server.end());
    TestChild c(argv, std::move(opts));
    Outcome out;
    auto line = c.read_line(60s);
    auto st = c.wait_exit(30s);
    EXPECT_TRUE(st && WIFEXITED(*st)) << mode;
    if (line) out.answer = nlohmann::json::parse(*line, nullptr, false);
    out.clean = nothing_tagged_left(c.tag());
    return out;
}

std::vector<std::string> through_run(const std::vector<std::string>& server,
                                     std::vector<std::string> options) {
    std::vector<std::string> a{kCli, "run", "--eof-grace", "500ms"};
    a.insert(a.end(), options.begin(), options.end());
    a.push_back("--");
    a.insert(a.end(), server.begin(), server.end());
    return a;
}

// One tag for every client of a test: the tag is in the server's environment, which is part of
// the identity a catalog is kept under (shim/catalog.hpp), so a fresh tag per client would make
// every catalog cold.
ChildOptions tagged(const std::string& tag) {
    ChildOptions o;
    o.tag = tag;
    return o;
}

// The three modes' clients at once through `run --share` (the user's broker private to `dir`,
// the linger long enough for the auto mode's real session to find its probe's tree) and, from
// the journal, the brokers and the trees their sessions went through: every tree of the
// sessions that spoke each era (session.protocol). A server's connection speaks one era
// (share/mux.hpp, "Eras"): sessions of both eras never share one tree. The trees and the
// broker end after the linger, by themselves (a client's end kills only its own run).
struct Shared {
    std::map<std::string, nlohmann::json> answers;  // mode → the client's line
    size_t brokers = 0, trees = 0;
    std::map<std::string, size_t> trees_of_era;  // "legacy", "stateless" → trees
};

Shared shared_answers(const Peer& peer, const std::string& dir, const std::string& tag,
                      const std::string& fault) {
    ::mkdir(dir.c_str(), 0700);
    const std::string db = dir + "/share.db";
    ChildOptions o = tagged(tag);
    o.kill_tagged = false;
    o.env = {{"XDG_RUNTIME_DIR", dir}, {"XDG_STATE_HOME", dir + "/state"}};
    if (!fault.empty()) o.env.emplace_back("MCPWARDEN_FAULT", fault);
    const auto run = through_run(peer.server, {"--journal", db, "--share", "--share-linger", "5s"});
    std::map<std::string, std::unique_ptr<TestChild>> clients;
    for (const auto& mode : kModes) {
        std::vector<std::string> argv{"node", e2e_dir() + "/sdk2_client.mjs", "--mode", mode};
        argv.insert(argv.end(), peer.asks.begin(), peer.asks.end());
        argv.push_back("--");
        argv.insert(argv.end(), run.begin(), run.end());
        clients[mode] = std::make_unique<TestChild>(argv, o);
    }
    Shared out;
    for (const auto& mode : kModes) {
        auto line = clients[mode]->read_line(60s);
        (void)clients[mode]->wait_exit(30s);
        out.answers[mode] = line ? nlohmann::json::parse(*line, nullptr, false) : nlohmann::json();
    }
    std::set<int64_t> brokers;
    std::set<std::string> trees;
    std::map<std::string, std::string> tree_of;  // client session → its tree
    for (const auto& start : record_data(db, "session.start"))
        if (start.contains("shared_tree")) {
            brokers.insert(start.value("share_broker_pid", int64_t{0}));
            trees.insert(start["shared_tree"].get<std::string>());
            tree_of[start["session"]] = start["shared_tree"];
        }
    std::map<std::string, std::set<std::string>> of_era;
    for (const auto& p : record_data(db, "session.protocol"))
        if (tree_of.count(p["session"])) of_era[p["era"]].insert(tree_of[p["session"]]);
    out.brokers = brokers.size();
    out.trees = trees.size();
    for (const auto& [era, t] : of_era)
        out.trees_of_era[era] = t.size();
    bool gone = false;
    for (int i = 0; i < 300 && !(gone = nothing_tagged_left(tag)); ++i)
        std::this_thread::sleep_for(100ms);
    EXPECT_TRUE(gone) << "a shared tree or its broker outlived the linger";
    if (!gone) TreeGuard(0, tag).kill_all();
    const auto left = remove_recorded_session_cgroups(db);
    if (gone) {
        EXPECT_TRUE(left.empty()) << ::testing::PrintToString(left) << " left";
    }
    return out;
}

// Every way through `run` answers `peer`'s client as the server does directly, in each mode.
void check_conformance(const Peer& peer) {
    TempDir dir;
    const std::string tag = unique_tag();
    std::map<std::string, nlohmann::json> direct;
    for (const auto& mode : kModes) {
        auto d = sdk2_run(mode, peer.asks, peer.server);
        ASSERT_TRUE(d.answer.is_object()) << mode;
        direct[mode] = d.answer;
    }
    auto same = [&](const std::string& mode, const std::string& way,
                    std::vector<std::string> options) {
        auto s =
            sdk2_run(mode, peer.asks, through_run(peer.server, std::move(options)), tagged(tag));
        EXPECT_EQ(s.answer, direct[mode]) << mode << " through run " << way;
        EXPECT_TRUE(s.clean) << mode << " through run " << way << ": processes left";
    };
    for (const auto& mode : kModes) {
        same(mode, "plain", {"--journal", dir.file("plain.db")});
        same(mode, "--idle-stop 0", {"--journal", dir.file("idle.db"), "--idle-stop", "0"});
    }
    // Lazy: the first session of each journal meets a cold catalog, the next ones the catalog
    // the sessions before them left — built by a legacy client in one journal, by 2026 ones in
    // the other.
    for (const auto& order : {std::vector<std::string>{"legacy", "auto", "pin"},
                              std::vector<std::string>{"pin", "auto", "legacy"}}) {
        const std::string db = dir.file("lazy-" + order.front() + ".db");
        for (size_t i = 0; i < order.size(); ++i)
            same(
                order[i],
                (i == 0 ? "--lazy, cold" : "--lazy, warm, built by " + order.front()) + " sessions",
                {"--journal", db, "--lazy"});
    }
    // Shared (`run --share`): the three modes' clients at once through the one broker of the
    // test's user, as directly; the sessions of each era on one tree (shared_answers).
    const auto shared = shared_answers(peer, dir.file("share"), tag, "");
    for (const auto& mode : kModes)
        EXPECT_EQ(shared.answers.at(mode), direct[mode]) << mode << " through run --share";
    EXPECT_EQ(shared.brokers, 1u) << "every mode's session through one broker";
    EXPECT_EQ(shared.trees_of_era.at("legacy"), 1u) << "the legacy sessions on one tree";
    if (peer.dual_era) {
        EXPECT_EQ(shared.trees_of_era.at("stateless"), 1u)
            << "the 2026-07-28 sessions (the probe copy's included) on one tree";
        EXPECT_EQ(shared.trees, 2u) << "one tree per era the server's connections took";
    }
}

TEST(E2ESdk2, ADualEraServerAnswersEachModeAsDirectlyThroughEveryWayOfRun) {
    if (!have_sdk2()) GTEST_SKIP() << "tests/e2e/node_modules (SDK v2) or node absent";
    check_conformance(sdk2_peer());
}

TEST(E2ESdk2, ALegacyServerAnswersEachModeAsDirectlyThroughEveryWayOfRun) {
    if (!have_sdk2()) GTEST_SKIP() << "tests/e2e/node_modules (SDK v2) or node absent";
    check_conformance(everything_peer());
}

// What the era guard keeps away (share/mux.hpp, "Eras"), its negative control: with
// MCPWARDEN_FAULT=share_eras_mixed every mode's session joins one tree, whose server's
// connection took the era of whichever session came first, and the clients of the other era
// get answers unlike the ones the server gives them directly (a 2026-07-28 client on a legacy
// connection: no _meta, its listen stream refused; a legacy one on a 2026-07-28 connection: its
// initialize refused). With the guard, check_conformance above.
TEST(E2ESdk2, ATreeOfBothErasWouldAnswerAModeWrong) {
    if (!have_sdk2()) GTEST_SKIP() << "tests/e2e/node_modules (SDK v2) or node absent";
    TempDir dir;
    const Peer peer = sdk2_peer();
    std::map<std::string, nlohmann::json> direct;
    for (const auto& mode : kModes)
        direct[mode] = sdk2_run(mode, peer.asks, peer.server).answer;
    const auto mixed = shared_answers(peer, dir.file("mixed"), unique_tag(), "share_eras_mixed");
    EXPECT_EQ(mixed.trees, 1u) << "the control kept the eras apart";
    size_t wrong = 0;
    for (const auto& mode : kModes)
        if (mixed.answers.at(mode) != direct[mode]) ++wrong;
    EXPECT_GE(wrong, 1u) << "one tree of both eras answered every mode as directly";
}

// The failure the catalog's era keeps away: a catalog that legacy sessions built answers a
// 2026 client's tools/list with the legacy answer (no resultType), and the SDK refuses it.
// Negative control: MCPWARDEN_FAULT=catalog_era keys answers on the method alone.
TEST(E2ESdk2, AWarmLegacyCatalogNeverAnswersA2026Client) {
    if (!have_sdk2()) GTEST_SKIP() << "tests/e2e/node_modules (SDK v2) or node absent";
    TempDir dir;
    const std::string tag = unique_tag();
    const Peer peer = sdk2_peer();
    const std::vector<std::string> list_only{};
    auto direct = sdk2_run("auto", list_only, peer.server).answer;
    ASSERT_EQ(direct.value("protocolVersion", ""), "2026-07-28") << direct;
    for (bool fault : {false, true}) {
        const std::string db = dir.file(fault ? "fault.db" : "guarded.db");
        ChildOptions o = tagged(tag);
        if (fault) o.env.emplace_back("MCPWARDEN_FAULT", "catalog_era");
        auto lazy = through_run(peer.server, {"--journal", db, "--lazy"});
        auto built = sdk2_run("legacy", list_only, lazy, o).answer;
        ASSERT_EQ(built.value("protocolVersion", ""), "2025-11-25") << built;
        auto warm = sdk2_run("auto", list_only, lazy, o).answer;
        if (!fault) {
            EXPECT_EQ(warm, direct);
        } else {
            EXPECT_EQ(warm.value("ok", true), false) << "the control served the 2026 client";
            EXPECT_NE(warm.dump().find("resultType"), std::string::npos) << warm;
        }
    }
}

// A 2026 client's connect through --lazy with a warm catalog that a 2026 session left starts no
// server at all: neither for the SDK's probe copy (server/discover) nor for the listing.
// Negative control: the same connect against a server whose answers may not be kept
// (cacheScope private) starts one for each.
TEST(E2ESdk2, A2026ConnectWithAWarmCatalogStartsNoServer) {
    if (!have_sdk2()) GTEST_SKIP() << "tests/e2e/node_modules (SDK v2) or node absent";
    TempDir dir;
    const std::string tag = unique_tag();
    for (const std::string scope : {"public", "private"}) {
        const std::string db = dir.file(scope + ".db");
        const std::vector<std::string> server{
            "node", e2e_dir() + "/sdk2_server.mjs", "--ttl-ms", "60000", "--cache-scope", scope};
        auto lazy = through_run(server, {"--journal", db, "--lazy"});
        auto cold = sdk2_run("pin", {}, lazy, tagged(tag)).answer;
        ASSERT_EQ(cold.value("protocolVersion", ""), "2026-07-28") << cold;
        const size_t sessions_before = record_data(db, "session.start").size();
        auto warm = sdk2_run("pin", {}, lazy, tagged(tag)).answer;
        EXPECT_EQ(warm, cold) << scope;
        // The probe's session and the real one.
        EXPECT_EQ(record_data(db, "session.start").size(), sessions_before + 2) << scope;
        size_t started = 0;
        for (const auto& w : record_data(db, "session.wake"))
            if (w["seq"].get<int64_t>() > 0 && w.value("lazy_start", false)) ++started;
        const size_t cold_starts = 2;  // the cold connect: one for the probe, one for the list
        if (scope == "private") {
            EXPECT_EQ(started, 2 * cold_starts) << "the control's private answers were served";
            continue;
        }
        EXPECT_EQ(started, cold_starts) << "the warm connect started a server";
        // Served whole from the catalog, the probe's session still says who probed (its
        // session.protocol), and the real session is linked to it.
        const auto starts = record_data(db, "session.start");
        const std::string probe = starts[sessions_before]["session"];
        const std::string real = starts[sessions_before + 1]["session"];
        auto of = [](const std::vector<nlohmann::json>& rows, const std::string& session) {
            std::vector<nlohmann::json> out;
            for (const auto& r : rows)
                if (r["session"] == session) out.push_back(r);
            return out;
        };
        auto said = of(record_data(db, "session.protocol"), probe);
        ASSERT_EQ(said.size(), 1u);
        EXPECT_EQ(said[0]["method"], "server/discover");
        EXPECT_EQ(said[0]["served_from"], "catalog");
        EXPECT_EQ(said[0]["client_name"], "mcpwarden-e2e-sdk2-client");
        auto links = of(record_data(db, "session.probed_by"), real);
        ASSERT_EQ(links.size(), 1u);
        EXPECT_EQ(links[0]["probe_session"], probe);
        // Negative control: MCPWARDEN_FAULT=served_protocol_unnoted leaves the served probe
        // without its protocol, and so without a link.
        ChildOptions o = tagged(tag);
        o.env.emplace_back("MCPWARDEN_FAULT", "served_protocol_unnoted");
        EXPECT_EQ(sdk2_run("pin", {}, lazy, o).answer, cold);
        const auto after = record_data(db, "session.start");
        ASSERT_EQ(after.size(), sessions_before + 4);
        EXPECT_TRUE(
            of(record_data(db, "session.protocol"), after[sessions_before + 2]["session"]).empty());
        EXPECT_TRUE(of(record_data(db, "session.probed_by"), after[sessions_before + 3]["session"])
                        .empty());
    }
}

// The SDK's auto mode probes on a short-lived copy of the server, a session of its own: the
// real session is linked to it (session.probed_by), and `journal sessions` shows the link.
// A legacy client makes no probe and no link. Negative control: MCPWARDEN_FAULT=probe_unlinked.
TEST(E2ESdk2, TheProbeCopysSessionIsLinkedToTheSessionItProbedFor) {
    if (!have_sdk2()) GTEST_SKIP() << "tests/e2e/node_modules (SDK v2) or node absent";
    TempDir dir;
    const Peer peer = sdk2_peer();
    for (const std::string way : {"auto", "legacy", "control"}) {
        const std::string db = dir.file(way + ".db");
        ChildOptions o;
        if (way == "control") o.env.emplace_back("MCPWARDEN_FAULT", "probe_unlinked");
        auto out = sdk2_run(way == "legacy" ? "legacy" : "auto", {},
                            through_run(peer.server, {"--journal", db}), o);
        ASSERT_EQ(out.answer.value("ok", false), true) << out.answer;
        const auto starts = record_data(db, "session.start");
        const auto links = record_data(db, "session.probed_by");
        if (way == "legacy") {
            EXPECT_EQ(starts.size(), 1u);
            EXPECT_EQ(links.size(), 0u);
            continue;
        }
        ASSERT_EQ(starts.size(), 2u) << "the probe's copy and the real server";
        if (way == "control") {
            EXPECT_EQ(links.size(), 0u) << "linked with the guard off";
            continue;
        }
        ASSERT_EQ(links.size(), 1u);
        EXPECT_EQ(links[0]["session"], starts[1]["session"]);
        EXPECT_EQ(links[0]["probe_session"], starts[0]["session"]);
        EXPECT_GE(links[0]["gap_ns"].get<int64_t>(), 0);
        auto listed = run_cli(dir, {"journal", "sessions", "--journal", db});
        const std::string probe = starts[0]["session"], real = starts[1]["session"];
        EXPECT_NE(listed.out.find("for " + real.substr(0, 8)), std::string::npos) << listed.out;
        EXPECT_NE(listed.out.find("by " + probe.substr(0, 8)), std::string::npos) << listed.out;
    }
}

}  // namespace
}  // namespace warden::testing
