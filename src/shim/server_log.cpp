#include "shim/server_log.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "journal/redact.hpp"
#include "sys/text.hpp"

namespace warden::shim {

namespace {

constexpr size_t kTailLines = 16;

int64_t wall_now_ns() {
    timespec ts{};
    ::clock_gettime(CLOCK_REALTIME, &ts);
    return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// FNV-1a, 64 bits: stable across builds and machines, which a log directory's name must be.
uint64_t fnv1a(uint64_t h, std::string_view s) {
    for (unsigned char c : s) {
        h ^= c;
        h *= 0x100000001b3ULL;
    }
    return h ^ 0xff;  // a separator, so that {"ab","c"} and {"a","bc"} differ
}

std::string dir_of(const std::string& path) {
    auto slash = path.rfind('/');
    if (slash == std::string::npos) return ".";
    return slash == 0 ? "/" : path.substr(0, slash);
}

std::string live_file(const std::string& dir) {
    return dir + "/" + std::string(kLogFile);
}

}  // namespace

std::string logs_root(const std::string& journal_db) {
    return dir_of(journal_db) + "/logs";
}

std::string log_key(std::string_view name, const std::vector<std::string>& argv,
                    std::string_view cwd) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const std::string& a : argv)
        h = fnv1a(h, a);
    h = fnv1a(h, cwd);
    std::string safe;
    for (char c : name.substr(0, 48))
        safe.push_back(
            std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ? c
                                                                                            : '_');
    if (safe.empty() || safe[0] == '.') safe.insert(0, "server");
    return fmt::format("{}-{:016x}", safe, h);
}

std::string log_time(int64_t ts_ns) {
    const time_t secs = static_cast<time_t>(ts_ns / 1'000'000'000);
    tm t{};
    ::gmtime_r(&secs, &t);
    return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z", t.tm_year + 1900, t.tm_mon + 1,
                       t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec, ts_ns % 1'000'000'000 / 1000);
}

std::string format_log_line(const LogLine& l) {
    return fmt::format("{} {} {} {}\n", log_time(l.ts_ns), l.session, l.pid, l.text);
}

std::optional<LogLine> parse_log_line(std::string_view line) {
    if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
    auto word = [&line]() -> std::optional<std::string_view> {
        auto sp = line.find(' ');
        if (sp == std::string_view::npos) return std::nullopt;
        auto w = line.substr(0, sp);
        line.remove_prefix(sp + 1);
        return w;
    };
    auto ts = word(), session = word(), pid = word();
    if (!ts || !session || !pid || ts->size() != 27) return std::nullopt;
    tm t{};
    int us = 0;
    if (std::sscanf(std::string(*ts).c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%6dZ", &t.tm_year, &t.tm_mon,
                    &t.tm_mday, &t.tm_hour, &t.tm_min, &t.tm_sec, &us) != 7)
        return std::nullopt;
    t.tm_year -= 1900;
    t.tm_mon -= 1;
    LogLine l;
    l.ts_ns = int64_t{::timegm(&t)} * 1'000'000'000 + int64_t{us} * 1000;
    l.session = std::string(*session);
    l.pid = std::strtoll(std::string(*pid).c_str(), nullptr, 10);
    l.text = std::string(line);
    return l;
}

// ---- The relay's side: copy and return --------------------------------------------------

ServerLog::ServerLog(std::string dir, std::string session, LogSettings settings)
    : dir_(settings.on ? std::move(dir) : std::string()),
      session_(std::move(session)),
      settings_(settings) {
    writer_ = std::thread([this] {
        ::pthread_setname_np(::pthread_self(), "mcpw-serverlog");
        run();
    });
}

ServerLog::~ServerLog() {
    close();
}

void ServerLog::push(Item item) {
    std::unique_lock lk(mu_);
    if (stop_) return;
    const size_t n = item.text.size();
    if (item.kind == Item::Kind::bytes) {
        if (settings_.block)  // the guard off: wait for the writer, as a synchronous log would
            written_.wait(lk, [&] { return stop_ || queued_bytes_ + n <= settings_.queue; });
        if (queued_bytes_ + n > settings_.queue) {
            dropped_ += n;
            dropped_unsaid_ += n;
            return;
        }
    }
    queued_bytes_ += n;
    const bool was_empty = queue_.empty();
    queue_.push_back(std::move(item));
    if (was_empty) wake_writer_.notify_one();
}

void ServerLog::on_stderr(std::string_view bytes) {
    push(Item{Item::Kind::bytes, wall_now_ns(), 0, std::string(bytes)});
}

void ServerLog::server_started(pid_t pid) {
    push(Item{Item::Kind::started, wall_now_ns(), pid, {}});
}

void ServerLog::note(std::string_view text) {
    push(Item{Item::Kind::note, wall_now_ns(), 0, std::string(text)});
}

std::vector<std::string> ServerLog::tail(size_t n, std::chrono::milliseconds bound) {
    std::unique_lock lk(mu_);
    if (!stop_) {
        const uint64_t ticket = ++flush_asked_;
        queue_.push_back(Item{Item::Kind::flush, 0, 0, {}, ticket});
        wake_writer_.notify_one();
        written_.wait_for(lk, bound, [&] { return flush_done_ >= ticket || stop_; });
    }
    std::vector<std::string> out;
    for (size_t i = tail_.size() > n ? tail_.size() - n : 0; i < tail_.size(); ++i)
        out.push_back(tail_[i]);
    return out;
}

void ServerLog::close() {
    {
        std::lock_guard lk(mu_);
        if (stop_ && !writer_.joinable()) return;
        stop_ = true;
        wake_writer_.notify_one();
        written_.notify_all();
    }
    if (writer_.joinable()) writer_.join();
}

ServerLog::Stats ServerLog::stats() const {
    std::lock_guard lk(mu_);
    Stats s = stats_;
    s.dropped_bytes = dropped_;
    return s;
}

// ---- The writer thread --------------------------------------------------------------------

void ServerLog::run() {
    if (!dir_.empty() && !open_live_file()) file_.reset();
    std::vector<Item> batch;
    for (;;) {
        bool stopping;
        uint64_t unsaid;
        {
            std::unique_lock lk(mu_);
            wake_writer_.wait(lk, [&] { return stop_ || !queue_.empty(); });
            batch.swap(queue_);
            queued_bytes_ = 0;
            stopping = stop_;
            unsaid = std::exchange(dropped_unsaid_, 0);
        }
        written_.notify_all();  // room again (the blocking fault waits on it)
        if (unsaid)
            emit(wall_now_ns(), fmt::format("[mcpwarden] {} bytes of stderr not kept here: the "
                                            "log's writer fell behind (they reached the client)",
                                            unsaid));
        for (Item& item : batch)
            take(item);
        batch.clear();
        write_out();
        if (stopping) {
            if (!partial_.empty()) line_done(partial_ts_, std::exchange(partial_, {}));
            write_out();
            std::lock_guard lk(mu_);
            flush_done_ = flush_asked_;
            written_.notify_all();
            return;
        }
    }
}

void ServerLog::take(Item& item) {
    switch (item.kind) {
        case Item::Kind::bytes: {
            std::string_view b = item.text;
            while (!b.empty()) {
                if (partial_.empty() && !cutting_) partial_ts_ = item.ts_ns;
                auto nl = b.find('\n');
                std::string_view piece = b.substr(0, nl);
                if (!cutting_) {
                    const size_t room = kMaxLogLine - partial_.size();
                    partial_.append(piece.substr(0, room));
                    if (piece.size() > room) {
                        line_done(partial_ts_, partial_ + " [cut]");
                        partial_.clear();
                        cutting_ = true;
                    }
                }
                if (nl == std::string_view::npos) break;
                if (!cutting_) line_done(partial_ts_, partial_);
                partial_.clear();
                cutting_ = false;
                b.remove_prefix(nl + 1);
            }
            return;
        }
        case Item::Kind::started:
            if (!partial_.empty()) line_done(partial_ts_, std::exchange(partial_, {}));
            cutting_ = in_pem_ = false;
            pid_ = item.pid;
            {
                std::lock_guard lk(mu_);
                tail_.clear();
            }
            return;
        case Item::Kind::note:
            emit(item.ts_ns, "[mcpwarden] " + item.text);
            return;
        case Item::Kind::flush: {
            // The unfinished last line counts: a traceback's last words may lack their newline.
            std::string redacted_partial;
            if (!partial_.empty() && !in_pem_)
                redacted_partial =
                    escape_bytes(settings_.redact ? journal::redact_text(partial_) : partial_);
            write_out();
            std::lock_guard lk(mu_);
            if (!redacted_partial.empty()) {
                tail_.push_back(std::move(redacted_partial));
                if (tail_.size() > kTailLines) tail_.pop_front();
            }
            flush_done_ = std::max(flush_done_, item.ticket);
            written_.notify_all();
            return;
        }
    }
}

// One whole line of the server's: a private key's lines are never kept, the rest redacted.
void ServerLog::line_done(int64_t ts_ns, std::string_view line) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (settings_.redact) {
        if (in_pem_) {
            if (line.find("-----END ") != std::string_view::npos) in_pem_ = false;
            return;
        }
        auto begin = line.find("-----BEGIN ");
        if (begin != std::string_view::npos &&
            line.find("PRIVATE KEY", begin) != std::string_view::npos &&
            line.find("-----END ", begin) == std::string_view::npos)
            in_pem_ = true;
    }
    std::string text = escape_bytes(settings_.redact ? journal::redact_text(line) : line);
    {
        std::lock_guard lk(mu_);
        tail_.push_back(text);
        if (tail_.size() > kTailLines) tail_.pop_front();
    }
    emit(ts_ns, text);
}

void ServerLog::emit(int64_t ts_ns, std::string_view text) {
    if (!file_.valid()) return;
    std::string line = format_log_line(LogLine{ts_ns, session_, pid_, std::string(text)});
    if (file_bytes_ + out_.size() + line.size() > settings_.file_size) {
        write_out();
        rotate();
        if (!file_.valid()) return;
    }
    out_ += line;
    std::lock_guard lk(mu_);
    ++stats_.lines;
}

void ServerLog::write_out() {
    if (out_.empty() || !file_.valid()) {
        out_.clear();
        return;
    }
    size_t off = 0;
    while (off < out_.size()) {
        ssize_t n = ::write(file_.get(), out_.data() + off, out_.size() - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            std::lock_guard lk(mu_);
            stats_.error = fmt::format("write {}/{}: {}", dir_, kLogFile, std::strerror(errno));
            break;
        }
        off += static_cast<size_t>(n);
    }
    file_bytes_ += off;
    {
        std::lock_guard lk(mu_);
        stats_.written_bytes += off;
    }
    out_.clear();
}

bool ServerLog::open_live_file() {
    const std::string root = dir_of(dir_);
    for (const std::string& d : {root, dir_})
        if (::mkdir(d.c_str(), 0700) != 0 && errno != EEXIST) {
            std::lock_guard lk(mu_);
            stats_.error = fmt::format("mkdir {}: {}", d, std::strerror(errno));
            return false;
        }
    auto f = open_file(live_file(dir_), O_WRONLY | O_CREAT | O_APPEND, 0600);
    auto l = open_file(dir_ + "/.lock", O_RDWR | O_CREAT, 0600);
    if (!f || !l) {
        std::lock_guard lk(mu_);
        stats_.error = !f ? f.error().message : l.error().message;
        return false;
    }
    file_ = std::move(*f);
    lock_ = std::move(*l);
    struct stat st {};
    file_bytes_ = ::fstat(file_.get(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
    return true;
}

bool rotate_log_file(const std::string& live, int files, int held) {
    struct stat open_file {
    }, named{};
    if (::fstat(held, &open_file) != 0 || ::stat(live.c_str(), &named) != 0 ||
        open_file.st_ino != named.st_ino || open_file.st_dev != named.st_dev)
        return false;
    auto numbered = [&](int n) { return n == 0 ? live : fmt::format("{}.{}", live, n); };
    ::unlink(numbered(files - 1).c_str());
    for (int n = files - 1; n >= 1; --n)
        ::rename(numbered(n - 1).c_str(), numbered(n).c_str());
    return true;
}

// Under the directory's lock, so that two sessions of one server rotate once between them.
void ServerLog::rotate() {
    ::flock(lock_.get(), LOCK_EX);
    if (rotate_log_file(live_file(dir_), settings_.files, file_.get())) {
        std::lock_guard lk(mu_);
        ++stats_.rotations;
    }
    file_.reset();
    ::flock(lock_.get(), LOCK_UN);
    if (!open_live_file()) file_.reset();
}

}  // namespace warden::shim
