// `mcpwarden demo` with what a user has, never the source tree: server-everything installed
// on PATH gives all four rows; without it (and with npx unable to resolve it offline) the
// row is skipped with a sentence that says what to install. The CLI under test is the
// build tree's, beside a CMakeCache.txt that names this source tree and its
// tests/e2e/node_modules: a demo that still looked there would run the row in the second
// test (its negative control).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/cli_run.hpp"
#include "common/e2e.hpp"
#include "common/testing.hpp"

namespace warden::testing {
namespace {

const std::string kPackageBin =
    "/node_modules/@modelcontextprotocol/server-everything/dist/index.js";

// A directory that holds `name` as a symlink to `target`; returns the directory.
std::string bin_dir_with(const TempDir& dir, const std::string& sub, const std::string& name,
                         const std::string& target) {
    const std::string bin = dir.file(sub);
    ::mkdir(bin.c_str(), 0755);
    EXPECT_EQ(::symlink(target.c_str(), (bin + "/" + name).c_str()), 0) << bin << "/" << name;
    return bin;
}

const nlohmann::json* row_of(const nlohmann::json& j, const std::string& server) {
    for (const auto& row : j["rows"])
        if (row["server"] == server) return &row;
    return nullptr;
}

TEST(DemoE2E, ServerEverythingOnPathGivesAllFourRows) {
    if (!have_node_modules()) GTEST_SKIP() << "node or tests/e2e/node_modules missing";
    TempDir dir;
    // As `npm install -g` leaves it: an mcp-server-everything on PATH (its script resolves
    // its dependencies beside its real path).
    const std::string bin =
        bin_dir_with(dir, "bin", "mcp-server-everything", e2e_dir() + kPackageBin);
    auto r = run_cli(dir, {"demo", "--json"}, 240s,
                     {{"PATH", bin + ":" + std::string(std::getenv("PATH"))}});
    ASSERT_EQ(r.code, 0) << r.out << "\nstderr:\n" << r.err;
    EXPECT_TRUE(r.left_after.empty()) << r.left_after.size() << " processes left";
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.out;
    ASSERT_EQ(j["rows"].size(), 4u) << r.out;
    for (const auto& row : j["rows"])
        EXPECT_FALSE(row.contains("skipped")) << row.dump(2);
    const nlohmann::json* row = row_of(j, "server-everything");
    ASSERT_NE(row, nullptr) << r.out;
    EXPECT_EQ((*row)["command"][0], bin + "/mcp-server-everything") << row->dump(2);
    EXPECT_EQ((*row)["with"]["processes_left"], 0) << row->dump(2);
    EXPECT_EQ((*row)["with"]["journal"]["abandoned"], true) << row->dump(2);
    EXPECT_TRUE(j["ok"].get<bool>()) << r.out;
}

TEST(DemoE2E, WithoutServerEverythingTheRowSaysWhatToInstall) {
    if (!have_node_modules()) GTEST_SKIP() << "node or tests/e2e/node_modules missing";
    TempDir dir;
    // node on PATH, no npx and no mcp-server-everything (/usr/bin has both: not on PATH).
    const std::string bin = bin_dir_with(dir, "bin", "node", "/usr/bin/node");
    auto r = run_cli(dir, {"demo", "--json"}, 180s, {{"PATH", bin}});
    ASSERT_EQ(r.code, 0) << r.out << "\nstderr:\n" << r.err;
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.out;
    const nlohmann::json* row = row_of(j, "server-everything");
    ASSERT_NE(row, nullptr) << r.out;
    EXPECT_EQ((*row).value("skipped", ""),
              "server-everything is not installed: no mcp-server-everything on PATH and no npx "
              "(npm install -g @modelcontextprotocol/server-everything)")
        << row->dump(2);
    EXPECT_FALSE(row->contains("with")) << "the row ran: " << row->dump(2);

    // npx on PATH too, with an empty npm cache (HOME is the test's) and no node_modules
    // above the working directory: npx --offline cannot resolve it either.
    const std::string npx = bin_dir_with(dir, "bin2", "npx", "/usr/bin/npx");
    auto r2 = run_cli(dir, {"demo", "--json"}, 180s, {{"PATH", bin + ":" + npx}});
    auto j2 = nlohmann::json::parse(r2.out, nullptr, false);
    ASSERT_FALSE(j2.is_discarded()) << r2.out << r2.err;
    row = row_of(j2, "server-everything");
    ASSERT_NE(row, nullptr) << r2.out;
    EXPECT_EQ((*row).value("skipped", ""),
              "server-everything is not installed: no mcp-server-everything on PATH, and `npx "
              "--offline` cannot resolve @modelcontextprotocol/server-everything (npm install "
              "-g @modelcontextprotocol/server-everything)")
        << row->dump(2);
}

}  // namespace
}  // namespace warden::testing
