// The writer thread: the queue of posted records and the thread that commits them in batches,
// under the same lock discipline as a synchronous append (journal.cpp, "The relay's hot
// path"); and the WAL's checkpoints, which it runs off everyone's path.
#include <pthread.h>
#include <sched.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#include <fmt/format.h>

#include "journal/journal_impl.hpp"

namespace warden::journal {

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

// Posted events are not committed the moment they arrive: the next synchronous append takes
// them into its own transaction (the order is kept either way), so on a busy session a
// response costs no transaction and no wake-up of this thread of its own. Whatever is still
// queued kPostDelay after this thread noticed it is committed here, in one batch; so is a
// full batch, and everything a flush() waits for, at once.
constexpr auto kPostDelay = std::chrono::milliseconds(5);

bool Journal::Impl::worker_has_work_locked() const {
    return stopping || queue.size() >= options.batch_limit || flush_wanted_locked() ||
           wal_checkpoint_wanted() || checkpoint_owed.load();
}

// A flush this thread can serve: something is queued. A flusher also waits while another
// thread's commit takes the queue (a synchronous append takes what was posted before it) and
// once its target is reached until it runs again: counted as work then, the flusher woke the
// wait at once, every time, and this thread spun until the flusher left.
bool Journal::Impl::flush_wanted_locked() const {
    return flush_waiters > 0 && (!queue.empty() || writer_spins);
}

// A checkpoint this thread will make: none once the end's sync is left to the next writer
// (checkpoint_wal returns at once then). Counted as work then, a due checkpoint woke the wait
// at once, every time: the thread spun on a core for the rest of the session, its teardown.
bool Journal::Impl::wal_checkpoint_wanted() const {
    return wal_checkpoint_due.load() && (!leave_end_sync.load() || writer_spins);
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
            if (queue.empty() && lost.empty() && !checkpoint_owed.load() && wal_checkpoint_wanted())
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

}  // namespace warden::journal
