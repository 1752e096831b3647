// Journal's state, shared by the files that implement it: journal.cpp (opening, the public
// calls, intents, durability, closing), commit.cpp (one transaction of the chain) and
// writer_thread.cpp (the queue of posted records and the thread that commits them). Not a
// header for anyone outside src/journal/.
#pragma once

#include <sqlite3.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "fault/faults.hpp"
#include "journal/append_lock.hpp"
#include "journal/checkpoint.hpp"
#include "journal/crypto.hpp"
#include "journal/journal.hpp"
#include "journal/losses.hpp"
#include "journal/prepared.hpp"
#include "journal/store.hpp"
#include "sys/fd.hpp"

namespace warden::journal {

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

    Stmt begin_immediate, commit_transaction;
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
    // checkpoints", writer_thread.cpp), on a connection of its own.
    std::atomic<bool> wal_checkpoint_due{false};
    // A hot commit crossed the checkpoint cadence or interval: the writer thread signs.
    std::atomic<bool> checkpoint_owed{false};
    bool worker_idle = false;              // waiting with nothing queued: a post wakes it (q_mu)
    int flush_waiters = 0;                 // flush() calls waiting for the queue (q_mu)
    std::atomic<int64_t> lock_wait_ms{0};  // bound of each wait for the append lock
    Db checkpointer;

    // Intents (journal.cpp, "Intents"). The file and the ticket counter under intent_mu, taken
    // before q_mu and never by the writer thread: the relay's write() to the file holds up
    // no one but another intent. The tickets' seqs under commit_mu.
    std::mutex intent_mu;
    Fd intent_fd;
    std::string intent_path;
    std::string intent_session;  // whose file intent_fd is (intent_path names it)
    int64_t last_ticket = 0;
    uint64_t intents_written = 0;
    std::atomic<uint64_t> intents_committed{0};
    std::map<int64_t, int64_t> ticket_seq;  // committed, not yet settled
    bool closed = false;                    // close() was called: the destructor does not again
    // leave_end_sync_to_next_writer(): a session.end's WAL fsync and checkpoint file are the
    // next writer's (end_left: one was left), and so is the WAL's copy into the database.
    std::atomic<bool> leave_end_sync{false};
    bool end_left = false;
    // MCPWARDEN_FAULT=writer_spins, read once (worker_has_work_locked).
    const bool writer_spins = Faults::from_env().writer_spins;

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
    // After a commit's COMMIT (commit.cpp): the WAL synced as JournalSync asks, or left to the
    // next writer (true); the signed checkpoint's file; a checkpoint owed by a hot commit.
    bool sync_committed(bool session_ended, const std::optional<CheckpointFile>& signed_checkpoint);
    void write_checkpoint_file_of(const CheckpointFile& signed_checkpoint);
    void owe_checkpoint_to_writer();
    Result<Prepared> prepare(const Event& e) const;
    // Serializes p.event (moved in by the caller: post() takes its event) into p.
    Status prepare_into(Prepared& p) const;
    // Queue plumbing; take_queue needs q_mu held, the others take it.
    void take_queue(std::deque<Prepared>& out, size_t limit);
    Result<Appended> commit_owed(std::vector<Prepared> mine, size_t take_limit,
                                 std::string_view force_checkpoint, bool hot = false);
    bool worker_has_work_locked() const;
    bool wal_checkpoint_wanted() const;
    bool flush_wanted_locked() const;
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
    // Journal::append_intents: `prepared`, each holding its event, serialized, written with one
    // write() and queued (moved out); on an error nothing is written and each keeps its event.
    Result<std::vector<int64_t>> write_intents(std::vector<Prepared>& prepared);
    // Counts `e` as lost (needs q_mu), and keeps what is owed in the loss slot.
    void count_lost_locked(const Event& e, const std::string& why);
    void keep_losses_locked();
    // The counts of writers gone before they could record them (losses.hpp), on record now.
    void record_left_losses();
};

// The WAL to the disk: every commit before is durable then (what a WAL checkpoint moved into
// the database already was: SQLite fsyncs the database before it reuses the WAL).
void fdatasync_wal(const Paths& paths);

// Starts the writeback of the WAL's dirty pages and returns without waiting for it
// (SYNC_FILE_RANGE_WRITE skips pages already being written): what a writer about to exit
// committed is on its way to the disk at once, rather than when the kernel's own writeback
// comes round. No barrier and no cache flush: durability is the next writer's fsync.
void start_wal_writeback(const Paths& paths);

}  // namespace warden::journal
