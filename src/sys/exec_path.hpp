// PATH lookup as execvp does it, done before a fork so that "not found" is an ordinary Error
// (execvp may allocate; the child of a raw clone3 must not), and so that the sandbox can
// allow the command's own installation before the command runs.
#pragma once

#include <string>

#include "sys/result.hpp"

namespace warden {

// argv0 as given when it has a '/', else the first executable regular file of that name in
// $PATH (default /usr/local/bin:/usr/bin:/bin). Errors: ENOENT "cannot run 'foo': command not
// found"; EACCES "cannot run './x': not an executable file".
Result<std::string> find_executable(const std::string& argv0);

// The absolute path of this process's executable (/proc/self/exe). Error:
// "readlink(/proc/self/exe): No such file or directory".
Result<std::string> self_executable();

}  // namespace warden
