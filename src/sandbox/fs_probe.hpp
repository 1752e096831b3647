// Small questions the sandbox asks of paths while it makes a plan: does it exist, is it a
// directory or a regular file, what are its parent and its last component. Each a stat or a
// string operation, shared by the plan (sandbox.cpp), the launchers (launcher.cpp) and the
// commands found inside a command line (command_line.cpp).
#pragma once

#include <sys/stat.h>

#include <string>

namespace warden::sandbox::fs_probe {

inline bool exists(const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0;
}

inline bool is_dir(const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

inline bool is_file(const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

inline std::string parent_of(const std::string& p) {
    auto slash = p.rfind('/');
    if (slash == std::string::npos) return ".";
    return slash == 0 ? "/" : p.substr(0, slash);
}

inline std::string base_of(const std::string& p) {
    auto slash = p.rfind('/');
    return slash == std::string::npos ? p : p.substr(slash + 1);
}

// `p` made absolute against `cwd` (no symbolic link resolved).
inline std::string absolute(const std::string& p, const std::string& cwd) {
    return p.empty() || p[0] == '/' ? p : cwd + "/" + p;
}

}  // namespace warden::sandbox::fs_probe
