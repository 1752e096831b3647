#include "sys/exec_path.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace warden {

namespace {

bool is_executable_file(const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}

}  // namespace

Result<std::string> find_executable(const std::string& argv0) {
    if (argv0.empty()) return Error{"cannot run '': empty command", ENOENT};
    if (argv0.find('/') != std::string::npos) {
        if (::access(argv0.c_str(), F_OK) != 0)
            return Error{"cannot run '" + argv0 + "': " + std::strerror(errno), errno};
        if (!is_executable_file(argv0))
            return Error{"cannot run '" + argv0 + "': not an executable file", EACCES};
        return argv0;
    }
    const char* path = std::getenv("PATH");
    std::string_view dirs = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
    while (true) {
        auto colon = dirs.find(':');
        std::string dir(dirs.substr(0, colon));
        std::string cand = (dir.empty() ? std::string(".") : dir) + "/" + argv0;
        if (is_executable_file(cand)) return cand;
        if (colon == std::string_view::npos) break;
        dirs.remove_prefix(colon + 1);
    }
    return Error{"cannot run '" + argv0 + "': command not found", ENOENT};
}

Result<std::string> self_executable() {
    char buf[PATH_MAX];
    ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf);
    if (n < 0) return Error::sys("readlink", "/proc/self/exe", errno);
    if (static_cast<size_t>(n) == sizeof buf)
        return Error{"readlink(/proc/self/exe): longer than PATH_MAX", ENAMETOOLONG};
    return std::string(buf, static_cast<size_t>(n));
}

}  // namespace warden
