// ProcessTable: one pass over /proc, then children and descendant walks on that snapshot.
#include "proc/process_table.hpp"

#include <dirent.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <deque>
#include <iterator>
#include <optional>
#include <string_view>
#include <system_error>
#include <thread>
#include <unordered_set>

namespace warden {
namespace {

bool parse_pid(const char* name, pid_t& pid) {
    std::string_view s = name;
    if (s.empty() || s[0] < '1' || s[0] > '9') return false;
    auto r = std::from_chars(s.data(), s.data() + s.size(), pid);
    return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

// Runs body(i) for i in [0, n) on `threads` threads (the caller's among them), in chunks
// handed out as the threads ask: a thread the scheduler holds back (the other core busy)
// leaves its share to the one that runs, instead of the caller waiting for it. body(i, t)
// gets the index of the thread it runs on (0 for the caller's).
template <class Body>
void for_each_chunked(size_t n, size_t threads, size_t chunk, Body body) {
    std::atomic<size_t> next{0};
    auto run = [&](size_t t) {
        for (;;) {
            size_t from = next.fetch_add(chunk, std::memory_order_relaxed);
            if (from >= n) break;
            for (size_t i = from; i < std::min(from + chunk, n); ++i)
                body(i, t);
        }
    };
    std::vector<std::jthread> workers;
    for (size_t t = 1; t < threads; ++t) {
        try {
            workers.emplace_back([&run, t] { run(t); });
        } catch (const std::system_error&) {
            break;  // no thread to be had (RLIMIT_NPROC): this one reads the rest
        }
    }
    run(0);
}

}  // namespace

ProcessTable ProcessTable::scan(unsigned what, int threads) {
    std::vector<pid_t> pids;
    pids.reserve(1024);
    if (DIR* d = ::opendir("/proc")) {
        while (dirent* e = ::readdir(d)) {
            pid_t pid = 0;
            if (parse_pid(e->d_name, pid)) pids.push_back(pid);
        }
        ::closedir(d);
    }
    // Reading /proc is syscall-bound (~25 per process with kAll): a second core halves it.
    // Below a few hundred processes the thread costs more than it saves.
    constexpr size_t kPerThread = 256;
    if (threads <= 0)
        threads = std::thread::hardware_concurrency() >= 2 && pids.size() >= 2 * kPerThread ? 2 : 1;
    const auto n = static_cast<size_t>(threads);
    std::vector<std::vector<Process>> parts(n);
    for (auto& part : parts)
        part.reserve(pids.size() / n + 32);
    for_each_chunked(pids.size(), n, 32, [&](size_t i, size_t t) {
        auto p = read_process(pids[i], what);
        if (p) parts[t].push_back(std::move(p).value());  // vanished mid-scan: skipped
    });
    std::vector<Process> procs = std::move(parts[0]);
    for (size_t t = 1; t < n; ++t)
        std::move(parts[t].begin(), parts[t].end(), std::back_inserter(procs));
    return from_processes(std::move(procs));
}

ProcessTable ProcessTable::from_processes(std::vector<Process> procs) {
    ProcessTable t;
    t.procs_ = std::move(procs);
    std::sort(t.procs_.begin(), t.procs_.end(),
              [](const Process& a, const Process& b) { return a.id.pid < b.id.pid; });
    t.by_pid_.reserve(t.procs_.size());
    t.by_ppid_.reserve(t.procs_.size());
    for (size_t i = 0; i < t.procs_.size(); ++i) {
        t.by_pid_.emplace(t.procs_[i].id.pid, i);
        t.by_ppid_.emplace(t.procs_[i].ppid, i);
    }
    return t;
}

const Process* ProcessTable::find(pid_t pid) const {
    auto it = by_pid_.find(pid);
    return it == by_pid_.end() ? nullptr : &procs_[it->second];
}

bool ProcessTable::read_links(pid_t pid) {
    auto it = by_pid_.find(pid);
    return it != by_pid_.end() && warden::read_links(procs_[it->second]);
}

namespace {
// read_details on a table's process; a process gone by now holds no pipe end we know of.
bool read_details_or_forget(Process& p, unsigned what) {
    if (warden::read_details(p, what)) return true;
    if (what & kPipeModes)
        for (FdInfo& f : p.fds)
            if (f.kind == FdInfo::Kind::Pipe) f.flags = -1;
    return false;
}
}  // namespace

bool ProcessTable::read_details(pid_t pid, unsigned what) {
    auto it = by_pid_.find(pid);
    return it != by_pid_.end() && read_details_or_forget(procs_[it->second], what);
}

void ProcessTable::read_details(const std::vector<std::pair<pid_t, unsigned>>& which, int threads) {
    // ~15 system calls a process: a second thread pays from a few dozen on.
    constexpr size_t kPerThread = 24;
    if (threads <= 0)
        threads =
            std::thread::hardware_concurrency() >= 2 && which.size() >= 2 * kPerThread ? 2 : 1;
    for_each_chunked(which.size(), static_cast<size_t>(threads), 8, [&](size_t i, size_t) {
        auto it = by_pid_.find(which[i].first);
        if (it != by_pid_.end()) (void)read_details_or_forget(procs_[it->second], which[i].second);
    });
}

const Process* ProcessTable::find(const ProcessId& id) const {
    const Process* p = find(id.pid);
    return p && p->id.starttime == id.starttime ? p : nullptr;
}

std::vector<const Process*> ProcessTable::children(pid_t pid) const {
    std::vector<const Process*> out;
    const Process* parent = find(pid);
    auto [b, e] = by_ppid_.equal_range(pid);
    for (auto it = b; it != e; ++it) {
        const Process& c = procs_[it->second];
        if (c.id.pid == pid) continue;
        // A child cannot be older than its parent: if it looks older, the parent's pid was
        // recycled after the child was born (psutil drops these too).
        if (parent && started_before(c.id, parent->id)) continue;
        out.push_back(&c);
    }
    std::sort(out.begin(), out.end(),
              [](const Process* a, const Process* b2) { return a->id.pid < b2->id.pid; });
    return out;
}

std::vector<const Process*> ProcessTable::descendants(const ProcessId& root) const {
    const Process* r = find(root);
    if (!r) return {};
    // Breadth-first from the root by ppid links, then reversed: every process ends up
    // before its parent, the deepest first. `seen` guards against a cycle, which the
    // starttime guard already rules out for a consistent snapshot.
    std::vector<const Process*> order;
    std::unordered_set<pid_t> seen{r->id.pid};
    std::deque<const Process*> queue{r};
    while (!queue.empty()) {
        const Process* p = queue.front();
        queue.pop_front();
        for (const Process* c : children(p->id.pid)) {
            if (!seen.insert(c->id.pid).second) continue;
            order.push_back(c);
            queue.push_back(c);
        }
    }
    std::reverse(order.begin(), order.end());
    return order;
}

}  // namespace warden
