#include "common/procfs.hpp"
#include "common/util.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "sys/fd.hpp"

namespace warden::testing {

namespace {

std::optional<ProcStat> parse_stat(const std::string& path, pid_t pid) {
    auto text = read_file(path);
    if (!text.ok()) return std::nullopt;
    const std::string& s = *text;
    auto open = s.find('(');
    auto close = s.rfind(')');
    if (open == std::string::npos || close == std::string::npos || close < open)
        return std::nullopt;
    ProcStat st;
    st.pid = pid;
    st.comm = s.substr(open + 1, close - open - 1);
    // After ") ": field 3 (state) onwards.
    std::istringstream in(s.substr(close + 1));
    std::vector<std::string> f;
    for (std::string tok; in >> tok;)
        f.push_back(tok);
    if (f.size() < 20) return std::nullopt;
    st.state = f[0].empty() ? '?' : f[0][0];                    // field 3
    st.ppid = static_cast<pid_t>(std::atoi(f[1].c_str()));      // field 4
    st.pgid = static_cast<pid_t>(std::atoi(f[2].c_str()));      // field 5
    st.sid = static_cast<pid_t>(std::atoi(f[3].c_str()));       // field 6
    st.cpu_ticks = std::strtoull(f[11].c_str(), nullptr, 10) +  // field 14
                   std::strtoull(f[12].c_str(), nullptr, 10);   // field 15
    st.nice = std::atoi(f[16].c_str());                         // field 19
    st.starttime = std::strtoull(f[19].c_str(), nullptr, 10);   // field 22
    return st;
}

}  // namespace

std::optional<ProcStat> read_stat(pid_t pid) {
    return parse_stat("/proc/" + std::to_string(pid) + "/stat", pid);
}

namespace {

// The /proc/PID/task/TID directory of `pid`'s thread named `name`, if it has one now.
std::optional<std::string> thread_dir(pid_t pid, std::string_view name) {
    const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
    DIR* d = ::opendir(tasks.c_str());
    if (!d) return std::nullopt;
    std::optional<std::string> found;
    while (auto* e = ::readdir(d)) {
        if (e->d_name[0] == '.') continue;
        const std::string dir = tasks + "/" + e->d_name;
        auto st = parse_stat(dir + "/stat", pid);
        if (st && st->comm == name) {
            found = dir;
            break;
        }
    }
    ::closedir(d);
    return found;
}

std::string cpus_allowed_in(const std::string& status) {
    std::ifstream in(status);
    for (std::string line; std::getline(in, line);)
        if (line.rfind("Cpus_allowed_list:", 0) == 0) {
            auto from = line.find_first_not_of(" \t", 18);
            return from == std::string::npos ? "" : line.substr(from);
        }
    return "";
}

// The /proc/PID/task/TID/stat of `pid`'s thread named `name`, if it has one now.
std::optional<ProcStat> thread_stat(pid_t pid, std::string_view name) {
    auto dir = thread_dir(pid, name);
    return dir ? parse_stat(*dir + "/stat", pid) : std::nullopt;
}

}  // namespace

std::optional<int> thread_nice(pid_t pid, std::string_view name) {
    auto st = thread_stat(pid, name);
    return st ? std::optional<int>(st->nice) : std::nullopt;
}

std::optional<uint64_t> thread_cpu_ticks(pid_t pid, std::string_view name) {
    auto st = thread_stat(pid, name);
    return st ? std::optional<uint64_t>(st->cpu_ticks) : std::nullopt;
}

std::string cpus_allowed(pid_t pid) {
    return cpus_allowed_in("/proc/" + std::to_string(pid) + "/status");
}

std::string thread_cpus_allowed(pid_t pid, std::string_view name) {
    auto dir = thread_dir(pid, name);
    return dir ? cpus_allowed_in(*dir + "/status") : "";
}

bool is_zombie_state(char state) {
    return state == 'Z' || state == 'X';
}

bool is_live(pid_t pid) {
    auto st = read_stat(pid);
    return st && !is_zombie_state(st->state);
}

bool is_same_live_process(pid_t pid, uint64_t starttime) {
    auto st = read_stat(pid);
    return st && st->starttime == starttime && !is_zombie_state(st->state);
}

std::vector<pid_t> list_pids() {
    std::vector<pid_t> pids;
    DIR* d = ::opendir("/proc");
    if (!d) return pids;
    while (auto* e = ::readdir(d)) {
        char* end = nullptr;
        long v = std::strtol(e->d_name, &end, 10);
        if (*e->d_name && *end == '\0' && v > 0) pids.push_back(static_cast<pid_t>(v));
    }
    ::closedir(d);
    return pids;
}

std::optional<std::string> env_value(pid_t pid, std::string_view name) {
    auto text = read_file("/proc/" + std::to_string(pid) + "/environ");
    if (!text.ok()) return std::nullopt;
    std::string_view all = *text;
    while (!all.empty()) {
        auto nul = all.find('\0');
        std::string_view entry = all.substr(0, nul);
        if (entry.size() > name.size() && entry.substr(0, name.size()) == name &&
            entry[name.size()] == '=')
            return std::string(entry.substr(name.size() + 1));
        if (nul == std::string_view::npos) break;
        all.remove_prefix(nul + 1);
    }
    return std::nullopt;
}

std::optional<uint64_t> status_mask(pid_t pid, std::string_view field) {
    auto text = read_file("/proc/" + std::to_string(pid) + "/status");
    if (!text.ok()) return std::nullopt;
    std::istringstream in(*text);
    for (std::string line; std::getline(in, line);) {
        if (line.size() > field.size() && line.compare(0, field.size(), field) == 0 &&
            line[field.size()] == ':')
            return std::strtoull(line.c_str() + field.size() + 1, nullptr, 16);
    }
    return std::nullopt;
}

namespace {

std::map<pid_t, ProcStat> scan() {
    std::map<pid_t, ProcStat> all;
    for (pid_t p : list_pids())
        if (auto st = read_stat(p)) all.emplace(p, *st);
    return all;
}

}  // namespace

std::vector<pid_t> children_of(pid_t pid) {
    auto all = scan();
    auto parent = all.find(pid);
    std::vector<pid_t> out;
    if (parent == all.end()) return out;
    for (const auto& [p, st] : all)
        if (st.ppid == pid && st.starttime >= parent->second.starttime) out.push_back(p);
    return out;
}

std::vector<pid_t> descendants_of(pid_t pid) {
    auto all = scan();
    std::multimap<pid_t, pid_t> kids;
    for (const auto& [p, st] : all)
        kids.emplace(st.ppid, p);
    std::vector<pid_t> out;
    std::vector<pid_t> todo{pid};
    while (!todo.empty() && out.size() < 100000) {
        pid_t cur = todo.back();
        todo.pop_back();
        auto cur_it = all.find(cur);
        if (cur_it == all.end()) continue;
        auto [b, e] = kids.equal_range(cur);
        for (auto it = b; it != e; ++it) {
            if (it->second == cur) continue;
            if (all.at(it->second).starttime < cur_it->second.starttime) continue;
            out.push_back(it->second);
            todo.push_back(it->second);
        }
    }
    return out;
}

std::vector<pid_t> live_tagged(const std::string& tag) {
    std::vector<pid_t> out;
    if (tag.empty()) return out;
    for (pid_t p : list_pids()) {
        auto v = env_value(p, kTagVar);
        if (v && *v == tag && is_live(p)) out.push_back(p);
    }
    return out;
}

std::vector<pid_t> live_tagged_below(const std::string& tag, pid_t root) {
    std::vector<pid_t> out;
    for (pid_t p : live_tagged(tag)) {
        pid_t up = p;
        for (int depth = 0; up > 1 && up != root && depth < 64; ++depth) {
            auto s = read_stat(up);
            up = s ? s->ppid : 0;
        }
        if (up != root) continue;
        if (auto s = read_stat(p); s && s->comm == "mcpwarden-sweep") continue;
        out.push_back(p);
    }
    return out;
}

bool nothing_tagged_left(const std::string& tag) {
    for (pid_t p : live_tagged(tag))
        if (auto s = read_stat(p); s && s->comm != "mcpwarden-sweep") return false;
    return wait_until([&] { return live_tagged(tag).empty(); }, std::chrono::seconds(5));
}

std::vector<uint64_t> listening_inodes(uint16_t port) {
    std::vector<uint64_t> out;
    for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
        auto text = read_file(table);
        if (!text.ok()) continue;
        std::istringstream in(*text);
        std::string line;
        std::getline(in, line);  // header
        while (std::getline(in, line)) {
            // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
            std::istringstream f(line);
            std::string sl, local, remote, state, txrx, trwhen, retr, uid, timeout;
            uint64_t inode = 0;
            if (!(f >> sl >> local >> remote >> state >> txrx >> trwhen >> retr >> uid >> timeout >>
                  inode))
                continue;
            auto colon = local.rfind(':');
            if (colon == std::string::npos) continue;
            auto p = std::strtoul(local.c_str() + colon + 1, nullptr, 16);
            if (p == port && state == "0A") out.push_back(inode);
        }
    }
    return out;
}

int open_descriptors(pid_t pid) {
    std::string dir = "/proc/" + std::to_string(pid) + "/fd";
    DIR* d = ::opendir(dir.c_str());
    if (!d) return -1;
    int n = 0;
    while (auto* e = ::readdir(d))
        if (e->d_name[0] != '.') ++n;
    ::closedir(d);
    return pid == ::getpid() ? n - 1 : n;  // our listing's own descriptor is not counted
}

bool holds_socket(pid_t pid, uint64_t inode) {
    std::string dir = "/proc/" + std::to_string(pid) + "/fd";
    DIR* d = ::opendir(dir.c_str());
    if (!d) return false;
    std::string want = "socket:[" + std::to_string(inode) + "]";
    bool found = false;
    while (auto* e = ::readdir(d)) {
        if (e->d_name[0] == '.') continue;
        char buf[128];
        ssize_t n = ::readlinkat(::dirfd(d), e->d_name, buf, sizeof buf);
        if (n > 0 && std::string_view(buf, static_cast<size_t>(n)) == want) {
            found = true;
            break;
        }
    }
    ::closedir(d);
    return found;
}

std::string cgroup_of(pid_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/cgroup");
    for (std::string line; std::getline(f, line);)
        if (line.starts_with("0::")) return line.substr(3);
    return {};
}

namespace {

// Calls `f` with each cgroup2 mount point.
void for_each_cgroup2_mount(const std::function<void(const std::string&)>& f) {
    std::ifstream mounts("/proc/self/mounts");
    for (std::string dev, dir, type, rest;
         mounts >> dev >> dir >> type && std::getline(mounts, rest);)
        if (type == "cgroup2") f(dir);
}

std::string session_of_payload(const std::string& payload) {
    return payload.substr(0, payload.rfind('/'));
}

}  // namespace

bool remove_session_cgroup(const std::string& payload) {
    if (payload.find("/mcpwarden-") == std::string::npos) return true;
    bool gone = true;
    for_each_cgroup2_mount([&](const std::string& dir) {
        ::rmdir((dir + payload).c_str());
        if (::rmdir((dir + session_of_payload(payload)).c_str()) != 0 && errno != ENOENT)
            gone = false;
    });
    return gone;
}

bool session_cgroup_left(const std::string& payload) {
    bool left = false;
    for_each_cgroup2_mount([&](const std::string& dir) {
        if (::access((dir + session_of_payload(payload)).c_str(), F_OK) == 0) left = true;
    });
    return left;
}

namespace {

std::string cgroup2_mount() {
    std::ifstream mounts("/proc/self/mounts");
    for (std::string dev, dir, type, rest;
         mounts >> dev >> dir >> type && std::getline(mounts, rest);)
        if (type == "cgroup2") return dir;
    return {};
}

void list_below(const std::string& dir, const std::string& prefix, std::vector<std::string>& out) {
    DIR* d = ::opendir(dir.c_str());
    if (!d) return;
    while (dirent* e = ::readdir(d)) {
        std::string name = e->d_name;
        if (e->d_type != DT_DIR || name == "." || name == "..") continue;
        list_below(dir + "/" + name, prefix + name + "/", out);
        out.push_back(prefix + name);
    }
    ::closedir(d);
}

}  // namespace

ScratchCgroup::ScratchCgroup(const std::string& name) {
    const std::string mnt = cgroup2_mount();
    const std::string own = cgroup_of(::getpid());
    if (mnt.empty() || own.empty()) return;
    std::string path = mnt + (own == "/" ? "" : own) + "/" + name;
    if (::mkdir(path.c_str(), 0755) != 0) return;
    // Can a process join it (delegation, the no-internal-process rule)? A child tries.
    pid_t probe = ::fork();
    if (probe == 0) {
        int fd = ::open((path + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
        ::_exit(fd >= 0 && ::write(fd, "0", 1) == 1 ? 0 : 1);
    }
    int st = 0;
    if (probe > 0 && ::waitpid(probe, &st, 0) == probe && WIFEXITED(st) && WEXITSTATUS(st) == 0)
        path_ = path;
    else
        ::rmdir(path.c_str());
}

ScratchCgroup::~ScratchCgroup() {
    if (path_.empty()) return;
    // What the test killed last may still be leaving the group: bounded retries.
    for (int i = 0; i < 200; ++i) {
        for (const std::string& c : children())  // depth first: leaves before their parents
            ::rmdir((path_ + "/" + c).c_str());
        if (::rmdir(path_.c_str()) == 0 || errno != EBUSY) return;
        ::usleep(10'000);
    }
}

std::vector<std::string> ScratchCgroup::children() const {
    std::vector<std::string> out;
    if (!path_.empty()) list_below(path_, "", out);
    return out;
}

}  // namespace warden::testing
