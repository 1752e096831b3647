// Package launchers: `npx`, `npm exec`, `uvx`, `uv tool run`, `pipx run`, `bunx`, `pnpm dlx`,
// `yarn dlx`. The commonest server configuration there is names no server at all, only a
// launcher and a package: the launcher resolves the package against its registry, installs
// it into a cache of its own when it is not there, and runs it.
//
// Confined, that breaks in two ways unless the plan knows the launcher. The cache is beneath
// the home directory, which no profile opens: the launcher needs it read (what is installed)
// and written (its index, its logs, what it installs). And the registry is across a network
// the profile closes: npm, asked to resolve a package it has, still asks the registry first,
// and on a refused connection retries for a minute before it gives up — a server the client
// sees hang, then time out, with nothing said.
//
// So a launcher gets its cache (and the configuration it reads) as path rules, and the
// launcher's own switch to work from its cache alone (npm_config_offline=true, UV_OFFLINE=1,
// …) in its environment: with the package cached it does the work it does unconfined and
// tries no network at all. Whether the package is cached is answered here,
// before the start, where the launcher's layout lets it be answered (npx: an install in
// ~/.npm/_npx for exactly these packages; bunx: the package in bun's cache); where it cannot
// (`cached` unset), the launcher runs offline and fails at once by itself when the package is
// missing. A package known to be missing is refused before anything runs, with a message that
// names it and the one flag that lets the launcher fetch it, --allow-fetch.
//
// What the cache holds is code the sandbox runs: a package written there by an earlier
// unconfined run (or by any process of the user's) is trusted as the user's own install is.
// docs/SANDBOX.md says so.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sandbox/path_rule.hpp"

namespace warden::sandbox {

struct Launcher {
    std::string name;                   // as a user says it: "npx", "npm exec", "uv tool run" …
    std::vector<std::string> packages;  // what it runs, as given ("@scope/server@1.2")
    std::vector<PathRule> paths;        // its cache (written) and configuration (read)
    std::vector<std::string> offline_env;  // KEY=VALUE: work from the cache alone
    std::vector<std::string> home_env;     // KEY=VALUE: the cache is where its rule is (always)
    std::string cache;                     // where the packages are kept, for messages
    std::optional<bool> cached;            // every package there; unset: cannot be told
};

// The launcher that `argv` runs (argv[0] by its base name, then its subcommand), with the
// paths beneath `home` it uses; nullopt for any other command. `cwd` is where npx looks for a
// project's own node_modules first.
std::optional<Launcher> launcher_of(const std::vector<std::string>& argv, const std::string& home,
                                    const std::string& cwd);

// The package name of a spec: "@scope/name@^1" → "@scope/name", "pkg==1.0" → "pkg".
std::string package_name(const std::string& spec);

}  // namespace warden::sandbox
