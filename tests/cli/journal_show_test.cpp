// `mcpwarden journal show SESSION` as docs/journal-json.md describes it: `--json` is one JSON
// array on one line, `--jsonl` the same records one stored body a line, in the same order.
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/cli_run.hpp"
#include "common/testing.hpp"

namespace warden::testing {
namespace {

using nlohmann::json;

TEST(JournalShow, JsonIsOneArrayAndJsonlOneRecordALine) {
    TempDir dir;
    const std::string db = dir.file("journal.db");
    CliRun session = run_cli(dir, {"run", "--journal", db, "--", kFixture}, 30s);
    ASSERT_EQ(session.code, 0) << session.err;
    CliRun sessions = run_cli(dir, {"journal", "sessions", "--json", "--journal", db}, 30s);
    ASSERT_EQ(sessions.code, 0) << sessions.err;
    json listed = json::parse(sessions.out);
    ASSERT_EQ(listed.size(), 1u) << sessions.out;
    const std::string id = listed[0]["session"];

    CliRun as_json = run_cli(dir, {"journal", "show", id, "--json", "--journal", db}, 30s);
    ASSERT_EQ(as_json.code, 0) << as_json.err;
    EXPECT_EQ(as_json.out.find('\n'), as_json.out.size() - 1) << "not one line: " << as_json.out;
    json all = json::parse(as_json.out);
    ASSERT_TRUE(all.is_array()) << as_json.out;
    ASSERT_GE(all.size(), 2u) << "session.start and session.end at least";
    EXPECT_EQ(all.front()["kind"], "session.start") << all.front().dump();
    EXPECT_EQ(all.back()["kind"], "session.end") << all.back().dump();

    CliRun as_lines = run_cli(dir, {"journal", "show", id, "--jsonl", "--journal", db}, 30s);
    ASSERT_EQ(as_lines.code, 0) << as_lines.err;
    std::istringstream in(as_lines.out);
    std::vector<json> lines;
    for (std::string line; std::getline(in, line);)
        lines.push_back(json::parse(line));
    ASSERT_EQ(lines.size(), all.size()) << as_lines.out;
    for (size_t i = 0; i < lines.size(); ++i)
        EXPECT_EQ(lines[i], all[i]) << i;
}

}  // namespace
}  // namespace warden::testing
