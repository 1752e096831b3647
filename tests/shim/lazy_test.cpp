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
#include "common/journal_rows.hpp"
#include "common/testing.hpp"
#include "journal/query.hpp"

namespace warden::testing {
namespace {

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
    // The relay and what it started (the run's background worker is neither).
    size_t live() const { return live_tagged_below(c->tag(), c->pid()).size(); }
    // Relay and keeper only, a moment after the last answer: no server was started for it.
    bool no_server() const { return live() == 2; }
    bool server_started() const {
        return wait_until([&] { return live() > 2; }, 8s);
    }
};

// `server` the command (the executable and its arguments); `flags` more flags of `run`.
LazyRun start_lazy(const std::string& db, const std::vector<std::string>& server,
                   const std::string& tag,
                   std::vector<std::pair<std::string, std::string>> env = {},
                   const std::vector<std::string>& flags = {}) {
    ChildOptions co;
    co.tag = tag;  // the same in every run: the tag is in the environment, which is identity
    co.env = std::move(env);
    std::vector<std::string> argv{
        kCli, "run", "--lazy", "--eof-grace", "200ms", "--term-grace", "300ms", "--journal", db};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.push_back("--");
    argv.insert(argv.end(), server.begin(), server.end());
    LazyRun r;
    r.c = std::make_unique<TestChild>(argv, co);
    return r;
}
LazyRun start_lazy(const std::string& db, const std::string& exe, const std::string& tag,
                   std::vector<std::pair<std::string, std::string>> env = {}) {
    return start_lazy(db, std::vector<std::string>{exe}, tag, std::move(env));
}

// Every line up to and including the answer to `id`; empty after 10 s without it.
std::vector<std::string> lines_until_answer(TestChild& c, int id) {
    std::vector<std::string> out;
    for (int i = 0; i < 64; ++i) {
        auto line = c.read_line(10s);
        if (!line) return {};
        out.push_back(*line);
        auto j = nlohmann::json::parse(*line, nullptr, false);
        if (j.is_object() && j.value("id", nlohmann::json()) == id) return out;
    }
    return {};
}

// A tools/call that starts the server (id `call`), and once it is answered a ping (`ping`),
// which the server answers: every line up to that answer. Whatever the session sends the
// client once the server has answered the rechecks is before it. (A ping sent with the call
// would be answered by the relay while the server starts.)
std::vector<std::string> call_then_ping(TestChild& c, int call, int ping) {
    if (!c.write_line(rpc_tools_call(call, "echo", {{"text", "hi"}}))) return {};
    auto lines = lines_until_answer(c, call);
    if (lines.empty() || !c.write_line(rpc_request(ping, "ping"))) return {};
    auto more = lines_until_answer(c, ping);
    if (more.empty()) return {};
    lines.insert(lines.end(), more.begin(), more.end());
    return lines;
}

// The methods of the notifications among `lines`, in order.
std::vector<std::string> notifications_in(const std::vector<std::string>& lines) {
    std::vector<std::string> out;
    for (const auto& line : lines) {
        auto j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_object() && !j.contains("id") && j.contains("method"))
            out.push_back(j["method"].get<std::string>());
    }
    return out;
}

// Ends the session and waits for its keeper, which settles the journal after `run` exits:
// the runs of a test share their tag, and the next one counts its processes by it.
void end_session(TestChild& c) {
    c.close_stdin();
    auto st = c.wait_exit(10s);
    ASSERT_TRUE(st);
    EXPECT_EQ(describe_status(*st), "exited 0");
    EXPECT_TRUE(nothing_tagged_left(c.tag()));
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
    auto starts = record_data(db, "session.start");
    ASSERT_EQ(starts.size(), 1u);
    EXPECT_EQ(starts[0]["lazy"]["not_used"], "no catalog of this server yet") << starts[0].dump();
    auto wakes = record_data(db, "session.wake");
    ASSERT_EQ(wakes.size(), 1u);
    EXPECT_EQ(wakes[0]["request"], "initialize");
    EXPECT_EQ(wakes[0]["lazy_start"], true);
    auto catalogs = record_data(db, "server.catalog");
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
        // The server's own bytes, but for the listChanged the catalog's tools/list asks for.
        std::string served_init = init1;
        const std::string plain = R"("tools":{})";
        ASSERT_NE(served_init.find(plain), std::string::npos) << init1;
        served_init.replace(served_init.find(plain), plain.size(),
                            R"("tools":{"listChanged":true})");
        EXPECT_EQ(with_id(answer_line(c, 11), 11, 1), served_init);
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
    starts = record_data(db, "session.start");
    ASSERT_EQ(starts.size(), 2u);
    EXPECT_EQ(starts[1]["lazy"]["catalog_seq"], catalogs[0]["seq"]) << starts[1].dump();
    wakes = record_data(db, "session.wake");
    ASSERT_EQ(wakes.size(), 2u);
    EXPECT_EQ(wakes[1]["request"], "tools/call");
    EXPECT_EQ(wakes[1]["lazy_start"], true);
    EXPECT_FALSE(wakes[1].contains("initialize_changed")) << wakes[1].dump();
    EXPECT_EQ(record_data(db, "server.catalog").size(), 1u) << "an unchanged catalog was rewritten";
    // The served tools/list was asked again of the started server, and found the same.
    auto checks = record_data(db, "session.lists_checked");
    ASSERT_EQ(checks.size(), 1u);
    EXPECT_EQ(checks[0]["compared"], nlohmann::json::array({"tools/list"})) << checks[0].dump();
    EXPECT_EQ(checks[0]["changed"], nlohmann::json::array()) << checks[0].dump();

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
    starts = record_data(db, "session.start");
    ASSERT_EQ(starts.size(), 3u);
    EXPECT_TRUE(starts[2]["lazy"]["catalog_seq"].is_null()) << starts[2].dump();
    EXPECT_EQ(starts[2]["lazy"]["not_used"],
              "catalog #" + std::to_string(catalogs[0]["seq"].get<int64_t>()) +
                  " is stale: its executable " + exe +
                  " changed (inode, size or modification time) since it was made");
    ASSERT_EQ(record_data(db, "server.catalog").size(), 2u) << "the new build's catalog";

    touch();
    EXPECT_FALSE(initialize_only({{"MCPWARDEN_FAULT", "lazy_stale"}}))
        << "the fault did not serve the stale catalog";
    starts = record_data(db, "session.start");
    ASSERT_EQ(starts.size(), 4u);
    EXPECT_FALSE(starts[3]["lazy"]["catalog_seq"].is_null()) << starts[3].dump();
}

// A server that announces that its tools changed (notifications/tools/list_changed) made the
// tools/list it answered before out of date: the catalog keeps its initialize and not that
// list, and the next --lazy session answers initialize with no server and starts one for
// tools/list. (Without the notification, the first test's second session is answered
// tools/list from the catalog: that is the difference this guard makes.)
TEST(Lazy, AListAnsweredBeforeItsListChangedIsNotKept) {
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
    auto catalogs = record_data(db, "server.catalog");
    ASSERT_EQ(catalogs.size(), 1u);
    ASSERT_EQ(catalogs[0]["answers"].size(), 1u) << catalogs[0].dump();
    EXPECT_EQ(catalogs[0]["answers"][0]["method"], "initialize");
    {
        auto r = start_lazy(db, exe, tag);
        TestChild& c = *r.c;
        ASSERT_TRUE(c.started()) << c.error();
        ASSERT_TRUE(c.write_line(rpc_initialize(11)));
        ASSERT_NE(answer_line(c, 11), "");
        EXPECT_TRUE(r.no_server()) << r.live() << " processes: the catalog's initialize unused";
        ASSERT_TRUE(c.write_line(rpc_tools_list(12)));
        ASSERT_NE(answer_line(c, 12), "");
        EXPECT_GT(r.live(), 2u) << "an out-of-date tools/list was served";
        end_session(c);
    }
    auto wakes = record_data(db, "session.wake");
    ASSERT_EQ(wakes.size(), 2u);
    EXPECT_EQ(wakes[1]["request"], "tools/list");
}

// A server whose tools depend on a file outside its identity (the fixture's --lists DIR).
// Three sessions:
//  1. the catalog: initialize and the three lists the server has;
//  2. a tool added in DIR: initialize (listChanged: true on tools, prompts and resources) and
//     the three lists are served from the catalog, with no server; a tools/call starts one,
//     which is asked the three lists again: the client gets notifications/tools/list_changed
//     and no other, the difference is on record, and the next catalog lists the new tool;
//  3. negative control: another tool added, the recheck off (MCPWARDEN_FAULT=lazy_recheck):
//     the served list misses it, and nothing tells the client.
// Then a catalog older than --lazy-max-age is not used, and says so.
TEST(Lazy, AListThatChangedIsAnnouncedAndNoOther) {
    TempDir dir;
    const std::string db = dir.file("journal.db"), exe = dir.file("fixture"),
                      lists = dir.file("lists");
    std::filesystem::copy_file(kFixture, exe);
    std::filesystem::create_directory(lists);
    const std::vector<std::string> server{exe, "--lists", lists};
    const std::string tag = unique_tag();
    auto add_tool = [&](const std::string& name) {
        std::FILE* f = std::fopen((lists + "/extra-tools").c_str(), "a");
        ASSERT_NE(f, nullptr);
        std::fprintf(f, "%s\n", name.c_str());
        std::fclose(f);
    };
    auto tool_names = [](const std::string& line) {
        std::vector<std::string> names;
        auto j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_object() && j["result"].is_object())
            for (const auto& t : j["result"]["tools"])
                names.push_back(t.value("name", "?"));
        return names;
    };
    auto ask_lists = [&](TestChild& c, int first_id) {
        EXPECT_TRUE(c.write_line(rpc_initialize(first_id)));
        auto init = answer_line(c, first_id);
        EXPECT_TRUE(c.write_line(rpc_initialized()));
        EXPECT_TRUE(c.write_line(rpc_tools_list(first_id + 1)));
        auto tools = answer_line(c, first_id + 1);
        EXPECT_TRUE(c.write_line(rpc_request(first_id + 2, "prompts/list")));
        EXPECT_NE(answer_line(c, first_id + 2), "");
        EXPECT_TRUE(c.write_line(rpc_request(first_id + 3, "resources/list")));
        EXPECT_NE(answer_line(c, first_id + 3), "");
        return std::pair{init, tools};
    };
    {
        auto r = start_lazy(db, server, tag);
        ASSERT_TRUE(r.c->started()) << r.c->error();
        ask_lists(*r.c, 1);
        end_session(*r.c);
    }
    ASSERT_EQ(record_data(db, "server.catalog").size(), 1u);

    add_tool("added_tool");
    {
        auto r = start_lazy(db, server, tag);
        TestChild& c = *r.c;
        ASSERT_TRUE(c.started()) << c.error();
        auto [init, tools] = ask_lists(c, 11);
        auto caps = nlohmann::json::parse(init)["result"]["capabilities"];
        for (const char* cap : {"tools", "prompts", "resources"})
            EXPECT_EQ(caps[cap]["listChanged"], true) << cap << ": " << init;
        EXPECT_EQ(tool_names(tools).size(), 5u) << "not the catalog's list: " << tools;
        EXPECT_TRUE(r.no_server()) << r.live() << " processes: a server was started";

        auto lines = call_then_ping(c, 15, 16);
        ASSERT_FALSE(lines.empty());
        EXPECT_EQ(notifications_in(lines),
                  std::vector<std::string>{"notifications/tools/list_changed"});
        // What the notification sends the client to fetch: the server's list now.
        ASSERT_TRUE(c.write_line(rpc_tools_list(17)));
        auto now = tool_names(answer_line(c, 17));
        EXPECT_EQ(now.size(), 6u);
        EXPECT_EQ(now.back(), "added_tool");
        end_session(c);
    }
    auto checks = record_data(db, "session.lists_checked");
    ASSERT_EQ(checks.size(), 1u);
    EXPECT_EQ(checks[0]["compared"],
              nlohmann::json::array({"prompts/list", "resources/list", "tools/list"}));
    ASSERT_EQ(checks[0]["changed"].size(), 1u) << checks[0].dump();
    EXPECT_EQ(checks[0]["changed"][0]["method"], "tools/list");
    EXPECT_EQ(checks[0]["changed"][0]["notified"], "notifications/tools/list_changed");
    EXPECT_EQ(checks[0]["changed"][0]["difference"],
              (nlohmann::json{{"added", {"added_tool"}},
                              {"removed", nlohmann::json::array()},
                              {"changed", nlohmann::json::array()}}));
    auto catalogs = record_data(db, "server.catalog");
    ASSERT_EQ(catalogs.size(), 2u) << "the catalog was not updated with the changed list";
    EXPECT_NE(catalogs[1].dump().find("added_tool"), std::string::npos) << catalogs[1].dump();

    add_tool("another_tool");
    {
        auto r = start_lazy(db, server, tag, {{"MCPWARDEN_FAULT", "lazy_recheck"}},
                            {"--lazy-max-age", "12h"});
        TestChild& c = *r.c;
        ASSERT_TRUE(c.started()) << c.error();
        auto tools = ask_lists(c, 21).second;
        EXPECT_EQ(tool_names(tools).back(), "added_tool") << "not the updated catalog's list";
        auto lines = call_then_ping(c, 25, 26);
        ASSERT_FALSE(lines.empty());
        EXPECT_TRUE(notifications_in(lines).empty()) << "told without the recheck";
        ASSERT_TRUE(c.write_line(rpc_tools_list(27)));
        EXPECT_EQ(tool_names(answer_line(c, 27)).back(), "another_tool")
            << "the server's list is the same as the one served: the control shows nothing";
        end_session(c);
    }
    EXPECT_EQ(record_data(db, "session.lists_checked").size(), 1u);
    auto starts = record_data(db, "session.start");
    ASSERT_EQ(starts.size(), 3u);
    EXPECT_FALSE(starts[2]["lazy"]["catalog_seq"].is_null()) << starts[2].dump();
    EXPECT_EQ(starts[2]["lazy"]["max_age_ms"], 12 * 3600 * 1000);

    // Older than --lazy-max-age: the server starts at initialize.
    const auto newest = record_data(db, "server.catalog").back()["seq"].get<int64_t>();
    {
        auto r = start_lazy(db, server, tag, {}, {"--lazy-max-age", "1ms"});
        TestChild& c = *r.c;
        ASSERT_TRUE(c.started()) << c.error();
        ASSERT_TRUE(c.write_line(rpc_initialize(31)));
        ASSERT_NE(answer_line(c, 31), "");
        EXPECT_GT(r.live(), 2u) << "a catalog older than --lazy-max-age answered";
        end_session(c);
    }
    starts = record_data(db, "session.start");
    ASSERT_EQ(starts.size(), 4u);
    const std::string why = starts[3]["lazy"].value("not_used", "");
    EXPECT_TRUE(why.starts_with("catalog #" + std::to_string(newest) + " is stale: made ") &&
                why.ends_with(" ago, more than --lazy-max-age 1 ms"))
        << why;
}

TEST(Lazy, IsRefusedWithAPidNamespace) {
    TestChild p({kCli, "run", "--no-journal", "--lazy", "--isolate", "pidns", "--", "true"},
                {{}, {}, {}, true});
    auto out = p.read_stderr(10s);
    auto st = p.wait_exit(10s);
    ASSERT_TRUE(st);
    EXPECT_EQ(describe_status(*st), "exited 2");
    EXPECT_NE(out.find("--lazy cannot be combined with --isolate=pidns"), std::string::npos) << out;

    TestChild q({kCli, "run", "--no-journal", "--lazy", "--lazy-max-age", "0", "--", "true"},
                {{}, {}, {}, true});
    out = q.read_stderr(10s);
    st = q.wait_exit(10s);
    ASSERT_TRUE(st);
    EXPECT_EQ(describe_status(*st), "exited 2");
    EXPECT_NE(out.find("--lazy-max-age: cannot parse '0' as an age from 1ms to 3650d (e.g. 12h, "
                       "7d, 30m)"),
              std::string::npos)
        << out;
}

}  // namespace
}  // namespace warden::testing
