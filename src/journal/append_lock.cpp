// The append lock (append_lock.hpp): the turn queue's tickets and the flock behind them.
#include "journal/append_lock.hpp"

#include <errno.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <optional>

#include <fmt/format.h>

#include "proc/process.hpp"

namespace warden::journal {

namespace {

constexpr auto kTurnCheckAfter = std::chrono::milliseconds(20);
constexpr auto kTurnStall = std::chrono::milliseconds(200);

long turn_futex(uint32_t* addr, int op, uint32_t val, const timespec* timeout, uint32_t bits) {
    return ::syscall(SYS_futex, addr, op, val, timeout, nullptr, bits);
}

// True when `pid` can no longer hold a turn: gone, or a zombie (kill(pid, 0) still answers
// for those). pid 0 marks a ticket given up after a timeout.
bool turn_holder_gone(pid_t pid) {
    if (pid <= 0) return true;
    if (::kill(pid, 0) != 0) return errno == ESRCH;
    auto p = read_process(pid, kStat);
    if (!p) return p.error().code == ENOENT || p.error().code == ESRCH;
    return p->zombie();
}

}  // namespace

TurnQueue::~TurnQueue() {
    if (page_) ::munmap(page_, kTurnPageSize);
}

bool TurnQueue::map(int fd) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) return false;
    if (st.st_size < static_cast<off_t>(kTurnPageSize) &&
        ::ftruncate(fd, static_cast<off_t>(kTurnPageSize)) != 0)
        return false;
    void* p = ::mmap(nullptr, kTurnPageSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return false;
    page_ = static_cast<TurnPage*>(p);
    return true;
}

uint32_t TurnQueue::take() {
    uint32_t t = next().fetch_add(1, std::memory_order_acq_rel);
    slot(t).store((static_cast<uint64_t>(t) << 32) | static_cast<uint32_t>(::getpid()),
                  std::memory_order_release);
    // Legal states have serving <= next; a page garbled ahead would let everyone
    // through forever. Pull it back to this ticket.
    uint32_t s = serving().load(std::memory_order_acquire);
    if (static_cast<int32_t>(s - t) > 1) serving().compare_exchange_strong(s, t);
    return t;
}

bool TurnQueue::wait(uint32_t t,
                     const std::function<std::chrono::steady_clock::time_point()>& deadline) {
    uint32_t seen = serving().load(std::memory_order_acquire);
    auto since = std::chrono::steady_clock::now();
    for (;;) {
        uint32_t s = serving().load(std::memory_order_acquire);
        if (static_cast<int32_t>(s - t) < 0 && pass_given_up(s))
            s = serving().load(std::memory_order_acquire);
        if (static_cast<int32_t>(s - t) >= 0) return true;
        auto now = std::chrono::steady_clock::now();
        if (s != seen) {
            seen = s;
            since = now;
        } else if (now - since >= kTurnCheckAfter) {
            uint64_t holder = slot(s).load(std::memory_order_acquire);
            std::optional<uint32_t> to;
            if (static_cast<uint32_t>(holder >> 32) == s &&
                turn_holder_gone(static_cast<pid_t>(holder & 0xffffffffu)))
                to = s + 1;  // a dead writer's turn
            else if (now - since >= kTurnStall)
                to = t;  // a holder we cannot see: stop queueing behind it
            if (to) {
                if (serving().compare_exchange_strong(s, *to, std::memory_order_acq_rel))
                    wake(FUTEX_BITSET_MATCH_ANY);
                since = now;
                continue;
            }
        }
        if (now >= deadline()) return false;
        // Woken by the turn before ours only (bit t % 32), or by a skip; 10 ms at most.
        timespec until{};
        ::clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += 10'000'000;
        if (until.tv_nsec >= 1'000'000'000) {
            until.tv_sec += 1;
            until.tv_nsec -= 1'000'000'000;
        }
        turn_futex(&page_->serving, FUTEX_WAIT_BITSET, s, &until, turn_bit(t));
    }
}

void TurnQueue::done(uint32_t t) {
    uint32_t s = serving().load(std::memory_order_acquire);
    while (static_cast<int32_t>(t + 1 - s) > 0)
        if (serving().compare_exchange_weak(s, t + 1, std::memory_order_acq_rel)) break;
    if (pass_given_up(t + 1)) return;  // it woke whoever is served now
    if (next().load(std::memory_order_acquire) != t + 1) wake(turn_bit(t + 1));
}

void TurnQueue::give_up(uint32_t t) {
    slot(t).store(static_cast<uint64_t>(t) << 32, std::memory_order_release);
}

bool TurnQueue::pass_given_up(uint32_t s) {
    if (keep_given_up_) return false;
    bool moved = false;
    while (s != next().load(std::memory_order_acquire) &&
           slot(s).load(std::memory_order_acquire) == static_cast<uint64_t>(s) << 32 &&
           serving().compare_exchange_strong(s, s + 1, std::memory_order_acq_rel)) {
        ++s;
        moved = true;
    }
    if (moved) wake(FUTEX_BITSET_MATCH_ANY);
    return moved;
}

void TurnQueue::wake(uint32_t bits) {
    turn_futex(&page_->serving, FUTEX_WAKE_BITSET, INT_MAX, nullptr, bits);
}

AppendLock::~AppendLock() {
    if (fd_ >= 0) ::flock(fd_, LOCK_UN);
    if (has_turn_) queue_->done(ticket_);
    if (timing_ && fd_ >= 0)
        timing_->hold_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::steady_clock::now() - acquired_)
                               .count();
}

Status AppendLock::acquire(int fd, const std::string& path,
                           const std::atomic<int64_t>& timeout_ms) {
    auto start = std::chrono::steady_clock::now();
    auto deadline = [&] { return start + std::chrono::milliseconds(timeout_ms.load()); };
    auto timed_out = [&] {
        return Error{fmt::format("journal lock {}: still held by another writer after {} ms", path,
                                 timeout_ms.load()),
                     EWOULDBLOCK};
    };
    if (queue_) {
        ticket_ = queue_->take();
        if (!queue_->wait(ticket_, deadline)) {
            queue_->give_up(ticket_);
            return timed_out();
        }
        has_turn_ = true;
    }
    long sleep_us = 20;
    for (;;) {
        if (::flock(fd, LOCK_EX | LOCK_NB) == 0) break;
        if (errno != EWOULDBLOCK && errno != EINTR) return Error::sys("flock", path, errno);
        if (std::chrono::steady_clock::now() >= deadline()) return timed_out();
        ::usleep(static_cast<useconds_t>(sleep_us));
        sleep_us = std::min(sleep_us * 2, 1000L);
    }
    fd_ = fd;
    acquired_ = std::chrono::steady_clock::now();
    if (timing_) {
        timing_->wait_ns =
            std::chrono::duration_cast<std::chrono::nanoseconds>(acquired_ - start).count();
        timing_->hold_ns = 0;
    }
    return {};
}

}  // namespace warden::journal
