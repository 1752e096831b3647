// Codex TOML: locating values with toml++ and editing only their bytes.
#include <gtest/gtest.h>
#include <toml++/toml.h>

#include "clients/toml_scan.hpp"
#include "clients/wrap.hpp"
#include "clients_test_util.hpp"

namespace warden::clients {
namespace {

Rewrite toml_rewrite(std::string_view text, Action action) {
    auto rw = rewrite_text(text, Format::Toml, Layout::CodexToml, Scope::User, action,
                           {"/usr/bin/mcpwarden", std::nullopt});
    EXPECT_TRUE(rw.ok()) << rw.error().message;
    return rw.ok() ? *rw : Rewrite{};
}

TEST(TomlScan, ValueEnds) {
    auto end = [](std::string_view t) { return t.substr(0, toml_value_end(t, 0)); };
    EXPECT_EQ(end(R"("a\"b" # c)"), R"("a\"b")");
    EXPECT_EQ(end(R"('C:\x' x)"), R"('C:\x')");
    EXPECT_EQ(end("\"\"\"one\ntwo\"\"\"\" rest"), "\"\"\"one\ntwo\"\"\"\"");
    EXPECT_EQ(end("'''a''b'''' rest"), "'''a''b''''");
    EXPECT_EQ(end("[1, [2, \"]\"], # ]\n 3] x"), "[1, [2, \"]\"], # ]\n 3]");
    EXPECT_EQ(end("{ a = \"}\", b = [1] } x"), "{ a = \"}\", b = [1] }");
    EXPECT_EQ(end("1979-05-27 07:32:00Z # c"), "1979-05-27 07:32:00Z");
    EXPECT_EQ(end("42 # c"), "42");
    EXPECT_EQ(end("true,"), "true");
}

TEST(TomlScan, ArrayItems) {
    std::string_view t = "[\n  \"a\",  # one\n  'b',\n  [1, 2],\n]";
    auto items = toml_array_items(t, {0, t.size()});
    ASSERT_EQ(items.size(), 3u);
    EXPECT_EQ(t.substr(items[0].begin, items[0].size()), "\"a\"");
    EXPECT_EQ(t.substr(items[1].begin, items[1].size()), "'b'");
    EXPECT_EQ(t.substr(items[2].begin, items[2].size()), "[1, 2]");
}

TEST(TomlScan, OffsetOfCountsCharacters) {
    std::string_view t = "a = 1\n\xC3\xA9 = 2\n";
    EXPECT_EQ(toml_offset_of(t, 2, 1), 6u);
    EXPECT_EQ(toml_offset_of(t, 2, 2), 8u);  // after the two-byte 'é'
}

TEST(TomlEdit, CodexCommentsSurvive) {
    std::string before = testing::data("codex.toml");
    Rewrite rw = toml_rewrite(before, Action::Wrap);
    for (const char* comment :
         {"# Codex configuration\n", "# ask before running commands\n",
          "# Docs server: keep this comment\n", "  # the launcher\n", "# pinned by the lockfile\n"})
        EXPECT_NE(rw.text.find(comment), std::string::npos) << comment;
    EXPECT_NE(rw.text.find("[mcp_servers.docs]\n"
                           "command = \"/usr/bin/mcpwarden\"  # the launcher\n"
                           "args = [\n"
                           "  \"run\",\n  \"--name\",\n  \"docs\",\n  \"--\",\n  \"npx\",\n"
                           "  \"-y\",\n"
                           "  \"@upstash/context7-mcp\",  # pinned by the lockfile\n"
                           "]\n"),
              std::string::npos)
        << rw.text;
    EXPECT_EQ(toml_rewrite(rw.text, Action::Unwrap).text, before);
}

TEST(TomlEdit, MissingArgsGetsItsOwnLineAndALiteralCommandMovesAsWritten) {
    std::string before = "[mcp_servers.shell]\n  command = '/opt/x'\n  enabled = false\n";
    Rewrite rw = toml_rewrite(before, Action::Wrap);
    EXPECT_EQ(rw.text,
              "[mcp_servers.shell]\n  args = [\"run\", \"--name\", \"shell\", \"--\", '/opt/x']\n"
              "  command = \"/usr/bin/mcpwarden\"\n  enabled = false\n");
    EXPECT_EQ(toml_rewrite(rw.text, Action::Unwrap).text, before);
}

TEST(TomlEdit, InlineTablesAndDottedKeys) {
    std::string before =
        "[mcp_servers]\n"
        "dot.command = \"a\"\n"
        "inl = { command = \"b\", args = [\"-v\"] }\n"
        "bare = { command = \"c\" }\n";
    Rewrite rw = toml_rewrite(before, Action::Wrap);
    EXPECT_EQ(rw.text,
              "[mcp_servers]\n"
              "dot.args = [\"run\", \"--name\", \"dot\", \"--\", \"a\"]\n"
              "dot.command = \"/usr/bin/mcpwarden\"\n"
              "inl = { command = \"/usr/bin/mcpwarden\", args = [\"run\", \"--name\", \"inl\", "
              "\"--\", \"b\", \"-v\"] }\n"
              "bare = { args = [\"run\", \"--name\", \"bare\", \"--\", \"c\"], command = "
              "\"/usr/bin/mcpwarden\" }\n");
    ASSERT_NO_THROW((void)toml::parse(rw.text));
    EXPECT_EQ(toml_rewrite(rw.text, Action::Unwrap).text, before);
    EXPECT_EQ(toml_rewrite(rw.text, Action::Wrap).text, rw.text);
}

TEST(TomlEdit, CrlfFilesKeepCrlf) {
    std::string before = "[mcp_servers.x]\r\ncommand = \"a\"\r\n";
    Rewrite rw = toml_rewrite(before, Action::Wrap);
    EXPECT_EQ(rw.text,
              "[mcp_servers.x]\r\nargs = [\"run\", \"--name\", \"x\", \"--\", \"a\"]\r\n"
              "command = \"/usr/bin/mcpwarden\"\r\n");
    EXPECT_EQ(toml_rewrite(rw.text, Action::Unwrap).text, before);
}

TEST(TomlEdit, NonAsciiBeforeValuesStillLocatesBytes) {
    std::string before =
        "# caf\xC3\xA9\n[mcp_servers.\"s\xC3\xA9rver\"]\ncommand = \"\xC3\xA9x\" # \xC3\xA9\nargs "
        "= [\"\xC3\xA9\"]\n";
    Rewrite rw = toml_rewrite(before, Action::Wrap);
    auto doc = toml::parse(rw.text);
    auto* args = doc["mcp_servers"]["s\xC3\xA9rver"]["args"].as_array();
    ASSERT_TRUE(args);
    ASSERT_EQ(args->size(), 6u);
    EXPECT_EQ(*args->get(2)->value<std::string>(), "s\xC3\xA9rver");
    EXPECT_EQ(*args->get(4)->value<std::string>(), "\xC3\xA9x");
    EXPECT_EQ(toml_rewrite(rw.text, Action::Unwrap).text, before);
}

TEST(TomlEdit, MalformedTomlIsAnErrorWithPosition) {
    auto rw = rewrite_text("[mcp_servers.x]\ncommand = \"npx\nargs = []\n", Format::Toml,
                           Layout::CodexToml, Scope::User, Action::Wrap,
                           {"/usr/bin/mcpwarden", std::nullopt});
    ASSERT_FALSE(rw.ok());
    EXPECT_EQ(rw.error().message.substr(0, 5), "2:15:") << rw.error().message;
}

TEST(TomlEdit, DuplicateTableIsAnError) {
    auto rw = rewrite_text("[mcp_servers.x]\ncommand = \"a\"\n[mcp_servers.x]\ncommand = \"b\"\n",
                           Format::Toml, Layout::CodexToml, Scope::User, Action::Wrap,
                           {"/usr/bin/mcpwarden", std::nullopt});
    ASSERT_FALSE(rw.ok());
    EXPECT_EQ(rw.error().message.substr(0, 2), "3:") << rw.error().message;
}

}  // namespace
}  // namespace warden::clients
