// Where `demo` and `drill` keep their journal when the user names none: a fresh directory
// $TMPDIR/mcpwarden-<what>-XXXXXX (mode 0700, from mkdtemp) holding journal.db, so that a
// practice run never writes into the user's real journal.
#pragma once

#include <stdlib.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace warden::cli {

// The journal path inside the new directory, or "" when it cannot be created.
inline std::string temp_journal(const char* what) {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/mcpwarden-" + what + "-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!::mkdtemp(buf.data())) return {};
    return std::string(buf.data()) + "/journal.db";
}

}  // namespace warden::cli
