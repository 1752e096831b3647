// `mcpwarden run --lazy`: no server until the client asks something the server's catalog in
// the journal cannot answer (docs/RUN.md, "Lazy start"). The built binary between this test
// (the client) and a copy of the fixture server in the test's directory, whose modification
// time the test changes to make the catalog stale. "No server" is seen from outside: of the
// processes carrying the test's tag only the relay and the keeper are alive.
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/cli_run.hpp"
#include "common/testing.hpp"
#include "journal/query.hpp"

namespace warden::testing {
namespace {

// The `data` of every record of `kind`, in order.
std::vector<nlohmann::json> data_of(const std::string& db, const std::string& kind) {
    std::vector<nlohmann::json> out;
    auto st = journal::for_each_record(db, 0, [&](const journal::Record& r) {
        if (r.kind != kind) return true;
        auto body = nlohmann::json::parse(r.body, nullptr, false);
        out.push_back(body.is_object() ? body["data"] : nlohmann::json());
        out.back()["seq"] = r.seq;
        return true;
    });
    EXPECT_TRUE(st.ok()) << st.error().message;
    return out;
}

// The raw line that answers `id` (other lines skipped), or "" after 10 s.
std::string answer_line(TestChild& c, int id) {
    for (int i = 0; i < 64; ++i) {
        auto line = c.read_line(10s);
        if (!line) return "";
        auto j = nlohmann::json::parse(*line, nullptr, false);
        if (j.is_object() && j.value("id", nlohmann::json()) == id &&
            (j.contains("result") || j.contains("error")))
            return *line;
    }
    return "";
}

// `line` with its `"id":N` written as `"id":M`: what the server would have said to id M.
std::string with_id(std::string line, int from, int to) {
    const std::string a = "\"id\":" + std::to_string(from), b = "\"id\":" + std::to_string(to);
    if (auto at = line.find(a); at != std::string::npos) line.replace(at, a.size(), b);
    return line;
}

struct LazyRun {
    std::unique_ptr<TestChild> c;
    size_t live() const { return live_tagged(c->tag()).size(); }
    // Relay and keeper only, a moment after the last answer: no server was started for it.
    bool no_server() const { return live() == 2; }
    bool server_started() const {
        return wait_until([&] { return live() > 2; }, 8s);
    }
};

LazyRun start_lazy(const std::string& db, const std::string& exe, const std::string& tag,
                   std::vector<std::pair<std::string, std::string>> env = {}) {
    ChildOptions co;
    co.tag = tag;  // the same in every run: the tag is in the environment, which is identity
    co.env = std::move(env);
    LazyRun r;
    r.c = std::make_unique<TestChild>(
        std::vector<std::string>{kCli, "run", "--lazy", "--eof-grace", "200ms", "--term-grace",
                                 "300ms", "--journal", db, "--", exe},
        co);
    return r;
}

void end_session(TestChild& c) {
    c.close_stdin();
    auto st = c.wait_exit(10s);
    ASSERT_TRUE(st);
    EXPECT_EQ(describe_status(*st), "exited 0");
}

// Four sessions of one server, one after the other:
//  1. no catalog yet: the server starts at the first request (initialize), and the session
//     leaves the catalog of its answers;
//  2. initialize, tools/list and ping answered with no server ever started, the same bytes as
//     the server's own save the id; a tools/call starts it (the handshake replayed: it was
//     told notifications/initialized) and is answered;
//  3. the executable changed: the catalog is stale, the server starts at initialize, and why
//     is on record;
//  4. negative control: the same change with the staleness check off
//     (MCPWARDEN_FAULT=lazy_stale) serves the stale catalog, no server started.
TEST(Lazy, StartsTheServerOnlyForWhatItsCatalogCannotAnswer) {
    TempDir dir;
    const std::string db = dir.file("journal.db"), exe = dir.file("fixture");
    std::filesystem::copy_file(kFixture, exe);
    const std::string tag = unique_tag();
    std::string init1, list1;
    {
        auto r = start_lazy(db, exe, tag);
        TestChild& c = *r.c;
        ASSERT_TRUE(c.started()) << c.error();
        ASSERT_TRUE(wait_until([&] { return r.live() == 2; }, 8s)) << r.live();
        ASSERT_TRUE(c.write_line(rpc_initialize(1)));
        init1 = answer_line(c, 1);
        ASSERT_NE(init1, "");
        EXPECT_TRUE(r.server_started()) << "no catalog, yet no server for initialize";
        ASSERT_TRUE(c.write_line(rpc_initialized()));
        ASSERT_TRUE(c.write_line(rpc_tools_list(2)));
        list1 = answer_line(c, 2);
        ASSERT_NE(list1, "");
        end_session(c);
    }
    auto starts = data_of(db, "session.start");
    ASSERT_EQ(starts.size(), 1u);
    EXPECT_EQ(starts[0]["lazy"]["not_used"], "no catalog of this server yet") << starts[0].dump();
    auto wakes = data_of(db, "session.wake");
    ASSERT_EQ(wakes.size(), 1u);
    EXPECT_EQ(wakes[0]["request"], "initialize");
    EXPECT_EQ(wakes[0]["lazy_start"], true);
    auto catalogs = data_of(db, "server.catalog");
    ASSERT_EQ(catalogs.size(), 1u);
    std::string methods;
    for (auto& a : catalogs[0]["answers"])
        methods += a.value("method", "?") + " ";
    EXPECT_EQ(methods, "initialize tools/list ") << catalogs[0].dump();

    {
        auto r = start_lazy(db, exe, tag);
        TestChild& c = *r.c;
        ASSERT_TRUE(c.started()) << c.error();
        ASSERT_TRUE(c.write_line(rpc_initialize(11)));
        EXPECT_EQ(with_id(answer_line(c, 11), 11, 1), init1);
        ASSERT_TRUE(c.write_line(rpc_initialized()));
        ASSERT_TRUE(c.write_line(rpc_tools_list(12)));
        EXPECT_EQ(with_id(answer_line(c, 12), 12, 2), list1);
        ASSERT_TRUE(c.write_line(rpc_request(13, "ping")));
        EXPECT_NE(answer_line(c, 13), "");
        EXPECT_TRUE(r.no_server()) << r.live() << " processes: a server was started";
        // `status` says so: sleeping, no server, no process of its tree.
        auto session = only_status_session(dir, db);
        EXPECT_EQ(session["state"], "sleeping") << session.dump();
        EXPECT_EQ(session["processes"], 0);
        EXPECT_EQ(session["server"]["pid"], 0);

        ASSERT_TRUE(c.write_line(rpc_tools_call(14, "state")));
        auto state = read_response(c, 14, 10s);
        ASSERT_TRUE(state);
        EXPECT_EQ(result_text(*state), "initialized=yes level=none");
        EXPECT_GT(r.live(), 2u);
        end_session(c);
    }
    starts = data_of(db, "session.start");
    ASSERT_EQ(starts.size(), 2u);
    EXPECT_EQ(starts[1]["lazy"]["catalog_seq"], catalogs[0]["seq"]) << starts[1].dump();
    wakes = data_of(db, "session.wake");
    ASSERT_EQ(wakes.size(), 2u);
    EXPECT_EQ(wakes[1]["request"], "tools/call");
    EXPECT_EQ(wakes[1]["lazy_start"], true);
    EXPECT_FALSE(wakes[1].contains("initialize_changed")) << wakes[1].dump();
    EXPECT_EQ(data_of(db, "server.catalog").size(), 1u) << "an unchanged catalog was rewritten";

    // A new build of the server: same path, another modification time.
    auto touch = [&] {
        std::filesystem::last_write_time(
            exe, std::filesystem::last_write_time(exe) + std::chrono::hours(1));
    };
    // A session that only initializes (id 21): the server's answer either way; whether a
    // server was started for it.
    auto initialize_only = [&](std::vector<std::pair<std::string, std::string>> env) {
        auto r = start_lazy(db, exe, tag, std::move(env));
        TestChild& c = *r.c;
        EXPECT_TRUE(c.started()) << c.error();
        EXPECT_TRUE(c.write_line(rpc_initialize(21)));
        EXPECT_EQ(with_id(answer_line(c, 21), 21, 1), init1);
        const bool started = r.live() > 2;
        end_session(c);
        return started;
    };
    touch();
    EXPECT_TRUE(initialize_only({})) << "a stale catalog answered initialize";
    starts = data_of(db, "session.start");
    ASSERT_EQ(starts.size(), 3u);
    EXPECT_TRUE(starts[2]["lazy"]["catalog_seq"].is_null()) << starts[2].dump();
    EXPECT_EQ(starts[2]["lazy"]["not_used"],
              "catalog #" + std::to_string(catalogs[0]["seq"].get<int64_t>()) +
                  " is stale: its executable " + exe +
                  " changed (inode, size or modification time) since it was made");
    ASSERT_EQ(data_of(db, "server.catalog").size(), 2u) << "the new build's catalog";

    touch();
    EXPECT_FALSE(initialize_only({{"MCPWARDEN_FAULT", "lazy_stale"}}))
        << "the fault did not serve the stale catalog";
    starts = data_of(db, "session.start");
    ASSERT_EQ(starts.size(), 4u);
    EXPECT_FALSE(starts[3]["lazy"]["catalog_seq"].is_null()) << starts[3].dump();
}

// A server that announces that its tools change (notifications/tools/list_changed) leaves a
// catalog that says so instead of answers, and the next --lazy session starts the server at
// its initialize, saying why. (Without the notification, the first test's second session is
// answered from the catalog: that is the difference this guard makes.)
TEST(Lazy, AServerWhoseListsChangeLeavesNoAnswersToServe) {
    TempDir dir;
    const std::string db = dir.file("journal.db"), exe = dir.file("fixture");
    std::filesystem::copy_file(kFixture, exe);
    const std::string tag = unique_tag();
    {
        auto r = start_lazy(db, exe, tag);
        TestChild& c = *r.c;
        ASSERT_TRUE(c.started()) << c.error();
        ASSERT_TRUE(c.write_line(rpc_initialize(1)));
        ASSERT_NE(answer_line(c, 1), "");
        ASSERT_TRUE(c.write_line(rpc_tools_list(2)));
        ASSERT_NE(answer_line(c, 2), "");
        ASSERT_TRUE(c.write_line(rpc_tools_call(3, "list_changed")));
        ASSERT_NE(answer_line(c, 3), "");
        end_session(c);
    }
    auto catalogs = data_of(db, "server.catalog");
    ASSERT_EQ(catalogs.size(), 1u);
    EXPECT_EQ(catalogs[0]["stale"],
              "the server sent notifications/tools/list_changed: its lists change");
    EXPECT_FALSE(catalogs[0].contains("answers")) << catalogs[0].dump();
    {
        auto r = start_lazy(db, exe, tag);
        TestChild& c = *r.c;
        ASSERT_TRUE(c.started()) << c.error();
        ASSERT_TRUE(c.write_line(rpc_initialize(11)));
        ASSERT_NE(answer_line(c, 11), "");
        EXPECT_GT(r.live(), 2u) << "the catalog of a server whose lists change answered";
        end_session(c);
    }
    auto starts = data_of(db, "session.start");
    ASSERT_EQ(starts.size(), 2u);
    EXPECT_EQ(starts[1]["lazy"]["not_used"],
              "catalog #" + std::to_string(catalogs[0]["seq"].get<int64_t>()) +
                  ": the server sent notifications/tools/list_changed: its lists change");
}

TEST(Lazy, IsRefusedWithAPidNamespace) {
    TestChild p({kCli, "run", "--no-journal", "--lazy", "--isolate", "pidns", "--", "true"},
                {{}, {}, {}, true});
    auto out = p.read_stderr(10s);
    auto st = p.wait_exit(10s);
    ASSERT_TRUE(st);
    EXPECT_EQ(describe_status(*st), "exited 2");
    EXPECT_NE(out.find("--lazy cannot be combined with --isolate=pidns"), std::string::npos) << out;
}

}  // namespace
}  // namespace warden::testing
