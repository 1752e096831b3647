// The examples of docs/*.md and README.md, as a reader would copy them: every ```toml block
// is a settings file that `config check` accepts and that `run` would use for each of its
// sections (a sandbox option without a profile is refused there), and every `mcpwarden …`
// command line parses. A doc that drifts from the code fails here, not in a user's hands.
//
// What counts as a command line: a `code span` or a line of a fenced block that starts with
// `mcpwarden` and a word of `mcpwarden --help`'s commands (or an option), and is not a
// synopsis: no `[`, `]`, `|`, `<`, `>`, `…` or `...` in it. `mcpwarden reap: …` (a message)
// is not one, nor is a command's name alone (`mcpwarden config`, `mcpwarden run`). In a
// block that is a transcript (lines prompted with "$ "), only the prompted lines count. The command
// lines are parsed with MCPWARDEN_PARSE_ONLY=1 (src/cli/main.cpp): nothing runs, every usage error
// the parser finds is found. The placeholder PID stands for a number. How a doc marks its
// exceptions, with an HTML comment a reader does not see:
//   `mcpwarden run node s.js --port 3`<!-- docs-check: refused -->  an example of a refused
//       command line: it must be refused (exit 2);
//   <!-- docs-check: skip --> on the line before a fence: the block is not checked (output
//       that starts with `mcpwarden`, a settings file shown broken on purpose).
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/cli_run.hpp"
#include "common/testing.hpp"

namespace warden::testing {
namespace {

struct DocFile {
    std::string name;  // "docs/SANDBOX.md"
    std::string text;
};

std::vector<DocFile> doc_files() {
    std::vector<DocFile> out;
    const std::filesystem::path root = WARDEN_SOURCE_DIR;
    std::vector<std::filesystem::path> paths{root / "README.md"};
    for (const auto& e : std::filesystem::directory_iterator(root / "docs"))
        if (e.path().extension() == ".md") paths.push_back(e.path());
    std::sort(paths.begin(), paths.end());
    for (const auto& p : paths) {
        std::ifstream in(p);
        std::stringstream ss;
        ss << in.rdbuf();
        out.push_back({std::filesystem::relative(p, root).string(), ss.str()});
    }
    return out;
}

constexpr std::string_view kSkip = "<!-- docs-check: skip -->";
constexpr std::string_view kRefused = "<!-- docs-check: refused -->";

struct Fence {
    std::string lang, body;
    int line = 0;  // of the opening fence
    bool skipped = false;
};

// The fenced blocks of a Markdown text, and the text with each block blanked (its lines kept,
// so that code spans are found only in prose).
std::vector<Fence> fences(const std::string& text, std::string& prose) {
    std::vector<Fence> out;
    std::istringstream in(text);
    std::string line, previous;
    std::optional<Fence> open;
    for (int n = 1; std::getline(in, line); ++n) {
        const size_t start = line.find_first_not_of(' ');
        const bool fence = start != std::string::npos && line.compare(start, 3, "```") == 0;
        if (fence && !open) {
            open = Fence{line.substr(start + 3), {}, n, previous.find(kSkip) != std::string::npos};
            prose += "\n";
        } else if (fence) {
            out.push_back(std::move(*open));
            open.reset();
            prose += "\n";
        } else if (open) {
            open->body += line + "\n";
            prose += "\n";
        } else {
            prose += line + "\n";
        }
        previous = line;
    }
    return out;
}

// The commands `mcpwarden --help` lists.
std::set<std::string> command_names(const TempDir& dir) {
    CliRun help = run_cli(dir, {"--help"}, 30s);
    EXPECT_EQ(help.code, 0) << help.err;
    std::set<std::string> out;
    std::istringstream in(help.out.substr(help.out.find("Subcommands:")));
    std::string line;
    std::getline(in, line);
    while (std::getline(in, line)) {
        std::istringstream words(line);
        std::string w;
        if (words >> w) out.insert(w);
    }
    return out;
}

// The words of a command line as a POSIX shell splits them (quotes, no expansion); a
// trailing `# comment` dropped.
std::vector<std::string> shell_words(const std::string& line) {
    std::vector<std::string> out;
    std::string word;
    bool in_word = false;
    char quote = 0;
    for (char c : line) {
        if (quote) {
            if (c == quote)
                quote = 0;
            else
                word += c;
        } else if (c == '\'' || c == '"') {
            quote = c;
            in_word = true;
        } else if (c == ' ' || c == '\t') {
            if (in_word) out.push_back(word);
            word.clear();
            in_word = false;
        } else if (c == '#' && !in_word) {
            break;
        } else {
            word += c;
            in_word = true;
        }
    }
    if (in_word) out.push_back(word);
    return out;
}

struct Example {
    std::string where;  // "docs/RUN.md:28"
    std::vector<std::string> args;
    bool refused = false;
};

bool is_synopsis(const std::string& s) {
    return s.find_first_of("[]|<>") != std::string::npos || s.find("…") != std::string::npos ||
           s.find("...") != std::string::npos;
}

// `text` is "mcpwarden WORDS…" on one line: the example, when it is a command line.
std::optional<Example> example(const std::string& where, const std::string& text,
                               const std::set<std::string>& commands) {
    if (is_synopsis(text)) return std::nullopt;
    std::vector<std::string> words = shell_words(text);
    if (words.size() < 2 || words[0] != "mcpwarden") return std::nullopt;
    // `mcpwarden config` alone names the command; `mcpwarden --version` is a command line.
    if (words[1][0] != '-' && (!commands.count(words[1]) || words.size() < 3)) return std::nullopt;
    Example e{where, {words.begin() + 1, words.end()}, false};
    for (std::string& w : e.args)
        if (w == "PID") w = "4711";
    return e;
}

int line_of(const std::string& text, size_t offset) {
    return 1 + static_cast<int>(std::count(text.begin(), text.begin() + offset, '\n'));
}

std::vector<Example> command_examples(const std::vector<DocFile>& docs,
                                      const std::set<std::string>& commands) {
    std::vector<Example> out;
    const std::regex span("`(mcpwarden [^`]+)`");
    for (const DocFile& d : docs) {
        std::string prose;
        for (const Fence& f : fences(d.text, prose)) {
            if (f.skipped || f.lang == "toml" || f.lang == "json") continue;
            // A transcript (some line starts with "$ "): its commands are the prompted lines,
            // the others are output.
            const bool transcript =
                f.body.rfind("$ ", 0) == 0 || f.body.find("\n$ ") != std::string::npos;
            std::istringstream in(f.body);
            std::string line;
            for (int n = f.line + 1; std::getline(in, line); ++n) {
                std::string s = line.substr(std::min(line.find_first_not_of(' '), line.size()));
                if (s.rfind("$ ", 0) == 0)
                    s = s.substr(2);
                else if (transcript)
                    continue;
                if (auto e = example(d.name + ":" + std::to_string(n), s, commands))
                    out.push_back(std::move(*e));
            }
        }
        for (auto it = std::sregex_iterator(prose.begin(), prose.end(), span);
             it != std::sregex_iterator(); ++it) {
            std::string s = (*it)[1].str();
            std::replace(s.begin(), s.end(), '\n', ' ');
            const size_t end = static_cast<size_t>(it->position(0) + it->length(0));
            const std::string where =
                d.name + ":" + std::to_string(line_of(prose, static_cast<size_t>(it->position(0))));
            if (auto e = example(where, s, commands)) {
                e->refused = prose.compare(end, kRefused.size(), kRefused) == 0;
                out.push_back(std::move(*e));
            }
        }
    }
    return out;
}

std::string joined(const std::vector<std::string>& words) {
    std::string out = "mcpwarden";
    for (const std::string& w : words)
        out += " " + w;
    return out;
}

TEST(DocsExamples, EveryCommandLineInTheDocsParses) {
    TempDir dir;
    const std::set<std::string> commands = command_names(dir);
    ASSERT_TRUE(commands.count("run") && commands.count("config")) << "no commands in --help";
    const std::vector<Example> examples = command_examples(doc_files(), commands);
    // The docs hold many: a parser that found none would pass by checking nothing.
    ASSERT_GT(examples.size(), 50u);
    std::set<std::string> seen;
    int refused = 0;
    for (const Example& e : examples) {
        if (!seen.insert(joined(e.args) + (e.refused ? " (refused)" : "")).second) continue;
        CliRun r = run_cli(dir, e.args, 30s, {{"MCPWARDEN_PARSE_ONLY", "1"}});
        if (e.refused) {
            ++refused;
            EXPECT_EQ(r.code, 2) << e.where << ": `" << joined(e.args)
                                 << "` is shown as refused, and parses";
        } else {
            EXPECT_EQ(r.code, 0) << e.where << ": `" << joined(e.args)
                                 << "` does not parse: " << r.err;
        }
    }
    // The negative control: RUN.md's example of an option after the server's command, which
    // is refused, so a parse-only run does tell a bad command line from a good one.
    EXPECT_GE(refused, 1) << "docs/RUN.md's refused example was not found";
}

// Every ```toml block, as a user's settings file: `config check` finds no problem, and for
// each of its [server.NAME] sections (and [run] alone) `config show`, which merges as `run`
// does, accepts what `run` would start with.
std::vector<std::string> problems_of(const std::string& toml, const TempDir& dir,
                                     const std::string& where) {
    std::filesystem::create_directories(dir.file("cfg/mcpwarden"));
    std::ofstream(dir.file("cfg/mcpwarden/config.toml")) << toml;
    const std::vector<std::pair<std::string, std::string>> env = {
        {"XDG_CONFIG_HOME", dir.file("cfg")}};
    CliRun check = run_cli(dir, {"config", "check"}, 30s, env);
    if (check.code != 0) return {where + ": config check: " + check.err};
    std::vector<std::string> out;
    std::vector<std::string> names{""};
    const std::regex section(R"(^\[server\.([A-Za-z0-9_-]+)\])");
    std::istringstream in(toml);
    std::string line;
    while (std::getline(in, line))
        if (std::smatch m; std::regex_search(line, m, section)) names.push_back(m[1]);
    for (const std::string& name : names) {
        std::vector<std::string> args = {"config", "show"};
        if (!name.empty()) args.insert(args.end(), {"--name", name});
        CliRun show = run_cli(dir, args, 30s, env);
        if (show.code != 0)
            out.push_back(where + " [server." + name + "]: config show: " + show.err);
    }
    return out;
}

TEST(DocsExamples, EveryTomlBlockInTheDocsIsASettingsFileRunAccepts) {
    TempDir dir;
    int blocks = 0;
    for (const DocFile& d : doc_files()) {
        std::string prose;
        for (const Fence& f : fences(d.text, prose)) {
            if (f.lang != "toml" || f.skipped) continue;
            ++blocks;
            for (const std::string& p :
                 problems_of(f.body, dir, d.name + ":" + std::to_string(f.line)))
                ADD_FAILURE() << p;
        }
    }
    EXPECT_GE(blocks, 2) << "SETTINGS.md and SANDBOX.md each hold one";

    // The negative control: SANDBOX.md's example as it was (underscored keys, a port as an
    // integer) is rejected, and one sandbox list without a profile is refused by `run`.
    EXPECT_FALSE(
        problems_of("[server.github]\nsandbox = \"strict\"\nallow_connect = [443]\n", dir, "old")
            .empty());
    auto without = problems_of("[server.github]\nallow-connect = [\"443\"]\n", dir, "no profile");
    ASSERT_EQ(without.size(), 1u);
    EXPECT_NE(without[0].find(":2: allow-connect needs a sandbox profile, and none is set"),
              std::string::npos)
        << without[0];
}

}  // namespace
}  // namespace warden::testing
