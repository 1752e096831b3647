#include "clients/line_diff.hpp"

#include <gtest/gtest.h>

namespace warden::clients {
namespace {

std::string lines(int from, int to) {
    std::string s;
    for (int i = from; i <= to; ++i)
        s += "l" + std::to_string(i) + "\n";
    return s;
}

TEST(LineDiff, EqualTextsGiveNothing) {
    EXPECT_EQ(unified_diff("a\nb\n", "a\nb\n", "x", "x"), "");
}

TEST(LineDiff, OneChangeWithThreeLinesOfContext) {
    std::string a = lines(1, 10);
    std::string b = a;
    b.replace(b.find("l5\n"), 3, "five\n");
    EXPECT_EQ(unified_diff(a, b, "old", "new"),
              "--- old\n+++ new\n@@ -2,7 +2,7 @@\n l2\n l3\n l4\n-l5\n+five\n l6\n l7\n l8\n");
}

TEST(LineDiff, DistantChangesMakeTwoHunksNearOnesOne) {
    std::string a = lines(1, 20);
    std::string b = a;
    b.replace(b.find("l2\n"), 3, "two\n");
    b.replace(b.find("l18\n"), 4, "");
    EXPECT_EQ(unified_diff(a, b, "f", "f"),
              "--- f\n+++ f\n@@ -1,5 +1,5 @@\n l1\n-l2\n+two\n l3\n l4\n l5\n"
              "@@ -15,6 +15,5 @@\n l15\n l16\n l17\n-l18\n l19\n l20\n");
    std::string c = a;
    c.replace(c.find("l2\n"), 3, "two\n");
    c.replace(c.find("l8\n"), 3, "eight\n");
    std::string d = unified_diff(a, c, "f", "f");
    EXPECT_EQ(d.find("@@ -"), d.rfind("@@ -")) << d;  // one hunk
}

TEST(LineDiff, InsertionAtTheStartAndIntoAnEmptyFile) {
    EXPECT_EQ(unified_diff("a\n", "new\na\n", "f", "f"), "--- f\n+++ f\n@@ -1 +1,2 @@\n+new\n a\n");
    EXPECT_EQ(unified_diff("", "x\n", "f", "f"), "--- f\n+++ f\n@@ -0,0 +1 @@\n+x\n");
}

TEST(LineDiff, MissingFinalNewlineIsMarked) {
    EXPECT_EQ(unified_diff("a\nb", "a\nc", "f", "f"),
              "--- f\n+++ f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n"
              "\\ No newline at end of file\n");
    EXPECT_EQ(unified_diff("a", "a\n", "f", "f"),
              "--- f\n+++ f\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+a\n");
}

TEST(LineDiff, LargeFileWithTwoEditsStaysSmall) {
    std::string a = lines(1, 20000);
    std::string b = a;
    b.replace(b.find("l100\n"), 5, "x\ny\n");
    b.replace(b.find("l19000\n"), 7, "z\n");
    std::string d = unified_diff(a, b, "f", "f");
    EXPECT_NE(d.find("@@ -97,7 +97,8 @@\n"), std::string::npos) << d;
    EXPECT_NE(d.find("-l19000\n+z\n"), std::string::npos) << d;
    EXPECT_LT(d.size(), 200u);
}

}  // namespace
}  // namespace warden::clients
