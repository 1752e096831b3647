// Wrap and unwrap every client's realistic fixture config, checking the result with
// independent parsers (nlohmann::json with comments ignored, toml++).
#include "clients/wrap.hpp"

#include <algorithm>

#include <gtest/gtest.h>
#include <toml++/toml.h>
#include <nlohmann/json.hpp>

#include "clients_test_util.hpp"

namespace warden::clients {
namespace {

using testing::data;

constexpr const char* kWarden = "/opt/mcp warden/bin/mcpwarden";  // a space: must be quoted

struct Case {
    const char* file;
    Format format;
    Layout layout;
    Scope scope;
    std::vector<std::string> stdio;   // names that get wrapped
    std::vector<std::string> remote;  // names left alone as remote
};

void PrintTo(const Case& c, std::ostream* os) {
    *os << c.file;
}

const Case kCases[] = {
    {"claude_code_user.json",
     Format::Json,
     Layout::ClaudeJson,
     Scope::User,
     {"github", "time", "postgres"},
     {"sentry"}},
    {"claude_code_project.json",
     Format::Json,
     Layout::McpServers,
     Scope::Project,
     {"filesystem", "local-tool"},
     {"docs"}},
    {"claude_desktop.json",
     Format::Json,
     Layout::McpServers,
     Scope::User,
     {"filesystem", "sqlite", "everything"},
     {}},
    {"cursor.json",
     Format::Json,
     Layout::McpServers,
     Scope::User,
     {"brave-search", "memory"},
     {"linear"}},
    {"vscode.json",
     Format::Json,
     Layout::Servers,
     Scope::Project,
     {"github", "playwright"},
     {"remote-docs"}},
    {"windsurf.json",
     Format::Json,
     Layout::McpServers,
     Scope::User,
     {"git", "puppeteer"},
     {"figma"}},
    {"zed.json",
     Format::Json,
     Layout::ContextServers,
     Scope::User,
     {"postgres-context-server", "mcp-server-time"},
     {"remote"}},
    {"codex.toml",
     Format::Toml,
     Layout::CodexToml,
     Scope::User,
     {"docs", "shell", "python"},
     {"figma"}},
    {"gemini.json",
     Format::Json,
     Layout::McpServers,
     Scope::User,
     {"pythonTools", "nodeServer"},
     {"httpServer"}},
    {"cline.json",
     Format::Json,
     Layout::McpServers,
     Scope::User,
     {"github.com/modelcontextprotocol/servers/tree/main/src/fetch", "weather"},
     {"remote"}},
};

class WrapFixture : public ::testing::TestWithParam<Case> {
  protected:
    Rewrite run(std::string_view text, Action action, const char* warden = kWarden) {
        auto rw = rewrite_text(text, GetParam().format, GetParam().layout, GetParam().scope, action,
                               {warden, std::nullopt});
        EXPECT_TRUE(rw.ok()) << rw.error().message;
        return rw.ok() ? *rw : Rewrite{};
    }
};

// The objects holding "command"/"args" (or Zed's command.path/args) of server `name`.
std::vector<nlohmann::json*> holders(nlohmann::json& doc, Layout layout, const std::string& name) {
    std::vector<nlohmann::json*> maps;
    switch (layout) {
        case Layout::Servers:
            maps.push_back(&doc["servers"]);
            break;
        case Layout::ContextServers:
            maps.push_back(&doc["context_servers"]);
            break;
        case Layout::ClaudeJson:
            maps.push_back(&doc["mcpServers"]);
            for (auto& [dir, p] : doc["projects"].items())
                if (p.contains("mcpServers")) maps.push_back(&p["mcpServers"]);
            break;
        default:
            maps.push_back(&doc["mcpServers"]);
    }
    std::vector<nlohmann::json*> out;
    for (auto* m : maps) {
        if (!m->contains(name)) continue;
        auto& e = (*m)[name];
        out.push_back(e["command"].is_object() ? &e["command"] : &e);
    }
    return out;
}

TEST_P(WrapFixture, WrapsEveryStdioServerAndNothingElse) {
    const Case& c = GetParam();
    std::string before = data(c.file);
    Rewrite rw = run(before, Action::Wrap);
    ASSERT_TRUE(rw.changed);

    std::vector<std::string> changed, remote;
    for (const auto& e : rw.entries) {
        if (e.outcome == Outcome::Changed) changed.push_back(e.name);
        if (e.outcome == Outcome::Remote) remote.push_back(e.name);
        EXPECT_NE(e.outcome, Outcome::Skipped) << e.name << ": " << e.reason;
    }
    EXPECT_EQ(changed, c.stdio);
    EXPECT_EQ(remote, c.remote);

    if (c.format == Format::Toml) {
        toml::table old_doc = toml::parse(before);
        toml::table new_doc;
        ASSERT_NO_THROW(new_doc = toml::parse(rw.text)) << rw.text;
        for (const auto& name : c.stdio) {
            auto* o = old_doc["mcp_servers"][name].as_table();
            auto* n = new_doc["mcp_servers"][name].as_table();
            ASSERT_TRUE(o && n) << name;
            EXPECT_EQ(n->get("command")->value<std::string>(), kWarden);
            std::vector<std::string> want = {"run", "--name", name, "--",
                                             *o->get("command")->value<std::string>()};
            if (auto* a = o->get_as<toml::array>("args"))
                for (auto& v : *a)
                    want.push_back(*v.value<std::string>());
            std::vector<std::string> got;
            for (auto& v : *n->get_as<toml::array>("args"))
                got.push_back(*v.value<std::string>());
            EXPECT_EQ(got, want) << name;
            for (auto* t : {o, n}) {
                t->erase("command");
                t->erase("args");
            }
        }
        EXPECT_EQ(old_doc, new_doc) << "something besides command/args changed:\n" << rw.text;
        return;
    }

    auto old_doc = nlohmann::json::parse(before, nullptr, true, true);
    nlohmann::json new_doc;
    ASSERT_NO_THROW(new_doc = nlohmann::json::parse(rw.text, nullptr, true, true)) << rw.text;
    for (const auto& name : c.stdio) {
        auto olds = holders(old_doc, c.layout, name);
        auto news = holders(new_doc, c.layout, name);
        ASSERT_EQ(olds.size(), 1u) << name;
        ASSERT_EQ(news.size(), 1u) << name;
        nlohmann::json& o = *olds[0];
        nlohmann::json& n = *news[0];
        const char* program = o.contains("path") ? "path" : "command";
        EXPECT_EQ(n[program], kWarden) << name;
        nlohmann::json want = {"run", "--name", name, "--", o[program]};
        if (o.contains("args"))
            for (auto& a : o["args"])
                want.push_back(a);
        EXPECT_EQ(n["args"], want) << name;
        for (auto* j : {&o, &n}) {
            j->erase(program);
            j->erase("args");
        }
    }
    EXPECT_EQ(old_doc, new_doc) << "something besides command/args changed:\n" << rw.text;
}

TEST_P(WrapFixture, UnwrapRestoresTheOriginalBytes) {
    std::string before = data(GetParam().file);
    Rewrite wrapped = run(before, Action::Wrap);
    Rewrite unwrapped = run(wrapped.text, Action::Unwrap);
    EXPECT_TRUE(unwrapped.changed);
    EXPECT_EQ(unwrapped.text, before);
}

TEST_P(WrapFixture, UnwrapFindsEntriesWrappedWithAnotherPath) {
    std::string before = data(GetParam().file);
    Rewrite wrapped = run(before, Action::Wrap, "/usr/local/bin/mcpwarden");
    EXPECT_EQ(run(wrapped.text, Action::Unwrap, kWarden).text, before);
}

TEST_P(WrapFixture, WrappingTwiceEqualsWrappingOnce) {
    Rewrite once = run(data(GetParam().file), Action::Wrap);
    Rewrite twice = run(once.text, Action::Wrap);
    EXPECT_FALSE(twice.changed);
    EXPECT_EQ(twice.text, once.text);
    for (const auto& e : twice.entries)
        EXPECT_TRUE(e.outcome == Outcome::Already || e.outcome == Outcome::Remote) << e.name;
}

TEST_P(WrapFixture, UnwrappingAnUnwrappedFileChangesNothing) {
    std::string before = data(GetParam().file);
    Rewrite rw = run(before, Action::Unwrap);
    EXPECT_FALSE(rw.changed);
    EXPECT_EQ(rw.text, before);
}

TEST_P(WrapFixture, VariablesAreMovedVerbatim) {
    std::string before = data(GetParam().file);
    Rewrite rw = run(before, Action::Wrap);
    // Every ${...} / $VAR spelling of the original is still there, unexpanded, as often.
    for (std::string_view needle : {"${", "$HOME", "$DB_", "$CONTEXT7", "${input:"}) {
        auto count = [&](std::string_view s) {
            size_t n = 0;
            for (size_t p = s.find(needle); p != std::string_view::npos; p = s.find(needle, p + 1))
                ++n;
            return n;
        };
        EXPECT_EQ(count(rw.text), count(before)) << needle;
    }
}

INSTANTIATE_TEST_SUITE_P(Clients, WrapFixture, ::testing::ValuesIn(kCases), [](const auto& p) {
    std::string n = p.param.file;
    std::replace_if(
        n.begin(), n.end(), [](char ch) { return !isalnum(ch); }, '_');
    return n;
});

// ---- single behaviours, on small texts ----

Rewrite wrap_json(std::string_view text, std::optional<std::string> server = std::nullopt) {
    auto rw = rewrite_text(text, Format::Json, Layout::McpServers, Scope::User, Action::Wrap,
                           {"/usr/bin/mcpwarden", std::move(server)});
    EXPECT_TRUE(rw.ok()) << rw.error().message;
    return rw.ok() ? *rw : Rewrite{};
}

std::string unwrap_json(std::string_view text) {
    auto rw = rewrite_text(text, Format::Json, Layout::McpServers, Scope::User, Action::Unwrap,
                           {"/usr/bin/mcpwarden", std::nullopt});
    EXPECT_TRUE(rw.ok()) << rw.error().message;
    return rw.ok() ? rw->text : std::string();
}

TEST(Wrap, InlineArrayGetsInlineElements) {
    std::string in = R"({"mcpServers": {"x": {"command": "npx", "args": ["-y", "x"]}}})";
    EXPECT_EQ(
        wrap_json(in).text,
        R"({"mcpServers": {"x": {"command": "/usr/bin/mcpwarden", "args": ["run", "--name", "x", "--", "npx", "-y", "x"]}}})");
}

TEST(Wrap, SandboxProfileGoesBeforeTheSeparatorAndUnwrapTakesItAway) {
    std::string in = R"({"mcpServers": {"x": {"command": "npx", "args": ["-y", "x"]}}})";
    WrapOptions o{"/usr/bin/mcpwarden", std::nullopt};
    o.sandbox = "strict";
    auto rw = rewrite_text(in, Format::Json, Layout::McpServers, Scope::User, Action::Wrap, o);
    ASSERT_TRUE(rw.ok()) << rw.error().message;
    EXPECT_EQ(
        rw->text,
        R"({"mcpServers": {"x": {"command": "/usr/bin/mcpwarden", "args": ["run", "--name", "x", "--sandbox", "strict", "--", "npx", "-y", "x"]}}})");
    EXPECT_EQ(unwrap_json(rw->text), in);
    // Without the option nothing of the sandbox is written (the control).
    EXPECT_EQ(wrap_json(in).text.find("--sandbox"), std::string::npos);
}

// `--share` is a switch: wrap writes it without a value, and reading the wrapped entry back
// (unwrap, inner_command) does not take the separator after it for its value.
TEST(Wrap, ShareGoesBeforeTheSeparatorAndUnwrapTakesItAway) {
    std::string in = R"({"mcpServers": {"x": {"command": "npx", "args": ["-y", "x"]}}})";
    WrapOptions o{"/usr/bin/mcpwarden", std::nullopt};
    o.share = true;
    auto rw = rewrite_text(in, Format::Json, Layout::McpServers, Scope::User, Action::Wrap, o);
    ASSERT_TRUE(rw.ok()) << rw.error().message;
    EXPECT_EQ(
        rw->text,
        R"({"mcpServers": {"x": {"command": "/usr/bin/mcpwarden", "args": ["run", "--name", "x", "--share", "--", "npx", "-y", "x"]}}})");
    EXPECT_EQ(unwrap_json(rw->text), in);
    EXPECT_EQ(wrap_json(in).text.find("--share"), std::string::npos);
}

TEST(Wrap, MultiLineArrayGetsOneElementPerLine) {
    std::string in =
        "{\"mcpServers\": {\"x\": {\n  \"command\": \"npx\",\n  \"args\": [\n    \"-y\",\n    "
        "\"x\"\n  ]\n}}}";
    EXPECT_EQ(wrap_json(in).text,
              "{\"mcpServers\": {\"x\": {\n  \"command\": \"/usr/bin/mcpwarden\",\n  \"args\": [\n"
              "    \"run\",\n    \"--name\",\n    \"x\",\n    \"--\",\n    \"npx\",\n    \"-y\",\n"
              "    \"x\"\n  ]\n}}}");
}

TEST(Wrap, MissingArgsIsAddedBeforeCommandAndRemovedOnUnwrap) {
    std::string in =
        "{\"mcpServers\": {\"x\": {\n    \"command\": \"my-server\",\n    \"env\": {}\n}}}";
    Rewrite rw = wrap_json(in);
    EXPECT_EQ(rw.text,
              "{\"mcpServers\": {\"x\": {\n    \"args\": [\"run\", \"--name\", \"x\", \"--\", "
              "\"my-server\"],\n    \"command\": \"/usr/bin/mcpwarden\",\n    \"env\": {}\n}}}");
    EXPECT_EQ(unwrap_json(rw.text), in);
}

TEST(Wrap, EmptyArgsKeepsItsInsideOnUnwrap) {
    for (std::string in : {R"({"mcpServers":{"x":{"command":"a","args":[]}}})",
                           R"({"mcpServers":{"x":{"command":"a","args":[ ]}}})"}) {
        Rewrite rw = wrap_json(in);
        EXPECT_NE(rw.text.find(R"("args":[)"), std::string::npos) << rw.text;
        EXPECT_EQ(unwrap_json(rw.text), in);
    }
}

TEST(Wrap, CompactStyleIsKept) {
    std::string in = R"({"mcpServers":{"x":{"env":{},"command":"a"}}})";
    Rewrite rw = wrap_json(in);
    EXPECT_EQ(
        rw.text,
        R"({"mcpServers":{"x":{"env":{},"args":["run", "--name", "x", "--", "a"], "command":"/usr/bin/mcpwarden"}}})");
    EXPECT_EQ(unwrap_json(rw.text), in);
}

TEST(Wrap, EscapesInNamesAndCommandsSurvive) {
    std::string in =
        R"({"mcpServers":{"my \"srv\"":{"command":"C:\\bin\\x\u00e9","args":["a\tb"]}}})";
    Rewrite rw = wrap_json(in);
    auto j = nlohmann::json::parse(rw.text);
    EXPECT_EQ(j["mcpServers"]["my \"srv\""]["args"],
              nlohmann::json({"run", "--name", "my \"srv\"", "--", "C:\\bin\\x\u00e9", "a\tb"}));
    // The original command is moved as written, escapes and all.
    EXPECT_NE(rw.text.find(R"("C:\\bin\\x\u00e9")"), std::string::npos);
    EXPECT_EQ(unwrap_json(rw.text), in);
}

TEST(Wrap, ServerSelectorWrapsOnlyThatServer) {
    std::string in = R"({"mcpServers":{"a":{"command":"x"},"b":{"command":"y"}}})";
    Rewrite rw = wrap_json(in, "b");
    ASSERT_EQ(rw.entries.size(), 1u);
    EXPECT_EQ(rw.entries[0].name, "b");
    auto j = nlohmann::json::parse(rw.text);
    EXPECT_EQ(j["mcpServers"]["a"]["command"], "x");
    EXPECT_EQ(j["mcpServers"]["b"]["command"], "/usr/bin/mcpwarden");
}

TEST(Wrap, UnusableEntriesAreSkippedWithAReason) {
    std::string in =
        R"({"mcpServers":{"a":{"command":"x","args":"-y"},"b":{"command":["x"]},"c":{"command":"x","args":[1]}}})";
    Rewrite rw = wrap_json(in);
    EXPECT_FALSE(rw.changed);
    ASSERT_EQ(rw.entries.size(), 3u);
    EXPECT_EQ(rw.entries[0].reason, "args is not an array");
    EXPECT_EQ(rw.entries[1].reason, "command is not a string");
    EXPECT_EQ(rw.entries[2].reason, "args holds a value that is not a string");
}

TEST(Wrap, HandWrappedEntryWithOptionsUnwraps) {
    std::string in =
        R"({"mcpServers":{"a":{"command":"/x/mcpwarden","args":["run","--isolate=pidns","--","srv","-v"]}}})";
    EXPECT_EQ(unwrap_json(in), R"({"mcpServers":{"a":{"command":"srv","args":["-v"]}}})");
}

// Found by fuzz_wrap: a server named "--" is wrapped as `run --name -- -- CMD`; its name is
// the value of --name (as `mcpwarden run` parses it), not the separator.
TEST(Wrap, ServerNamedLikeAnOptionRoundTrips) {
    for (std::string name : {"--", "-x", "--name", "--no-journal"}) {
        std::string in = R"({"mcpServers":{")" + name + R"(":{"command":"-x","args":["--","a"]}}})";
        Rewrite rw = wrap_json(in);
        ASSERT_TRUE(rw.changed) << name;
        auto j = nlohmann::json::parse(rw.text);
        EXPECT_EQ(j["mcpServers"][name]["args"],
                  nlohmann::json({"run", "--name", name, "--", "-x", "--", "a"}))
            << name;
        EXPECT_FALSE(wrap_json(rw.text).changed) << name;
        EXPECT_EQ(unwrap_json(rw.text), in) << name;
    }
}

// Found by fuzz_wrap: a name defined twice in one map. Clients parse with JSON.parse, which
// keeps the last; wrap edits that one and leaves the dead first one alone, saying why. (Before,
// both were edited and the check after the edit refused the whole file.)
TEST(Wrap, ServerDefinedTwiceIsWrappedWhereTheClientReadsIt) {
    std::string in =
        "{\"mcpServers\": {\n  \"a\": {\"command\": \"old\"},\n  \"a\": {\"command\": "
        "\"new\"}\n}}";
    Rewrite rw = wrap_json(in);
    ASSERT_TRUE(rw.changed);
    ASSERT_EQ(rw.entries.size(), 2u);
    EXPECT_EQ(rw.entries[0].outcome, Outcome::Skipped);
    EXPECT_EQ(rw.entries[0].reason,
              "the name is defined again at line 3: the client reads only that one");
    EXPECT_EQ(rw.entries[1].outcome, Outcome::Changed);
    auto j = nlohmann::json::parse(rw.text);  // last wins, as in the client
    EXPECT_EQ(j["mcpServers"]["a"]["command"], "/usr/bin/mcpwarden");
    EXPECT_EQ(j["mcpServers"]["a"]["args"], nlohmann::json({"run", "--name", "a", "--", "new"}));
    EXPECT_NE(rw.text.find(R"("a": {"command": "old"})"), std::string::npos) << rw.text;
    EXPECT_FALSE(wrap_json(rw.text).changed);
    EXPECT_EQ(unwrap_json(rw.text), in);
}

TEST(Wrap, ProjectDefinedTwiceInClaudeJsonIsLeftAlone) {
    std::string in =
        "{\"projects\": {\n\"/p\": {\"mcpServers\": {\"a\": {\"command\": \"x\"}}},\n"
        "\"/p\": {\"mcpServers\": {\"a\": {\"command\": \"y\"}}}}}";
    auto rw = rewrite_text(in, Format::Json, Layout::ClaudeJson, Scope::User, Action::Wrap,
                           {"/usr/bin/mcpwarden", std::nullopt});
    ASSERT_TRUE(rw.ok()) << rw.error().message;
    ASSERT_EQ(rw->entries.size(), 2u);
    EXPECT_EQ(rw->entries[0].reason,
              "its project is defined again at line 3: the client reads only that one");
    EXPECT_EQ(rw->entries[1].outcome, Outcome::Changed);
    auto j = nlohmann::json::parse(rw->text);
    EXPECT_EQ(j["projects"]["/p"]["mcpServers"]["a"]["args"],
              nlohmann::json({"run", "--name", "a", "--", "y"}));
}

TEST(Wrap, RunFlagsTakeNoValueWhenFindingTheCommand) {
    std::string in =
        R"({"mcpServers":{"a":{"command":"mcpwarden","args":["run","--no-journal","--explain","--journal","/j.db","--","srv","-v"]}}})";
    EXPECT_EQ(unwrap_json(in), R"({"mcpServers":{"a":{"command":"srv","args":["-v"]}}})");
}

TEST(Wrap, WrappedEntryWithoutCommandAfterDashesIsSkipped) {
    std::string in = R"({"mcpServers":{"a":{"command":"mcpwarden","args":["run","--name","a"]}}})";
    auto rw = rewrite_text(in, Format::Json, Layout::McpServers, Scope::User, Action::Unwrap,
                           {"/usr/bin/mcpwarden", std::nullopt});
    ASSERT_TRUE(rw.ok());
    EXPECT_FALSE(rw->changed);
    ASSERT_EQ(rw->entries.size(), 1u);
    EXPECT_EQ(rw->entries[0].outcome, Outcome::Skipped);
}

TEST(Wrap, DetectsWrappedEntries) {
    ServerEntry e;
    e.program.value = "/home/u/.local/bin/mcpwarden";
    e.args = {{{}, "run"}, {{}, "--name"}, {{}, "x"}, {{}, "--"}, {{}, "npx"}, {{}, "-y"}};
    EXPECT_TRUE(is_wrapped(e));
    auto inner = inner_command(e);
    ASSERT_TRUE(inner);
    EXPECT_EQ(inner->command, "npx");
    EXPECT_EQ(inner->args, std::vector<std::string>{"-y"});
    e.program.value = "/usr/bin/npx";
    EXPECT_FALSE(is_wrapped(e));
    EXPECT_TRUE(is_wrapped(e, "/usr/bin/npx"));  // our own path, whatever its name
    e.program.value = "mcpwarden";
    e.args[0].value = "ps";
    EXPECT_FALSE(is_wrapped(e));
}

TEST(Wrap, MalformedTextIsAnErrorWithPosition) {
    auto rw = rewrite_text("{\n  \"mcpServers\": {\n    \"a\": {}\n    \"b\": {}\n  }\n}",
                           Format::Json, Layout::McpServers, Scope::User, Action::Wrap,
                           {"/usr/bin/mcpwarden", std::nullopt});
    ASSERT_FALSE(rw.ok());
    EXPECT_EQ(rw.error().message, "4:5: expected ',' or '}'");
}

}  // namespace
}  // namespace warden::clients
