// The journal commands through the built binary: verify exit codes and JSON, listings,
// export.
#include <sys/wait.h>

#include <cstdio>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/json_doc.hpp"
#include "common/paths.hpp"
#include "journal/journal.hpp"
#include "journal_test_util.hpp"

namespace warden::journal {
namespace {

using namespace testing_util;

struct Run {
    int code;
    std::string out;
};

Run run(const std::string& args) {
    std::string cmd = fmt::format("{} {} 2>&1", warden::testing::kCli, args);
    FILE* p = ::popen(cmd.c_str(), "r");
    Run r{-1, {}};
    if (!p) return r;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0)
        r.out.append(buf, n);
    int status = ::pclose(p);
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

struct Journal3 {
    TempDir dir;
    std::string db = dir.path + "/journal.db";
    Journal3() {
        auto j = Journal::open({.path = db});
        EXPECT_TRUE(j.ok());
        SessionStart s;
        s.session = "sess-a";
        s.server_name = "filesystem";
        EXPECT_TRUE((*j)->append(session_start(s)).ok());
        auto a = (*j)->append(activity_request(
            {"sess-a", rpc_id_number(17), "tools/call", "read_file",
             R"({"path":"/etc/hosts","token":"s3cret"})", RecordArgs::Preview, 90}));
        EXPECT_TRUE(a.ok());
        (*j)->post(activity_response(
            {"sess-a", a->seq, rpc_id_number(17), Outcome::ok, 300, 2'000'000, {}}));
        EXPECT_TRUE((*j)->append(activity_request({"sess-a", rpc_id_string("17"), "tools/call",
                                                   "write_file", "{}", RecordArgs::Preview, 40}))
                        .ok());
        SessionEnd e;
        e.session = "sess-a";
        e.reason = "client_lost";
        EXPECT_TRUE((*j)->append(session_end(e)).ok());
    }
};

TEST(Cli, VerifyExitCodesAndJson) {
    Journal3 j;
    auto ok = run("audit verify --require-anchored --journal " + j.db);
    EXPECT_EQ(ok.code, 0) << ok.out;
    EXPECT_NE(ok.out.find("OK: 6 records"), std::string::npos) << ok.out;
    EXPECT_NE(ok.out.find("private key: " + j.dir.path + "/journal.key"), std::string::npos)
        << ok.out;

    ASSERT_TRUE(
        exec_sql(j.db, "DROP TRIGGER records_no_delete; DELETE FROM records WHERE seq = 3;"));
    auto bad = run("audit verify --journal " + j.db);
    EXPECT_EQ(bad.code, 1);
    EXPECT_NE(
        bad.out.find(
            "INTEGRITY FAILURE at seq 3: sequence gap: seq 3 is missing (the next row is seq 4)"),
        std::string::npos)
        << bad.out;
    auto js = run("audit verify --json --journal " + j.db);
    EXPECT_EQ(js.code, 1);
    auto parsed = nlohmann::json::parse(js.out, nullptr, false);
    ASSERT_FALSE(parsed.is_discarded()) << js.out;
    EXPECT_EQ(parsed["first_bad_seq"], 3);
    EXPECT_EQ(parsed["exit_code"], 1);
    EXPECT_EQ(parsed["ok"], false);
    EXPECT_EQ(parsed["schema"], "mcpwarden.audit.verify");
    EXPECT_EQ(
        warden::testing::undocumented_keys(parsed, {warden::testing::schema_doc("audit-json.md")}),
        std::vector<std::string>{});

    auto missing = run("audit verify --journal " + j.dir.path + "/nope.db");
    EXPECT_EQ(missing.code, 2) << missing.out;
    EXPECT_NE(missing.out.find("nope.db: no such file"), std::string::npos) << missing.out;
    auto missing_js = run("audit verify --json --journal " + j.dir.path + "/nope.db");
    EXPECT_EQ(missing_js.code, 2) << missing_js.out;
    auto error = nlohmann::json::parse(missing_js.out, nullptr, false);
    ASSERT_TRUE(error.is_object()) << missing_js.out;
    EXPECT_NE(error.value("error", "").find("nope.db: no such file"), std::string::npos)
        << missing_js.out;
    EXPECT_EQ(
        warden::testing::undocumented_keys(error, {warden::testing::schema_doc("audit-json.md")}),
        std::vector<std::string>{});
}

TEST(Cli, VerifyRequireAnchoredIsExit3WithoutCheckpoints) {
    Journal3 j;
    ASSERT_TRUE(exec_sql(j.db, "DROP TRIGGER checkpoints_no_delete; DELETE FROM checkpoints;"));
    std::filesystem::remove_all(j.dir.path + "/checkpoints");
    EXPECT_EQ(run("audit verify --journal " + j.db).code, 0);
    auto r = run("audit verify --require-anchored --journal " + j.db);
    EXPECT_EQ(r.code, 3) << r.out;
    EXPECT_NE(r.out.find("NO CHECKPOINT"), std::string::npos);
}

TEST(Cli, ListingsFilterAndShow) {
    Journal3 j;
    auto s = run("journal sessions --json --journal " + j.db);
    ASSERT_EQ(s.code, 0) << s.out;
    auto sessions = nlohmann::json::parse(s.out);
    ASSERT_EQ(sessions.size(), 1u);
    EXPECT_EQ(sessions[0]["server"], "filesystem");
    EXPECT_EQ(sessions[0]["state"], "ended");
    EXPECT_EQ(sessions[0]["in_flight"], 1);

    auto a = run("journal activity --outcome in-flight --json --journal " + j.db);
    ASSERT_EQ(a.code, 0) << a.out;
    auto act = nlohmann::json::parse(a.out);
    ASSERT_EQ(act.size(), 1u);
    EXPECT_EQ(act[0]["tool"], "write_file");
    EXPECT_EQ(act[0]["id"], "\"17\"");
    auto t = run("journal activity --tool read_file --journal " + j.db);
    EXPECT_NE(t.out.find("read_file"), std::string::npos);
    EXPECT_EQ(t.out.find("write_file"), std::string::npos);

    auto show = run("journal show sess-a --journal " + j.db);
    EXPECT_EQ(show.code, 0);
    EXPECT_NE(show.out.find("activity.response"), std::string::npos) << show.out;
    EXPECT_EQ(show.out.find("s3cret"), std::string::npos) << "secrets never reach the journal";
}

TEST(Cli, ExportOtlpLeavesContentOut) {
    Journal3 j;
    auto e = run("journal export --format otlp-json --journal " + j.db);
    ASSERT_EQ(e.code, 0) << e.out;
    EXPECT_NE(e.out.find(R"("eventName":"mcp.audit.activity.request")"), std::string::npos)
        << e.out;
    EXPECT_NE(e.out.find(R"({"key":"gen_ai.tool.name","value":{"stringValue":"read_file"}})"),
              std::string::npos);
    EXPECT_NE(e.out.find(R"({"key":"network.transport","value":{"stringValue":"pipe"}})"),
              std::string::npos);
    EXPECT_EQ(e.out.find("/etc/hosts"), std::string::npos)
        << "argument content is not exported by default";
    // --include-content changes every format: the preview comes out, masked as recorded.
    for (const char* format : {"otlp-json", "ndjson"}) {
        auto plain = run(std::string("journal export --format ") + format + " --journal " + j.db);
        auto with = run(std::string("journal export --include-content --format ") + format +
                        " --journal " + j.db);
        ASSERT_EQ(with.code, 0) << with.out;
        EXPECT_EQ(plain.out.find("/etc/hosts"), std::string::npos) << format;
        EXPECT_NE(with.out.find("/etc/hosts"), std::string::npos) << format << ": " << with.out;
        EXPECT_EQ(with.out.find("s3cret"), std::string::npos) << format;
    }
    EXPECT_NE(run("journal export --include-content --format otlp-json --journal " + j.db)
                  .out.find(R"({"key":"gen_ai.tool.call.arguments","value":{"stringValue":)"),
              std::string::npos);
    auto n = run("journal export --format ndjson --since-seq 4 --journal " + j.db);
    ASSERT_EQ(n.code, 0);
    auto first = nlohmann::json::parse(n.out.substr(0, n.out.find('\n')));
    EXPECT_EQ(first["seq"], 5);
    EXPECT_EQ(run("journal export --format xml --journal " + j.db).code, 2);
}

}  // namespace
}  // namespace warden::journal
