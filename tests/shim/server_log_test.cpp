// The log's line format and identity (shim/server_log.hpp); the log itself is tested through
// real sessions in supervise_test.cpp.
#include <gtest/gtest.h>

#include "shim/server_log.hpp"

namespace warden::shim {
namespace {

TEST(ServerLog, ALineRoundTrips) {
    const LogLine in{int64_t{1796581143} * 1'000'000'000 + 123456000, "abcd", 4711,
                     "text with  two spaces"};
    const std::string text = format_log_line(in);
    EXPECT_EQ(text, "2026-12-06T18:19:03.123456Z abcd 4711 text with  two spaces\n");
    auto out = parse_log_line(text);
    ASSERT_TRUE(out);
    EXPECT_EQ(out->ts_ns, in.ts_ns);
    EXPECT_EQ(out->session, in.session);
    EXPECT_EQ(out->pid, in.pid);
    EXPECT_EQ(out->text, in.text);
    EXPECT_FALSE(parse_log_line("not a log line"));
}

// One identity per command line and directory; the name made safe for a file name.
TEST(ServerLog, TheKeyNamesTheServerAndHashesItsCommandLine) {
    const std::string a = log_key("gdrive", {"npx", "-y", "gdrive"}, "/home/u");
    EXPECT_EQ(a.rfind("gdrive-", 0), 0u);
    EXPECT_EQ(a.size(), std::string("gdrive-").size() + 16);
    EXPECT_EQ(a, log_key("gdrive", {"npx", "-y", "gdrive"}, "/home/u"));
    EXPECT_NE(a, log_key("gdrive", {"npx", "-y", "gdrive"}, "/tmp"));
    EXPECT_NE(log_key("x", {"ab", "c"}, "/"), log_key("x", {"a", "bc"}, "/"));
    EXPECT_EQ(log_key("../evil name", {"x"}, "/").rfind("server.._evil_name-", 0), 0u);
    EXPECT_EQ(logs_root("/state/mcpwarden/journal.db"), "/state/mcpwarden/logs");
}

}  // namespace
}  // namespace warden::shim
