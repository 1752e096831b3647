// mcpwarden: keeps MCP stdio servers on a leash. See README.md and `mcpwarden --help`.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "command.hpp"
#include "mcpwarden/settings.hpp"
#include "version_text.hpp"

namespace warden::cli {
namespace {
struct Registered {
    int order;
    Command::Setup setup;
};
std::vector<Registered>& registry() {
    static std::vector<Registered> r;
    return r;
}
// The names of the subcommands, in --help order.
std::vector<std::string> command_names(const std::vector<Bound>& bound) {
    std::vector<std::string> names;
    for (const Bound& b : bound)
        names.push_back(b.sub->get_name());
    return names;
}

std::string joined(const std::vector<std::string>& words) {
    std::string out;
    for (const std::string& w : words)
        out += (out.empty() ? "" : ", ") + w;
    return out;
}

// The first word must be a command (or --help/--version). CLI11 would answer both
// `mcpwarden frobnicate` and `mcpwarden --bogus` with "A subcommand is required"; this names
// the word, suggests the command it resembles, and lists them all.
std::optional<int> unknown_command(const std::vector<Bound>& bound, int argc, char** argv) {
    if (argc < 2) return std::nullopt;
    const std::string word = argv[1];
    const std::vector<std::string> names = command_names(bound);
    if (word == "-h" || word == "--help" || word == "--version" ||
        std::find(names.begin(), names.end(), word) != names.end())
        return std::nullopt;
    const bool option = word.size() > 1 && word[0] == '-';
    std::string bare =
        word.substr(word.find_first_not_of('-') == std::string::npos ? word.size()
                                                                     : word.find_first_not_of('-'));
    std::string guess = warden::api::closest_word(bare, names);
    std::string msg = option ? "mcpwarden: unknown option '" + word +
                                   "': the command comes first, its options after it "
                                   "(mcpwarden COMMAND [OPTIONS])"
                             : "mcpwarden: unknown command '" + word + "'";
    if (!guess.empty()) msg += "; did you mean 'mcpwarden " + guess + "'?";
    msg += "\ncommands: " + joined(names) + " (mcpwarden --help; mcpwarden COMMAND --help)\n";
    std::fputs(msg.c_str(), stderr);
    return 2;
}

// The same for the second word of a command that has subcommands (config, journal, audit,
// bench, …): CLI11 answers `mcpwarden config shw` as it answers `mcpwarden config`, "A
// subcommand is required". This names the word and the subcommands it could have been.
std::optional<int> unknown_subcommand(CLI::App& app, int argc, char** argv) {
    if (argc < 2) return std::nullopt;
    CLI::App* cmd = find_subcommand(app, argv[1]);
    auto every = [](CLI::App*) { return true; };
    if (!cmd || cmd->get_subcommands(every).empty()) return std::nullopt;
    std::vector<std::string> names;
    for (const CLI::App* s : cmd->get_subcommands(every))
        names.push_back(s->get_name());
    const std::string prefix = "mcpwarden " + cmd->get_name();
    const std::string expected = " (expected " + joined(names) + "; " + prefix + " --help)\n";
    if (argc < 3) {
        std::fputs((prefix + ": a subcommand is required" + expected).c_str(), stderr);
        return 2;
    }
    const std::string word = argv[2];
    if (word == "-h" || word == "--help" ||
        std::find(names.begin(), names.end(), word) != names.end())
        return std::nullopt;
    std::string msg = word.size() > 1 && word[0] == '-'
                          ? prefix + ": unknown option '" + word +
                                "': the subcommand comes first, its options after it (" + prefix +
                                " SUBCOMMAND [OPTIONS])"
                          : prefix + ": unknown subcommand '" + word + "'";
    std::string guess = warden::api::closest_word(word, names);
    msg += expected;
    if (!guess.empty())
        msg.insert(msg.size() - 1, "; did you mean '" + prefix + " " + guess + "'?");
    std::fputs(msg.c_str(), stderr);
    return 2;
}

// A word after a command's arguments that CLI11 does not know: for the commands that take a
// server's command line (run, drill, …), that word was meant for the server.
int extras_error(const std::vector<Bound>& bound, const CLI::ExtrasError& e) {
    for (const Bound& b : bound)
        if (b.sub->parsed() && b.sub->get_option_no_throw("command")) {
            const std::string name = b.sub->get_name();
            std::fprintf(stderr,
                         "mcpwarden %s: %s: mcpwarden's own options come first and the server's "
                         "command with its arguments after `--`: mcpwarden %s [OPTIONS] -- CMD "
                         "[ARGS...]\n",
                         name.c_str(), e.what(), name.c_str());
            return 2;
        }
    std::fprintf(stderr, "mcpwarden: %s (mcpwarden COMMAND --help lists its options)\n", e.what());
    return 2;
}

// CLI11 says "Could not convert: pid = abc"; a PID deserves a sentence.
int conversion_error(CLI::App& app, const CLI::ConversionError& e) {
    const std::string what = e.what();
    const size_t colon = what.find(": "), eq = what.find(" = ");
    if (colon != std::string::npos && eq != std::string::npos && eq > colon) {
        std::string name = what.substr(colon + 2, eq - colon - 2);
        name.erase(0, name.find_first_not_of('-'));
        if (name == "pid") {
            std::fprintf(stderr,
                         "mcpwarden: '%s' is not a PID: a PID is the number the kernel gives a "
                         "running process (the PID column of `mcpwarden ps`, e.g. 4711)\n",
                         what.substr(eq + 3).c_str());
            return 2;
        }
    }
    return app.exit(e) == 0 ? 0 : 2;
}

}  // namespace

Command::Command(int order, Setup setup) {
    registry().push_back({order, std::move(setup)});
}

}  // namespace warden::cli

int main(int argc, char** argv) {
    using namespace warden::cli;
    CLI::App app{"mcpwarden: keeps MCP stdio servers on a leash", "mcpwarden"};
    app.require_subcommand(1);
    app.set_version_flag("--version", version_text());

    auto& reg = registry();
    std::stable_sort(reg.begin(), reg.end(), [](auto& a, auto& b) { return a.order < b.order; });
    std::vector<Bound> bound;
    for (auto& r : reg)
        bound.push_back(r.setup(app));
    if (auto rc = unknown_command(bound, argc, argv)) return *rc;
    if (auto rc = unknown_subcommand(app, argc, argv)) return *rc;
    try {
        app.parse(argc, argv);
    } catch (const CLI::ExtrasError& e) {
        return extras_error(bound, e);
    } catch (const CLI::ConversionError& e) {
        return conversion_error(app, e);
    } catch (const CLI::ParseError& e) {
        // --help / --version exit 0; every usage error exits 2, whatever CLI11's own code.
        int code = app.exit(e);
        return code == 0 ? 0 : 2;
    }
    // MCPWARDEN_PARSE_ONLY=1: stop once the command line parsed, having run nothing. The test
    // of every command line in docs/ (tests/cli/docs_examples_test.cpp) parses examples that
    // would act on the machine or need what only the docs' reader has (a PID, a session).
    if (const char* p = std::getenv("MCPWARDEN_PARSE_ONLY"); p && std::string_view(p) == "1")
        return 0;
    for (auto& b : bound)
        if (b.sub->parsed()) return b.run();
    return 2;
}
