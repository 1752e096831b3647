// `mcpwarden help [COMMAND [SUBCOMMAND]]`: the text of `mcpwarden COMMAND [SUBCOMMAND] --help`,
// for the user who types the word first, as git and go take it.
#include <cstdio>
#include <string>
#include <vector>

#include "command.hpp"

namespace warden::cli {
namespace {

int help_main(CLI::App& app, const std::vector<std::string>& topic) {
    CLI::App* at = &app;
    std::string parents;  // "mcpwarden config": what the usage line names before `at`
    for (const std::string& word : topic) {
        CLI::App* next = find_subcommand(*at, word);
        if (!next || word == "help") {
            std::string names;
            for (const CLI::App* s :
                 at->get_subcommands([](CLI::App* c) { return c->get_name() != "help"; }))
                names += (names.empty() ? "" : ", ") + s->get_name();
            const std::string where = parents.empty() ? "" : " of '" + at->get_name() + "'";
            std::fprintf(stderr, "mcpwarden help: '%s' is no command%s (%s: %s)\n", word.c_str(),
                         where.c_str(), parents.empty() ? "commands" : "expected", names.c_str());
            return 2;
        }
        parents += (parents.empty() ? "" : " ") + at->get_name();
        at = next;
    }
    // The formatter, not at->help(): that would print the help of `help`, the subcommand
    // this parse selected.
    const std::string name = parents.empty() ? at->get_name() : parents + " " + at->get_name();
    std::fputs(at->get_formatter()->make_help(at, name, CLI::AppFormatMode::Normal).c_str(),
               stdout);
    return 0;
}

const Command help_cmd(1001, [](CLI::App& app) {
    static std::vector<std::string> topic;
    auto* sub = app.add_subcommand(
        "help", "Print the help of a command: `mcpwarden help run` is `mcpwarden run --help`");
    sub->add_option("topic", topic, "A command, and one of its subcommands (help config show)")
        ->expected(-1);
    return Bound{sub, [&app] { return help_main(app, topic); }};
});

}  // namespace
}  // namespace warden::cli
