// One path a confined server may reach, and why the profile gives it.
#pragma once

#include <string>

namespace warden::sandbox {

struct PathRule {
    std::string path;
    bool write = false;
    std::string why;  // "system", "command", "argument", "cache", "private tmp", "--allow-read" …
};

}  // namespace warden::sandbox
