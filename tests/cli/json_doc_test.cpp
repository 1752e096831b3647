// The helper that ties each --json output to its schema document (tests/common/json_doc.hpp):
// it must report a key that the document does not name, wherever in the output the key is,
// and a key that only the document's example shows. Its negative control: a real schema
// document with one field's line removed reports exactly that field.
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/json_doc.hpp"
#include "common/testing.hpp"

namespace warden::testing {
namespace {

std::string write_doc(const TempDir& dir, const std::string& name, const std::string& text) {
    std::ofstream(dir.file(name)) << text;
    return dir.file(name);
}

TEST(JsonDoc, ReportsKeysAtAnyDepthThatTheDocumentDoesNotNameInBackticks) {
    TempDir dir;
    auto output = nlohmann::json::parse(
        R"({"schema": "x", "trees": [{"pid": 1, "members": [{"pid": 2, "rss_kb": 3}]}],
            "cgroup": {"path": "/a"}})");
    std::string full = write_doc(dir, "full.md",
                                 "| `schema` | `trees` | `pid` |\n"
                                 "`members`, `rss_kb`; `cgroup` holds `path`\n");
    EXPECT_EQ(undocumented_keys(output, {full}), std::vector<std::string>{});

    // rss_kb only in the example, path as plain text: both reported, each once.
    std::string partial = write_doc(dir, "partial.md",
                                    "```json\n{\"rss_kb\": 3, \"`rss_kb`\": 0}\n```\n"
                                    "| `schema` | `trees` | `pid` | `members` | `cgroup` | path\n");
    EXPECT_EQ(undocumented_keys(output, {partial}), (std::vector<std::string>{"path", "rss_kb"}));
    // A second document can name what the first does not.
    std::string rest = write_doc(dir, "rest.md", "`rss_kb` and `path`\n");
    EXPECT_EQ(undocumented_keys(output, {partial, rest}), std::vector<std::string>{});
    EXPECT_EQ(
        undocumented_keys(output, {dir.file("none.md")}),
        std::vector<std::string>{"(cannot read the schema document " + dir.file("none.md") + ")"});
}

// Negative control on a real document: docs/reap-json.md without the row of `ports_free`.
TEST(JsonDoc, NegativeControlARealDocumentWithOneFieldRemovedReportsIt) {
    TempDir dir;
    std::ifstream in(schema_doc("reap-json.md"));
    ASSERT_TRUE(in) << schema_doc("reap-json.md");
    std::string line, without;
    int removed = 0;
    while (std::getline(in, line)) {
        if (line.rfind("| `ports_free` |", 0) == 0) {  // its row in the table
            ++removed;
            continue;
        }
        without += line + "\n";
    }
    ASSERT_EQ(removed, 1);
    auto output = nlohmann::json::parse(
        R"({"schema": "mcpwarden.reap", "schema_version": 1, "dry_run": false,
            "plan": {"trees": [], "refused": [], "scanned": 3, "empty_cgroups": []},
            "results": [{"root": {"pid": 1, "starttime": 2}, "command": "c", "outcome": "reaped",
                         "detail": "", "ports_free": true, "survivors": 0,
                         "processes": [{"pid": 1, "starttime": 2, "command": "c",
                                        "outcome": "killed"}]}],
            "cgroups": []})");
    EXPECT_EQ(undocumented_keys(output, {schema_doc("reap-json.md")}), std::vector<std::string>{});
    EXPECT_EQ(undocumented_keys(output, {write_doc(dir, "reap-json.md", without)}),
              std::vector<std::string>{"ports_free"});
}

}  // namespace
}  // namespace warden::testing
