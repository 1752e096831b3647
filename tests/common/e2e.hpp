// The npm peers of the e2e tests (tests/e2e: the official SDK client, server-everything,
// server-filesystem), installed by scripts/deps.sh with `npm ci`.
#pragma once

#include <sys/stat.h>

#include <string>

#include "common/paths.hpp"

namespace warden::testing {

inline std::string e2e_dir() {
    return std::string(kSourceDir) + "/tests/e2e";
}

// node and tests/e2e/node_modules are there (the e2e tests skip without them).
inline bool have_node_modules() {
    struct stat st;
    return ::stat((e2e_dir() + "/node_modules/@modelcontextprotocol/sdk").c_str(), &st) == 0 &&
           ::stat("/usr/bin/node", &st) == 0;
}

}  // namespace warden::testing
