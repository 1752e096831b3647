// --journal PATH of the commands that read the journal: an empty path is a mistake (an unset
// variable in a script), never a request for the default journal.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace warden::cli {

inline CLI::Validator journal_path_given() {
    return CLI::Validator(
        [](std::string& v) -> std::string {
            return v.empty() ? "empty path (leave --journal out for the default journal)" : "";
        },
        "PATH");
}

}  // namespace warden::cli
