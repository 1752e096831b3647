// src/cli — the `mcpwarden` command line.
//
// main() plus one file per subcommand. Each subcommand file registers itself with a
// static `Command` object whose `setup` adds a CLI11 subcommand with its options and
// returns that subcommand and the function that runs it once parsed (returning the
// process exit code). Files add commands without touching main.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

namespace warden::cli {

struct Bound {
    CLI::App* sub;
    std::function<int()> run;
};

// The subcommand of `app` named `name`, or nullptr (CLI11's get_subcommand throws).
inline CLI::App* find_subcommand(CLI::App& app, const std::string& name) {
    for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
        if (sub->get_name() == name) return sub;
    return nullptr;
}

struct Command {
    using Setup = std::function<Bound(CLI::App& app)>;
    // `order` places the subcommand in --help (lower first).
    Command(int order, Setup setup);
};

}  // namespace warden::cli
