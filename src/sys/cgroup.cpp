#include "sys/cgroup.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <sstream>

namespace warden {
namespace {

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string unescape_mount(const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '\\' && i + 3 < s.size()) {
            int v = 0;
            bool octal = true;
            for (size_t k = 1; k <= 3; ++k) {
                char c = s[i + k];
                if (c < '0' || c > '7') octal = false;
                v = v * 8 + (c - '0');
            }
            if (octal) {
                out += static_cast<char>(v);
                i += 3;
                continue;
            }
        }
        out += s[i];
    }
    return out;
}

// "populated 1\nfrozen 0\n" → value of `key`, or -1.
int events_field(const std::string& text, std::string_view key) {
    std::istringstream in(text);
    std::string k;
    int v;
    while (in >> k >> v)
        if (k == key) return v;
    return -1;
}

}  // namespace

Result<std::string> cgroup2_mount() {
    auto text = read_file("/proc/self/mountinfo");
    if (!text) return text.error();
    std::istringstream in(*text);
    std::string line;
    while (std::getline(in, line)) {
        // id parent major:minor root mount-point options [optional...] - fstype source ...
        auto dash = line.find(" - ");
        if (dash == std::string::npos) continue;
        std::istringstream rest(line.substr(dash + 3));
        std::string fstype;
        rest >> fstype;
        if (fstype != "cgroup2") continue;
        std::istringstream head(line.substr(0, dash));
        std::string f[5];
        for (auto& s : f)
            head >> s;
        if (f[3] != "/") continue;  // a bind mount of a subtree is not the hierarchy's top
        return unescape_mount(f[4]);
    }
    return Error::msg("no cgroup2 filesystem in /proc/self/mountinfo");
}

Result<std::string> own_cgroup() {
    auto text = read_file("/proc/self/cgroup");
    if (!text) return text.error();
    std::istringstream in(*text);
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("0::", 0) == 0) return line.substr(3);
    return Error::msg("no cgroup v2 entry (0::) in /proc/self/cgroup");
}

Result<bool> Cgroup::holds(pid_t pid) const {
    static const Result<std::string> mount = cgroup2_mount();
    if (!mount) return mount.error();
    const std::string file = "/proc/" + std::to_string(pid) + "/cgroup";
    auto text = read_file(file);
    if (!text) return text.error();
    std::istringstream in(*text);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("0::", 0) != 0) continue;
        const std::string rel = line.substr(3);
        const std::string abs = rel == "/" ? *mount : *mount + rel;
        return abs == path_ || abs.starts_with(path_ + "/");
    }
    return Error::msg(file + ": no cgroup v2 entry (0::)");
}

Cgroup& Cgroup::operator=(Cgroup&& o) noexcept {
    if (this != &o) {
        if (owned_ && !path_.empty()) ::rmdir(path_.c_str());
        path_ = std::move(o.path_);
        dir_ = std::move(o.dir_);
        owned_ = std::exchange(o.owned_, false);
        o.path_.clear();
    }
    return *this;
}

Cgroup::~Cgroup() {
    // Best effort: a group still holding processes cannot be removed, and saying so is
    // the teardown report's job, not a destructor's.
    if (owned_ && !path_.empty()) ::rmdir(path_.c_str());
}

Result<Cgroup> Cgroup::create(const std::string& abs_path) {
    if (::mkdir(abs_path.c_str(), 0755) != 0) return Error::sys("mkdir", abs_path, errno);
    auto c = open(abs_path);
    if (!c) {
        ::rmdir(abs_path.c_str());
        return c.error();
    }
    c->owned_ = true;
    return c;
}

Result<Cgroup> Cgroup::open(const std::string& abs_path) {
    auto fd = open_file(abs_path, O_RDONLY | O_DIRECTORY);
    if (!fd) return fd.error();
    Cgroup c;
    c.path_ = abs_path;
    c.dir_ = std::move(*fd);
    return c;
}

bool Cgroup::has_kill() const {
    return ::faccessat(dir_.get(), "cgroup.kill", W_OK, 0) == 0;
}

static Status write_at(int dir, const std::string& path, const char* name, std::string_view v) {
    std::string what = path + "/" + name;
    auto fd = open_at(dir, name, O_WRONLY, what);
    if (!fd) return fd.error();
    return write_all(fd->get(), v, what);
}

Status Cgroup::kill() const {
    return write_at(dir_.get(), path_, "cgroup.kill", "1");
}

Status Cgroup::freeze(bool on) const {
    return write_at(dir_.get(), path_, "cgroup.freeze", on ? "1" : "0");
}

Status Cgroup::add(pid_t pid) const {
    return write_at(dir_.get(), path_, "cgroup.procs", std::to_string(pid));
}

Result<std::vector<pid_t>> Cgroup::procs() const {
    auto text = read_file_at(dir_.get(), "cgroup.procs", path_ + "/cgroup.procs");
    if (!text) return text.error();
    std::vector<pid_t> out;
    std::istringstream in(*text);
    pid_t p;
    while (in >> p)
        out.push_back(p);
    return out;
}

Result<bool> Cgroup::populated() const {
    auto text = read_file_at(dir_.get(), "cgroup.events", path_ + "/cgroup.events");
    if (!text) return text.error();
    int v = events_field(*text, "populated");
    if (v < 0) return Error::msg("no 'populated' in " + path_ + "/cgroup.events");
    return v != 0;
}

Result<Fd> Cgroup::open_events() const {
    return open_at(dir_.get(), "cgroup.events", O_RDONLY, path_ + "/cgroup.events");
}

Result<bool> Cgroup::wait_empty(int timeout_ms) const {
    auto ev = open_events();
    if (!ev) return ev.error();
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms);
    for (;;) {
        // Read first: kernfs arms the POLLPRI notification for this open file on read.
        char buf[256];
        ssize_t n = ::pread(ev->get(), buf, sizeof buf - 1, 0);
        if (n < 0) return Error::sys("read", path_ + "/cgroup.events", errno);
        if (events_field(std::string(buf, static_cast<size_t>(n)), "populated") == 0) return true;
        int left = timeout_ms < 0
                       ? -1
                       : static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                              deadline - std::chrono::steady_clock::now())
                                              .count());
        if (timeout_ms >= 0 && left <= 0) return false;
        pollfd p{ev->get(), POLLPRI, 0};
        if (::poll(&p, 1, left) < 0 && errno != EINTR)
            return Error::sys("poll", path_ + "/cgroup.events", errno);
    }
}

Status Cgroup::remove() {
    if (path_.empty()) return {};
    if (::rmdir(path_.c_str()) != 0) return Error::sys("rmdir", path_, errno);
    owned_ = false;
    dir_.reset();
    return {};
}

Status Cgroup::remove_once_empty(int timeout_ms) {
    auto st = remove();
    if (st || st.error().code != EBUSY) return st;
    auto empty = wait_empty(timeout_ms);
    if (!empty) return empty.error();
    if (!*empty) return st;
    return remove();
}

}  // namespace warden
