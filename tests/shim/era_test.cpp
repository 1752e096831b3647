// The two eras of MCP through the built `mcpwarden run` and the fixture server: the stateless
// 2026-07-28 revision (every request names its protocol version in params._meta; no
// handshake) and the legacy one (initialize). What the journal says of each (session.protocol),
// what a --lazy catalog answers to each, and how --idle-stop puts a stateless session to sleep.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/cli_run.hpp"
#include "common/journal_rows.hpp"
#include "common/testing.hpp"
#include "journal/crypto.hpp"

namespace warden::testing {
namespace {

// `mcpwarden run` of the fixture with `flags` before `--` and `server_flags` after it.
std::unique_ptr<TestChild> start_run(const std::string& db, const std::vector<std::string>& flags,
                                     const std::vector<std::string>& server_flags = {},
                                     const std::string& tag = unique_tag(),
                                     std::vector<std::pair<std::string, std::string>> env = {}) {
    std::vector<std::string> argv{kCli,           "run",   "--eof-grace", "200ms",
                                  "--term-grace", "300ms", "--journal",   db};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.push_back("--");
    argv.push_back(kFixture);
    argv.insert(argv.end(), server_flags.begin(), server_flags.end());
    ChildOptions co;
    co.tag = tag;
    co.env = std::move(env);
    return std::make_unique<TestChild>(argv, co);
}

void finish_run(TestChild& c) {
    c.close_stdin();
    auto st = c.wait_exit(10s);
    ASSERT_TRUE(st);
    EXPECT_EQ(describe_status(*st), "exited 0");
    EXPECT_TRUE(nothing_tagged_left(c.tag()));
}

std::string short_digest(const nlohmann::json& capabilities) {
    return journal::to_hex(journal::sha256(capabilities.dump())).substr(0, 16);
}

// A 2026-07-28 client (Claude Code's opening: server/discover under its probe id, then a list)
// is on record once, as stateless, with its client info and the digest of its capabilities;
// a client that probes and falls back to initialize on a server that does not know the
// revision (--legacy-only) leaves both eras in one session, in the order it spoke them.
TEST(Era, EachProtocolVersionIsOnRecordWithTheClientThatSpokeIt) {
    TempDir dir;
    const std::string db = dir.file("journal.db");
    const nlohmann::json caps{{"elicitation", nlohmann::json::object()}};
    {
        auto c = start_run(db, {});
        ASSERT_TRUE(c->started()) << c->error();
        ASSERT_TRUE(
            c->write_line(rpc_stateless("server-discover-probe-1", "server/discover", {}, caps)));
        auto discover = read_response(*c, "server-discover-probe-1", 10s);
        ASSERT_TRUE(discover);
        EXPECT_EQ((*discover)["result"].value("resultType", ""), "complete") << discover->dump();
        ASSERT_TRUE(c->write_line(rpc_stateless(2, "tools/list", {}, caps)));
        auto list = read_response(*c, 2, 10s);
        ASSERT_TRUE(list);
        EXPECT_TRUE((*list)["result"].contains("tools")) << list->dump();
        finish_run(*c);
    }
    auto rows = record_data(db, "session.protocol");
    ASSERT_EQ(rows.size(), 1u) << "one version, one record";
    EXPECT_EQ(rows[0]["era"], "stateless");
    EXPECT_EQ(rows[0]["protocol_version"], kStatelessVersion);
    EXPECT_EQ(rows[0]["method"], "server/discover");
    EXPECT_EQ(rows[0]["client_name"], "warden-test");
    EXPECT_EQ(rows[0]["client_version"], "0");
    EXPECT_EQ(rows[0]["client_capabilities_sha256"], short_digest(caps));
    EXPECT_LT(rows[0]["request_seq"].get<int64_t>(), rows[0]["seq"].get<int64_t>());

    {
        auto c = start_run(db, {}, {"--legacy-only"});
        ASSERT_TRUE(c->started()) << c->error();
        ASSERT_TRUE(
            c->write_line(rpc_stateless("server-discover-probe-1", "server/discover", {}, caps)));
        auto probe = read_response(*c, "server-discover-probe-1", 10s);
        ASSERT_TRUE(probe);
        EXPECT_EQ((*probe)["error"].value("message", ""), "Method not found") << probe->dump();
        ASSERT_TRUE(c->write_line(rpc_initialize(1, "2025-11-25")));
        ASSERT_TRUE(read_response(*c, 1, 10s));
        ASSERT_TRUE(c->write_line(rpc_initialized()));
        ASSERT_TRUE(c->write_line(rpc_tools_list(2)));
        ASSERT_TRUE(read_response(*c, 2, 10s));
        finish_run(*c);
    }
    rows = record_data(db, "session.protocol");
    ASSERT_EQ(rows.size(), 3u);
    EXPECT_EQ(rows[1]["session"], rows[2]["session"]);
    EXPECT_NE(rows[0]["session"], rows[1]["session"]);
    EXPECT_EQ(rows[1]["era"], "stateless");
    EXPECT_EQ(rows[1]["method"], "server/discover");
    EXPECT_EQ(rows[2]["era"], "legacy");
    EXPECT_EQ(rows[2]["protocol_version"], "2025-11-25");
    EXPECT_EQ(rows[2]["method"], "initialize");
    EXPECT_EQ(rows[2]["client_name"], "warden-test");
    EXPECT_EQ(rows[2]["client_capabilities_sha256"], short_digest(nlohmann::json::object()));
}

// The relay and what it started: relay and keeper alone means no server (asleep, or --lazy
// with nothing asked of the server yet).
size_t live_below(TestChild& c) {
    return live_tagged_below(c.tag(), c.pid()).size();
}

// The answer to a stateless tools/list (id `id`) in a new --lazy session, and whether a
// server had to start for it.
struct Listed {
    nlohmann::json answer;
    bool server = false;
};
Listed lazy_stateless_list(const std::string& db, const std::string& tag, int id,
                           std::vector<std::pair<std::string, std::string>> env = {},
                           const std::vector<std::string>& server_flags = {}) {
    Listed l;
    auto c = start_run(db, {"--lazy"}, server_flags, tag, std::move(env));
    EXPECT_TRUE(c->started()) << c->error();
    EXPECT_TRUE(c->write_line(rpc_stateless(id, "tools/list")));
    auto a = read_response(*c, id, 10s);
    EXPECT_TRUE(a);
    if (a) l.answer = *a;
    l.server = live_below(*c) > 2;
    finish_run(*c);
    return l;
}

// A catalog that legacy sessions built holds the legacy tools/list; a 2026-07-28 client asks
// tools/list with its _meta and must get the server's stateless answer (resultType), which
// needs the server; a later 2026 client is served that one, within its ttlMs, with no server.
// Negative control: with the era left out of the key (MCPWARDEN_FAULT=catalog_era) the 2026
// client is served the legacy answer, without resultType, the answer a 2026 client rejects.
TEST(Era, ALazyCatalogNeverAnswersOneErasRequestWithTheOthersAnswer) {
    TempDir dir;
    const std::string db = dir.file("journal.db"), tag = unique_tag();
    {
        auto c = start_run(db, {"--lazy"}, {}, tag);
        ASSERT_TRUE(c->started()) << c->error();
        ASSERT_TRUE(c->write_line(rpc_initialize(1)));
        ASSERT_TRUE(read_response(*c, 1, 10s));
        ASSERT_TRUE(c->write_line(rpc_initialized()));
        ASSERT_TRUE(c->write_line(rpc_tools_list(2)));
        auto legacy = read_response(*c, 2, 10s);
        ASSERT_TRUE(legacy);
        EXPECT_FALSE((*legacy)["result"].contains("resultType")) << legacy->dump();
        finish_run(*c);
    }
    ASSERT_EQ(record_data(db, "server.catalog").size(), 1u);

    auto first = lazy_stateless_list(db, tag, 3);
    EXPECT_EQ(first.answer["result"].value("resultType", ""), "complete") << first.answer.dump();
    EXPECT_TRUE(first.server) << "the legacy tools/list answered a 2026-07-28 request";
    auto catalogs = record_data(db, "server.catalog");
    ASSERT_EQ(catalogs.size(), 2u) << "the stateless answer was not kept";
    std::string keys;
    for (auto& a : catalogs[1]["answers"])
        keys += a.value("key", a.value("method", "?")).substr(0, 21) + ",";
    EXPECT_EQ(keys, "initialize,tools/list,tools/list 2026-07-28,") << catalogs[1].dump();

    auto again = lazy_stateless_list(db, tag, 4);
    EXPECT_EQ(again.answer["result"].value("resultType", ""), "complete") << again.answer.dump();
    EXPECT_EQ(again.answer["result"]["tools"], first.answer["result"]["tools"]);
    EXPECT_FALSE(again.server) << "the stateless answer in the catalog was not served";

    auto unkeyed = lazy_stateless_list(db, tag, 5, {{"MCPWARDEN_FAULT", "catalog_era"}});
    EXPECT_FALSE(unkeyed.answer["result"].contains("resultType"))
        << "without the era in the key, the legacy answer should have been served: "
        << unkeyed.answer.dump();
    EXPECT_FALSE(unkeyed.server);
}

// Legacy answers belong to the protocol version of the catalog's initialize: a session that
// initialized with another version (answered by the server: the params differ) and then
// slept under --idle-stop is not served the catalog's tools/list; its server is woken for it.
// Negative control: with the era and version checks off (MCPWARDEN_FAULT=catalog_era) the
// list of the other version is served from the catalog, no wake.
TEST(Era, ALegacyListIsServedOnlyToTheVersionItWasAnsweredFor) {
    TempDir dir;
    const std::string tag = unique_tag();
    // In a journal of its own, a catalog of version 2025-06-18; then the wakes of a session
    // of version 2025-11-25 that lists its tools once asleep.
    auto wakes_for_list = [&](const std::string& db,
                              std::vector<std::pair<std::string, std::string>> env) -> size_t {
        {
            auto c = start_run(db, {"--lazy"}, {}, tag);
            EXPECT_TRUE(c->started()) << c->error();
            EXPECT_TRUE(c->write_line(rpc_initialize(1, "2025-06-18")));
            EXPECT_TRUE(read_response(*c, 1, 10s));
            EXPECT_TRUE(c->write_line(rpc_initialized()));
            EXPECT_TRUE(c->write_line(rpc_tools_list(2)));
            EXPECT_TRUE(read_response(*c, 2, 10s));
            finish_run(*c);
        }
        const size_t before = record_data(db, "session.wake").size();
        auto c = start_run(db, {"--lazy", "--idle-stop", "200ms"}, {}, tag, std::move(env));
        EXPECT_TRUE(c->started()) << c->error();
        EXPECT_TRUE(c->write_line(rpc_initialize(1, "2025-11-25")));
        auto init = read_response(*c, 1, 10s);
        EXPECT_TRUE(init && (*init)["result"]["protocolVersion"] == "2025-11-25");
        EXPECT_TRUE(c->write_line(rpc_initialized()));
        // Asleep once the relay recorded it (the keeper's report came back): while the
        // server is gone but that report is on its way, a request wakes it again.
        EXPECT_TRUE(
            wait_until([&] { return record_data(db, "session.hibernate").size() == 1; }, 8s))
            << "the session did not sleep";
        EXPECT_TRUE(c->write_line(rpc_tools_list(2)));
        EXPECT_TRUE(read_response(*c, 2, 10s));
        finish_run(*c);
        return record_data(db, "session.wake").size() - before;
    };
    EXPECT_EQ(wakes_for_list(dir.file("a.db"), {}), 2u)
        << "the lazy start, then a wake for tools/list";
    EXPECT_EQ(wakes_for_list(dir.file("b.db"), {{"MCPWARDEN_FAULT", "catalog_era"}}), 1u)
        << "without the version check, the catalog's list should have answered";
}

// The cache hints of a 2026-07-28 answer: one past its ttlMs, or marked private (for the
// client it was given to alone), is never served to another session; the server starts each
// time. The control is the test above: a public answer within its ttlMs is served.
TEST(Era, ALazyCatalogHonoursTtlAndPrivateScope) {
    TempDir dir;
    const std::string db = dir.file("journal.db"), tag = unique_tag();
    for (const auto& flags : {std::vector<std::string>{"--ttl-ms", "1"},
                              std::vector<std::string>{"--cache-scope", "private"}}) {
        for (int round = 0; round < 2; ++round) {
            auto l = lazy_stateless_list(db, tag, 10 + round, {}, flags);
            EXPECT_EQ(l.answer["result"].value("resultType", ""), "complete");
            EXPECT_TRUE(l.server) << flags[0] << " " << flags[1] << ", session " << round + 1
                                  << ": served from the catalog";
        }
    }
}

// A stateless session under --idle-stop: once idle its server is torn down (no handshake to
// wait for: there is none in this era), and its next request starts a new server that
// answers it as its first message, no initialize replayed (the fixture's `state` tool says
// whether it was told notifications/initialized). Negative control: a session that must wait
// for a handshake first (MCPWARDEN_FAULT=sleep_needs_handshake) keeps its server.
TEST(Era, AStatelessSessionSleepsWhenIdleAndWakesForItsNextRequest) {
    TempDir dir;
    const std::string db = dir.file("journal.db");
    {
        auto c = start_run(db, {"--idle-stop", "200ms"});
        ASSERT_TRUE(c->started()) << c->error();
        ASSERT_TRUE(c->write_line(rpc_stateless(1, "tools/list")));
        ASSERT_TRUE(read_response(*c, 1, 10s));
        EXPECT_TRUE(wait_until([&] { return live_below(*c) == 2; }, 8s))
            << live_below(*c) << " processes: the server was not put to sleep";
        ASSERT_TRUE(c->write_line(rpc_stateless(2, "tools/call", {{"name", "state"}})));
        auto state = read_response(*c, 2, 10s);
        ASSERT_TRUE(state);
        EXPECT_EQ((*state)["result"].value("resultType", ""), "complete") << state->dump();
        EXPECT_EQ(result_text(*state), "initialized=no level=none");
        EXPECT_GT(live_below(*c), 2u);
        finish_run(*c);
    }
    auto sleeps = record_data(db, "session.hibernate");
    auto wakes = record_data(db, "session.wake");
    ASSERT_EQ(sleeps.size(), 1u);
    ASSERT_EQ(wakes.size(), 1u);
    EXPECT_EQ(wakes[0]["request"], "tools/call");
    EXPECT_FALSE(wakes[0].contains("error")) << wakes[0].dump();
    EXPECT_LT(sleeps[0]["seq"].get<int64_t>(), wakes[0]["seq"].get<int64_t>());

    {
        auto c = start_run(db, {"--idle-stop", "200ms"}, {}, unique_tag(),
                           {{"MCPWARDEN_FAULT", "sleep_needs_handshake"}});
        ASSERT_TRUE(c->started()) << c->error();
        ASSERT_TRUE(c->write_line(rpc_stateless(1, "tools/list")));
        ASSERT_TRUE(read_response(*c, 1, 10s));
        EXPECT_FALSE(wait_until([&] { return live_below(*c) == 2; }, 1500ms))
            << "the fault should have kept the server awake";
        finish_run(*c);
    }
    EXPECT_EQ(record_data(db, "session.hibernate").size(), 1u);
}

// A 2026-07-28 call the server answers `input_required` is on record with that outcome (not
// ok), and the client's retry with inputResponses names it (`retry_of_id`): one call, two
// rounds. A `subscriptions/listen` stream still open when the client leaves is recorded as
// a stream that ended with the session, not as a request the client abandoned.
TEST(Era, InputRequiredAndItsRetryAreOneCallAndAListenStreamIsNotAbandoned) {
    TempDir dir;
    const std::string db = dir.file("journal.db");
    {
        auto c = start_run(db, {});
        ASSERT_TRUE(c->started()) << c->error();
        const nlohmann::json call{{"name", "confirm"}, {"arguments", {{"what", "deploy"}}}};
        ASSERT_TRUE(c->write_line(rpc_stateless(1, "tools/call", call)));
        auto first = read_response(*c, 1, 10s);
        ASSERT_TRUE(first);
        EXPECT_EQ((*first)["result"].value("resultType", ""), "input_required") << first->dump();
        auto retry = call;
        retry["inputResponses"] = {
            {"ok", {{"action", "accept"}, {"content", {{"password", "hunter2-not-on-record"}}}}}};
        ASSERT_TRUE(c->write_line(rpc_stateless(2, "tools/call", retry)));
        auto second = read_response(*c, 2, 10s);
        ASSERT_TRUE(second);
        EXPECT_EQ(result_text(*second), "confirmed");
        ASSERT_TRUE(c->write_line(rpc_stateless(3, "subscriptions/listen")));
        ASSERT_TRUE(c->write_line(rpc_stateless(4, "tools/call", {{"name", "state"}})));
        ASSERT_TRUE(read_response(*c, 4, 10s));  // the stream is open on the server by now
        finish_run(*c);
    }
    auto requests = record_data(db, "activity.request");
    auto responses = record_data(db, "activity.response");
    ASSERT_EQ(requests.size(), 4u);
    ASSERT_GE(responses.size(), 2u);
    EXPECT_EQ(responses[0]["request_seq"], requests[0]["seq"]);
    EXPECT_EQ(responses[0]["outcome"], "input_required");
    EXPECT_EQ(requests[1]["retry_of_id"], requests[0]["id"]) << requests[1].dump();
    EXPECT_FALSE(requests[0].contains("retry_of_id"));
    // The client's answers on record as its arguments are: digest, size, masked preview.
    EXPECT_FALSE(requests[0].contains("input_responses"));
    const std::string answers = requests[1].value("input_responses", "");
    EXPECT_NE(answers.find("accept"), std::string::npos) << requests[1].dump();
    EXPECT_EQ(answers.find("hunter2"), std::string::npos) << "a secret-named value on record";
    EXPECT_GT(requests[1].value("input_responses_bytes", 0), 0);
    EXPECT_TRUE(requests[1].value("input_responses_digest", "").starts_with("sha256:"));
    EXPECT_EQ(responses[1]["outcome"], "ok");
    EXPECT_EQ(requests[2]["method"], "subscriptions/listen");
    EXPECT_EQ(requests[2]["stream"], true);
    EXPECT_EQ(record_data(db, "activity.abandoned").size(), 0u);
    auto ends = record_data(db, "activity.stream_end");
    ASSERT_EQ(ends.size(), 1u);
    EXPECT_EQ(ends[0]["request_seq"], requests[2]["seq"]);
}

// An input_required answer longer than --max-message passes unclassified (the relay scans it
// in pieces, never holding it): it is still on record as input_required, not ok.
// Negative control: MCPWARDEN_FAULT=oversize_outcome_unscanned reads no resultType: ok.
TEST(Era, AnOversizeInputRequiredAnswerKeepsItsOutcome) {
    TempDir dir;
    for (bool fault : {false, true}) {
        const std::string db = dir.file(fault ? "fault.db" : "guarded.db");
        std::vector<std::pair<std::string, std::string>> env;
        if (fault) env.emplace_back("MCPWARDEN_FAULT", "oversize_outcome_unscanned");
        auto c = start_run(db, {"--max-message", "4KiB"}, {}, unique_tag(), env);
        ASSERT_TRUE(c->started()) << c->error();
        const nlohmann::json call{{"name", "confirm"},
                                  {"arguments", {{"what", "deploy"}, {"pad", 100000}}}};
        ASSERT_TRUE(c->write_line(rpc_stateless(1, "tools/call", call)));
        auto first = read_response(*c, 1, 10s);
        ASSERT_TRUE(first);
        EXPECT_EQ((*first)["result"].value("resultType", ""), "input_required");
        finish_run(*c);
        auto oversize = record_data(db, "activity.oversize");
        ASSERT_EQ(oversize.size(), 1u) << "the answer was not past the limit";
        EXPECT_EQ(oversize[0]["direction"], "server_to_client");
        auto responses = record_data(db, "activity.response");
        ASSERT_EQ(responses.size(), 1u);
        EXPECT_EQ(responses[0]["outcome"], fault ? "ok" : "input_required");
    }
}

// A subscriptions/listen stream still open when the server exits ends with the session,
// closed by the server: an activity.stream_end, never an abandoned call, and no longer in
// flight for `journal sessions`.
// Negative control: MCPWARDEN_FAULT=stream_abandoned records it abandoned.
TEST(Era, AListenStreamOpenWhenTheServerExitsEndsClosedByTheServer) {
    TempDir dir;
    for (bool fault : {false, true}) {
        const std::string db = dir.file(fault ? "fault.db" : "guarded.db");
        std::vector<std::pair<std::string, std::string>> env;
        if (fault) env.emplace_back("MCPWARDEN_FAULT", "stream_abandoned");
        const std::string tag = unique_tag();
        auto c = start_run(db, {}, {}, tag, env);
        ASSERT_TRUE(c->started()) << c->error();
        ASSERT_TRUE(c->write_line(rpc_stateless(1, "subscriptions/listen")));
        ASSERT_TRUE(c->write_line(rpc_stateless(2, "tools/call", {{"name", "state"}})));
        ASSERT_TRUE(read_response(*c, 2, 10s));  // the stream is open on the server by now
        auto starts = record_data(db, "session.start");
        ASSERT_EQ(starts.size(), 1u);
        const pid_t pid = starts[0]["server"]["pid"].get<pid_t>();
        auto ours = live_tagged(tag);
        ASSERT_NE(std::find(ours.begin(), ours.end(), pid), ours.end()) << "not our server";
        ASSERT_EQ(::kill(pid, SIGKILL), 0);
        auto st = c->wait_exit(10s);
        ASSERT_TRUE(st);
        EXPECT_TRUE(nothing_tagged_left(tag));
        auto ends = record_data(db, "session.end");
        ASSERT_EQ(ends.size(), 1u);
        EXPECT_EQ(ends[0]["reason"], "server_exit");
        auto requests = record_data(db, "activity.request");
        ASSERT_EQ(requests.size(), 2u);
        auto stream_ends = record_data(db, "activity.stream_end");
        auto abandoned = record_data(db, "activity.abandoned");
        if (fault) {
            EXPECT_EQ(stream_ends.size(), 0u);
            EXPECT_EQ(abandoned.size(), 1u);
            continue;
        }
        EXPECT_EQ(abandoned.size(), 0u);
        ASSERT_EQ(stream_ends.size(), 1u);
        EXPECT_EQ(stream_ends[0]["request_seq"], requests[0]["seq"]);
        EXPECT_EQ(stream_ends[0]["closed_by"], "server");
        auto sessions = run_cli(dir, {"journal", "sessions", "--journal", db, "--json"});
        auto rows = nlohmann::json::parse(sessions.out, nullptr, false);
        ASSERT_TRUE(rows.is_array() && rows.size() == 1u) << sessions.out;
        EXPECT_EQ(rows[0]["in_flight"], 0) << "the ended stream counted in flight";
    }
}

}  // namespace
}  // namespace warden::testing
