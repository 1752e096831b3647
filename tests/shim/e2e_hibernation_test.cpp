// `mcpwarden run --idle-stop` with the official TypeScript SDK client (tests/e2e/sdk_client.mjs)
// and the real npm servers: one connection, three rounds of list + call with a pause between
// them in which the server sleeps. Every round answers as a plain session does, the server's
// tree is gone while idle, and two hibernate/wake pairs are on record, in order.
// `--lazy` the same way: a first session leaves the server's catalog, a second lists the tools
// with no server process and then calls tools, answered as in a plain session.
// Label: e2e (needs node and tests/e2e/node_modules; skipped without them).
#include <sys/wait.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/e2e.hpp"
#include "common/testing.hpp"
#include "journal/query.hpp"

namespace warden::testing {
namespace {

constexpr int kRounds = 3;
constexpr const char* kPauseMs = "1500";

struct Rounds {
    std::vector<nlohmann::json> answers;  // one per round, without "pid"
    std::vector<bool> asleep_between;     // after round k: only client, relay and keeper alive
};

// The SDK client against `server` for `rounds` rounds. With `watch` (the shimmed run), while
// the client pauses after each round but the last, waits for the session to shrink to the
// client, the relay and the keeper (the tree gone: asleep).
Rounds sdk_rounds(const std::vector<std::string>& calls, const std::vector<std::string>& server,
                  int rounds, bool watch) {
    std::vector<std::string> argv{"node",     e2e_dir() + "/sdk_client.mjs",
                                  "--rounds", std::to_string(rounds),
                                  "--pause",  kPauseMs};
    argv.insert(argv.end(), calls.begin(), calls.end());
    argv.push_back("--");
    argv.insert(argv.end(), server.begin(), server.end());
    TestChild c(argv);
    Rounds r;
    for (int i = 0; i < rounds; ++i) {
        auto line = c.read_line(60s);
        if (!line) break;
        auto j = nlohmann::json::parse(*line, nullptr, false);
        if (j.is_object()) j.erase("pid");
        r.answers.push_back(j);
        if (watch && i + 1 < rounds)
            r.asleep_between.push_back(
                wait_until([&] { return live_tagged(c.tag()).size() == 3; }, 1400ms));
    }
    auto st = c.wait_exit(30s);
    EXPECT_TRUE(st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0);
    return r;
}

std::vector<std::string> hibernating(const std::string& db, std::vector<std::string> server) {
    std::vector<std::string> a{kCli, "run",         "--idle-stop", "300ms", "--journal",
                               db,   "--eof-grace", "500ms",       "--"};
    a.insert(a.end(), server.begin(), server.end());
    return a;
}

std::string sleep_wake_kinds(const std::string& db) {
    std::string kinds;
    auto st = journal::for_each_record(db, 0, [&](const journal::Record& r) {
        if (r.kind == "session.hibernate" || r.kind == "session.wake")
            kinds += (kinds.empty() ? "" : " ") + r.kind.substr(8);
        if (r.kind == "session.wake" && r.body.find("\"error\"") != std::string::npos)
            kinds += "(failed)";
        return true;
    });
    EXPECT_TRUE(st.ok()) << st.error().message;
    return kinds;
}

void same_answers_while_sleeping_between(const std::vector<std::string>& server,
                                         const std::vector<std::string>& calls) {
    TempDir dir;
    const std::string db = dir.file("journal.db");
    auto plain = sdk_rounds(calls, server, 1, false);
    ASSERT_EQ(plain.answers.size(), 1u);
    ASSERT_EQ(plain.answers[0].value("ok", false), true) << plain.answers[0].dump();
    auto slept = sdk_rounds(calls, hibernating(db, server), kRounds, true);
    ASSERT_EQ(slept.answers.size(), static_cast<size_t>(kRounds));
    for (int i = 0; i < kRounds; ++i)
        EXPECT_EQ(slept.answers[i], plain.answers[0]) << "round " << i + 1;
    EXPECT_EQ(slept.asleep_between, std::vector<bool>(kRounds - 1, true))
        << "the server's tree was not gone while the client paused";
    auto kinds = sleep_wake_kinds(db);
    EXPECT_EQ(kinds.rfind("hibernate wake hibernate wake", 0), 0u) << kinds;
}

TEST(E2EHibernation, ServerEverythingSleepsBetweenRoundsAndAnswersTheSame) {
    if (!have_node_modules()) GTEST_SKIP() << "tests/e2e/node_modules or node absent";
    same_answers_while_sleeping_between(
        {"node", e2e_dir() + "/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
         "stdio"},
        {"--call", "echo", "--args", R"({"message":"hi"})", "--call", "get-sum", "--args",
         R"({"a":1,"b":2})"});
}

TEST(E2EHibernation, ServerFilesystemSleepsBetweenRoundsAndAnswersTheSame) {
    if (!have_node_modules()) GTEST_SKIP() << "tests/e2e/node_modules or node absent";
    TempDir root;
    {
        std::FILE* f = std::fopen(root.file("note.txt").c_str(), "w");
        ASSERT_TRUE(f);
        std::fputs("kept across sleeps\n", f);
        std::fclose(f);
    }
    same_answers_while_sleeping_between(
        {"node", e2e_dir() + "/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js",
         root.path()},
        {"--call", "list_directory", "--args", nlohmann::json{{"path", root.path()}}.dump(),
         "--call", "read_text_file", "--args",
         nlohmann::json{{"path", root.file("note.txt")}}.dump()});
}

// One SDK client session with --step: the tools listed, how many processes carry `tag` right
// then (client, relay, keeper, and the server's if it runs), and the round's answer.
struct Stepped {
    nlohmann::json listed, answer;
    size_t live_while_listed = 0;
};
Stepped sdk_stepped(const std::vector<std::string>& calls, const std::vector<std::string>& server,
                    const std::string& tag) {
    std::vector<std::string> argv{"node", e2e_dir() + "/sdk_client.mjs", "--step"};
    argv.insert(argv.end(), calls.begin(), calls.end());
    argv.push_back("--");
    argv.insert(argv.end(), server.begin(), server.end());
    ChildOptions co;
    co.tag = tag;  // the server's environment, and so its identity, is the same each time
    TestChild c(argv, co);
    Stepped r;
    auto listed = c.read_line(60s);
    if (!listed) return r;
    r.listed = nlohmann::json::parse(*listed, nullptr, false);
    r.live_while_listed = live_tagged(tag).size();
    EXPECT_TRUE(c.write_line("go"));
    if (auto line = c.read_line(60s)) {
        r.answer = nlohmann::json::parse(*line, nullptr, false);
        if (r.answer.is_object()) r.answer.erase("pid");
    }
    auto st = c.wait_exit(30s);
    EXPECT_TRUE(st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0);
    // The keeper settles the journal after `run` exits; the next session counts by this tag.
    EXPECT_TRUE(nothing_tagged_left(tag));
    return r;
}

TEST(E2EHibernation, ServerEverythingUnderLazyListsWithNoServerAndAnswersTheSame) {
    if (!have_node_modules()) GTEST_SKIP() << "tests/e2e/node_modules or node absent";
    TempDir dir;
    const std::string db = dir.file("journal.db"), tag = unique_tag();
    const std::vector<std::string> server{
        "node", e2e_dir() + "/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
        "stdio"};
    const std::vector<std::string> calls{"--call", "echo",    "--args", R"({"message":"hi"})",
                                         "--call", "get-sum", "--args", R"({"a":1,"b":2})"};
    auto plain = sdk_rounds(calls, server, 1, false);
    ASSERT_EQ(plain.answers.size(), 1u);
    ASSERT_EQ(plain.answers[0].value("ok", false), true) << plain.answers[0].dump();

    std::vector<std::string> lazy{kCli, "run",         "--lazy", "--journal",
                                  db,   "--eof-grace", "500ms",  "--"};
    lazy.insert(lazy.end(), server.begin(), server.end());
    auto first = sdk_stepped(calls, lazy, tag);
    EXPECT_EQ(first.answer, plain.answers[0]);
    EXPECT_GT(first.live_while_listed, 3u) << "no catalog yet, yet no server for the listing";
    auto second = sdk_stepped(calls, lazy, tag);
    EXPECT_EQ(second.live_while_listed, 3u)
        << "a server ran for initialize and tools/list: the catalog did not answer";
    EXPECT_EQ(second.listed.value("listed", nlohmann::json()), plain.answers[0]["tools"]);
    EXPECT_EQ(second.answer, plain.answers[0]);

    std::vector<std::string> wakes;
    auto st = journal::for_each_record(db, 0, [&](const journal::Record& r) {
        if (r.kind == "session.wake")
            wakes.push_back(nlohmann::json::parse(r.body)["data"].value("request", "?"));
        return true;
    });
    ASSERT_TRUE(st.ok()) << st.error().message;
    EXPECT_EQ(wakes, (std::vector<std::string>{"initialize", "tools/call"}));
}

}  // namespace
}  // namespace warden::testing
