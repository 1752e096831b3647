// bench_journal: durable appends/s (1 and 16 writer processes) with latency percentiles,
// and verify speed and peak RSS on a large journal. Baselines from the same run:
//   - appends: a raw SQLite insert of the same body, WAL + synchronous=FULL, one row per
//     transaction, no lock file, no chain, no projections;
//   - verify: the chain alone (read rows, SHA-256 leaf + link), no parsing, no checks.
// Usage: bench_journal [--records N] [--appends N] [--writers N] [--each N] [--dir DIR]
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "journal/crypto.hpp"
#include "journal/journal.hpp"
#include "journal/verify.hpp"

using namespace warden::journal;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
    int64_t records = 1'000'000;
    int appends = 3000;
    int writers = 16;
    int each = 400;
    std::string dir = "/var/tmp";
};

double ms(Clock::duration d) {
    return std::chrono::duration<double, std::milli>(d).count();
}

struct Stats {
    double p50, p99, p999;
};
Stats percentiles(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    auto at = [&](double q) {
        return v.empty() ? 0.0 : v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))];
    };
    return {at(0.50), at(0.99), at(0.999)};
}

// A ~600-byte activity.request, like a tools/call with a preview.
Event request_event(const std::string& session, int i) {
    std::string args = fmt::format(
        R"({{"path":"/home/user/project/src/file_{}.cpp","mode":"read","context":"{}"}})", i,
        std::string(300, 'x'));
    return activity_request({session, rpc_id_number(i), "tools/call", "read_file", args,
                             warden::RecordArgs::Preview, 420});
}

double max_of(const std::vector<double>& v) {
    return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end());
}

std::string loadavg() {
    std::string s;
    if (FILE* f = std::fopen("/proc/loadavg", "r")) {
        char buf[128] = {};
        if (std::fgets(buf, sizeof buf, f)) s = buf;
        std::fclose(f);
    }
    while (!s.empty() && s.back() == '\n')
        s.pop_back();
    return s;
}

std::string fresh_dir(const std::string& base, const char* name) {
    std::string d = fmt::format("{}/mcpwarden-bench-{}-{}", base, name, ::getpid());
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
    return d;
}

// Per-append latency and, from Journal::last_lock_timing, the lock wait and hold (all ms).
struct Samples {
    std::vector<double> latency, wait, hold;
    void add(double l, double w, double h) {
        latency.push_back(l);
        wait.push_back(w);
        hold.push_back(h);
    }
};

// Appends n events through the journal.
Samples journal_appends(const std::string& db, const std::string& session, int n,
                        bool fair = true) {
    Samples out;
    auto j = Journal::open({.path = db, .fair_lock = fair});
    if (!j) {
        std::fprintf(stderr, "%s\n", j.error().message.c_str());
        std::exit(2);
    }
    for (int i = 0; i < n; ++i) {
        Event e = request_event(session, i);
        auto t0 = Clock::now();
        auto r = (*j)->append(e);
        double l = ms(Clock::now() - t0);
        if (!r) {
            std::fprintf(stderr, "%s\n", r.error().message.c_str());
            std::exit(2);
        }
        auto t = (*j)->last_lock_timing();
        out.add(l, static_cast<double>(t.wait_ns) / 1e6, static_cast<double>(t.hold_ns) / 1e6);
    }
    return out;
}

std::vector<double> raw_sqlite_inserts(const std::string& db, int n) {
    sqlite3* h = nullptr;
    sqlite3_open(db.c_str(), &h);
    sqlite3_exec(h,
                 "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; CREATE TABLE r(seq INTEGER "
                 "PRIMARY KEY, body BLOB)",
                 nullptr, nullptr, nullptr);
    sqlite3_stmt* s = nullptr;
    sqlite3_prepare_v2(h, "INSERT INTO r(body) VALUES(?1)", -1, &s, nullptr);
    std::string body = *canonical(request_event("s", 0).data);
    body.resize(600, ' ');
    std::vector<double> lat;
    for (int i = 0; i < n; ++i) {
        auto t0 = Clock::now();
        sqlite3_exec(h, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
        sqlite3_bind_blob(s, 1, body.data(), static_cast<int>(body.size()), SQLITE_STATIC);
        sqlite3_step(s);
        sqlite3_reset(s);
        sqlite3_exec(h, "COMMIT", nullptr, nullptr, nullptr);
        lat.push_back(ms(Clock::now() - t0));
    }
    sqlite3_finalize(s);
    sqlite3_close(h);
    return lat;
}

enum class Writers { raw, flock_only, fair };

// n writer processes; each sends its samples back through a pipe (latency, wait, hold).
std::pair<Samples, double> many_writers(const std::string& db, int writers, int each,
                                        Writers mode) {
    std::vector<std::pair<pid_t, int>> kids;
    auto t0 = Clock::now();
    for (int w = 0; w < writers; ++w) {
        int p[2];
        if (::pipe(p) != 0) std::exit(2);
        pid_t pid = ::fork();
        if (pid == 0) {
            ::close(p[0]);
            Samples out;
            if (mode == Writers::raw) {
                // Raw baseline: SQLite's own busy handler, no flock, no chain.
                sqlite3* h = nullptr;
                sqlite3_open(db.c_str(), &h);
                sqlite3_busy_timeout(h, 60000);
                sqlite3_exec(h, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL", nullptr,
                             nullptr, nullptr);
                sqlite3_stmt* s = nullptr;
                sqlite3_prepare_v2(h, "INSERT INTO r(body) VALUES(?1)", -1, &s, nullptr);
                std::string body(600, 'x');
                for (int i = 0; i < each; ++i) {
                    auto a = Clock::now();
                    while (sqlite3_exec(h, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) !=
                           SQLITE_OK) {
                    }
                    sqlite3_bind_blob(s, 1, body.data(), static_cast<int>(body.size()),
                                      SQLITE_STATIC);
                    sqlite3_step(s);
                    sqlite3_reset(s);
                    while (sqlite3_exec(h, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) {
                    }
                    out.add(ms(Clock::now() - a), 0, 0);
                }
                sqlite3_finalize(s);
                sqlite3_close(h);
            } else {
                out = journal_appends(db, fmt::format("writer-{}", w), each, mode == Writers::fair);
            }
            for (auto* v : {&out.latency, &out.wait, &out.hold}) {
                v->resize(static_cast<size_t>(each));
                size_t bytes = v->size() * sizeof(double);
                if (::write(p[1], v->data(), bytes) != static_cast<ssize_t>(bytes)) ::_exit(3);
            }
            ::_exit(0);
        }
        ::close(p[1]);
        kids.emplace_back(pid, p[0]);
    }
    Samples all;
    for (auto [pid, fd] : kids) {
        std::vector<double> buf(3 * static_cast<size_t>(each));
        size_t got = 0;
        while (got < buf.size() * sizeof(double)) {
            ssize_t n = ::read(fd, reinterpret_cast<char*>(buf.data()) + got,
                               buf.size() * sizeof(double) - got);
            if (n <= 0) break;
            got += static_cast<size_t>(n);
        }
        ::close(fd);
        int status;
        ::waitpid(pid, &status, 0);
        if (got != buf.size() * sizeof(double)) {
            std::fprintf(stderr, "writer %d failed (status %d)\n", static_cast<int>(pid), status);
            continue;
        }
        auto e = static_cast<std::ptrdiff_t>(each);
        all.latency.insert(all.latency.end(), buf.begin(), buf.begin() + e);
        all.wait.insert(all.wait.end(), buf.begin() + e, buf.begin() + 2 * e);
        all.hold.insert(all.hold.end(), buf.begin() + 2 * e, buf.end());
    }
    double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    return {all, secs};
}

// Runs fn in a child and returns (its result line, its peak RSS in KiB).
template <class F>
std::pair<std::string, long> in_child(F fn) {
    int p[2];
    if (::pipe(p) != 0) std::exit(2);
    pid_t pid = ::fork();
    if (pid == 0) {
        ::close(p[0]);
        std::string out = fn();
        if (::write(p[1], out.data(), out.size()) < 0) ::_exit(3);
        ::_exit(0);
    }
    ::close(p[1]);
    std::string out;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(p[0], buf, sizeof buf)) > 0)
        out.append(buf, static_cast<size_t>(n));
    ::close(p[0]);
    int status;
    struct rusage ru {};
    ::wait4(pid, &status, 0, &ru);
    return {out, ru.ru_maxrss};
}

}  // namespace

int main(int argc, char** argv) {
    Args a;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string k = argv[i];
        if (k == "--records")
            a.records = std::stoll(argv[i + 1]);
        else if (k == "--appends")
            a.appends = std::stoi(argv[i + 1]);
        else if (k == "--writers")
            a.writers = std::stoi(argv[i + 1]);
        else if (k == "--each")
            a.each = std::stoi(argv[i + 1]);
        else if (k == "--dir")
            a.dir = argv[i + 1];
        else {
            std::fprintf(stderr,
                         "usage: bench_journal [--records N] [--appends N] [--writers N] [--each "
                         "N] [--dir DIR]\n");
            return 2;
        }
    }
    std::printf(
        "bench_journal: dir %s, ~600-byte activity.request bodies, WAL + synchronous=FULL\n\n",
        a.dir.c_str());

    // 1. Single writer.
    if (a.appends > 0) {
        std::string d = fresh_dir(a.dir, "one");
        auto t0 = Clock::now();
        auto one = journal_appends(d + "/journal.db", "one", a.appends);
        double secs = std::chrono::duration<double>(Clock::now() - t0).count();
        auto rt0 = Clock::now();
        auto raw = raw_sqlite_inserts(d + "/raw.db", a.appends);
        double rsecs = std::chrono::duration<double>(Clock::now() - rt0).count();
        auto s = percentiles(one.latency), rs = percentiles(raw);
        auto hs = percentiles(one.hold);
        std::printf("1 writer, %d durable appends:\n", a.appends);
        std::printf("  journal  %8.0f appends/s  p50 %.2f ms  p99 %.2f ms  p99.9 %.2f ms\n",
                    a.appends / secs, s.p50, s.p99, s.p999);
        std::printf("    lock held  p50 %.2f ms  p99 %.2f ms  p99.9 %.2f ms  max %.2f ms\n", hs.p50,
                    hs.p99, hs.p999, max_of(one.hold));
        std::printf(
            "  baseline raw SQLite insert, no chain/lock/projection: %8.0f inserts/s  p50 %.2f ms  "
            "p99 %.2f ms\n",
            a.appends / rsecs, rs.p50, rs.p99);
        std::printf("  ratio journal/baseline throughput: %.2f\n\n",
                    (a.appends / secs) / (a.appends / rsecs));
        std::filesystem::remove_all(d);
    }
    // 2. N writers: the journal (turn queue + flock), the journal with the flock alone (the
    //    discipline before the queue), raw SQLite with its busy handler.
    if (a.each > 0) {
        std::printf("%d writer processes x %d durable appends (load %s):\n", a.writers, a.each,
                    loadavg().c_str());
        auto report = [&](const char* name, const Samples& x, double secs) {
            auto s = percentiles(x.latency);
            std::printf(
                "  %-40s %6.0f appends/s  p50 %6.2f ms  p99 %7.2f ms  p99.9 %7.2f ms  max %7.2f "
                "ms\n",
                name, static_cast<double>(x.latency.size()) / secs, s.p50, s.p99, s.p999,
                max_of(x.latency));
            if (x.hold.empty() || max_of(x.hold) == 0) return s;
            auto w = percentiles(x.wait), h = percentiles(x.hold);
            std::printf("    lock wait  p50 %6.2f ms  p99 %7.2f ms  p99.9 %7.2f ms  max %7.2f ms\n",
                        w.p50, w.p99, w.p999, max_of(x.wait));
            std::printf("    lock held  p50 %6.2f ms  p99 %7.2f ms  p99.9 %7.2f ms  max %7.2f ms\n",
                        h.p50, h.p99, h.p999, max_of(x.hold));
            return s;
        };
        std::string d = fresh_dir(a.dir, "many");
        { auto j = Journal::open({.path = d + "/journal.db"}); }
        auto [fair, secs] = many_writers(d + "/journal.db", a.writers, a.each, Writers::fair);
        auto [unfair, usecs] =
            many_writers(d + "/journal.db", a.writers, a.each, Writers::flock_only);
        sqlite3* h = nullptr;
        sqlite3_open((d + "/raw.db").c_str(), &h);
        sqlite3_exec(h,
                     "PRAGMA journal_mode=WAL; CREATE TABLE r(seq INTEGER PRIMARY KEY, body BLOB)",
                     nullptr, nullptr, nullptr);
        sqlite3_close(h);
        auto [raw, rsecs] = many_writers(d + "/raw.db", a.writers, a.each, Writers::raw);
        auto s = report("journal (turn queue + flock)", fair, secs);
        auto us = report("baseline journal, flock alone", unfair, usecs);
        auto rs = report("baseline raw SQLite, busy handler only", raw, rsecs);
        std::printf(
            "  ratio p99 journal/flock-alone: %.2f  p99.9: %.2f;  p99.9 journal/raw: %.2f\n",
            us.p99 > 0 ? s.p99 / us.p99 : 0.0, us.p999 > 0 ? s.p999 / us.p999 : 0.0,
            rs.p999 > 0 ? s.p999 / rs.p999 : 0.0);
        auto v = verify({.path = d + "/journal.db"});
        std::printf("  audit verify after both journal runs: exit %d, %lld records\n\n",
                    v.exit_code, static_cast<long long>(v.records));
        std::filesystem::remove_all(d);
    }
    // 3. Verify on a large journal.
    if (a.records > 0) {
        std::string d = fresh_dir(a.dir, "verify");
        std::string db = d + "/journal.db";
        auto t0 = Clock::now();
        {
            auto j = Journal::open({.path = db});
            if (!j) return 2;
            std::vector<Event> batch;
            int64_t written = 0;
            int session = 0;
            while (written < a.records) {
                batch.clear();
                std::string sid = fmt::format("session-{}", session++);
                for (int i = 0;
                     i < 1000 && written + static_cast<int64_t>(batch.size()) < a.records; ++i)
                    batch.push_back(request_event(sid, i));
                auto r = (*j)->append_all(batch);
                if (!r) {
                    std::fprintf(stderr, "%s\n", r.error().message.c_str());
                    return 2;
                }
                written = r->seq;
            }
        }
        double build = std::chrono::duration<double>(Clock::now() - t0).count();
        auto [vline, vrss] = in_child([&] {
            auto r = verify({.path = db});
            return fmt::format("{} {} {}", r.exit_code, r.records, r.seconds);
        });
        int code = 0;
        long long recs = 0;
        double vsecs = 0;
        std::sscanf(vline.c_str(), "%d %lld %lf", &code, &recs, &vsecs);
        auto [cline, crss] = in_child([&] {
            auto c0 = Clock::now();
            sqlite3* h = nullptr;
            sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr);
            sqlite3_stmt* s = nullptr;
            sqlite3_prepare_v2(h, "SELECT body FROM records ORDER BY seq", -1, &s, nullptr);
            Hasher hs;
            Hash prev{};
            long long n = 0;
            while (sqlite3_step(s) == SQLITE_ROW) {
                std::string_view b(static_cast<const char*>(sqlite3_column_blob(s, 0)),
                                   static_cast<size_t>(sqlite3_column_bytes(s, 0)));
                prev = hs.chain(prev, hs.leaf(b));
                ++n;
            }
            sqlite3_finalize(s);
            sqlite3_close(h);
            return fmt::format("{} {}", n,
                               std::chrono::duration<double>(Clock::now() - c0).count());
        });
        long long cn = 0;
        double csecs = 0;
        std::sscanf(cline.c_str(), "%lld %lf", &cn, &csecs);
        std::printf(
            "verify, %lld records (built in %.1f s with batched appends, %.0f records/s):\n", recs,
            build, a.records / build);
        std::printf("  audit verify  exit %d  %8.0f records/s  peak RSS %.1f MiB\n", code,
                    recs / vsecs, vrss / 1024.0);
        std::printf(
            "  baseline chain only (read + SHA-256 leaf and link, no checks): %8.0f records/s  "
            "peak RSS %.1f MiB\n",
            cn / csecs, crss / 1024.0);
        std::printf("  ratio verify/chain-only throughput: %.2f\n", (recs / vsecs) / (cn / csecs));
        std::filesystem::remove_all(d);
    }
    return 0;
}
