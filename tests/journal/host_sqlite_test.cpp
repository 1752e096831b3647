// What opening a journal changes in a library host's SQLite (docs/LIBRARY.md, "What embedding
// changes in the host"): its allocation statistics are turned off by the first journal, unless
// the host initialized SQLite before, which then keeps them. SQLite's configuration is global
// to a process and taken only before it initializes: each case is this binary run again, a
// process that has not used SQLite yet, as a host that is about to open its first journal.
#include <sqlite3.h>
#include <sys/wait.h>

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "common/testing.hpp"
#include "journal/journal.hpp"

namespace warden::testing {
namespace {

constexpr const char* kCaseVar = "WARDEN_HOST_SQLITE_CASE";  // "fresh" | "initialized"
constexpr const char* kDbVar = "WARDEN_HOST_SQLITE_DB";

// The host's side, run only as the child below asks for it.
TEST(HostSqliteCase, DISABLED_OpenAJournalAndSayWhetherAllocationsAreCounted) {
    const char* which = std::getenv(kCaseVar);
    const char* db = std::getenv(kDbVar);
    if (!which || !db) GTEST_SKIP() << "run by HostSqlite.* only";
    const bool initialized = std::string(which) == "initialized";
    if (initialized) {
        ASSERT_EQ(sqlite3_initialize(), SQLITE_OK);
    }
    const sqlite3_int64 before = sqlite3_memory_used();
    journal::Options o;
    o.path = db;
    auto j = journal::Journal::open(o);
    ASSERT_TRUE(j) << j.error().message;
    ASSERT_TRUE((*j)->append(journal::Event{"note", "", 0, journal::Json{{"n", 1}}}));
    // The journal's connection and its pages are SQLite's allocations while it is open.
    EXPECT_EQ(sqlite3_memory_used() > before, initialized)
        << "allocations counted: " << sqlite3_memory_used() - before << " bytes";
}

std::string host_run(const TempDir& dir, const std::string& which) {
    ChildOptions o;
    o.capture_stderr = true;
    o.env = {{kCaseVar, which}, {kDbVar, dir.file(which + ".db")}};
    TestChild c(
        {"/proc/self/exe", "--gtest_also_run_disabled_tests", "--gtest_filter=HostSqliteCase.*"},
        o);
    if (!c.started()) return c.error();
    std::string out = c.read_all_stdout(std::chrono::seconds(60));
    auto status = c.wait_exit(std::chrono::seconds(5));
    if (!status) return "no exit within 60 s\n" + out;
    return WIFEXITED(*status) && WEXITSTATUS(*status) == 0 ? "" : out;
}

TEST(HostSqlite, TheFirstJournalTurnsAllocationStatisticsOffUnlessTheHostInitializedFirst) {
    TempDir dir;
    EXPECT_EQ(host_run(dir, "fresh"), "")
        << "a host that had not initialized SQLite: its allocations are no longer counted";
    EXPECT_EQ(host_run(dir, "initialized"), "")
        << "a host that initialized SQLite first keeps its counts";
}

}  // namespace
}  // namespace warden::testing
