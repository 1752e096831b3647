// read_logs() and LogFollower: the servers' own logs (shim/server_log.hpp writes them), for
// `mcpwarden logs`.
//
// A log directory is a server identity's: logs/<name>-<hash>/stderr.log and its rotated
// predecessors stderr.log.1 (newest) … stderr.log.N (oldest). Reading follows the live file by
// its inode: when a writer rotates it (renames it to .1 and opens a new stderr.log), what the
// old one still held past our offset is read through the descriptor we hold before the new file
// is read from its start, so nothing is lost or read twice across a rotation.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <map>

#include "api/internal.hpp"
#include "journal/journal.hpp"
#include "journal/query.hpp"
#include "mcpwarden/logs.hpp"
#include "shim/server_log.hpp"
#include "sys/fd.hpp"

namespace warden::api {
namespace {

constexpr int kMaxRotated = 100;  // the most log-files allows

bool looks_like_session(const std::string& t) {
    return t.size() >= 4 && t.size() <= 64 && std::all_of(t.begin(), t.end(), [](char c) {
               return std::isxdigit(static_cast<unsigned char>(c));
           });
}

// "<name>-<16 hex>" → "<name>".
std::string name_of(const std::string& dir) {
    auto dash = dir.rfind('-');
    return dash == std::string::npos ? dir : dir.substr(0, dash);
}

std::vector<std::string> log_dirs(const std::string& root) {
    std::vector<std::string> out;
    DIR* d = ::opendir(root.c_str());
    if (!d) return out;
    while (dirent* e = ::readdir(d)) {
        std::string n = e->d_name;
        if (n == "." || n == "..") continue;
        struct stat st {};
        if (::stat((root + "/" + n).c_str(), &st) == 0 && S_ISDIR(st.st_mode)) out.push_back(n);
    }
    ::closedir(d);
    std::sort(out.begin(), out.end());
    return out;
}

// One directory's live file, followed.
struct Followed {
    std::string dir;  // "<name>-<hash>"
    Fd fd;
    ino_t ino = 0;
    std::string partial;  // a line not finished yet
};

class Follower final : public LogFollower {
  public:
    Follower(std::string root, LogQuery q, int64_t since_ns)
        : root_(std::move(root)), q_(std::move(q)), since_ns_(since_ns) {}

    warden::Status start() {
        std::vector<std::string> names;
        for (const std::string& d : log_dirs(root_)) {
            names.push_back(name_of(d));
            if (q_.target.empty() || name_of(d) == q_.target)
                by_name_ = by_name_ || !q_.target.empty();
        }
        if (!q_.target.empty() && !by_name_ && !looks_like_session(q_.target)) {
            std::sort(names.begin(), names.end());
            names.erase(std::unique(names.begin(), names.end()), names.end());
            std::string known;
            for (const auto& n : names)
                known += (known.empty() ? "" : ", ") + n;
            return warden::Error::msg(
                "logs: no server named '" + q_.target + "' has a log in " + root_ +
                (known.empty() ? " (none has)" : " (there are: " + known + ")"));
        }
        return {};
    }

    std::vector<LogEntry> poll() override {
        std::vector<LogEntry> out;
        for (const std::string& d : log_dirs(root_)) {
            if (by_name_ && name_of(d) != q_.target) continue;
            auto it = followed_.find(d);
            if (it == followed_.end()) {
                it = followed_.emplace(d, Followed{d, {}, 0, {}}).first;
                read_rotated(d, out);
            }
            follow(it->second, out);
        }
        std::stable_sort(out.begin(), out.end(),
                         [](const LogEntry& a, const LogEntry& b) { return a.ts_ns < b.ts_ns; });
        return out;
    }

  private:
    std::string path(const std::string& dir, int n) const {
        return root_ + "/" + dir + "/" + std::string(shim::kLogFile) +
               (n ? "." + std::to_string(n) : "");
    }

    void take(const std::string& dir, std::string_view line, std::vector<LogEntry>& out) const {
        auto l = shim::parse_log_line(line);
        if (!l || l->ts_ns < since_ns_) return;
        if (!by_name_ && !q_.target.empty() && l->session.rfind(q_.target, 0) != 0) return;
        out.push_back(
            LogEntry{l->ts_ns, shim::log_time(l->ts_ns), dir, l->session, l->pid, l->text});
    }

    // Reads `fd` to its end, whole lines only; the rest waits in `partial`.
    void read_on(Followed& f, std::vector<LogEntry>& out) const {
        char buf[65536];
        for (int i = 0; i < 1 << 16; ++i) {
            ssize_t n = ::read(f.fd.get(), buf, sizeof buf);
            if (n <= 0) break;
            f.partial.append(buf, static_cast<size_t>(n));
        }
        size_t start = 0;
        for (size_t nl; (nl = f.partial.find('\n', start)) != std::string::npos; start = nl + 1)
            take(f.dir, std::string_view(f.partial).substr(start, nl - start), out);
        f.partial.erase(0, start);
    }

    // The rotated files of a directory seen for the first time, oldest first.
    void read_rotated(const std::string& dir, std::vector<LogEntry>& out) const {
        for (int n = kMaxRotated; n >= 1; --n) {
            auto fd = open_file(path(dir, n), O_RDONLY);
            if (!fd) continue;
            Followed f{dir, std::move(*fd), 0, {}};
            read_on(f, out);
        }
    }

    void follow(Followed& f, std::vector<LogEntry>& out) const {
        struct stat st {};
        const std::string live = path(f.dir, 0);
        if (f.fd.valid()) read_on(f, out);  // the old file's rest first, rotated or not
        if (::stat(live.c_str(), &st) != 0 || (f.fd.valid() && st.st_ino == f.ino)) return;
        auto fd = open_file(live, O_RDONLY);
        if (!fd) return;
        f.fd = std::move(*fd);
        f.ino = st.st_ino;
        f.partial.clear();
        read_on(f, out);
    }

    std::string root_;
    LogQuery q_;
    int64_t since_ns_ = 0;
    bool by_name_ = false;
    std::map<std::string, Followed> followed_;
};

Result<std::string> logs_root_for(const std::string& journal) {
    auto db = journal::resolve_path(journal);
    if (!db) return db.error();
    return shim::logs_root(*db);
}

}  // namespace

Result<std::unique_ptr<LogFollower>> LogFollower::open(const LogQuery& q) {
    auto root = logs_root_for(q.journal);
    if (!root) return root.error();
    int64_t since_ns = 0;
    if (!q.since.empty()) {
        auto s = journal::parse_since(q.since, journal::now_ns());
        if (!s) return Error{"logs: --since: " + s.error().message, EINVAL};
        since_ns = *s;
    }
    auto f = std::make_unique<Follower>(*root, q, since_ns);
    if (auto s = f->start(); !s) return s.error();
    return std::unique_ptr<LogFollower>(std::move(f));
}

Result<std::vector<LogEntry>> read_logs(const LogQuery& q) {
    auto f = LogFollower::open(q);
    if (!f) return f.error();
    return (*f)->poll();
}

}  // namespace warden::api
