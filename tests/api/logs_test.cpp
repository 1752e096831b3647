// read_logs() and LogFollower (mcpwarden/logs.hpp) on log files written in the shim's format
// (docs/LOGS.md): what `mcpwarden logs` shows a user, a rotation followed without a line lost
// or shown twice.
#include <time.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/testing.hpp"
#include "mcpwarden/logs.hpp"

namespace warden::testing {
namespace {

constexpr int64_t kNow = int64_t{1796400000} * 1'000'000'000;  // long past: older than --since 1h

// A line as the shim writes it (docs/LOGS.md): TIME SESSION PID TEXT.
struct Line {
    int64_t ts_ns;
    std::string session;
    int pid;
    std::string text;
};

std::string format(const Line& l) {
    const time_t secs = static_cast<time_t>(l.ts_ns / 1'000'000'000);
    tm t{};
    ::gmtime_r(&secs, &t);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", t.tm_year + 1900,
                  t.tm_mon + 1, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec,
                  static_cast<long long>(l.ts_ns % 1'000'000'000 / 1000));
    return std::string(buf) + " " + l.session + " " + std::to_string(l.pid) + " " + l.text + "\n";
}

struct Logs {
    TempDir dir;
    std::string db = dir.file("journal.db");
    std::string root = dir.file("logs");  // beside the journal

    std::string write(const std::string& server, const std::string& file,
                      const std::vector<Line>& lines) {
        std::filesystem::create_directories(root + "/" + server);
        const std::string path = root + "/" + server + "/" + file;
        std::ofstream out(path, std::ios::app);
        for (const auto& l : lines)
            out << format(l);
        return path;
    }
};

std::vector<std::string> texts(const std::vector<api::LogEntry>& entries) {
    std::vector<std::string> out;
    for (const auto& e : entries)
        out.push_back(e.server + " " + e.session + " " + e.text);
    return out;
}

TEST(ApiLogs, ReadsRotatedFilesFirstAndSelectsByNameOrSession) {
    Logs l;
    l.write("gdrive-00000000000000aa", "stderr.log.1",
            {{kNow + 1000, "aaaa000000000001", 10, "first run"}});
    l.write("gdrive-00000000000000aa", "stderr.log",
            {{kNow + 3000, "aaaa000000000001", 11, "second run"}});
    l.write("github-00000000000000bb", "stderr.log",
            {{kNow + 2000, "bbbb000000000002", 20, "other server"}});

    auto all = api::read_logs({l.db, "", ""});
    ASSERT_TRUE(all) << all.error().message;
    EXPECT_EQ(texts(*all),
              (std::vector<std::string>{"gdrive-00000000000000aa aaaa000000000001 first run",
                                        "github-00000000000000bb bbbb000000000002 other server",
                                        "gdrive-00000000000000aa aaaa000000000001 second run"}));
    auto by_name = api::read_logs({l.db, "gdrive", ""});
    ASSERT_TRUE(by_name);
    EXPECT_EQ(by_name->size(), 2u);
    auto by_session = api::read_logs({l.db, "bbbb", ""});
    ASSERT_TRUE(by_session);
    ASSERT_EQ(by_session->size(), 1u);
    EXPECT_EQ((*by_session)[0].pid, 20);
    auto since = api::read_logs({l.db, "", "1h"});
    ASSERT_TRUE(since);
    EXPECT_TRUE(since->empty());  // every line is older than an hour

    auto unknown = api::read_logs({l.db, "slack", ""});
    ASSERT_FALSE(unknown);
    EXPECT_NE(unknown.error().message.find("no server named 'slack'"), std::string::npos);
    EXPECT_NE(unknown.error().message.find("there are: gdrive, github"), std::string::npos);
}

// A writer rotates the live file (renames it to .1 and starts a new one) between two polls:
// the follower reads the rest of the old file, then the new one, each line once.
TEST(ApiLogs, AFollowerReadsAcrossARotationEachLineOnce) {
    Logs l;
    const std::string live =
        l.write("srv-00000000000000cc", "stderr.log", {{kNow, "cccc000000000003", 1, "one"}});
    auto f = api::LogFollower::open({l.db, "srv", ""});
    ASSERT_TRUE(f) << f.error().message;
    EXPECT_EQ(texts((*f)->poll()),
              (std::vector<std::string>{"srv-00000000000000cc cccc000000000003 one"}));
    l.write("srv-00000000000000cc", "stderr.log", {{kNow + 1000, "cccc000000000003", 1, "two"}});
    std::filesystem::rename(live, live + ".1");
    l.write("srv-00000000000000cc", "stderr.log", {{kNow + 2000, "cccc000000000003", 2, "three"}});
    EXPECT_EQ(texts((*f)->poll()),
              (std::vector<std::string>{"srv-00000000000000cc cccc000000000003 two",
                                        "srv-00000000000000cc cccc000000000003 three"}));
    EXPECT_TRUE((*f)->poll().empty());
    // A server of that name whose log appears later is followed too.
    l.write("srv-00000000000000dd", "stderr.log", {{kNow + 3000, "dddd000000000004", 3, "four"}});
    EXPECT_EQ(texts((*f)->poll()),
              (std::vector<std::string>{"srv-00000000000000dd dddd000000000004 four"}));
}

}  // namespace
}  // namespace warden::testing
