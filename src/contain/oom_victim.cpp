#include "contain/oom_victim.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "sys/fd.hpp"

namespace warden {
namespace {

// The value of `key=` in a comma-separated list of key=value ("" when absent).
std::string_view field(std::string_view list, std::string_view key) {
    for (size_t pos = 0; pos < list.size();) {
        size_t comma = list.find(',', pos);
        if (comma == std::string_view::npos) comma = list.size();
        std::string_view kv = list.substr(pos, comma - pos);
        if (kv.size() > key.size() && kv.substr(0, key.size()) == key && kv[key.size()] == '=')
            return kv.substr(key.size() + 1);
        pos = comma + 1;
    }
    return {};
}

// Whether the cgroup path `memcg` is the group `name` or beneath it.
bool in_group(std::string_view memcg, std::string_view name) {
    const std::string part = "/" + std::string(name);
    for (size_t at = memcg.find(part); at != std::string_view::npos;
         at = memcg.find(part, at + 1)) {
        const size_t end = at + part.size();
        if (end == memcg.size() || memcg[end] == '/') return true;
    }
    return false;
}

}  // namespace

std::optional<OomVictim> parse_oom_kill_line(std::string_view line, std::string_view group_name) {
    // A /dev/kmsg record is "prio,seq,usec,flags;text"; a dmesg line is the text alone.
    if (size_t semi = line.find(';'); semi != std::string_view::npos && semi < line.find(':'))
        line.remove_prefix(semi + 1);
    constexpr std::string_view kHead = "oom-kill:";
    const size_t at = line.find(kHead);
    if (at == std::string_view::npos) return std::nullopt;
    std::string_view list = line.substr(at + kHead.size());
    if (size_t nl = list.find('\n'); nl != std::string_view::npos) list = list.substr(0, nl);
    if (group_name.empty() || !in_group(field(list, "task_memcg"), group_name)) return std::nullopt;
    const std::string pid(field(list, "pid"));
    char* end = nullptr;
    const long n = std::strtol(pid.c_str(), &end, 10);
    if (pid.empty() || *end != '\0' || n <= 0) return std::nullopt;
    return OomVictim{static_cast<pid_t>(n), std::string(field(list, "task"))};
}

Result<std::optional<OomVictim>> find_oom_victim(std::string_view group_name) {
    auto fd = open_file("/dev/kmsg", O_RDONLY | O_NONBLOCK);
    if (!fd) return fd.error();
    std::optional<OomVictim> last;
    // One record a read; bounded by the ring buffer, and here by count. EPIPE: records were
    // overwritten while we read, the next read goes on from the oldest left.
    char buf[8192];
    for (int i = 0; i < 200000; ++i) {
        const ssize_t n = ::read(fd->get(), buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EPIPE) continue;
        if (n <= 0) break;  // EAGAIN: the end of the log
        if (auto v = parse_oom_kill_line(std::string_view(buf, static_cast<size_t>(n)), group_name))
            last = std::move(v);
    }
    return last;
}

}  // namespace warden
