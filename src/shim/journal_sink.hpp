// The journal, as the relay and the keeper feed it.
//
// JournalSink is the relay's ActivitySink: each client request is appended synchronously
// (on record before its bytes reach the server; on failure the request is forwarded and
// counted for journal.degraded, with one line on stderr, or refused with
// --on-journal-failure=deny); responses, abandoned requests and the client
// loss are posted and committed by the journal's writer thread, off the relay's path.
// `activity.response` is recorded when the answer has been delivered to the client, not when
// it was read from the server (relay.hpp): its duration_ns runs to delivery, and its
// error_code carries error.code of a JSON-RPC error (outcome jsonrpc_error; a tool that ran
// and failed, result.isError, is outcome tool_error without a code).
//
// The evidence the relay leaves before a teardown (the client's loss, the requests it
// abandoned) goes to the intent file with one write() (record_evidence) and is committed
// while the keeper signals. The keeper records its teardown (shim/keeper.cpp) on its own
// Journal (a Journal is not to be shared across fork).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "contain/teardown.hpp"
#include "journal/intents.hpp"
#include "journal/journal.hpp"
#include "journal/losses.hpp"
#include "sandbox/sandbox.hpp"
#include "shim/options.hpp"
#include "shim/relay.hpp"
#include "sys/background_thread.hpp"
#include "sys/fd.hpp"

namespace warden::shim {

class JournalSink : public ActivitySink {
  public:
    // The relay's events posted to the journal's queue before it waits for the writer thread
    // to commit them (journal_sink.cpp, post_paced): the most of them the queue holds.
    static constexpr size_t kPostsPerWait = 1024;
    // `journal` may be null (it could not be opened: `open_error` says why); then requests are
    // denied or allowed according to the policy.
    JournalSink(std::unique_ptr<journal::Journal> journal, std::string open_error,
                std::string session, OnJournalFailure policy, RecordArgs record, int log_fd);
    // The journal at `path` opened on a thread of its own while the keeper starts the server
    // and the relay goes on (journal_sink.cpp, "The journal's start-up"); session.start is
    // appended there once begin() gives it.
    // `cpus`: where the thread may run (nullopt: anywhere).
    static std::unique_ptr<JournalSink> opening(const std::string& path, JournalSync sync,
                                                std::string session, OnJournalFailure policy,
                                                RecordArgs record, int log_fd,
                                                std::optional<CpuSet> cpus);
    // The server is up: `start` is appended by the start-up (once the journal is open), and
    // "journal-started" written to `started_fd` (the keeper's control pipe; -1: none) when
    // that is over. Called once, before anything is recorded; a sink destroyed without it
    // (the server never started) records nothing.
    void begin(journal::SessionStart start, int started_fd);
    ~JournalSink() override;

    Result<int64_t> on_request(const rpc::Message& m, std::string_view line) override;
    // A request answered from the --lazy catalog (shim/hibernation.hpp): not recorded as a
    // request, but the protocol it speaks is (session.protocol, served_from "catalog"), so a
    // session served whole from the catalog still says who its client was.
    void on_served(const rpc::Message& m, std::string_view line);
    // session.probed_by, when a probe session of the same client came just before (the
    // start-up does it itself; a session that opened its journal inline calls it after
    // session.start).
    void link_probe(const journal::SessionStart& start) {
        if (journal()) link_probe(*journal_, start);
    }
    // How long after a probe session's end the session it probed for may start (link_probe).
    static constexpr std::chrono::milliseconds kProbeLinkBound{10'000};
    void on_response(const Answer& a, const Outstanding* req) override;
    void on_client_lost(ClientLoss cause, std::span<const Outstanding> outstanding) override;
    void on_oversize(Direction d, size_t bytes) override;
    // What the client left in flight (session.client_lost, activity.abandoned): in the
    // intent file with one write() before the caller goes on to the teardown, which need not
    // wait for a commit; synchronously appended where intents are off.
    void record_evidence(std::span<const journal::Event> events);
    // The keeper died before its report: what it wrote of its teardown to our intent file
    // (keeper_journal.cpp) is committed now, after our own records so far,
    // before those of the teardown we do ourselves.
    void recover_keepers_records();
    // The keeper reported and handed its teardown's records over (`lines`, each an intent
    // line: they are in our intent file too, and it commits none of them): queued now, after
    // our own records so far, for the next commit to carry them (our session.end: one
    // transaction).
    void queue_keepers_records(std::span<const std::string> lines);
    // Before the keeper's records and session.end: what of ours could not be committed when
    // it was due (the append lock held past its wait, a failed batch) and waits in the
    // session's intent file is committed now, so that nothing of the session comes after its
    // end and the client's loss comes before the teardown.
    void recover_uncommitted();
    // Recorded like on_request, with "oversize": true and "id_in_prefix" (the id is null
    // when the line's first --max-message bytes do not hold it); the activity.oversize record
    // posted at the line's end carries its request_seq and its whole size.
    Result<int64_t> on_oversize_request(const rpc::Message& m, std::string_view prefix) override;

    // The journal, its start-up waited for; null if it could not be opened.
    journal::Journal* journal() {
        ready();
        return journal_.get();
    }
    // Durable append of a session-level record, with a member of its data given as canonical
    // text if any (Journal::append); errors are warned about, never fatal.
    void append(const journal::Event& e,
                std::optional<journal::CanonicalMember> member = std::nullopt);
    // Waits for everything posted so far (before the keeper starts signalling); with a
    // `bound`, at most that long (a slow disk): what is not committed then goes with the next
    // commit. False when something failed or is not committed yet.
    bool flush(std::optional<std::chrono::milliseconds> bound = std::nullopt);
    // The session is over: the journal is closed (Journal::close), and nothing more recorded.
    void close();
    // The same for a process about to exit (Journal::close_at_exit): nothing is freed.
    void close_at_exit();
    // The teardown begins: from now on a wait for the journal's lock is bounded by
    // kTeardownLockWait, like the keeper's. Another writer holding the lock (a stuck process,
    // another user's lock file) then costs the teardown one short wait, and what could not be
    // written is counted for journal.degraded, instead of each flush and append waiting as
    // long as a request may (10 s) while the tree lives on. `leave_end_sync`
    // (--journal-sync periodic): no periodic fsync starts any more, and session.end's sync is
    // the next writer's (Journal::leave_end_sync_to_next_writer).
    void tearing_down(bool leave_end_sync);
    // The run of a shared tree (src/share): every call it serves is on the record of the client
    // session that made it, under that client's id (the broker records it), so the tree's own
    // session keeps only what is its own (its start and end, notifications, the loss of its
    // client, which is the broker, the teardown): its requests are not recorded a second time,
    // nor their answers, nor abandoned on its record. A journal that could not be opened still
    // denies them under --on-journal-failure=deny.
    void leave_calls_to_clients() { calls_to_clients_ = true; }
    bool records_calls() const { return !calls_to_clients_; }
    // The session's one stderr line about the journal (later failures are only counted).
    void warn_once(const std::string& what);
    // Whether that line was written: the journal could not be opened or written.
    bool warned() const { return warned_.load(); }

  private:
    JournalSink(std::string session, OnJournalFailure policy, RecordArgs record, int log_fd);
    Result<int64_t> record_request(const rpc::Message& m, std::string_view line, bool oversize);
    void post_paced(journal::Event e);
    // session.protocol at the first request of each era and protocol version.
    // (request_seq 0: the request was answered from the catalog, and not recorded.)
    void note_protocol(const rpc::Message& m, std::string_view line, int64_t request_seq);
    void link_probe(journal::Journal& j, const journal::SessionStart& start);
    static std::string logical_call(const rpc::Message& m);
    void remember_call(int64_t record, const std::string& call);
    // Waits for the start-up, if one is under way, and takes its journal (on the relay's
    // thread: nothing else touches journal_); then commits the evidence written meanwhile.
    void ready();
    bool starting() const { return opening_ && opening_->joinable(); }
    void yield_start_up();
    void record_early_evidence(std::span<const journal::Event> events);

    // At close: how many records the session could not write, on one stderr line, if any.
    void report_losses();
    void count_unjournaled(const journal::Event& e);

    std::unique_ptr<journal::Journal> journal_;
    std::string open_error_;
    // No journal: what is lost is counted here (and session.start, which the start-up could
    // not append, once ready() takes over).
    std::optional<journal::LossLedger> ledger_;
    bool ledger_tried_ = false;
    journal::LossCount unjournaled_;  // what ledger_ counts, also without one
    std::optional<journal::Event> unjournaled_start_;
    std::string session_;
    OnJournalFailure policy_;
    RecordArgs record_;
    int log_fd_;
    std::atomic<bool> warned_{false};
    int64_t oversize_seq_ = 0;  // the oversize client request whose end is still to come
    // Posted from the relay's thread since it last waited for the writer (post_paced).
    size_t posts_since_wait_ = 0;
    std::set<std::string> protocols_seen_;  // "ERA VERSION" of the session.protocol records
    // input_required and its retry (journal_sink.cpp, "One call, several rounds").
    std::map<int64_t, std::string> calls_;           // record of a stateless request → its call
    std::map<std::string, journal::Json> awaiting_;  // call → id of its input_required round
    bool short_lock_wait_ = false;                   // tearing_down() came during the start-up
    bool end_sync_left_ = false;  // and asked to leave the end's sync to the next writer

    // What the relay gives the start-up's thread after the server started (begin()), or that
    // it never will; the thread waits for it once the journal is open. Under its mutex.
    struct Handoff {
        std::mutex mu;
        std::condition_variable given_cv;
        std::optional<journal::SessionStart> start;
        Fd started;  // "journal-started" goes there
        bool abandoned = false;
    };
    // The start-up's thread: opens, awaits begin(), appends session.start.
    void start_up(const std::string& path, JournalSync sync, bool slow);
    // On the start-up's thread: the session to start, or nullopt (abandoned).
    std::optional<journal::SessionStart> await_begin(Fd& started);
    void abandon_start_up();

    // The start-up's thread, and what it hands over when joined.
    Handoff handoff_;
    std::optional<BackgroundThread> opening_;
    std::unique_ptr<journal::Journal> opened_;
    std::string start_error_;  // session.start could not be appended: why
    std::string journal_path_;
    JournalSync sync_ = JournalSync::Periodic;
    // The evidence of a client that left during the start-up: in the session's intent file
    // (`early_file_`), committed after session.start by ready(). Its lines come before any
    // of the journal's own in that file, whose tickets count only its own lines: from then
    // on records take the synchronous way (no_intents_).
    std::vector<journal::Event> early_;
    std::optional<journal::IntentFile> early_file_;
    bool early_in_file_ = true;   // every write to early_file_ succeeded
    bool early_pending_ = false;  // its commit failed: recover_uncommitted() takes it
    bool recovered_ = false;      // recover_uncommitted() took the intent file
    bool no_intents_ = false;
    bool calls_to_clients_ = false;  // leave_calls_to_clients()
};

// A journal::TeardownRecorder (snapshot → signal → exit) for `session`, on the journal at
// `path` opened with a short lock wait (kTeardownLockWait): a lock wait never delays a
// teardown, and after the first record that cannot be written the rest are only counted. With
// `start_if_missing` (the keeper, once the relay died): if the journal holds no session.start
// for `session` — the relay was killed before its first record was durable — that record is
// appended first, so the teardown's rows belong to a session `journal sessions` lists and
// `journal reconcile` can end.
inline constexpr std::chrono::milliseconds kTeardownLockWait{250};
Result<std::unique_ptr<TeardownObserver>> make_teardown_journal(
    const std::string& session, const std::string& path,
    const journal::SessionStart* start_if_missing = nullptr, JournalSync sync = {});

// session.start's "sandbox" field: the profile, its enforcement level ("off", "full",
// "partial"), the Landlock ABI, the network policy and, in plain words, what is not enforced.
journal::Json sandbox_record(const sandbox::Plan& plan);

// Opens the journal at `path` (empty: the default place).
// `lock_wait` bounds each wait for the append lock (and SQLite's busy timeout).
Result<std::unique_ptr<journal::Journal>> open_journal(
    const std::string& path, JournalSync sync = {},
    std::chrono::milliseconds lock_wait = std::chrono::seconds(10));

}  // namespace warden::shim
