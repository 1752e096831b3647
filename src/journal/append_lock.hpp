// The append lock: a turn queue in front of the flock on the journal's lock file. Every
// transaction of every writer (journal.cpp, "Many writers at once") holds it.
//
// The flock alone is not first come, first served: a writer that just released it takes it
// again before the others notice, and (worse) a waiter only finds it free by retrying. Under
// 16 writers that measured p50 0.5 ms but p99 134 ms and p99.9 197 ms: most appends went
// straight through, a few waited for dozens of turns. So writers queue first: the first
// page of the lock file, mapped shared, holds a ticket counter (`next`), the ticket whose
// turn it is (`serving`) and, per ticket, the holder's pid. A writer takes a ticket, sleeps
// on a futex until `serving` reaches it, then takes the flock (free by then, unless a
// writer without the queue holds it) and, after unlocking, moves `serving` on and wakes
// the others.
//
// The queue only orders; the flock still excludes. Whatever goes wrong with the queue
// costs fairness, never the chain: a ticket taken by a writer that was SIGKILLed (waiting,
// or holding) is skipped once its pid is gone or a zombie, checked after 20 ms without
// progress; a queue that has not moved for 200 ms (a holder we cannot see: another pid
// namespace, a garbled page) lets the waiter through at once. Waiters wait for `serving`
// to be at least their ticket, so skipping never strands anyone. A lock file that cannot
// be mapped leaves the flock alone in charge, as before.
//
// A ticket given up (its writer's wait ran out: give_up() clears its pid) is passed at once,
// by the writer whose turn ends before it (done) or by any waiter that finds it served. Left
// to the 20 ms check, such a ticket stranded writers that never wait that long: the keeper
// opens its journal ahead with no wait at all, so each attempt that found a turn taken left a
// ticket given up, the next attempt found that one served and gave up too, and so on for
// the whole session, with the journal idle. Only a slot stamped with the served ticket's own
// number and no pid is passed: a ticket just taken, not yet stamped, still shows an older
// number.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "journal/journal.hpp"

namespace warden::journal {

constexpr size_t kTurnPageSize = 4096;
constexpr uint32_t kTurnSlots = 256;

struct TurnPage {
    uint32_t next;
    uint32_t serving;
    uint64_t slots[kTurnSlots];  // (ticket << 32) | pid of the ticket's holder
};
static_assert(sizeof(TurnPage) <= kTurnPageSize);
static_assert(std::atomic_ref<uint32_t>::is_always_lock_free);
static_assert(std::atomic_ref<uint64_t>::is_always_lock_free);

class TurnQueue {
  public:
    TurnQueue() = default;
    TurnQueue(const TurnQueue&) = delete;
    TurnQueue& operator=(const TurnQueue&) = delete;
    ~TurnQueue();
    // Maps the lock file's first page (growing the file to a page). False: not available.
    bool map(int fd);
    bool mapped() const { return page_ != nullptr; }

    uint32_t take();
    // Sleeps until ticket t's turn or the deadline (false), asked again on every wake-up.
    bool wait(uint32_t t, const std::function<std::chrono::steady_clock::time_point()>& deadline);
    // Ticket t is done: the next one's turn.
    void done(uint32_t t);
    // Ticket t timed out before its turn: whoever finds it served passes it.
    void give_up(uint32_t t);
    // The test hook Options::keep_given_up_turns: given-up tickets wait for the stall check.
    void keep_given_up() { keep_given_up_ = true; }

  private:
    // Moves `serving` past the given-up tickets from s on, up to the first one taken by a
    // writer still waiting (or not taken yet). True when it moved; the waiters were woken.
    bool pass_given_up(uint32_t s);
    std::atomic_ref<uint32_t> next() { return std::atomic_ref<uint32_t>(page_->next); }
    std::atomic_ref<uint32_t> serving() { return std::atomic_ref<uint32_t>(page_->serving); }
    std::atomic_ref<uint64_t> slot(uint32_t t) {
        return std::atomic_ref<uint64_t>(page_->slots[t % kTurnSlots]);
    }
    static uint32_t turn_bit(uint32_t t) { return 1u << (t % 32); }
    void wake(uint32_t bits);

    TurnPage* page_ = nullptr;
    bool keep_given_up_ = false;
};

// Holds the append lock: a turn (when the queue is mapped) and the flock. Releases the
// flock first, then passes the turn on, so the next writer finds the flock free.
class AppendLock {
  public:
    AppendLock(TurnQueue* queue, LockTiming* timing)
        : queue_(queue && queue->mapped() ? queue : nullptr), timing_(timing) {}
    AppendLock(const AppendLock&) = delete;
    AppendLock& operator=(const AppendLock&) = delete;
    ~AppendLock();
    // Waits for this writer's turn, then for the flock (short non-blocking retries: a writer
    // outside the queue may still hold it), both within `timeout` — read again while waiting,
    // so that a bound shortened meanwhile (Journal::set_lock_wait) ends a wait under way.
    Status acquire(int fd, const std::string& path, const std::atomic<int64_t>& timeout_ms);

  private:
    TurnQueue* queue_;
    LockTiming* timing_;
    int fd_ = -1;
    uint32_t ticket_ = 0;
    bool has_turn_ = false;
    std::chrono::steady_clock::time_point acquired_{};
};

}  // namespace warden::journal
