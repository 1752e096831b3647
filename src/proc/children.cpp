#include "proc/children.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "sys/fd.hpp"

namespace warden {

bool proc_children_supported() {
    static const bool supported = [] {
        std::string path = "/proc/self/task/" + std::to_string(::getpid()) + "/children";
        return ::access(path.c_str(), R_OK) == 0;
    }();
    return supported;
}

std::vector<pid_t> read_children(pid_t pid) {
    std::vector<pid_t> out;
    const std::string task = "/proc/" + std::to_string(pid) + "/task";
    int dfd = ::open(task.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return out;
    DIR* d = ::fdopendir(dfd);
    if (!d) {
        ::close(dfd);
        return out;
    }
    std::string name;
    while (dirent* e = ::readdir(d)) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        name.assign(e->d_name).append("/children");
        auto text = read_file_at(::dirfd(d), name.c_str(), "children");
        if (!text) continue;  // the thread ended meanwhile
        append_children(*text, out);
    }
    ::closedir(d);
    return out;
}

void append_children(const std::string& text, std::vector<pid_t>& out) {
    const char* p = text.c_str();
    for (;;) {
        char* end = nullptr;
        long v = std::strtol(p, &end, 10);
        if (end == p) break;
        out.push_back(static_cast<pid_t>(v));
        p = end;
    }
}

}  // namespace warden
