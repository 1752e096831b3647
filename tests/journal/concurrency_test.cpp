// Many writer processes at once, and writers SIGKILLed mid-append: the chain stays one chain,
// seqs stay contiguous, and every append a writer was told succeeded is in the log.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <random>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "journal/journal.hpp"
#include "journal/verify.hpp"
#include "journal_test_util.hpp"

namespace warden::journal {
namespace {

using namespace testing_util;

// Child side: never returns.
[[noreturn]] void append_forever_or_n(const std::string& db, const std::string& session, int n,
                                      int ack_fd) {
    auto j = Journal::open({.path = db});
    if (!j) ::_exit(3);
    for (int i = 0; n < 0 || i < n; ++i) {
        auto a = (*j)->append(
            Event{"activity.request", session, 0,
                  Json{{"id", rpc_id_number(i)}, {"method", "tools/call"}, {"tool", "t"}}});
        if (!a) ::_exit(4);
        if (ack_fd >= 0 && ::write(ack_fd, &a->seq, sizeof a->seq) != sizeof a->seq) ::_exit(5);
    }
    j->reset();
    ::_exit(0);
}

// Percentage of records, up to the first writer's last, that follow a record of the same
// writer (all writers opened the journal before the start). Taking turns keeps it low (a
// writer repeats only when nobody else is queued, e.g. while the others are descheduled);
// with the flock alone one writer takes turn after turn and it is near 100.
long repeat_percent(bool fair_lock) {
    TempDir dir("/dev/shm");
    if (dir.path.empty()) return -1;
    std::string db = dir.path + "/journal.db";
    if (!Journal::open({.path = db}).ok()) return -1;
    constexpr int kWriters = 4, kEach = 60;
    int gate[2], ready[2];
    if (::pipe(gate) != 0) return -1;
    if (::pipe(ready) != 0) return -1;
    std::vector<pid_t> kids;
    for (int w = 0; w < kWriters; ++w) {
        pid_t pid = ::fork();
        if (pid < 0) break;
        if (pid == 0) {
            ::close(gate[1]);
            ::close(ready[0]);
            auto j = Journal::open({.path = db, .fair_lock = fair_lock});
            if (!j) ::_exit(3);
            char c = 'r';
            if (::write(ready[1], &c, 1) != 1) ::_exit(5);
            (void)::read(gate[0], &c, 1);  // everyone starts together
            for (int i = 0; i < kEach; ++i) {
                Event e{"activity.request", fmt::format("w{}", w), 0,
                        Json{{"id", rpc_id_number(i)}, {"method", "tools/call"}, {"tool", "t"}}};
                if (!(*j)->append(e)) ::_exit(4);
            }
            j->reset();
            ::_exit(0);
        }
        kids.push_back(pid);
    }
    ::close(ready[1]);
    char byte;
    for (size_t i = 0; i < kids.size(); ++i)  // bounded: EOF once every child is gone
        if (::read(ready[0], &byte, 1) != 1) break;
    ::close(ready[0]);
    ::close(gate[0]);
    ::close(gate[1]);
    bool ok = kids.size() == kWriters;
    for (pid_t pid : kids) {
        int status = 0;
        ok = ::waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
             ok;
    }
    if (!ok) return -1;
    std::string order =
        query_text(db,
                   "SELECT group_concat(substr(session, 2), '') FROM (SELECT session FROM records "
                   "WHERE kind = 'activity.request' ORDER BY seq)");
    std::map<char, int> count;
    long repeats = 0, n = 0;
    for (size_t i = 0; i < order.size(); ++i) {
        ++n;
        if (i > 0 && order[i] == order[i - 1]) ++repeats;
        if (++count[order[i]] == kEach) break;
    }
    return n ? repeats * 100 / n : -1;
}

// Writers take turns in arrival order: a writer that just appended queues behind the others
// instead of taking the lock again at once. Negative control: the flock alone lets one
// writer append run after run while the others wait.
TEST(Concurrency, WritersTakeTurnsInArrivalOrder) {
    long fair = repeat_percent(true);
    long unfair = repeat_percent(false);
    ASSERT_GE(fair, 0);
    ASSERT_GE(unfair, 0);
    EXPECT_LT(fair, 50) << fair << "% of appends went to the writer that had just appended";
    EXPECT_GE(unfair, 50) << "negative control: the flock alone took turns too (" << unfair
                          << "% repeats)";
}

TEST(Concurrency, SixteenWriterProcessesKeepOneContiguousChain) {
    TempDir dir("/dev/shm");
    ASSERT_FALSE(dir.path.empty());
    std::string db = dir.path + "/journal.db";
    { ASSERT_TRUE(Journal::open({.path = db}).ok()); }
    constexpr int kWriters = 16, kEach = 1000;
    std::vector<pid_t> kids;
    for (int w = 0; w < kWriters; ++w) {
        pid_t pid = ::fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) append_forever_or_n(db, fmt::format("writer-{}", w), kEach, -1);
        kids.push_back(pid);
    }
    for (pid_t pid : kids) {
        int status = 0;
        ASSERT_EQ(::waitpid(pid, &status, 0), pid);
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "writer status " << status;
    }
    EXPECT_EQ(query_int(db, "SELECT count(*) FROM records WHERE kind = 'activity.request'"),
              kWriters * kEach);
    EXPECT_EQ(
        query_int(db,
                  "SELECT count(DISTINCT session) FROM records WHERE kind = 'activity.request'"),
        kWriters);
    EXPECT_EQ(query_int(db, "SELECT max(seq) - count(*) FROM records"), 0);
    auto r = verify({.path = db});
    EXPECT_EQ(r.exit_code, 0) << r.reason;
    EXPECT_EQ(r.records, query_int(db, "SELECT count(*) FROM records"));
    for (const auto& w : r.warnings)
        EXPECT_EQ(w.find("projection"), std::string::npos) << w;
}

TEST(Concurrency, SigkilledWritersLoseNothingAcknowledgedAndBreakNothing) {
    TempDir dir("/dev/shm");
    ASSERT_FALSE(dir.path.empty());
    std::string db = dir.path + "/journal.db";
    { ASSERT_TRUE(Journal::open({.path = db, .checkpoint_every = 16}).ok()); }
    std::mt19937 rng(20261129);
    std::map<int64_t, std::string> acked;  // seq → session of the writer told it succeeded
    constexpr int kRounds = 100, kWritersPerRound = 3;
    for (int round = 0; round < kRounds; ++round) {
        struct Kid {
            pid_t pid;
            int fd;
            std::string session;
        };
        std::vector<Kid> kids;
        for (int w = 0; w < kWritersPerRound; ++w) {
            int p[2];
            ASSERT_EQ(::pipe(p), 0);
            std::string session = fmt::format("round-{}-{}", round, w);
            pid_t pid = ::fork();
            ASSERT_GE(pid, 0);
            if (pid == 0) {
                ::close(p[0]);
                append_forever_or_n(db, session, -1, p[1]);
            }
            ::close(p[1]);
            kids.push_back({pid, p[0], session});
        }
        // Each writer has opened the journal and finished one append before the clock
        // starts (on a slow machine the random delay alone can end before the open does,
        // and the round then tests nothing); then kill them one by one, at random moments,
        // in random order, each in the middle of its stream of appends.
        for (auto& k : kids) {
            pollfd pfd{k.fd, POLLIN, 0};
            ASSERT_EQ(::poll(&pfd, 1, 30'000), 1) << "writer " << k.session << " never appended";
            int64_t seq;
            ASSERT_EQ(::read(k.fd, &seq, sizeof seq), static_cast<ssize_t>(sizeof seq));
            acked[seq] = k.session;
        }
        std::shuffle(kids.begin(), kids.end(), rng);
        for (auto& k : kids) {
            ::usleep(std::uniform_int_distribution<useconds_t>(200, 4000)(rng));
            ASSERT_EQ(::kill(k.pid, SIGKILL), 0);
            int status = 0;
            ASSERT_EQ(::waitpid(k.pid, &status, 0), k.pid);
            ASSERT_TRUE(WIFSIGNALED(status)) << "writer exited by itself: " << WEXITSTATUS(status);
            int64_t seq;
            while (::read(k.fd, &seq, sizeof seq) == sizeof seq)
                acked[seq] = k.session;
            ::close(k.fd);
        }
    }
    ASSERT_GE(acked.size(), static_cast<size_t>(kRounds * kWritersPerRound));
    auto r = verify({.path = db});
    EXPECT_EQ(r.exit_code, 0) << r.reason;
    EXPECT_EQ(query_int(db, "SELECT max(seq) - count(*) FROM records"), 0);
    for (const auto& [seq, session] : acked)
        ASSERT_EQ(query_text(db, fmt::format("SELECT session FROM records WHERE seq = {}", seq)),
                  session)
            << "acknowledged seq " << seq << " missing or overwritten";
}

}  // namespace
}  // namespace warden::journal
