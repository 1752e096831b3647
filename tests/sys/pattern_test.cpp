// Pattern: --match over command lines that another user may have planted.
#include "sys/pattern.hpp"

#include <cstdlib>
#include <regex>
#include <string>

#include <gtest/gtest.h>

namespace warden {
namespace {

// A command line of 1 MiB, "T" near its start and "Q" at its very end: what made
// std::regex recurse once per character and overflow the stack (exit 139 at 60 KB).
std::string megabyte_command_line() {
    std::string s = "/usr/bin/python3 -c T";
    s.append((1 << 20) - s.size() - 1, 'a');
    s.push_back('Q');
    return s;
}

TEST(Pattern, SearchesAnywhereAndRefusesWhatIsNoRegexWithTheReason) {
    auto p = Pattern::compile("mcp-server-(git|fetch)");
    ASSERT_TRUE(p.ok()) << p.error().message;
    EXPECT_TRUE(p->search("uvx mcp-server-git --repo ."));
    EXPECT_FALSE(p->search("uvx mcp-server-time"));
    EXPECT_EQ(p->source(), "mcp-server-(git|fetch)");

    auto bad = Pattern::compile("(unclosed");
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.error().message, "'(unclosed': not a regular expression: missing ): (unclosed");
    // What an automaton cannot do is refused, not run by backtracking.
    auto backref = Pattern::compile("(a)\\1");
    ASSERT_FALSE(backref.ok());
    EXPECT_NE(backref.error().message.find("not a regular expression"), std::string::npos);
    // The pattern is escaped in the message: it came from a command line too.
    auto esc = Pattern::compile("\x1b[(");
    ASSERT_FALSE(esc.ok());
    EXPECT_EQ(esc.error().message.find('\x1b'), std::string::npos) << esc.error().message;
}

TEST(Pattern, BytesThatAreNotUtf8AreSearchedToo) {
    auto p = Pattern::compile("T.*Q");
    ASSERT_TRUE(p.ok());
    EXPECT_TRUE(p->search(std::string("T\xff\xfe\0Q", 5)));
}

TEST(Pattern, MegabyteCommandLineIsSearchedWithoutRecursion) {
    const std::string line = megabyte_command_line();
    auto p = Pattern::compile("T.*Q");
    ASSERT_TRUE(p.ok());
    EXPECT_TRUE(p->search(line));
    auto miss = Pattern::compile("T.*Z");
    ASSERT_TRUE(miss.ok());
    EXPECT_FALSE(miss->search(line));
}

// The negative control: the same search with std::regex, the matcher this replaced, dies on
// the same command line (its recursion overflows the stack).
TEST(PatternDeathTest, StdRegexOverflowsItsStackOnTheSameCommandLine) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    const std::string line = megabyte_command_line();
    EXPECT_DEATH(
        {
            std::regex r("T.*Q", std::regex::ECMAScript);
            bool found = std::regex_search(line, r);
            std::_Exit(found ? 0 : 0);  // surviving it, either way, fails the expectation
        },
        "");
}

}  // namespace
}  // namespace warden
