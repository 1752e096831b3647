// Two questions wrap asks before it writes: is the program it is about to put into a
// client's config really an mcpwarden that runs, and is the file it is about to edit under
// version control?
//
// A wrapped entry that points at a path which is not an executable mcpwarden takes the
// server down: the client fails to start it and says little more than "connection closed".
// So the path is run (`PATH --version`, bounded in time) and must answer as mcpwarden;
// `clients --check` asks the same of every wrapped entry later, when a package upgrade or a
// moved build tree may have removed the binary.
//
// A project config that is committed to a repository is shared with everyone who clones it;
// wrapping it writes this machine's absolute path into it. That is allowed (the user asked
// for it with --project or an explicit path) but never silently.
#pragma once

#include <optional>
#include <string>

#include "sys/result.hpp"

namespace warden::clients {

// Ok when `path` is absolute, a regular executable file, and `path --version` prints a
// first line starting with "mcpwarden ". The error names the path and what is wrong:
// "/opt/x/mcpwarden: No such file or directory", "/bin/true is not mcpwarden: `/bin/true
// --version` printed nothing".
Status check_mcpwarden_program(const std::string& path);

// When `path` lies inside a version-controlled tree: a sentence saying so, e.g.
// "tracked by git (repository /src/shop)" or "inside a Mercurial working copy (/src/x)".
// A git work tree is asked whether the file is tracked (`git ls-files`); a file git does
// not track gives nullopt. Without git installed, being inside the work tree is enough.
std::optional<std::string> version_control_of(const std::string& path);

}  // namespace warden::clients
