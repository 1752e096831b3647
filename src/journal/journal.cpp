// The journal's hash chain and its append path.
//
// What can go wrong, and how each step answers it
// ------------------------------------------------
// The journal is evidence: after a client died mid-call, it is how anyone learns which run
// owned the server, what it was last asked, whether it answered, and what was signalled.
// Evidence is only worth something if changing it afterwards shows, and if writing it never
// silently loses or invents a record. The threats, in the order an append meets them:
//
// * Many writers at once. Every `mcpwarden run` appends to the same per-user database, and
//   so do `reap` and `journal reconcile`. SQLite serializes writers, but its busy handler
//   sleeps and retries: under 16 writers it measured p99.9 at 186 ms with 2.8 s stalls. So
//   an append first takes an exclusive flock on the sidecar `journal.lock` and SQLite never
//   sees contention. The flock is held by an open file, so it dies with its process: a
//   writer killed while holding it blocks nobody. A flock is not first come, first served,
//   though, so writers first queue for their turn in a ticket page mapped from the same
//   file (see "The append lock" below); the queue orders, the flock excludes.
//
// * Two writers that both think they are at the head. Another audit log forked its chain
//   eight times because each writer cached the head between appends. Here the head is read
//   *inside* `BEGIN IMMEDIATE` (which takes SQLite's write lock before reading), the new
//   record gets seq = head + 1 and chain = H(0x10 ‖ prev ‖ leaf), and the head row is updated
//   in the same transaction. Nothing about the head survives the transaction in memory.
//
// * A crash anywhere in the append: SIGKILL, power loss, ENOSPC. The record, the head update
//   and the projection updates are one transaction in a WAL database: either all of it is
//   in the WAL when `append` returns, or none of it is visible after recovery. `append` only
//   returns success after COMMIT, so anything the caller was told was written survives the
//   death of any process; anything else leaves no trace, not even a gap, because seq
//   numbers are taken inside the transaction. Against an OS crash or power loss, the WAL is
//   fsync'd at most a second after a commit, at once after a checkpoint or a session end
//   ("Durability" below), or in every commit with JournalSync::Always.
//
// * A journal that cannot be written (full disk, read-only, another user's files). The shim
//   forwards the call anyway by default and counts what it could not record; the first
//   transaction that succeeds afterwards begins with a journal.degraded record saying how
//   many records of each kind were lost and the ids of the requests concerned, so a gap is
//   never silent.
//
// * Edits after the fact. Each stored body is canonical JSON and is hashed exactly as
//   stored: leaf = SHA-256(0x00 ‖ body), chain = SHA-256(0x10 ‖ prev ‖ leaf), genesis prev =
//   32 zero bytes (domain-separated, so a leaf can never pose as a link). A changed byte
//   breaks the leaf; a recomputed leaf breaks the link; a recomputed link breaks the next
//   row's link. The index columns (seq, ts, kind, session, origin) are repeated inside the
//   body, so editing a column without the body shows as well. Update and delete triggers
//   stop accidents; the hashes catch whoever drops the triggers.
//
// * Rewriting a whole suffix, or truncating. Someone who recomputes every hash from the
//   edit to the end produces a consistent chain. Against that, every 256 records, after 60 s,
//   and at every session end, the writer signs (origin, seq, chain) with an Ed25519 key
//   whose public half is pinned in the database and in `journal.pub`, stores the signature
//   in the `checkpoints` table, and writes it as a file `checkpoints/SEQ` outside the
//   database (temp file, fsync, rename, fsync of the directory, so a crash leaves either
//   the old set or the new one). A rewritten suffix no longer matches the first checkpoint
//   that covers it; a log truncated below a checkpoint is caught by the file or by a copy
//   kept elsewhere (`verify --trusted-checkpoint`). The checkpoint itself is a record of the
//   chain (kind `checkpoint`), signed over its own chain value, so a checkpoint leaves no
//   unanchored tail behind it.
//
// * Rollback of everything together. A same-user attacker can read the private key, rewrite
//   the database, the files and `journal.pub`. Nothing on this machine can detect that: only
//   a checkpoint or public key copied off the host can. `verify` says so, and says where the
//   private key lives; the unanchored tail (records after the last checkpoint) is the
//   window a truncation can hide in, and `verify` reports its size.
//
// * The relay's hot path. Only what can act (the request before it is forwarded, snapshots
//   and signals before they happen, session start and end) is appended synchronously. The
//   rest is posted to a queue that one background thread commits in batches under the same
//   lock discipline. A synchronous append commits whatever was posted before it in the same
//   transaction, so the log keeps the order the caller issued events in. A batch that cannot
//   be written is counted, and recorded as `journal.degraded` as soon as the journal accepts
//   writes again.
#include "journal/journal.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <pwd.h>
#include <sched.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <dirent.h>
#include <algorithm>
#include <atomic>
#include <cctype>
#include <climits>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <simdjson.h>

#include "fault/faults.hpp"
#include "journal/checkpoint.hpp"
#include "journal/intents.hpp"
#include "journal/losses.hpp"
#include "journal/store.hpp"
#include "sys/fd.hpp"

namespace warden::journal {

int64_t now_ns() {
    timespec ts{};
    ::clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

Paths Paths::for_db(const std::string& db) {
    Paths p;
    p.db = db;
    auto slash = db.find_last_of('/');
    p.dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : db.substr(0, slash));
    std::string name = slash == std::string::npos ? db : db.substr(slash + 1);
    std::string base = name;
    if (base.size() > 3 && base.ends_with(".db")) base.resize(base.size() - 3);
    std::string prefix = p.dir == "/" ? "/" : p.dir + "/";
    p.lock = prefix + base + ".lock";
    p.key = prefix + base + ".key";
    p.pub = prefix + base + ".pub";
    p.checkpoints = base == "journal" ? prefix + "checkpoints" : prefix + base + ".checkpoints";
    p.intents = base == "journal" ? prefix + "intents" : prefix + base + ".intents";
    return p;
}

std::string Paths::intent_file(std::string_view session) const {
    if (session.empty() || session.size() > 128 || session.front() == '.') return {};
    for (char c : session)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.')
            return {};
    return intents + "/" + std::string(session) + ".intent";
}

std::string home_directory() {
    if (const char* home = std::getenv("HOME"); home && *home == '/') return home;
    // No HOME (`env -i`, some service managers): the password database knows it.
    std::vector<char> buf(16384);
    passwd pw{};
    passwd* found = nullptr;
    if (::getpwuid_r(::geteuid(), &pw, buf.data(), buf.size(), &found) == 0 && found &&
        found->pw_dir && found->pw_dir[0] == '/')
        return found->pw_dir;
    return {};
}

Result<std::string> resolve_path(std::string_view flag) {
    if (!flag.empty()) return std::string(flag);
    if (const char* env = std::getenv("MCPWARDEN_JOURNAL"); env && *env) return std::string(env);
    if (const char* xdg = std::getenv("XDG_STATE_HOME"); xdg && *xdg == '/')
        return std::string(xdg) + "/mcpwarden/journal.db";
    if (std::string home = home_directory(); !home.empty())
        return home + "/.local/state/mcpwarden/journal.db";
    return Error::msg(fmt::format(
        "journal: neither XDG_STATE_HOME nor HOME is set and uid {} has no home directory in "
        "the password database; pass --journal PATH or set MCPWARDEN_JOURNAL",
        ::geteuid()));
}

// ---- Impl ---------------------------------------------------------------------------------

namespace {

// An event serialized outside the lock: everything of the body except seq.
struct Prepared {
    Event event;
    int64_t ts;
    int64_t ticket = 0;      // < 0: written to the intent file as this ticket (append_intent)
    std::string before_seq;  // {"data":…,"kind":…,"origin":…,"seq":
    std::string after_seq;   // ,"session":…,"ts":…,"v":1}
    // A record that names its request by a ticket ("request_seq":-N, the last key of its
    // data): where that number is in before_seq, so that the writer puts the request's seq
    // in its place without serialising the data again. Length 0: not found, prepare again.
    size_t ticket_at = 0, ticket_len = 0;
};

// A string as canonical() writes it (canonical_json.hpp: non-UTF-8 as {"b64":…}), appended
// without building a Json value: the envelope of every record has three of them.
void append_canonical_string(std::string& out, std::string_view s) {
    if (valid_utf8(s)) {
        append_json_string(out, s);
        return;
    }
    out += "{\"b64\":";
    append_json_string(out, base64_encode(s));
    out += '}';
}

// The record's body but its seq, for `origin` (Journal::Impl::prepare): of `e`, or of the
// event already in `p` (the caller's, moved there rather than copied).
Result<Prepared> prepare_record(const Event& e, std::string_view origin);
Status prepare_record_into(Prepared& p, std::string_view origin,
                           const CanonicalMember* member = nullptr);

// The envelope around a record's data, once `p.before_seq` holds `{"data":DATA` and `p.ts` is
// set: the rest of before_seq up to the seq, and after_seq.
void close_envelope(Prepared& p, std::string_view kind, std::string_view origin,
                    std::string_view session) {
    p.before_seq += ",\"kind\":";
    append_canonical_string(p.before_seq, kind);
    p.before_seq += ",\"origin\":";
    append_canonical_string(p.before_seq, origin);
    p.before_seq += ",\"seq\":";
    p.after_seq.reserve(session.size() + 48);
    p.after_seq += ",\"session\":";
    append_canonical_string(p.after_seq, session);
    p.after_seq += ",\"ts\":";
    p.after_seq += std::to_string(p.ts);
    p.after_seq += ",\"v\":1}";
}

// A prepared record as a line of an intent file: its body with seq 0.
void append_intent_line(std::string& text, const Prepared& p) {
    text += p.before_seq;
    text += '0';
    text += p.after_seq;
    text += '\n';
}

// ---- The append lock: a turn queue in front of the flock --------------------------------
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

constexpr size_t kTurnPageSize = 4096;
constexpr uint32_t kTurnSlots = 256;
constexpr auto kTurnCheckAfter = std::chrono::milliseconds(20);
constexpr auto kTurnStall = std::chrono::milliseconds(200);

struct TurnPage {
    uint32_t next;
    uint32_t serving;
    uint64_t slots[kTurnSlots];  // (ticket << 32) | pid of the ticket's holder
};
static_assert(sizeof(TurnPage) <= kTurnPageSize);
static_assert(std::atomic_ref<uint32_t>::is_always_lock_free);
static_assert(std::atomic_ref<uint64_t>::is_always_lock_free);

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

class TurnQueue {
  public:
    TurnQueue() = default;
    TurnQueue(const TurnQueue&) = delete;
    TurnQueue& operator=(const TurnQueue&) = delete;
    ~TurnQueue() {
        if (page_) ::munmap(page_, kTurnPageSize);
    }
    // Maps the lock file's first page (growing the file to a page). False: not available.
    bool map(int fd) {
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
    bool mapped() const { return page_ != nullptr; }

    uint32_t take() {
        uint32_t t = next().fetch_add(1, std::memory_order_acq_rel);
        slot(t).store((static_cast<uint64_t>(t) << 32) | static_cast<uint32_t>(::getpid()),
                      std::memory_order_release);
        // Legal states have serving <= next; a page garbled ahead would let everyone
        // through forever. Pull it back to this ticket.
        uint32_t s = serving().load(std::memory_order_acquire);
        if (static_cast<int32_t>(s - t) > 1) serving().compare_exchange_strong(s, t);
        return t;
    }

    // Sleeps until ticket t's turn or the deadline (false), asked again on every wake-up.
    bool wait(uint32_t t, const std::function<std::chrono::steady_clock::time_point()>& deadline) {
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

    // Ticket t is done: the next one's turn.
    void done(uint32_t t) {
        uint32_t s = serving().load(std::memory_order_acquire);
        while (static_cast<int32_t>(t + 1 - s) > 0)
            if (serving().compare_exchange_weak(s, t + 1, std::memory_order_acq_rel)) break;
        if (pass_given_up(t + 1)) return;  // it woke whoever is served now
        if (next().load(std::memory_order_acquire) != t + 1) wake(turn_bit(t + 1));
    }
    // Ticket t timed out before its turn: whoever finds it served passes it.
    void give_up(uint32_t t) {
        slot(t).store(static_cast<uint64_t>(t) << 32, std::memory_order_release);
    }
    // The test hook Options::keep_given_up_turns: given-up tickets wait for the stall check.
    void keep_given_up() { keep_given_up_ = true; }

  private:
    // Moves `serving` past the given-up tickets from s on, up to the first one taken by a
    // writer still waiting (or not taken yet). True when it moved; the waiters were woken.
    bool pass_given_up(uint32_t s) {
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
    std::atomic_ref<uint32_t> next() { return std::atomic_ref<uint32_t>(page_->next); }
    std::atomic_ref<uint32_t> serving() { return std::atomic_ref<uint32_t>(page_->serving); }
    std::atomic_ref<uint64_t> slot(uint32_t t) {
        return std::atomic_ref<uint64_t>(page_->slots[t % kTurnSlots]);
    }
    static uint32_t turn_bit(uint32_t t) { return 1u << (t % 32); }
    void wake(uint32_t bits) {
        turn_futex(&page_->serving, FUTEX_WAKE_BITSET, INT_MAX, nullptr, bits);
    }

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
    ~AppendLock() {
        if (fd_ >= 0) ::flock(fd_, LOCK_UN);
        if (has_turn_) queue_->done(ticket_);
        if (timing_ && fd_ >= 0)
            timing_->hold_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now() - acquired_)
                                   .count();
    }
    // Waits for this writer's turn, then for the flock (short non-blocking retries: a writer
    // outside the queue may still hold it), both within `timeout` — read again while waiting,
    // so that a bound shortened meanwhile (Journal::set_lock_wait) ends a wait under way.
    Status acquire(int fd, const std::string& path, const std::atomic<int64_t>& timeout_ms) {
        auto start = std::chrono::steady_clock::now();
        auto deadline = [&] { return start + std::chrono::milliseconds(timeout_ms.load()); };
        auto timed_out = [&] {
            return Error{fmt::format("journal lock {}: still held by another writer after {} ms",
                                     path, timeout_ms.load()),
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

  private:
    TurnQueue* queue_;
    LockTiming* timing_;
    int fd_ = -1;
    uint32_t ticket_ = 0;
    bool has_turn_ = false;
    std::chrono::steady_clock::time_point acquired_{};
};

}  // namespace

struct Journal::Impl {
    Options options;
    const Faults faults = Faults::from_env();  // read once: commit() consults them
    Paths paths;
    std::string origin;
    std::optional<SigningKey> key;
    PublicKey pub{};
    Db db;
    Fd lock_fd;
    TurnQueue turns;  // declared after lock_fd: unmapped before the fd closes
    LockTiming timing;

    Stmt head_get, head_set, insert_record, last_checkpoint, insert_checkpoint;
    Stmt session_insert, session_state, session_end, activity_insert, activity_resolve;

    // commit_mu serializes transactions of this process (the flock is per open file, so it
    // does not exclude our own threads) and makes queue takes + commits one atomic step.
    std::mutex commit_mu;

    std::mutex q_mu;
    std::condition_variable q_cv, done_cv;
    std::deque<Prepared> queue;
    uint64_t posted = 0, processed = 0;
    bool stopping = false;
    std::thread worker;
    std::optional<Error> async_error;  // first failure since the last flush
    Losses lost;                       // events dropped or failed, not yet recorded
    Losses committing;                 // taken from `lost` by a commit under way (commit_owed)
    LossCount counted;                 // everything counted since open (Journal::losses)
    // Where the counts not on record yet are kept for the next writer, should this one never
    // get to record them (losses.hpp): claimed at the first loss.
    std::optional<LossSlot> loss_slot;
    bool loss_slot_tried = false;
    bool dirty_since_checkpoint = false;
    // JournalSync::Periodic: commits not yet fsync'd, and when the WAL was last (steady clock, ns).
    std::atomic<bool> unsynced{false};
    std::atomic<int64_t> last_sync_ns{0};
    // The WAL holds this many frames or more: the writer thread checkpoints it ("WAL
    // checkpoints" below), on a connection of its own.
    std::atomic<bool> wal_checkpoint_due{false};
    // A hot commit crossed the checkpoint cadence or interval: the writer thread signs.
    std::atomic<bool> checkpoint_owed{false};
    bool worker_idle = false;              // waiting with nothing queued: a post wakes it (q_mu)
    int flush_waiters = 0;                 // flush() calls waiting for the queue (q_mu)
    std::atomic<int64_t> lock_wait_ms{0};  // bound of each wait for the append lock
    Db checkpointer;

    // Intents ("Intents" below). The file and the ticket counter under intent_mu, taken
    // before q_mu and never by the writer thread: the relay's write() to the file holds up
    // no one but another intent. The tickets' seqs under commit_mu.
    std::mutex intent_mu;
    Fd intent_fd;
    std::string intent_path;
    int64_t last_ticket = 0;
    uint64_t intents_written = 0;
    std::atomic<uint64_t> intents_committed{0};
    std::map<int64_t, int64_t> ticket_seq;  // committed, not yet settled
    bool closed = false;                    // close() was called: the destructor does not again
    // leave_end_sync_to_next_writer(): a session.end's WAL fsync and checkpoint file are the
    // next writer's (end_left: one was left), and so is the WAL's copy into the database.
    std::atomic<bool> leave_end_sync{false};
    bool end_left = false;

    Status init();
    Status prepare_statements();
    // `hot`: a synchronous append on the caller's path (a request before it is forwarded):
    // a checkpoint due by cadence or interval is left to the writer thread.
    // `items` are left in place (a ticket resolved, produced events added at the end): what
    // failed is counted from them, without a copy of each made beforehand.
    Result<Appended> commit(std::vector<Prepared>& items, std::string_view force_checkpoint,
                            const Producer* produce, bool hot = false);
    Result<Appended> commit(std::vector<Prepared>&& items, std::string_view force_checkpoint,
                            const Producer* produce, bool hot = false) {
        return commit(items, force_checkpoint, produce, hot);
    }
    Status project(const Event& e, int64_t seq, int64_t ts);
    Result<Prepared> prepare(const Event& e) const;
    // Serializes p.event (moved in by the caller: post() takes its event) into p.
    Status prepare_into(Prepared& p) const;
    // Queue plumbing; take_queue needs q_mu held, the others take it.
    void take_queue(std::deque<Prepared>& out, size_t limit);
    Result<Appended> commit_owed(std::vector<Prepared> mine, size_t take_limit,
                                 std::string_view force_checkpoint, bool hot = false);
    bool worker_has_work_locked() const;
    void sync_wal();
    void sync_if_due();
    void checkpoint_wal();
    static int wal_grew(void* self, sqlite3* db, const char* name, int pages);
    void run_worker();
    void start_worker_locked();
    void stop_worker();
    // Queues `p` as post() does; `prepared` failed: counted as lost instead.
    void post_prepared(Prepared p, const Status& prepared);
    // Queues a prepared event and wakes the writer thread if it waits idle. Needs q_mu.
    void enqueue_locked(Prepared p, std::unique_lock<std::mutex>& lk);
    void enqueue_locked_wake(std::unique_lock<std::mutex>& lk);  // after queue.push_back
    Status open_intent_file_locked(const std::string& session);
    // Counts `e` as lost (needs q_mu), and keeps what is owed in the loss slot.
    void count_lost_locked(const Event& e, const std::string& why);
    void keep_losses_locked();
    // The counts of writers gone before they could record them (losses.hpp), on record now.
    void record_left_losses();
};

Result<Prepared> Journal::Impl::prepare(const Event& e) const {
    return prepare_record(e, origin);
}

Status Journal::Impl::prepare_into(Prepared& p) const {
    return prepare_record_into(p, origin);
}

namespace {

Result<Prepared> prepare_record(const Event& e, std::string_view origin) {
    Prepared p;
    p.event = e;
    if (auto st = prepare_record_into(p, origin); !st) return st.error();
    return p;
}

// With a `member` (Journal::append's CanonicalMember): spliced as its text stands when that is
// canonical, and then in the body only, not in p.event.data, which only project() reads again
// (no projection reads such a member: session.end's teardown); else parsed into
// p.event.data and serialized with the rest.
Status prepare_record_into(Prepared& p, std::string_view origin, const CanonicalMember* member) {
    const Event& e = p.event;
    if (e.kind.empty()) return Error::msg("journal: event without a kind");
    if (!e.data.is_object() && !e.data.is_null())
        return Error::msg(fmt::format("journal: {} event data is not a JSON object", e.kind));
    Result<std::string> data = std::string("{}");
    if (member) {
        if (p.event.data.is_null()) p.event.data = Json::object();
        data = canonical_with(e.data, member->key, member->text);
        if (!data) {
            // Not canonical: parsed and serialized with the rest, when it is JSON at all.
            auto parsed = Json::parse(member->text, nullptr, false);
            if (parsed.is_discarded())
                return Error::msg(
                    fmt::format("journal: {} event: {}", e.kind, data.error().message));
            p.event.data[std::string(member->key)] = std::move(parsed);
            data = canonical(e.data);
        }
    } else if (!e.data.is_null()) {
        data = canonical(e.data);
    }
    if (!data)
        return Error::msg(fmt::format("journal: {} event: {}", e.kind, data.error().message));
    p.ts = e.ts_ns ? e.ts_ns : now_ns();
    p.before_seq.reserve(data->size() + 128);
    p.before_seq += "{\"data\":";
    if (auto rs = e.data.is_object() ? e.data.find("request_seq") : e.data.end();
        rs != e.data.end() && rs->is_number_integer() && rs->get<int64_t>() < 0) {
        // Canonical keys are sorted: request_seq is the data's last key in every record that
        // names a request by a ticket. Found at the very end of the top-level object only.
        std::string number = std::to_string(rs->get<int64_t>());
        std::string tail = "\"request_seq\":" + number + "}";
        if (data->size() > tail.size() && data->ends_with(tail) &&
            ((*data)[data->size() - tail.size() - 1] == ',' ||
             (*data)[data->size() - tail.size() - 1] == '{')) {
            p.ticket_at = p.before_seq.size() + data->size() - 1 - number.size();
            p.ticket_len = number.size();
        }
    }
    p.before_seq += *data;
    close_envelope(p, e.kind, origin, e.session);
    return {};
}

// A teardown record's intent line back into the record it was prepared as, for `origin`,
// without building its data as a Json: the relay commits the keeper's records with its
// session.end, and parsing each line into a Json only for prepare() to serialize it again
// was most of the relay's time between the keeper's report and `run`'s exit (a teardown
// record has no projection: its data is never read). The line is parsed (simdjson: it
// is JSON) and then held to the envelope append_intent_line writes, exactly: seven keys
// in canonical order, the data a canonical object, seq 0 and no origin, of `session`. So
// what is committed is the line's own data, under this writer's origin, byte for byte what
// prepare() would have made of it.
Result<Prepared> prepared_from_intent_line(std::string_view line, std::string_view session,
                                           std::string_view origin) {
    auto refuse = [&](std::string_view why) -> Error {
        return Error::msg(fmt::format("an intent line ({} bytes) {}", line.size(), why));
    };
    thread_local simdjson::dom::parser parser;
    simdjson::dom::object top;
    if (parser.parse(line.data(), line.size()).get(top) != simdjson::SUCCESS)
        return refuse("that is not a JSON object");
    std::string_view kind, in_session, in_origin;
    int64_t ts = 0, seq = -1, v = 0;
    simdjson::dom::element data;
    if (top.size() != 7 || top["kind"].get(kind) || top["session"].get(in_session) ||
        top["origin"].get(in_origin) || top["ts"].get(ts) || top["seq"].get(seq) ||
        top["v"].get(v) || top["data"].get(data) || !data.is_object())
        return refuse("that is not a record");
    if (!is_teardown_record(kind))
        return refuse(fmt::format("of kind {}, not a teardown record", kind));
    if (in_session != session) return refuse("of another session");
    if (ts <= 0 || seq != 0 || !in_origin.empty() || v != 1)
        return refuse("that is not as an intent line is written");
    Prepared p;
    p.event = Event{std::string(kind), std::string(session), ts, Json()};
    p.ts = ts;
    Prepared written;  // the envelope as it must stand in the line
    written.ts = ts;
    close_envelope(written, kind, "", session);
    written.before_seq += '0';
    written.before_seq += written.after_seq;
    constexpr std::string_view kHead = "{\"data\":";
    if (!line.starts_with(kHead) || !line.ends_with(written.before_seq))
        return refuse("that is not as an intent line is written");
    const std::string_view data_text =
        line.substr(kHead.size(), line.size() - kHead.size() - written.before_seq.size());
    std::string again;
    again.reserve(data_text.size());
    if (!canonical_of(again, data) || again != data_text)
        return refuse("whose data is not canonical");
    p.before_seq.reserve(line.size() + origin.size());
    p.before_seq += kHead;
    p.before_seq += data_text;
    close_envelope(p, kind, origin, session);
    return p;
}

// The WAL to the disk: every commit before is durable then (what a WAL checkpoint moved into
// the database already was: SQLite fsyncs the database before it reuses the WAL).
void fdatasync_wal(const Paths& paths) {
    Fd wal(::open((paths.db + "-wal").c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (wal.valid()) ::fdatasync(wal.get());
}

// Starts the writeback of the WAL's dirty pages and returns without waiting for it
// (SYNC_FILE_RANGE_WRITE skips pages already being written): what a writer about to exit
// committed is on its way to the disk at once, rather than when the kernel's own writeback
// comes round. No barrier and no cache flush: durability is the next writer's fsync.
void start_wal_writeback(const Paths& paths) {
    Fd wal(::open((paths.db + "-wal").c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (wal.valid()) (void)::sync_file_range(wal.get(), 0, 0, SYNC_FILE_RANGE_WRITE);
}

// The file of the newest signed checkpoint, written if it is missing: a writer that left its
// end sync to the next writer owes it ("Durability" below). The caller holds the
// append lock (files appear in seq order); `sync_wal` runs first, so that the file never names
// a seq the disk could still lose. Only a checkpoint signed by the pinned key over this
// journal's origin is written: a row edited in the table stays for `audit verify` to find.
Status write_owed_checkpoint_file(Db& db, const Paths& paths, std::string_view origin,
                                  const PublicKey& pinned, size_t kept,
                                  const std::function<void()>& sync_wal) {
    auto s = db.prepare(
        "SELECT seq, origin, chain, public_key, signature, ts FROM checkpoints ORDER BY seq DESC "
        "LIMIT 1");
    if (!s) return s.error();
    if (s->step() != SQLITE_ROW) return {};
    CheckpointFile cp;
    cp.seq = s->int64(0);
    const std::string file = fmt::format("{}/{}", paths.checkpoints, cp.seq);
    if (::access(file.c_str(), F_OK) == 0) return {};
    cp.origin = std::string(s->text(1));
    auto chain = s->blob(2);
    auto sig = s->blob(4);
    if (chain.size() != cp.chain.size() || sig.size() != cp.signature.size() ||
        !from_hex(s->text(3), cp.public_key.data(), cp.public_key.size()))
        return {};
    std::memcpy(cp.chain.data(), chain.data(), chain.size());
    std::memcpy(cp.signature.data(), sig.data(), sig.size());
    cp.ts = s->int64(5);
    if (cp.origin != origin || cp.public_key != pinned || !checkpoint_signature_valid(cp))
        return {};
    sync_wal();
    if (auto st = write_checkpoint_file(paths.checkpoints, cp); !st) return st;
    prune_checkpoint_files(paths.checkpoints, kept);
    return {};
}

}  // namespace

Status Journal::Impl::prepare_statements() {
    struct S {
        Stmt* s;
        const char* sql;
    } all[] = {
        {&head_get, "SELECT seq, chain FROM head WHERE id = 1"},
        {&head_set, "UPDATE head SET seq = ?1, chain = ?2 WHERE id = 1"},
        {&insert_record,
         "INSERT INTO records(seq, ts, kind, session, origin, body, leaf, chain) "
         "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"},
        {&last_checkpoint, "SELECT seq, ts FROM checkpoints ORDER BY seq DESC LIMIT 1"},
        {&insert_checkpoint,
         "INSERT INTO checkpoints(seq, origin, chain, public_key, signature, ts) "
         "VALUES(?1, ?2, ?3, ?4, ?5, ?6)"},
        {&session_insert,
         "INSERT OR REPLACE INTO sessions(session, start_seq, started_ns, server, writer_pid, "
         "writer_starttime, writer_boot_id, state, state_seq) "
         "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, 'running', ?2)"},
        {&session_state, "UPDATE sessions SET state = ?2, state_seq = ?3 WHERE session = ?1"},
        {&session_end,
         "UPDATE sessions SET state = 'ended', state_seq = ?2, ended_ns = ?3, end_reason = ?4, "
         "exit_status = ?5 WHERE session = ?1"},
        {&activity_insert,
         "INSERT OR REPLACE INTO activity(request_seq, session, request_id, method, tool, "
         "started_ns, outcome) VALUES(?1, ?2, ?3, ?4, ?5, ?6, 'in_flight')"},
        {&activity_resolve,
         "UPDATE activity SET outcome = ?2, resolved_seq = ?3, ended_ns = ?4, duration_ns = ?5, "
         "bytes = ?6 WHERE request_seq = ?1 AND outcome = 'in_flight'"},
    };
    for (auto& s : all) {
        auto st = db.prepare(s.sql);
        if (!st) return st.error();
        *s.s = std::move(*st);
    }
    return {};
}

// ---- WAL checkpoints ----------------------------------------------------------------------
//
// SQLite copies the WAL back into the database once it holds 1000 pages (auto-checkpoint),
// inside the COMMIT that crossed the mark: about every 200th request, that request's commit
// also copied 4 MB and waited for two fsyncs (WAL, then database), milliseconds at the p99
// of the relay's hot path. Here the hook below replaces the auto-checkpoint: a commit only
// notes that the WAL is long, and the writer thread checkpoints it (PASSIVE: never waits for
// a writer, never blocks one) on a connection of its own, outside commit_mu and the append
// lock, so appends, ours and other processes', go on meanwhile. The next transaction after
// a complete checkpoint starts the WAL over from its beginning, so its size stays bounded.
// A Journal that never ran its writer thread checkpoints what it made long in close().
constexpr int kWalCheckpointPages = 1000;  // SQLite's default auto-checkpoint mark

int Journal::Impl::wal_grew(void* self, sqlite3*, const char*, int pages) {
    auto* m = static_cast<Impl*>(self);
    if (pages >= kWalCheckpointPages && !m->wal_checkpoint_due.exchange(true)) {
        std::lock_guard lk(m->q_mu);
        m->start_worker_locked();
        m->q_cv.notify_one();
    }
    return SQLITE_OK;
}

void Journal::Impl::checkpoint_wal() {
    // Left to the next writer (its copy fsyncs the database): nothing the exit would wait for.
    if (leave_end_sync) return;
    if (!wal_checkpoint_due.exchange(false)) return;
    if (!checkpointer.get()) {
        auto c =
            Db::open(paths.db, Db::Mode::write, static_cast<int>(options.busy_timeout.count()));
        if (!c) return;  // the next commit's hook asks again
        checkpointer = std::move(*c);
        if (options.sync == JournalSync::Periodic)
            (void)checkpointer.exec("PRAGMA synchronous=NORMAL");
        sqlite3_wal_autocheckpoint(checkpointer.get(), 0);
    }
    (void)sqlite3_wal_checkpoint_v2(checkpointer.get(), nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr,
                                    nullptr);
}

Status Journal::Impl::init() {
    if (auto st = check_location(paths, /*create=*/true); !st) return st;
    int lfd = ::open(paths.lock.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (lfd < 0)
        return Error{fmt::format("journal lock {}: {}", paths.lock, std::strerror(errno)), errno};
    lock_fd = Fd(lfd);
    // Another user's lock (or one others can open) would let them stall every append.
    struct stat lst {};
    if (::fstat(lock_fd.get(), &lst) != 0) return Error::sys("fstat", paths.lock, errno);
    if (auto st = check_sidecar("journal lock", paths.lock, lst, /*private_only=*/true); !st)
        return st;
    if (auto st = check_sidecar_path("journal key", paths.key, /*private_only=*/true); !st)
        return st;
    if (auto st = check_sidecar_path("journal public key", paths.pub, /*private_only=*/false); !st)
        return st;
    if (auto st = check_sidecar_path("journal checkpoint directory", paths.checkpoints,
                                     /*private_only=*/false);
        !st)
        return st;
    if (auto st = check_intents_dir(paths); !st) return st;
    if (options.fair_lock) (void)turns.map(lock_fd.get());
    if (options.keep_given_up_turns) turns.keep_given_up();
    auto opened =
        Db::open(paths.db, Db::Mode::write, static_cast<int>(options.busy_timeout.count()));
    if (!opened) return opened.error();
    db = std::move(*opened);
    lock_wait_ms = options.busy_timeout.count();
    if (options.sync == JournalSync::Periodic) {
        if (auto st = db.exec("PRAGMA synchronous=NORMAL"); !st) return st;
    }
    // Replaces SQLite's auto-checkpoint on this connection ("WAL checkpoints" below).
    sqlite3_wal_hook(db.get(), &wal_grew, this);

    AppendLock guard(&turns, &timing);
    if (auto st = guard.acquire(lock_fd.get(), paths.lock, lock_wait_ms); !st) return st;
    // The loss slots (losses.hpp), reserved while there is room; without them, counts are
    // kept in memory only, as journal.degraded's transaction waits for room.
    (void)LossSlot::reserve(lock_fd.get());
    bool created = false;
    auto k = SigningKey::load_or_create(paths.key, &created);
    if (!k) return k.error();
    // Again, now that it exists: it may have appeared since the check above.
    if (auto st = check_sidecar_path("journal key", paths.key, /*private_only=*/true); !st)
        return st;
    key.emplace(std::move(*k));
    // OpenSSL 3 looks the Ed25519 signature's implementation up in its provider at a
    // process's first signature (EVP_DigestSignInit: ~150 µs of CPU here, ~30 µs for each one
    // after). A writer's first checkpoint is most often its session.end, on the way to `run`'s
    // exit; one signature now, while the journal opens (the relay's start-up thread), takes it.
    if (auto warm = key->sign("mcpwarden-checkpoint-warm-up"); !warm) return warm.error();
    pub = key->public_key();
    std::string pub_hex = to_hex(pub.data(), pub.size());

    if (auto st = db.exec("BEGIN IMMEDIATE"); !st) return st;
    auto fail = [&](Error e) {
        (void)db.exec("ROLLBACK");
        return e;
    };
    if (auto st = ensure_schema(db); !st) return fail(st.error());
    auto o = read_meta(db, "origin");
    if (o) {
        origin = *o;
        auto pinned = read_meta(db, "public_key");
        if (!pinned) return fail(pinned.error());
        if (*pinned != pub_hex)
            return fail(Error::msg(fmt::format(
                "journal {}: signing key {} ({}) does not match the key pinned in the journal "
                "({}); restore the original key or start a new journal",
                paths.db, paths.key, pub_hex.substr(0, 16), pinned->substr(0, 16))));
    } else {
        char host[256] = {};
        ::gethostname(host, sizeof host - 1);
        uint8_t rnd[8];
        auto seed = sha256(fmt::format("{}:{}:{}", now_ns(), ::getpid(), host));
        std::memcpy(rnd, seed.data(), sizeof rnd);
        origin = fmt::format("mcpwarden:{}:{}:{}", host, ::geteuid(), to_hex(rnd, sizeof rnd));
        Hash zero{};
        std::string sql = fmt::format(
            "INSERT INTO meta(key, value) VALUES('origin', '{}'), ('public_key', '{}'), "
            "('format', '1'), ('created_ns', '{}');"
            "INSERT OR IGNORE INTO head(id, seq, chain) VALUES(1, 0, x'{}');",
            origin, pub_hex, now_ns(), to_hex(zero));
        if (origin.find('\'') != std::string::npos)
            return fail(Error::msg("journal: hostname contains a quote"));
        if (auto st = db.exec(sql.c_str()); !st) return fail(st.error());
    }
    if (auto st = db.exec("COMMIT"); !st) return fail(st.error());
    // A writer that left its session.end's sync to the next one (`run`, "Durability" below)
    // left the newest checkpoint without its file: written now, still under the lock. Best effort:
    // a missing file only weakens truncation detection, and the table keeps the checkpoint. (The
    // guard is off under MCPWARDEN_FAULT=journal_owed_file, a negative control.)
    if (!Faults::from_env().journal_owed_file)
        (void)write_owed_checkpoint_file(db, paths, origin, pub, options.checkpoint_files_kept,
                                         [this] { sync_wal(); });
    if (::access(paths.pub.c_str(), F_OK) != 0) {
        // Out-of-band pin: copy this file off the host (or compare it) to catch a database
        // regenerated with another key.
        (void)write_file_atomic(paths.pub, pub_hex + "\n", 0644);
    }
    return prepare_statements();
}

Status Journal::Impl::project(const Event& e, int64_t seq, int64_t ts) {
    const Json& d = e.data;
    auto str = [&](const char* k) -> std::string {
        auto it = d.find(k);
        return it != d.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    auto num = [&](const Json& j, const char* k) -> int64_t {
        auto it = j.find(k);
        return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
    };
    Stmt* s = nullptr;
    const std::string& k = e.kind;
    if (k == "session.start") {
        static const Json kNoWriter = Json::object();
        auto wit = d.find("writer");
        const Json& w = wit != d.end() && wit->is_object() ? *wit : kNoWriter;
        auto wb = w.find("boot_id");
        std::string boot =
            wb != w.end() && wb->is_string() ? wb->get<std::string>() : std::string();
        s = &session_insert;
        s->bind(1, e.session).bind(2, seq).bind(3, ts).bind(4, str("server_name"));
        s->bind(5, num(w, "pid")).bind(6, num(w, "starttime"));
        s->bind(7, boot);
    } else if (k == "session.client_lost" || k == "session.orphaned") {
        s = &session_state;
        s->bind(1, e.session)
            .bind(2, k == "session.orphaned" ? "orphaned" : "client_lost")
            .bind(3, seq);
    } else if (k == "session.end") {
        s = &session_end;
        s->bind(1, e.session).bind(2, seq).bind(3, ts).bind(4, str("reason"));
        if (auto it = d.find("exit_status"); it != d.end() && it->is_number_integer())
            s->bind(5, it->get<int64_t>());
        else
            s->bind_null(5);
    } else if (k == "activity.request") {
        auto idit = d.find("id");
        auto id = canonical(idit != d.end() ? *idit : Json());
        s = &activity_insert;
        s->bind(1, seq).bind(2, e.session).bind(3, id ? *id : std::string("null"));
        s->bind(4, str("method")).bind(5, str("tool")).bind(6, ts);
    } else if (k == "activity.response" || k == "activity.abandoned" ||
               k == "activity.unresolved" || k == "activity.stream_end") {
        s = &activity_resolve;
        // A stream (subscriptions/listen) is settled by its end: no longer in flight.
        std::string outcome = k == "activity.response"     ? str("outcome")
                              : k == "activity.abandoned"  ? "abandoned"
                              : k == "activity.stream_end" ? "stream_end"
                                                           : "unresolved";
        s->bind(1, num(d, "request_seq")).bind(2, outcome).bind(3, seq).bind(4, ts);
        if (k == "activity.response") {
            s->bind(5, num(d, "duration_ns")).bind(6, num(d, "bytes"));
        } else {
            s->bind_null(5).bind_null(6);
        }
    } else {
        return {};
    }
    int rc = s->step();
    s->reset();
    if (rc != SQLITE_DONE) return db.error(fmt::format("project {} at seq {}", k, seq), rc);
    return {};
}

Result<Appended> Journal::Impl::commit(std::vector<Prepared>& prepared,
                                       std::string_view force_checkpoint, const Producer* produce,
                                       bool hot) {
    AppendLock guard(&turns, &timing);
    if (auto st = guard.acquire(lock_fd.get(), paths.lock, lock_wait_ms); !st) return st.error();
    if (auto st = db.exec("BEGIN IMMEDIATE"); !st) return st.error();
    bool open_tx = true;
    auto rollback = [&](Error e) -> Error {
        if (open_tx) (void)db.exec("ROLLBACK");
        open_tx = false;
        return e;
    };

    // The head, read inside the transaction: never from memory.
    int rc = head_get.step();
    if (rc != SQLITE_ROW) {
        head_get.reset();
        return rollback(db.error("read head", rc));
    }
    int64_t seq = head_get.int64(0);
    Hash prev{};
    auto chain_blob = head_get.blob(1);
    if (chain_blob.size() == prev.size()) std::memcpy(prev.data(), chain_blob.data(), prev.size());
    head_get.reset();

    int64_t cp_seq = 0, cp_ts = 0;
    if (last_checkpoint.step() == SQLITE_ROW) {
        cp_seq = last_checkpoint.int64(0);
        cp_ts = last_checkpoint.int64(1);
    }
    last_checkpoint.reset();
    if (cp_ts == 0) cp_ts = now_ns();  // no checkpoint yet: the interval counts from now

    std::vector<Event> produced;
    if (produce) {
        auto more = (*produce)(db);
        if (!more) return rollback(more.error());
        produced = std::move(*more);
        if (produced.empty()) force_checkpoint = {};  // nothing produced: nothing to sign
        for (const auto& e : produced) {
            auto p = prepare(e);
            if (!p) return rollback(p.error());
            prepared.push_back(std::move(*p));
        }
    }

    std::optional<CheckpointFile> last_cp_file;
    // Tickets of intents committed in this transaction: known to ticket_seq after COMMIT.
    struct Committed {
        int64_t ticket, seq;
        bool settled = false;
    };
    std::vector<Committed> tickets;
    // Several records may name one request (an oversize request's activity.oversize, then
    // its answer), in one batch or in several; only the record that settles the request lets
    // its ticket go, so the map holds the requests still in flight and no more.
    std::vector<int64_t> settled_earlier;
    // Records that name a request whose intent never committed (its batch failed; it waits
    // in its file for recovery at close): no seq to give them. Written as request_seq 0 they
    // would answer nothing, and the recovered request would stay in flight on record; so
    // they are counted as lost, with their ids, once this transaction commits.
    std::vector<Event> unnamed;
    auto seq_of_ticket = [&](int64_t ticket, bool settles) -> int64_t {
        for (auto& c : tickets)
            if (c.ticket == ticket) {
                c.settled = c.settled || settles;
                return c.seq;
            }
        auto it = ticket_seq.find(ticket);
        if (it == ticket_seq.end()) return 0;  // never committed: as a request not recorded
        int64_t found = it->second;
        if (settles) settled_earlier.push_back(ticket);  // let go once this commits
        return found;
    };
    std::string body;  // each record's, in one buffer: no allocation per record
    // `given` is this transaction's own: a ticket is resolved in place.
    auto write_one = [&](Prepared& given) -> Status {
        // An answer to a request that is not on record (its record was lost, and counted):
        // stored as request_seq 0 it would answer nothing, so it is counted with it instead.
        if (const auto& k = given.event.kind;
            (k == "activity.response" || k == "activity.abandoned") &&
            given.event.data.is_object() &&
            given.event.data.value("request_seq", int64_t{-1}) == 0) {
            unnamed.push_back(given.event);
            return {};
        }
        // "request_seq" given as a ticket: the seq of that intent, known now.
        std::optional<Prepared> resolved;
        if (auto rs = given.event.data.is_object() ? given.event.data.find("request_seq")
                                                   : given.event.data.end();
            rs != given.event.data.end() && rs->is_number_integer() && rs->get<int64_t>() < 0) {
            const std::string& kind = given.event.kind;
            const bool settles = kind == "activity.response" || kind == "activity.abandoned" ||
                                 kind == "activity.stream_end";
            const int64_t request_seq = seq_of_ticket(rs->get<int64_t>(), settles);
            if (request_seq == 0) {
                unnamed.push_back(given.event);
                return {};
            }
            *rs = request_seq;  // for project()
            if (given.ticket_len) {
                given.before_seq.replace(given.ticket_at, given.ticket_len,
                                         std::to_string(request_seq));
                given.ticket_len = 0;
            } else {
                Event e = given.event;
                e.ts_ns = given.ts;
                auto again = prepare(e);
                if (!again) return again.error();
                resolved = std::move(*again);
            }
        }
        const Prepared& p = resolved ? *resolved : given;
        ++seq;
        if (given.ticket) tickets.push_back({given.ticket, seq});
        body.clear();
        body.reserve(p.before_seq.size() + p.after_seq.size() + 20);
        body += p.before_seq;
        body += std::to_string(seq);
        body += p.after_seq;
        Hash leaf = leaf_hash(body);
        Hash chain = chain_hash(prev, leaf);
        auto& s = insert_record;
        // Borrowed: all of it outlives the step() below.
        s.bind(1, seq).bind(2, p.ts).bind_borrowed(3, p.event.kind);
        s.bind_borrowed(4, p.event.session).bind_borrowed(5, origin);
        s.bind_blob_borrowed(6, body.data(), body.size());
        s.bind_blob_borrowed(7, leaf.data(), leaf.size());
        s.bind_blob_borrowed(8, chain.data(), chain.size());
        int r = s.step();
        s.reset();
        if (r != SQLITE_DONE)
            return db.error(fmt::format("insert {} at seq {}", p.event.kind, seq), r);
        if (auto st = project(p.event, seq, p.ts); !st) return st;
        prev = chain;
        return {};
    };
    auto write_checkpoint = [&](std::string_view reason) -> Status {
        Event cp{"checkpoint", "", 0,
                 Json{{"previous_seq", cp_seq},
                      {"reason", std::string(reason)},
                      {"public_key", to_hex(pub.data(), pub.size())}}};
        auto p = prepare(cp);
        if (!p) return p.error();
        if (auto st = write_one(*p); !st) return st;
        CheckpointFile f{origin, seq, prev, pub, {}, p->ts};
        auto sig = key->sign(checkpoint_message(f.origin, f.seq, f.chain));
        if (!sig) return sig.error();
        f.signature = *sig;
        auto& s = insert_checkpoint;
        s.bind(1, f.seq).bind(2, f.origin).bind_blob(3, f.chain.data(), f.chain.size());
        s.bind(4, to_hex(pub.data(), pub.size()))
            .bind_blob(5, f.signature.data(), f.signature.size());
        s.bind(6, f.ts);
        int r = s.step();
        s.reset();
        if (r != SQLITE_DONE) return db.error(fmt::format("insert checkpoint {}", seq), r);
        cp_seq = seq;
        cp_ts = f.ts;
        last_cp_file = f;
        return {};
    };

    bool session_ended = false;
    Appended last_event;  // the caller's last record, not a checkpoint written after it
    for (auto& p : prepared) {
        if (auto st = write_one(p); !st) return rollback(st.error());
        last_event = Appended{seq, prev};
        if (p.event.kind == "session.end") session_ended = true;
        if (!hot && seq - cp_seq >= static_cast<int64_t>(options.checkpoint_every)) {
            if (auto st = write_checkpoint("cadence"); !st) return rollback(st.error());
        }
    }
    if (seq > cp_seq) {
        std::string_view reason;
        if (!force_checkpoint.empty())
            reason = force_checkpoint;
        else if (session_ended)
            reason = "session_end";
        else if (!hot && now_ns() - cp_ts >= options.checkpoint_interval.count())
            reason = "interval";
        if (!reason.empty()) {
            if (auto st = write_checkpoint(reason); !st) return rollback(st.error());
        }
    }

    // A signed checkpoint costs a signature, a WAL fsync and a file written with two fsyncs:
    // milliseconds that a request waiting to be forwarded must not pay. When one is due on
    // the hot path, the writer thread writes it right after this commit.
    const bool owe_checkpoint = hot && !session_ended && force_checkpoint.empty() &&
                                (seq - cp_seq >= static_cast<int64_t>(options.checkpoint_every) ||
                                 now_ns() - cp_ts >= options.checkpoint_interval.count());

    head_set.bind(1, seq).bind_blob(2, prev.data(), prev.size());
    rc = head_set.step();
    head_set.reset();
    if (rc != SQLITE_DONE) return rollback(db.error("update head", rc));
    if (auto st = db.exec("COMMIT"); !st) return rollback(st.error());
    open_tx = false;
    for (auto& c : tickets)
        if (!c.settled) ticket_seq.emplace(c.ticket, c.seq);
    for (int64_t t : settled_earlier)
        ticket_seq.erase(t);
    intents_committed += tickets.size();
    if (!unnamed.empty()) {
        std::lock_guard lk(q_mu);
        for (const auto& e : unnamed)
            count_lost_locked(e, fmt::format("journal {}: {} names a request that is not on "
                                             "record: it cannot name it",
                                             paths.db, e.kind));
    }

    // Under JournalSync::Periodic, a checkpoint and a session end reach the disk now: a signed
    // checkpoint file must never name a seq an OS crash could still take from the log. Left to
    // the next writer (a session's end, and any checkpoint signed on the way to it), both wait
    // for it, in that order; the WAL's writeback is started now, not waited for
    // ("Durability" below).
    const bool left_to_next = leave_end_sync && (session_ended || last_cp_file);
    if (left_to_next) {
        end_left = true;
        unsynced = false;  // the writer thread's periodic fsync would only hold up the exit
        start_wal_writeback(paths);
    } else if (options.sync == JournalSync::Periodic) {
        if (last_cp_file || session_ended) {
            sync_wal();
        } else if (!unsynced.exchange(true)) {
            std::lock_guard lk(q_mu);
            start_worker_locked();  // it syncs within sync_interval
        }
    }
    // The file only after COMMIT: a file naming a seq the database never committed would
    // look like truncation. Still under the flock, so files appear in seq order.
    if (last_cp_file && !left_to_next) {
        if (auto st = write_checkpoint_file(paths.checkpoints, *last_cp_file); !st) {
            // The signed row is in the database; a missing file weakens truncation
            // detection only. Report through the async path.
            std::lock_guard lk(q_mu);
            if (!async_error) async_error = st.error();
        } else {
            prune_checkpoint_files(paths.checkpoints, options.checkpoint_files_kept);
        }
    }
    dirty_since_checkpoint = !last_cp_file.has_value() || last_cp_file->seq != seq;
    if (owe_checkpoint && !checkpoint_owed.exchange(true)) {
        std::lock_guard lk(q_mu);
        start_worker_locked();
        q_cv.notify_one();
    }
    if (last_event.seq == 0) last_event = Appended{seq, prev};  // a bare checkpoint
    return last_event;
}

// ---- Async writer -------------------------------------------------------------------------

// Under q_mu, which the relay takes for every request and response: a writer thread
// preempted while it holds q_mu stalls the relay for a time slice (docs/BENCHMARKS.md, "Where
// the journal's tail comes from"). So the usual case, the whole queue, is a swap of two
// deques (no allocation, no moves); `out` is empty and was built outside the lock.
void Journal::Impl::take_queue(std::deque<Prepared>& out, size_t limit) {
    if (out.empty() && queue.size() <= limit) {
        out.swap(queue);
        return;
    }
    while (!queue.empty() && out.size() < limit) {
        out.push_back(std::move(queue.front()));
        queue.pop_front();
    }
}

// One transaction for `mine` and everything this Journal owes before it: the
// journal.degraded record for earlier losses, then what was posted (up to `take_limit`
// events), then `mine`: the log keeps the caller's order, and losses are reported the first
// time the journal can be written again. If it fails, the owed losses stay owed and every
// posted event of the batch is counted as lost by its kind; `mine` is the caller's to count
// (a refused request is not a lost record). Needs commit_mu.
Result<Appended> Journal::Impl::commit_owed(std::vector<Prepared> mine, size_t take_limit,
                                            std::string_view force_checkpoint, bool hot) {
    // The losses owed go into this transaction's journal.degraded: `committing` until it
    // commits, kept in the loss slot all the while (keep_losses_locked).
    std::deque<Prepared> taken;
    {
        std::lock_guard lk(q_mu);
        committing = std::exchange(lost, Losses{});
        take_queue(taken, take_limit);
    }
    const size_t n_taken = taken.size();
    if (options.hold_intents) std::erase_if(taken, [](const Prepared& p) { return p.ticket != 0; });
    std::vector<Prepared> all;
    all.reserve(1 + taken.size() + mine.size());
    if (!committing.empty()) {
        if (auto p = prepare(committing.record())) all.push_back(std::move(*p));
    }
    // The posted events are all[first_taken, end_taken): counted from there if this fails.
    const size_t first_taken = all.size();
    for (auto& p : taken)
        all.push_back(std::move(p));
    const size_t end_taken = all.size();
    for (auto& p : mine)
        all.push_back(std::move(p));
    if (all.empty() && force_checkpoint.empty()) {
        std::lock_guard lk(q_mu);
        processed += n_taken;  // intents held by the fault hook
        done_cv.notify_all();
        return Appended{};
    }
    const bool async = !taken.empty();
    auto r = commit(all, force_checkpoint, nullptr, hot);
    std::lock_guard lk(q_mu);
    processed += n_taken;
    const bool had_owed = !committing.empty();
    if (!r) {
        committing.merge(std::exchange(lost, Losses{}));
        lost = std::exchange(committing, Losses{});
        for (size_t i = first_taken; i < end_taken; ++i)
            if (!all[i].ticket)
                count_lost_locked(all[i].event, r.error().message);  // intents: in their file
        if (async && !async_error) async_error = r.error();
    } else {
        committing = Losses{};
        if (had_owed) keep_losses_locked();  // what was owed is on record
    }
    done_cv.notify_all();
    return r;
}

void Journal::Impl::count_lost_locked(const Event& e, const std::string& why) {
    lost.add(e, why);
    ++counted.events;
    ++counted.kinds[e.kind];
    keep_losses_locked();
}

// The slot holds what is owed, exactly: rewritten at every count and every change of what is
// owed, so a process killed at any point leaves the counts it did not record (losses.hpp).
void Journal::Impl::keep_losses_locked() {
    if (!loss_slot && !loss_slot_tried && !faults.loss_slot_off) {
        loss_slot_tried = true;
        if (auto claimed = LossSlot::claim(lock_fd.get())) loss_slot.emplace(std::move(*claimed));
    }
    if (!loss_slot) return;
    if (lost.empty() && committing.empty())
        (void)loss_slot->store("");
    else
        (void)loss_slot->store(committing.slot_text(lost));
}

void Journal::Impl::record_left_losses() {
    auto left = LossSlot::left_behind(lock_fd.get());
    if (left.empty()) return;
    std::vector<Prepared> items;
    for (const auto& l : left)
        if (auto p = prepare(l.losses.record())) items.push_back(std::move(*p));
    std::lock_guard commit_lk(commit_mu);
    if (!commit(items, {}, nullptr)) return;  // still not writable: left for the next writer
    for (auto& l : left)
        (void)l.slot.store("");
}

// ---- Durability ---------------------------------------------------------------------------
//
// Under JournalSync::Periodic the database runs with synchronous=NORMAL: COMMIT appends the
// transaction to the WAL with write() and returns. The kernel has the bytes then, so SIGKILL
// of the relay, the keeper or both loses nothing that was committed; only an OS crash or
// power loss can, and only what was committed since the last fsync of the WAL. That window
// is bounded here: the writer thread fsyncs the WAL once a second while commits are
// unsynced, a commit that carries a checkpoint or a session.end fsyncs at once (before the
// checkpoint file that names it), and close() fsyncs what is left. SQLite's own WAL
// checkpoints fsync as well. JournalSync::Always is synchronous=FULL: an fsync in every COMMIT.
//
// A writer about to exit, whose exit someone waits for (the shim's relay: its client), may
// leave a session.end's fsync and checkpoint file, and the WAL's copy into the database, to
// the next writer (leave_end_sync_to_next_writer): its commit is in the WAL through write(),
// signed, and its writeback started (start_wal_writeback), but nothing waits for the disk, so
// a slow or hung disk cannot hold the exit. The next opening of the journal (init) fsyncs the
// WAL and then writes the newest checkpoint's file, under the append lock; until then that
// checkpoint has a row and no file (truncation detection is the weaker for it), and a power
// loss can take the session's last records as it can the last second of any session under
// Periodic. Nothing acknowledged as durable is left: under JournalSync::Always the relay
// does not leave it, and the end's commit fsyncs before `run` goes on.

void Journal::Impl::sync_wal() {
    unsynced = false;  // before the fsync: a commit racing in marks it again
    fdatasync_wal(paths);
    last_sync_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::steady_clock::now().time_since_epoch())
                       .count();
}

void Journal::Impl::sync_if_due() {
    // Left to the next writer: no periodic fsync starts that the writer's exit would wait for.
    if (!unsynced || leave_end_sync) return;
    int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count();
    if (now - last_sync_ns >= std::chrono::nanoseconds(options.sync_interval).count()) sync_wal();
}

// Posted events are not committed the moment they arrive: the next synchronous append takes
// them into its own transaction (the order is kept either way), so on a busy session a
// response costs no transaction and no wake-up of this thread of its own. Whatever is still
// queued kPostDelay after this thread noticed it is committed here, in one batch; so is a
// full batch, and everything a flush() waits for, at once.
constexpr auto kPostDelay = std::chrono::milliseconds(5);

bool Journal::Impl::worker_has_work_locked() const {
    return stopping || queue.size() >= options.batch_limit || flush_waiters > 0 ||
           wal_checkpoint_due.load() || checkpoint_owed.load();
}

// The writer thread's CPU (~30 µs a record, one burst per batch) competes with the relay,
// the client and the server for the machine's cores; a call that arrives during a burst can
// wait for a core. MCPWARDEN_JOURNAL_WRITER (a diagnostic knob for bench_relay_latency, see
// docs/BENCHMARKS.md) runs the writer thread under another policy to measure that: `batch`
// (SCHED_BATCH: never preempts on wake-up), `idle` (SCHED_IDLE: runs only on a core nothing
// else wants; beware, it holds the append lock while it commits), `nice:N` or `cpu:N` (only
// CPU N: with the bench under `taskset -c` of another CPU, the writer has a core to itself).
// Unset: as the relay.
namespace {
void apply_writer_scheduling() {
    const char* v = std::getenv("MCPWARDEN_JOURNAL_WRITER");
    if (!v || !*v) return;
    std::string_view how(v);
    sched_param none{};
    if (how == "batch") {
        (void)::sched_setscheduler(0, SCHED_BATCH, &none);
    } else if (how == "idle") {
        (void)::sched_setscheduler(0, SCHED_IDLE, &none);
    } else if (how.starts_with("nice:")) {
        (void)::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), std::atoi(v + 5));
    } else if (how.starts_with("cpu:")) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(std::atoi(v + 4), &one);
        (void)::sched_setaffinity(0, sizeof one, &one);
    }
}
}  // namespace

void Journal::Impl::run_worker() {
    // Named, so that `top -H`, `perf --per-thread` and /proc tell it from the relay.
    ::pthread_setname_np(::pthread_self(), "mcpwarden-jrnl");
    apply_writer_scheduling();
    auto last_activity = std::chrono::steady_clock::now();
    auto wake_every =
        std::min<std::chrono::milliseconds>(std::chrono::seconds(1), options.sync_interval);
    for (;;) {
        sync_if_due();
        checkpoint_wal();
        {
            std::unique_lock lk(q_mu);
            worker_idle = true;
            q_cv.wait_for(lk, wake_every,
                          [&] { return worker_has_work_locked() || !queue.empty(); });
            worker_idle = false;
            if (!queue.empty())
                q_cv.wait_for(lk, kPostDelay, [&] { return worker_has_work_locked(); });
            if (stopping && queue.empty()) return;
            if (queue.empty() && lost.empty() && !checkpoint_owed.load() &&
                wal_checkpoint_due.load())
                continue;
        }
        if (options.slow_writer.count() > 0) std::this_thread::sleep_for(options.slow_writer);
        std::lock_guard commit_lk(commit_mu);
        if (checkpoint_owed.exchange(false)) {
            // Owed by a hot commit; the batch below, if any, may carry one as well.
            (void)commit_owed({}, options.batch_limit, "cadence");
            last_activity = std::chrono::steady_clock::now();
            continue;
        }
        bool idle, owes;
        {
            std::lock_guard lk(q_mu);
            idle = queue.empty();
            owes = !lost.empty();
        }
        if (idle && !owes) {
            // Idle: sign the tail once the interval has passed, so it does not stay
            // unanchored while the session is quiet.
            if (dirty_since_checkpoint &&
                std::chrono::steady_clock::now() - last_activity >= options.checkpoint_interval) {
                (void)commit({}, "interval", nullptr);
                last_activity = std::chrono::steady_clock::now();
            }
            continue;
        }
        // With nothing queued but losses owed, this retries journal.degraded alone (once a
        // second at most): the gap is on record as soon as the journal can be written.
        last_activity = std::chrono::steady_clock::now();
        (void)commit_owed({}, options.batch_limit, {});
    }
}

void Journal::Impl::start_worker_locked() {
    if (!worker.joinable() && !stopping) worker = std::thread([this] { run_worker(); });
}

void Journal::Impl::stop_worker() {
    {
        std::lock_guard lk(q_mu);
        stopping = true;
    }
    q_cv.notify_all();
    if (worker.joinable()) worker.join();
}

// ---- Journal ------------------------------------------------------------------------------

Journal::Journal(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Journal::~Journal() {
    // Closed already: what that close left (a tail left to the next writer) stays so.
    if (impl_ && !impl_->closed) (void)close();
    if (impl_) impl_->stop_worker();  // closed at exit, and destroyed all the same
}

Result<std::unique_ptr<Journal>> Journal::open(const Options& options) {
    auto impl = std::make_unique<Impl>();
    impl->options = options;
    auto path = resolve_path(options.path);
    if (!path) return path.error();
    impl->paths = Paths::for_db(*path);
    if (auto st = impl->init(); !st) return st.error();
    impl->record_left_losses();
    return std::unique_ptr<Journal>(new Journal(std::move(impl)));
}

Result<Appended> Journal::append(const Event& event) {
    return append_all(std::span<const Event>(&event, 1));
}

Result<Appended> Journal::append(const Event& event, CanonicalMember member) {
    auto& m = *impl_;
    std::vector<Prepared> mine(1);
    mine.front().event = event;
    if (auto st = prepare_record_into(mine.front(), m.origin, &member); !st) return st.error();
    std::lock_guard commit_lk(m.commit_mu);
    return m.commit_owed(std::move(mine), SIZE_MAX, {}, m.options.checkpoint_off_path);
}

Result<Appended> Journal::append_all(std::span<const Event> events) {
    auto& m = *impl_;
    std::vector<Prepared> mine;
    mine.reserve(events.size());
    for (const auto& e : events) {
        auto p = m.prepare(e);
        if (!p) return p.error();
        mine.push_back(std::move(*p));
    }
    std::lock_guard commit_lk(m.commit_mu);
    // Whatever was posted before this call goes first, in the same transaction: the log keeps
    // the caller's order and the hot path pays one transaction, not two.
    return m.commit_owed(std::move(mine), SIZE_MAX, {}, m.options.checkpoint_off_path);
}

void Journal::count_lost(std::span<const Event> events, const Error& why) {
    auto& m = *impl_;
    std::lock_guard lk(m.q_mu);
    for (const auto& e : events)
        m.count_lost_locked(e, why.message);
}

LossCount Journal::losses() const {
    auto& m = *impl_;
    std::lock_guard lk(m.q_mu);
    LossCount c = m.counted;
    c.owed = m.lost.events + m.committing.events;
    return c;
}

void Journal::post(Event event) {
    auto& m = *impl_;
    Prepared p;
    p.event = std::move(event);  // the queue's from here on: no copy on the relay's path
    auto prepared = m.prepare_into(p);
    m.post_prepared(std::move(p), prepared);
}

Status Journal::post_intent_line(std::string_view line, std::string_view session) {
    auto& m = *impl_;
    auto p = prepared_from_intent_line(line, session, m.origin);
    if (!p) return p.error();
    m.post_prepared(std::move(*p), {});
    return {};
}

void Journal::Impl::post_prepared(Prepared p, const Status& prepared) {
    std::unique_lock lk(q_mu);
    ++posted;
    if (!prepared || queue.size() >= options.queue_limit) {
        Error e = prepared
                      ? Error::msg(fmt::format("journal {}: queue full ({} events), {} dropped",
                                               paths.db, queue.size(), p.event.kind))
                      : prepared.error();
        count_lost_locked(p.event, e.message);
        if (!async_error) async_error = e;
        ++processed;
        return;
    }
    enqueue_locked(std::move(p), lk);
}

void Journal::Impl::enqueue_locked(Prepared p, std::unique_lock<std::mutex>& lk) {
    queue.push_back(std::move(p));
    enqueue_locked_wake(lk);
}

void Journal::Impl::enqueue_locked_wake(std::unique_lock<std::mutex>& lk) {
    start_worker_locked();
    // Only a writer thread that waits with nothing to do needs waking (run_worker): one
    // already counting down kPostDelay takes this event along.
    bool wake = worker_idle || queue.size() >= options.batch_limit;
    worker_idle = worker_idle && !wake;
    lk.unlock();
    if (wake) q_cv.notify_one();
}

// ---- Intents ------------------------------------------------------------------------------
//
// A request must be on record before its bytes go on, and on record has always meant what
// survives the death of any process: a transaction in the WAL through write(). That
// transaction is about twenty system calls (the turn, the flock, SQLite's WAL-index locks,
// two pwrite()s for each of five dirty pages) and, on a virtual machine where a system call
// costs microseconds, most of the journal's cost per call (docs/BENCHMARKS.md, "The
// journal's CPU per call"). One write() to a file opened O_APPEND survives the same deaths. So
// with Options::intents the request path writes the prepared record (its body with seq 0:
// the seq is only known under the lock) as one line to the session's intent file, queues it,
// and forwards; the writer thread chains it into the log in queue order, with the responses
// and the other posted records, as it does for them.
//
// What that changes, and how each is answered:
// * The seq of a request is not known when it is forwarded, and responses name it
//   (`request_seq`). append_intent returns a ticket (negative, so never a seq) that the
//   caller keeps in its place; a record whose `request_seq` is a ticket gets the seq when it
//   is committed (the request was queued before it, so it is committed first or in the
//   same transaction).
// * The process dies with intents not yet chained. The intent file holds them; whoever
//   finds the file recovers it (intents.hpp): the writer itself at close, the keeper when
//   the relay died, the next run's dead-session worker and `journal reconcile` when both
//   died. Recovery appends, in file order, each intent the log does not hold yet (a record
//   of the session with the same kind and ts), then removes the file. `audit verify` reports
//   an intent file still there as uncommitted intents, not as tampering.
// * A torn last line is not a record: recovery reports it and counts it as a lost request
//   in journal.degraded. A short write() (a full disk) is cut off at once and the request
//   takes the synchronous path, which counts it if it fails as well; so a torn line in a
//   file means damage from outside, or a death inside that write().
// * A batch that fails: its intents stay in their file and are not counted as lost; the
//   relay recovers them before its session.end (shim/journal_sink.cpp, recover_uncommitted),
//   the writer at close if it can, or whoever finds the file later does. Their
//   tickets never get a seq, so an answer committed meanwhile cannot name its request: it
//   is counted as lost (with its id) in journal.degraded, never written as request_seq 0.
// * JournalSync::Always promises an fsync before forwarding: it keeps the synchronous append.

Result<Fd> open_intent_file(const Paths& paths, const std::string& session) {
    std::string path = paths.intent_file(session);
    if (path.empty())
        return Error::msg(
            fmt::format("journal: session id '{}' cannot name an intent file", session));
    if (::mkdir(paths.intents.c_str(), 0700) != 0 && errno != EEXIST)
        return Error::sys("mkdir", paths.intents, errno);
    // Checked again now that it exists (init checked it too): it may have appeared since.
    if (auto st = check_intents_dir(paths); !st) return st.error();
    Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK,
                 0600));
    if (!fd.valid()) return Error::sys("open", path, errno);
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return Error::sys("fstat", path, errno);
    if (auto ok = check_intent_file(path, st); !ok) return ok.error();
    // Held while open, shared with the session's other writer: a file nobody holds has no
    // writer left, whatever the log knows of its session (intent_file_held).
    (void)::flock(fd.get(), LOCK_SH | LOCK_NB);
    return fd;
}

Result<std::string> intent_lines(std::span<const Event> events) {
    std::string text;
    for (const auto& e : events) {
        if (e.ts_ns <= 0)
            return Error::msg(fmt::format("journal: {} intent without its ts", e.kind));
        auto p = prepare_record(e, {});  // the origin is the recovering writer's
        if (!p) return p.error();
        append_intent_line(text, *p);
    }
    return text;
}

Status Journal::Impl::open_intent_file_locked(const std::string& session) {
    if (intent_fd.valid() && paths.intent_file(session) == intent_path) return {};
    auto fd = open_intent_file(paths, session);
    if (!fd) return fd.error();
    intent_fd = std::move(*fd);
    intent_path = paths.intent_file(session);
    return {};
}

Result<int64_t> Journal::append_intent(const Event& event) {
    auto tickets = append_intents(std::span<const Event>(&event, 1));
    if (!tickets) return tickets.error();
    return tickets->front();
}

Result<std::vector<int64_t>> Journal::append_intents(std::span<const Event> events) {
    auto& m = *impl_;
    if (!m.options.intents || m.options.sync != JournalSync::Periodic)
        return Error::msg("journal: intents are off");
    if (events.empty()) return std::vector<int64_t>{};
    std::vector<Prepared> prepared;
    prepared.reserve(events.size());
    std::string text;
    for (const auto& e : events) {
        if (e.session != events.front().session)
            return Error::msg("journal: intents of one session per write");
        auto p = m.prepare(e);
        if (!p) return p.error();
        append_intent_line(text, *p);
        prepared.push_back(std::move(*p));
    }
    std::lock_guard ik(m.intent_mu);  // the file's order is the queue's
    {
        std::lock_guard lk(m.q_mu);
        if (m.queue.size() + prepared.size() > m.options.queue_limit)
            return Error::msg(fmt::format("journal {}: queue full", m.paths.db));
    }
    const std::string& session = events.front().session;
    if (m.intent_fd.valid() && m.intent_path != m.paths.intent_file(session))
        return Error::msg("journal: intents of one session per Journal");
    if (auto st = m.open_intent_file_locked(session); !st) return st.error();
    // One write(): all of these records survive the process, or (a death inside it) a torn
    // last line does, which recovery counts.
    ssize_t n = ::write(m.intent_fd.get(), text.data(), text.size());
    if (n != static_cast<ssize_t>(text.size())) {
        int err = n < 0 ? errno : ENOSPC;
        // These records go the synchronous way (and are counted there if that fails too): a
        // torn line left behind would be counted again by recovery, so it is cut off.
        if (n > 0) {
            off_t end = ::lseek(m.intent_fd.get(), 0, SEEK_END);
            if (end >= n) (void)!::ftruncate(m.intent_fd.get(), end - n);
        }
        return Error::sys("write", m.intent_path, err);
    }
    // Ticket -k is the file's k-th line: recovery resolves a request_seq given as a ticket
    // by that (intents.cpp).
    std::vector<int64_t> tickets;
    tickets.reserve(prepared.size());
    std::unique_lock lk(m.q_mu);
    for (auto& p : prepared) {
        p.ticket = --m.last_ticket;
        ++m.intents_written;
        tickets.push_back(p.ticket);
        ++m.posted;
        m.queue.push_back(std::move(p));
    }
    m.enqueue_locked_wake(lk);
    return tickets;
}

Status Journal::adopt_intent_file(const std::string& session) {
    auto& m = *impl_;
    std::lock_guard ik(m.intent_mu);
    if (m.intent_fd.valid() && m.intent_path != m.paths.intent_file(session))
        return Error::msg("journal: intents of one session per Journal");
    return m.open_intent_file_locked(session);
}

Status Journal::flush() {
    return flush_within(std::nullopt);
}

Status Journal::flush_within(std::optional<std::chrono::milliseconds> bound) {
    auto& m = *impl_;
    std::unique_lock lk(m.q_mu);
    uint64_t target = m.posted;
    // Nothing posted since the last commit: no need to wake the writer thread (on the way to
    // `run`'s exit, a flush after session.end would wake it for nothing, to fsync at worst).
    if (m.processed < target) {
        ++m.flush_waiters;
        m.q_cv.notify_one();
        auto done = [&] { return m.processed >= target || !m.worker.joinable(); };
        bool in_time = true;
        if (bound)
            in_time = m.done_cv.wait_for(lk, *bound, done);
        else
            m.done_cv.wait(lk, done);
        --m.flush_waiters;
        if (!in_time)
            return Error::msg(fmt::format("journal {}: not committed within {} ms (a slow disk?)",
                                          m.paths.db, bound->count()));
    }
    if (m.async_error) {
        Error e = std::move(*m.async_error);
        m.async_error.reset();
        return e;
    }
    return {};
}

Status Journal::checkpoint(std::string_view reason) {
    auto& m = *impl_;
    std::lock_guard commit_lk(m.commit_mu);
    auto r = m.commit_owed({}, SIZE_MAX, reason.empty() ? "explicit" : reason);
    if (!r) return r.error();
    return {};
}

Status Journal::close(Tail tail) {
    return close_impl(tail, /*at_exit=*/false);
}

Status Journal::close_at_exit() {
    return close_impl(Tail::anchor, /*at_exit=*/true);
}

Status Journal::close_impl(Tail tail, bool at_exit) {
    auto& m = *impl_;
    m.closed = true;
    Status st = flush();
    // At exit the writer thread, idle now, and the connection are left to the process's end
    // (its commit_mu still orders what follows before anything it could do).
    if (!at_exit) m.stop_worker();
    {
        // Anything that raced in after the flush, and losses still owed.
        std::lock_guard commit_lk(m.commit_mu);
        auto r = m.commit_owed({}, SIZE_MAX, {});
        if (!r && st.ok()) st = r.error();
        // A writer leaves nothing of its own unanchored: what it wrote after its last
        // checkpoint (the keeper's exits after the relay's session.end) is signed now, so a
        // clean session verifies without an unanchored tail.
        if (tail == Tail::anchor) {
            if (r && m.dirty_since_checkpoint) {
                auto c = m.commit({}, "close", nullptr);
                if (!c && st.ok()) st = c.error();
            }
            if (m.unsynced && !m.end_left) m.sync_wal();
        }
    }
    // At exit the writer thread still owns the checkpointing connection, and ours is never
    // closed: nothing to copy or to configure.
    if (!at_exit) m.checkpoint_wal();
    if ((m.end_left || tail == Tail::to_next_writer) && !at_exit) {
        // The next writer copies the WAL into the database, after its fsync: not this
        // connection when it closes as the last one (a copy is writes and an fsync).
        for (sqlite3* c : {m.db.get(), m.checkpointer.get()})
            if (c) (void)sqlite3_db_config(c, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
    }
    // Every intent chained: the file has served. Else what failed is recovered from it now
    // (or, failing that, by whoever finds the file later).
    std::lock_guard ik(m.intent_mu);
    if (m.intent_fd.valid()) {
        m.intent_fd.reset();
        if (m.intents_committed.load() == m.intents_written) {
            ::unlink(m.intent_path.c_str());
        } else if (auto r = recover_intents(*this, m.intent_path); !r && st.ok()) {
            st = r.error();
        }
        if (m.unsynced) m.sync_wal();  // what recovery appended: the writer thread is gone
    }
    return st;
}

void Journal::leave_end_sync_to_next_writer() {
    std::lock_guard commit_lk(impl_->commit_mu);
    impl_->leave_end_sync = true;
}

bool Journal::intents_pending() const {
    std::lock_guard ik(impl_->intent_mu);
    return impl_->intents_committed.load() != impl_->intents_written;
}

const Paths& Journal::paths() const {
    return impl_->paths;
}
const std::string& Journal::origin() const {
    return impl_->origin;
}
const PublicKey& Journal::public_key() const {
    return impl_->pub;
}
void Journal::set_lock_wait(std::chrono::milliseconds wait) {
    impl_->lock_wait_ms = wait.count();
    sqlite3_busy_timeout(impl_->db.get(), static_cast<int>(wait.count()));
}

LockTiming Journal::last_lock_timing() const {
    std::lock_guard lk(impl_->commit_mu);
    return impl_->timing;
}

Status Journal::compact() {
    auto& m = *impl_;
    std::lock_guard commit_lk(m.commit_mu);
    AppendLock guard(&m.turns, &m.timing);
    if (auto st = guard.acquire(m.lock_fd.get(), m.paths.lock, m.lock_wait_ms); !st) return st;
    if (auto st = m.db.exec("VACUUM"); !st) return st;
    return m.db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
}

Result<Appended> Journal::append_produced(const Producer& produce, bool seqs_in_order,
                                          std::string_view sign_as) {
    auto& m = *impl_;
    std::lock_guard commit_lk(m.commit_mu);
    return m.commit({}, sign_as, &produce, /*hot=*/seqs_in_order);
}

}  // namespace warden::journal
