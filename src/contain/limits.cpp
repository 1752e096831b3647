#include "contain/limits.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "contain/layers.hpp"
#include "sys/fd.hpp"

namespace warden {

std::string_view to_string(Controller c) {
    switch (c) {
        case Controller::memory:
            return "memory";
        case Controller::pids:
            return "pids";
        case Controller::cpu:
            return "cpu";
    }
    return "?";
}

std::string size_text(uint64_t bytes) {
    constexpr uint64_t kKiB = 1024, kMiB = kKiB * 1024, kGiB = kMiB * 1024;
    if (bytes >= kGiB && bytes % kGiB == 0) return fmt::format("{}GiB", bytes / kGiB);
    if (bytes >= kMiB && bytes % kMiB == 0) return fmt::format("{}MiB", bytes / kMiB);
    if (bytes >= kMiB) return fmt::format("{:.1f}MiB", static_cast<double>(bytes) / kMiB);
    if (bytes >= kKiB && bytes % kKiB == 0) return fmt::format("{}KiB", bytes / kKiB);
    return fmt::format("{}B", bytes);
}

namespace {

// cpu-max: a quota per period of 100 ms, as systemd's CPUQuota= writes it.
constexpr uint64_t kCpuPeriodUs = 100000;

std::string option_text(Controller c, uint64_t value) {
    switch (c) {
        case Controller::memory:
            return "--memory-max " + size_text(value);
        case Controller::pids:
            return "--tasks-max " + std::to_string(value);
        case Controller::cpu:
            return "--cpu-max " + std::to_string(value);
    }
    return "?";
}

std::string limit_name(Controller c) {
    switch (c) {
        case Controller::memory:
            return "memory-max";
        case Controller::pids:
            return "tasks-max";
        case Controller::cpu:
            return "cpu-max";
    }
    return "?";
}

// The value of `key` in a flat keyed file ("oom_kill 3\nmax 0\n").
std::optional<uint64_t> keyed_value(const std::string& text, std::string_view key) {
    std::istringstream in(text);
    std::string k;
    uint64_t v = 0;
    while (in >> k >> v)
        if (k == key) return v;
    return std::nullopt;
}

std::optional<std::string> limit_file_text(const std::string& group, const char* file) {
    auto t = read_file(group + "/" + file);
    if (!t) return std::nullopt;
    return std::move(*t);
}

std::optional<uint64_t> limit_file_number(const std::string& group, const char* file) {
    auto t = limit_file_text(group, file);
    if (!t) return std::nullopt;
    char* end = nullptr;
    unsigned long long v = std::strtoull(t->c_str(), &end, 10);
    if (end == t->c_str()) return std::nullopt;  // "max"
    return static_cast<uint64_t>(v);
}

Status write_limit_file(const std::string& group, const char* file, const std::string& value) {
    const std::string path = group + "/" + file;
    auto fd = open_file(path, O_WRONLY);
    if (!fd) return fd.error();
    return write_all(fd->get(), value, path);
}

bool limit_file_exists(const std::string& group, const char* file) {
    return ::access((group + "/" + file).c_str(), F_OK) == 0;
}

// ---- Where the hierarchies are ------------------------------------------------------------

struct Mount {
    std::string root, point;  // the mount's root within its hierarchy, and where it is
};

// The v1 mount whose super options name `controller`, from /proc/self/mountinfo.
std::optional<Mount> v1_mount(Controller c) {
    auto text = read_file("/proc/self/mountinfo");
    if (!text) return std::nullopt;
    std::istringstream in(*text);
    for (std::string line; std::getline(in, line);) {
        auto dash = line.find(" - ");
        if (dash == std::string::npos) continue;
        std::istringstream rest(line.substr(dash + 3));
        std::string fstype, source, options;
        rest >> fstype >> source >> options;
        if (fstype != "cgroup") continue;
        bool named = false;
        std::istringstream opts(options);
        for (std::string o; std::getline(opts, o, ',');)
            named = named || o == to_string(c);
        if (!named) continue;
        std::istringstream head(line.substr(0, dash));
        std::string f[5];
        for (auto& s : f)
            head >> s;
        return Mount{f[3], f[4]};
    }
    return std::nullopt;
}

// The group of `pid` in the v1 hierarchy of `c` ("N:memory:/a/b" of /proc/PID/cgroup), or
// in v2 for nullopt ("0::/a/b").
std::optional<std::string> group_of(pid_t pid, std::optional<Controller> c) {
    auto text = read_file("/proc/" + std::to_string(pid) + "/cgroup");
    if (!text) return std::nullopt;
    std::istringstream in(*text);
    for (std::string line; std::getline(in, line);) {
        auto a = line.find(':'), b = line.find(':', a + 1);
        if (a == std::string::npos || b == std::string::npos) continue;
        const std::string ctrls = line.substr(a + 1, b - a - 1);
        bool match = !c ? line.compare(0, 3, "0::") == 0 : false;
        if (c) {
            std::istringstream cs(ctrls);
            for (std::string x; std::getline(cs, x, ',');)
                match = match || x == to_string(*c);
        }
        if (match) return line.substr(b + 1);
    }
    return std::nullopt;
}

// `<mount><our group>/mcpwarden-<session>`: beneath the group `pid` is in.
std::optional<std::string> v1_session_group(Controller c, pid_t pid, const std::string& session,
                                            std::string* why) {
    auto m = v1_mount(c);
    if (!m) {
        if (why) *why = fmt::format("no cgroup v1 {} hierarchy mounted", to_string(c));
        return std::nullopt;
    }
    auto own = group_of(pid, c);
    if (!own) {
        if (why) *why = fmt::format("no {} line in /proc/{}/cgroup", to_string(c), pid);
        return std::nullopt;
    }
    std::string rel = *own;
    // A mount of a subtree (containers): its root is a prefix of the paths it shows.
    if (m->root != "/" && rel.starts_with(m->root)) rel = rel.substr(m->root.size());
    if (rel == "/") rel.clear();
    return m->point + rel + "/mcpwarden-" + session;
}

std::optional<std::string> v2_session_group(pid_t pid, const std::string& session) {
    auto mnt = cgroup2_mount();
    auto own = group_of(pid, std::nullopt);
    if (!mnt || !own) return std::nullopt;
    return *mnt + (*own == "/" ? "" : *own) + "/mcpwarden-" + session;
}

bool v2_offers(const std::string& group, Controller c) {
    auto t = limit_file_text(group, "cgroup.controllers");
    if (!t) return false;
    std::istringstream in(*t);
    for (std::string w; in >> w;)
        if (w == to_string(c)) return true;
    return false;
}

// ---- Writing a limit ----------------------------------------------------------------------

// Writes the limit into `group` (cgroup `version`) and returns what the group holds now.
Result<uint64_t> write_limit(Controller c, int version, const std::string& group, uint64_t value) {
    switch (c) {
        case Controller::memory:
            if (version == 2) {
                if (auto st = write_limit_file(group, "memory.max", std::to_string(value)); !st)
                    return st.error();
                if (limit_file_exists(group, "memory.swap.max"))
                    if (auto st = write_limit_file(group, "memory.swap.max", "0"); !st)
                        return st.error();
                auto back = limit_file_number(group, "memory.max");
                if (!back) return Error::msg(group + "/memory.max: not set");
                return *back;
            } else {
                if (auto st =
                        write_limit_file(group, "memory.limit_in_bytes", std::to_string(value));
                    !st)
                    return st.error();
                // memsw (memory + swap) exists where swap is accounted; it must not be below
                // limit_in_bytes, which is why it is written second.
                if (limit_file_exists(group, "memory.memsw.limit_in_bytes"))
                    if (auto st = write_limit_file(group, "memory.memsw.limit_in_bytes",
                                                   std::to_string(value));
                        !st)
                        return st.error();
                auto back = limit_file_number(group, "memory.limit_in_bytes");
                if (!back) return Error::msg(group + "/memory.limit_in_bytes: not set");
                return *back;
            }
        case Controller::pids: {
            if (auto st = write_limit_file(group, "pids.max", std::to_string(value)); !st)
                return st.error();
            auto back = limit_file_number(group, "pids.max");
            if (!back) return Error::msg(group + "/pids.max: not set");
            return *back;
        }
        case Controller::cpu: {
            const uint64_t quota = value * kCpuPeriodUs / 100;
            if (version == 2) {
                if (auto st = write_limit_file(group, "cpu.max",
                                               fmt::format("{} {}", quota, kCpuPeriodUs));
                    !st)
                    return st.error();
                auto back = limit_file_number(group, "cpu.max");
                if (!back) return Error::msg(group + "/cpu.max: not set");
                return *back * 100 / kCpuPeriodUs;
            }
            if (auto st =
                    write_limit_file(group, "cpu.cfs_period_us", std::to_string(kCpuPeriodUs));
                !st)
                return st.error();
            if (auto st = write_limit_file(group, "cpu.cfs_quota_us", std::to_string(quota)); !st)
                return st.error();
            auto back = limit_file_number(group, "cpu.cfs_quota_us");
            if (!back) return Error::msg(group + "/cpu.cfs_quota_us: not set");
            return *back * 100 / kCpuPeriodUs;
        }
    }
    return Error::msg("unknown controller");
}

// The value as the group gives it back is what is enforced: v1 rounds memory down to pages.
bool limit_holds(Controller c, uint64_t asked, uint64_t back) {
    if (c == Controller::memory) return back <= asked && asked - back < 65536;
    return back == asked;
}

std::vector<std::pair<Controller, std::optional<uint64_t>>> asked(const LimitRequest& r) {
    return {{Controller::memory, r.memory_max},
            {Controller::pids, r.tasks_max},
            {Controller::cpu, r.cpu_max ? std::optional<uint64_t>(*r.cpu_max) : std::nullopt}};
}

// The limit a group holds now, for find(): nullopt when it holds none ("max").
std::optional<uint64_t> limit_in(Controller c, int version, const std::string& group) {
    switch (c) {
        case Controller::memory: {
            auto v =
                limit_file_number(group, version == 2 ? "memory.max" : "memory.limit_in_bytes");
            if (v && *v >= (uint64_t{1} << 62)) return std::nullopt;  // v1's "unlimited"
            return v;
        }
        case Controller::pids:
            return limit_file_number(group, "pids.max");
        case Controller::cpu: {
            auto q = limit_file_number(group, version == 2 ? "cpu.max" : "cpu.cfs_quota_us");
            if (!q || static_cast<int64_t>(*q) < 0) return std::nullopt;  // v1 -1: none
            return *q * 100 / kCpuPeriodUs;
        }
    }
    return std::nullopt;
}

}  // namespace

SessionLimits SessionLimits::apply(const std::string& session_id, const LimitRequest& req,
                                   const std::string& v2_session_dir, const Faults& faults) {
    SessionLimits out;
    for (auto [c, value] : asked(req)) {
        if (!value) continue;
        LimitPlacement p;
        p.controller = c;
        p.option = option_text(c, *value);
        p.value = *value;
        std::string v1_why;
        // v2 first: one group holds the whole tree, and nothing needs joining.
        if (!v2_session_dir.empty() && v2_offers(v2_session_dir, c)) {
            p.version = 2;
            p.group = v2_session_dir;
        } else if (faults.limits_v1_absent) {
            v1_why = "no cgroup v1 hierarchy (injected fault, MCPWARDEN_FAULT)";
        } else if (auto g = v1_session_group(c, ::getpid(), session_id, &v1_why)) {
            auto made = Cgroup::create(*g);
            if (made) {
                p.version = 1;
                p.group = *g;
                out.v1_groups_.push_back(std::move(*made));
            } else {
                v1_why = "cannot make a cgroup v1 " + std::string(to_string(c)) +
                         " group: " + made.error().message;
            }
        }
        if (p.version == 0) {
            p.why =
                fmt::format("no {} controller: cgroup v2 {}; {}", to_string(c),
                            v2_session_dir.empty() ? "has no session group here"
                                                   : "does not delegate it to " + v2_session_dir,
                            v1_why);
        } else if (faults.limits_unwritten) {
            p.why = fmt::format("cgroup v{} {} ({}): not written (injected fault)", p.version,
                                to_string(c), p.group);
        } else if (auto back = write_limit(c, p.version, p.group, *value); !back) {
            p.why = fmt::format("cgroup v{} {}: {}", p.version, to_string(c), back.error().message);
            p.version = 0;
        } else if (!limit_holds(c, *value, *back)) {
            p.why = fmt::format("cgroup v{} {}: asked {}, the group holds {}", p.version,
                                to_string(c), *value, *back);
            p.version = 0;
        } else {
            p.value = *back;
            p.why = fmt::format("cgroup v{} {} ({})", p.version, to_string(c), p.group);
        }
        out.placements_.push_back(std::move(p));
    }
    return out;
}

SessionLimits SessionLimits::find(const std::string& session_id, pid_t pid) {
    SessionLimits out;
    const auto v2 = v2_session_group(pid, session_id);
    for (Controller c : {Controller::memory, Controller::pids, Controller::cpu}) {
        LimitPlacement p;
        p.controller = c;
        if (v2 && v2_offers(*v2, c)) {
            p.version = 2;
            p.group = *v2;
        } else if (auto g = v1_session_group(c, pid, session_id, nullptr);
                   g && ::access(g->c_str(), F_OK) == 0) {
            p.version = 1;
            p.group = *g;
        } else {
            continue;
        }
        auto v = limit_in(c, p.version, p.group);
        if (!v) {
            if (p.version == 2) continue;  // the group is the session's, without this limit
            v = 0;                         // a v1 group is made only for a limit
        }
        p.value = *v;
        p.option = option_text(c, *v);
        p.why = fmt::format("cgroup v{} {} ({})", p.version, to_string(c), p.group);
        out.placements_.push_back(std::move(p));
    }
    return out;
}

SessionLimits::~SessionLimits() {
    // The teardown emptied the tree, but the v1 groups have no cgroup.events to wait on: a
    // member's exit still under way holds its group a moment (rmdir: EBUSY). Bounded.
    for (Cgroup& g : v1_groups_) {
        for (int i = 0; i < 50; ++i) {
            auto st = g.remove();
            if (st || st.error().code != EBUSY) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
    }
}

void SessionLimits::remove_found() {
    for (const LimitPlacement& p : placements_)
        if (p.version == 1) ::rmdir(p.group.c_str());
}

std::string SessionLimits::missing() const {
    std::string out;
    for (const LimitPlacement& p : placements_)
        if (p.version == 0) out += (out.empty() ? "" : "; ") + p.option + ": " + p.why;
    return out;
}

std::vector<std::string> SessionLimits::v1_procs_files() const {
    std::vector<std::string> out;
    for (const Cgroup& g : v1_groups_)
        out.push_back(g.path() + "/cgroup.procs");
    return out;
}

LimitUsage SessionLimits::usage() const {
    LimitUsage u;
    for (const LimitPlacement& p : placements_) {
        if (p.version == 0) continue;
        const std::string& g = p.group;
        const bool v2 = p.version == 2;
        switch (p.controller) {
            case Controller::memory:
                u.memory_current =
                    limit_file_number(g, v2 ? "memory.current" : "memory.usage_in_bytes");
                u.memory_peak =
                    limit_file_number(g, v2 ? "memory.peak" : "memory.max_usage_in_bytes");
                if (auto ev = limit_file_text(g, v2 ? "memory.events" : "memory.oom_control"))
                    u.oom_kills = keyed_value(*ev, "oom_kill").value_or(0);
                if (v2) {
                    if (auto ev = limit_file_text(g, "memory.events"))
                        u.memory_at_max = keyed_value(*ev, "max").value_or(0);
                } else {
                    u.memory_at_max = limit_file_number(g, "memory.failcnt").value_or(0);
                }
                break;
            case Controller::pids:
                u.tasks_current = limit_file_number(g, "pids.current");
                if (auto ev = limit_file_text(g, "pids.events"))
                    u.tasks_refused = keyed_value(*ev, "max").value_or(0);
                break;
            case Controller::cpu:
                if (auto st = limit_file_text(g, "cpu.stat")) {
                    if (v2) u.cpu_usage_us = keyed_value(*st, "usage_usec");
                    u.cpu_throttled = keyed_value(*st, "nr_throttled").value_or(0);
                }
                break;
        }
    }
    return u;
}

std::string SessionLimits::summary() const {
    if (placements_.empty()) return "";
    const LimitUsage u = usage();
    std::string out;
    for (const LimitPlacement& p : placements_) {
        if (!out.empty()) out += ' ';
        switch (p.controller) {
            case Controller::memory:
                out += "mem " + (u.memory_current ? size_text(*u.memory_current) : "?") + "/" +
                       size_text(p.value);
                if (u.oom_kills) out += fmt::format(" ({} OOM)", u.oom_kills);
                break;
            case Controller::pids:
                out += "tasks " + (u.tasks_current ? std::to_string(*u.tasks_current) : "?") + "/" +
                       std::to_string(p.value);
                if (u.tasks_refused) out += fmt::format(" ({} refused)", u.tasks_refused);
                break;
            case Controller::cpu:
                out += fmt::format("cpu {}%", p.value);
                break;
        }
        if (p.version == 0) out += " (not enforced)";
    }
    return out;
}

std::string SessionLimits::render_text() const {
    std::string out;
    for (const LimitPlacement& p : placements_)
        out +=
            fmt::format("{:<15} {:<4} {}: {}\n", limit_name(p.controller), p.version ? "on" : "off",
                        p.option.substr(p.option.find(' ') + 1), p.why);
    return out;
}

nlohmann::json SessionLimits::to_json() const {
    nlohmann::json a = nlohmann::json::array();
    for (const LimitPlacement& p : placements_)
        a.push_back({{"limit", limit_name(p.controller)},
                     {"value", p.value},
                     {"on", p.version != 0},
                     {"cgroup", p.version},
                     {"group", p.group},
                     {"reason", p.why}});
    return a;
}

nlohmann::json LimitUsage::to_json() const {
    nlohmann::json j = nlohmann::json::object();
    auto put = [&](const char* k, const std::optional<uint64_t>& v) {
        if (v) j[k] = *v;
    };
    put("memory_bytes", memory_current);
    put("memory_peak_bytes", memory_peak);
    put("tasks", tasks_current);
    put("cpu_usage_us", cpu_usage_us);
    j["oom_kills"] = oom_kills;
    j["memory_at_max"] = memory_at_max;
    j["tasks_refused"] = tasks_refused;
    j["cpu_throttled"] = cpu_throttled;
    return j;
}

}  // namespace warden
