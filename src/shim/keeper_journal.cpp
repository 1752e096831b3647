// The keeper's journal.
//
// The keeper records the teardown: a snapshot of every target taken before its first
// signal, every signal, every exit. On a machine where a commit costs milliseconds, a
// commit of the snapshot before the first signal, and of each signal before it, held the
// tree (and its ports) that long. What must come before a signal is the snapshot's
// *taking*: what /proc shows of each target while it still runs. So the teardown signals
// first: the recorder keeps the snapshot, the signals and the exits in memory, in order
// (TeardownRecorder without a journal), and record_teardown writes them in one
// transaction once the tree is gone, before the report. The relay's evidence of what the
// client left in flight was in its intent file before it asked (one write(), as a
// forwarded request), and is committed while we signal; it says "evidence" when it is,
// and our records go after it, so the log reads client_lost, abandoned, snapshot,
// signals, exits, session.end as before. If the relay dies instead, its intent file is
// recovered first. A keeper killed during the teardown leaves its records in the intent
// file: the relay, which then tears down what is left, commits them before its own
// (recover_keepers_intents), or whoever recovers the file later does.
//
// When a live relay asked for the teardown, that file is where the records stay: they
// are in it, each before what it precedes, so they survive the death of either process
// as a committed transaction would, and the relay's session.end is the next commit
// anyway. So the keeper hands them over (hand_over_records: a "record" line each, as it
// would have committed them, before its report) and the relay queues them after its own
// records and commits them with its session.end, in one transaction. Our commit of them (the
// lock, the lookups, a transaction, and the writer thread's WAL fsync racing the relay's
// commit) was a millisecond or more between the tree's last process and `run`'s exit; in a
// session that ended during the relay's journal start-up, it was the opening of our journal too
// (~7 ms of CPU). A relay killed after the report, before its commit: we see it die
// before "ended" and recover the whole file before writing the end ourselves
// (end_session_if_the_relay_cannot). Both killed: the file is there for the next `run`'s
// dead-session worker or `journal reconcile`. A recorder that could not write the file
// keeps them in memory only: then we commit them ourselves, as before.
//
// Opening a journal is milliseconds of work (the lock, the signing key, the schema check
// in a transaction) and, with another writer holding the lock, a wait. So the journal is
// opened ahead, as soon as the server runs, and kept (idle: no transaction, no writer
// thread) until the teardown needs it; an opening still under way when the teardown is
// asked for is finished after the signals, not before. Only a session that ends before
// any attempt succeeded opens it at the teardown's end, within kTeardownLockWait.
//
// Opening ahead starts once the relay says "journal-started" (its journal open, its
// session.start written: two openings of a new journal at once can fail one of them),
// and never waits for the lock: a writer holding it (a stuck process) makes the attempt
// fail at once, and the wait loop tries again 10 ms later, backing off to once a second.
// An attempt is still milliseconds of work (SQLite's open, OpenSSL reading the key), and
// a client that closes right after its first exchange (`claude mcp list` does) ends the
// session in that very window: done in the wait loop, the attempt held back the report
// of the server's exit, and so the whole teardown, by as long as it took. So it runs on
// a thread of its own (JournalOpening) while the loop goes on reaping and listening; the
// thread is joined before anything forks (a wake) and when the teardown's records are
// written. A journal that cannot be opened then leaves the records in memory
// (unrecorded_): close_journal opens the journal with a longer wait and counts them as
// lost, by kind, in a journal.degraded record. A journal that opened but cannot write
// (lock held, disk full) counts them the same way; the counts are written at close, before
// the report, so that the relay's session.end, which follows the report, does not wait
// behind them.
//
// After each teardown (a hibernation too) the journal is closed: a wake forks a server,
// and the journal's writer thread must not be running then. It is opened ahead again.
//
// An attempt still under way when the keeper is done (the journal was not needed: the
// records went to the relay, or the teardown was not recorded) is not waited for. The
// teardown lowered it to nice 19, for good (sys/background_thread.hpp), and on a machine
// whose cores are busy such a thread gets ~1.5% of one: its few milliseconds of work can
// take seconds, during which the keeper, and so `run`, outlived a tree that was already gone. It
// ends with the process instead (the keeper leaves by _exit, nothing of the process is torn
// down under it): SQLite is made for a process that dies mid-open, and the journal's lock,
// if the attempt held it, goes with its descriptor.
#include <unistd.h>

#include <fmt/format.h>

#include "journal/intents.hpp"
#include "journal/query.hpp"
#include "shim/journal_sink.hpp"
#include "shim/keeper_impl.hpp"

namespace warden::shim {

// The teardown's records, kept in memory while it ran, in one transaction once the tree is
// gone: after the relay's evidence when the relay asked (it says "evidence" once that is
// committed, or dies, and then its intent file holds it), after the session.start and the
// intents of a relay that died. Without a journal they stay in unrecorded_, and
// close_journal counts them.
void Keeper::record_teardown(Cause cause) {
    bool relay_gone = cause == Cause::relay_gone;
    const bool await_evidence = cause == Cause::asked && !cfg_.contain.faults.keeper_evidence_wait;
    // A relay whose client left during its journal's start-up (no "journal-started" yet:
    // shim/journal_sink.cpp) writes its session.start and its evidence once that is over,
    // which a wait for the lock can make long: our journal is opened after it (two
    // openings of a new journal at once can fail one), and our records go after its.
    const bool relay_starting = cfg_.journal_on && !relay_journal_started_;
    if (await_evidence && relay_starting)
        relay_gone = !await_control_line("evidence", kRelayStartWait).value_or(true);
    open_for_teardown();
    if (await_evidence && !relay_starting) relay_gone = !await_relays_evidence();
    if (!journal_) return;
    // A relay that died: its intent file, ours in it, is recovered first; what of ours
    // is on record then is not appended twice (append_missing).
    if (relay_gone) take_over_from_relay(*journal_);
    if (auto a = journal::append_missing(*journal_, unrecorded_); !a) {
        journal_->count_lost(unrecorded_, a.error());
        records_lost_ = true;  // owed: journal.degraded, committed by the close
    }
    unrecorded_.clear();
}

// A live relay asked for the teardown, and every record of it is in the session's intent
// file: the relay commits them (sent before our report, as they are in memory: a signal's
// outcome is known only after its line was written), after its own evidence and with its
// session.end, and we neither wait for its "evidence" nor open or commit anything on the
// way to our report (the essay above says why, and what a death of either
// does then).
void Keeper::hand_over_records() {
    records_handed_over_ = true;
}

// The records handed over, as lines of the report pipe (none if they were not).
std::string Keeper::handed_over_lines() {
    std::string lines;
    if (!records_handed_over_) return lines;
    unrecorded_.clear();
    for (const std::string& l : std::exchange(unrecorded_lines_, {}))
        lines += line_of("record " + l);
    return lines;
}

// The recorder of a teardown that signals first: its records in memory until
// record_teardown commits them, and each in the session's intent file before what it
// precedes. Without that file (keeper_no_intents, or it cannot be opened) in memory only:
// a keeper killed before its commit then loses them, uncounted.
std::unique_ptr<journal::TeardownRecorder> Keeper::recorder_on_intents() {
    const journal::TeardownRecorder::Reasons reasons{};
    if (!cfg_.contain.faults.keeper_no_intents) {
        auto path = journal::resolve_path(cfg_.journal_path);
        auto file = path ? journal::IntentFile::open(journal::Paths::for_db(*path), cfg_.session_id)
                         : Result<journal::IntentFile>(path.error());
        // A file that cannot be opened: the journal cannot be written either, which the
        // relay has said once already; the records are then counted at close as before.
        if (file) {
            records_in_intents_ = true;
            return std::make_unique<journal::TeardownRecorder>(std::move(*file), cfg_.session_id,
                                                               reasons);
        }
    }
    return std::make_unique<journal::TeardownRecorder>(nullptr, cfg_.session_id, reasons);
}

// The journal opened ahead, its attempt under way finished (bounded), or else one bounded
// attempt now (a session too short for the attempts between the relay's own appends, or a
// lock held all along: kTeardownLockWait); if that fails, the records are counted at close.
void Keeper::open_for_teardown() {
    finish_opening();
    if (journal_) return;
    if (auto j = open_journal(cfg_.journal_path, cfg_.journal_sync, kTeardownLockWait))
        journal_ = std::move(*j);
    else
        journal_error_ = j.error();
}

// Until the relay says "evidence" (true) or dies (false); a relay that does neither
// within kEvidenceWait (stopped, or its commit stuck past its own lock bound) is alive:
// our records then go on record after whatever of its evidence is committed by then.
bool Keeper::await_relays_evidence() {
    return await_control_line("evidence", kEvidenceWait).value_or(true);
}

bool Keeper::journal_wanted() const {
    return cfg_.journal_on && relay_journal_started_ && !journal_ && !opening_ &&
           !cfg_.contain.faults.keeper_journal_late;
}

// The keeper is done with its journal and exits next (the essay above).
void Keeper::leave_opening_to_the_exit() {
    if (!opening_ || cfg_.contain.faults.keeper_waits_for_opening) return;
    JournalOpening::leave_to_the_exit(std::move(opening_));
}

// One attempt when one is due, on its own thread.
void Keeper::open_journal_ahead() {
    if (!journal_wanted() || std::chrono::steady_clock::now() < journal_retry_at_) return;
    const auto& faults = cfg_.contain.faults;
    const std::chrono::milliseconds delay = faults.keeper_journal_stuck  ? std::chrono::minutes(1)
                                            : faults.keeper_journal_slow ? std::chrono::seconds(2)
                                                                         : std::chrono::seconds(0);
    auto o = JournalOpening::start(cfg_.journal_path, cfg_.journal_sync, delay,
                                   faults.keeper_journal_inline);
    if (!o) {
        attempt_failed(o.error());
        return;
    }
    opening_ = std::move(*o);
    if (cfg_.contain.faults.keeper_journal_inline) finish_opening();
}

// The attempt under way, if any, is over (joined): its journal kept, or the next one due.
void Keeper::finish_opening() {
    if (!opening_) return;
    auto j = opening_->finish();
    opening_.reset();
    if (j) {
        journal_ = std::move(*j);
        journal_->set_lock_wait(kTeardownLockWait);
        journal_error_.reset();
        journal_backoff_ = kJournalRetryFirst;
        trace_phase("keeper_journal_open");
        return;
    }
    attempt_failed(j.error());
}

void Keeper::attempt_failed(const Error& why) {
    journal_error_ = why;
    journal_retry_at_ = std::chrono::steady_clock::now() + journal_backoff_;
    journal_backoff_ = std::min(journal_backoff_ * 2, kJournalRetryMax);
}

// When the wait loop must wake to try again.
std::optional<std::chrono::steady_clock::time_point> Keeper::journal_retry_at() const {
    if (!journal_wanted()) return std::nullopt;
    return journal_retry_at_;
}

// The guards off (keeper_records_first, keeper_journal_late): the recorder for a
// teardown that records each snapshot and signal before it, as the keeper once did, on
// the journal opened ahead (its opening finished first), or on none (its records are
// counted later). Once the relay died, what take_over_from_relay writes comes first.
std::unique_ptr<journal::TeardownRecorder> Keeper::teardown_recorder(bool relay_gone) {
    if (cfg_.contain.faults.keeper_journal_late && !journal_) {
        // The guard off: opened now, on the teardown path; no journal, no record.
        auto j = open_journal(cfg_.journal_path, cfg_.journal_sync, kTeardownLockWait);
        if (!j) {
            if (relay_gone) log("mcpwarden: " + j.error().message + " (teardown not recorded)\n");
            return nullptr;
        }
        journal_ = std::move(*j);
        trace_phase("keeper_journal_open");
    }
    open_for_teardown();
    if (!journal_)
        return std::make_unique<journal::TeardownRecorder>(nullptr, cfg_.session_id,
                                                           journal::TeardownRecorder::Reasons{});
    if (relay_gone) take_over_from_relay(*journal_);
    return std::make_unique<journal::TeardownRecorder>(*journal_, cfg_.session_id,
                                                       journal::TeardownRecorder::Reasons{});
}

// The relay died: the session.start it may not have written comes first, so the
// teardown's rows belong to a session, then what it left in its intent file. Best
// effort: a journal that cannot say whether the start is there, or take it, still gets
// the teardown's rows (their own appends report what fails).
void Keeper::take_over_from_relay(journal::Journal& journal) {
    auto started = journal::has_session_start(journal.paths().db, cfg_.session_id);
    if (started && !*started)
        (void)journal.append(journal::session_start(session_start_of_keeper()));
    if (!cfg_.contain.faults.keeper_intents) recover_relays_intents(journal);
}

// The relay died: the requests it forwarded but had not chained yet, and the evidence it
// left before the teardown, are in its intent file (journal.cpp, "Intents"). On record
// now, in their order, before the teardown's records or the session's end.
void Keeper::recover_relays_intents(journal::Journal& journal) {
    auto r = journal::recover_session_intents(journal, cfg_.session_id);
    if (!r) {
        log("mcpwarden: " + r.error().message + "\n");
        return;
    }
    for (const auto& p : r->problems)
        log("mcpwarden: " + p + "\n");
}

// Before the report: what the teardown could not write is counted, what is owed is
// written (journal.degraded first), and the journal is closed. `say_why`: a journal
// that cannot be opened even now is worth a line (the relay, alive, has said it).
void Keeper::close_journal(bool say_why, journal::Journal::Tail tail) {
    if (!cfg_.journal_on) return;
    if (!journal_ && !unrecorded_.empty()) {
        auto j = open_journal(cfg_.journal_path, cfg_.journal_sync, kLateRecordLockWait);
        if (!j) {
            if (say_why)
                log(fmt::format("mcpwarden: {} ({} teardown records not recorded)\n",
                                j.error().message, unrecorded_.size()));
            unrecorded_.clear();
            return;
        }
        journal_ = std::move(*j);
    }
    if (!journal_) return;
    if (!unrecorded_.empty()) {
        Error why =
            Error::msg("journal: not open when the teardown began" +
                       (journal_error_ ? " (" + journal_error_->message + ")" : std::string()));
        journal_->count_lost(unrecorded_, why);
        unrecorded_.clear();
    }
    journal_->set_lock_wait(kLateRecordLockWait);
    // A journal that opened but cannot take what is owed even now: its counts die with it.
    if (auto st = journal_->close(tail); !st)
        log("mcpwarden: " + st.error().message +
            " (the keeper's teardown records are not all recorded)\n");
    journal_.reset();
    journal_retry_at_ = {};
}

// The relay asked for the teardown and records session.end once it has the report; it
// then says "ended" on the control pipe. If it dies before that (a client's stop
// sequence: SIGINT, SIGTERM, then SIGKILL while the grace window runs), the session
// would be left without an end, and `journal reconcile` would call it orphaned although
// its tree was torn down in full. So the keeper waits for "ended" or the lifeline's
// end, and on the latter records the end itself, `recorded_by: keeper`, unless the
// journal already holds one (the relay died right after writing it). The relay had
// recorded what the client left in flight before asking, so nothing stays in flight.
// A relay that neither says "ended" nor dies within kRelayEndBound (a slow client
// reading the last answers) is alive and writes its own record.
void Keeper::end_session_if_the_relay_cannot(const TeardownReport& report) {
    if (!cfg_.journal_on) return;
    if (!relay_died_before_ending()) return;
    if (cfg_.contain.faults.keeper_session_end) return;
    auto j = open_journal(cfg_.journal_path);
    if (!j) {
        log("mcpwarden: journal: " + j.error().message + " (session.end not recorded)\n");
        return;
    }
    // Records handed over to it (hand_over_records) are in its intent file, and so is
    // what it left of a start-up it may not have finished (its session.start too).
    record_end(**j, report, /*take_over=*/true);
}

// The relay died before it asked for the teardown: a client that SIGKILLs it inside its
// EOF window (Codex SIGTERMs the relay's group and SIGKILLs it 270-640 ms later, while the
// relay waits the 1 s window for a server that does not exit on EOF; docs/CLIENTS.md).
// Nobody else records the session's end: without this, the session stayed `client_lost`
// until a later `run` or `reconcile` called it orphaned. record_teardown took over what
// the relay left (its session.start, its intent file) before the teardown's records; the
// end follows them, on the same journal, `recorded_by: keeper`. Its reason is the relay's
// when the relay had recorded the client's loss, else `relay_died`.
void Keeper::end_session_for_the_dead_relay(const TeardownReport& report) {
    if (!cfg_.journal_on || cfg_.contain.faults.keeper_session_end) return;
    if (!journal_) {
        auto j = open_journal(cfg_.journal_path, cfg_.journal_sync, kLateRecordLockWait);
        if (!j) {
            log("mcpwarden: journal: " + j.error().message + " (session.end not recorded)\n");
            return;
        }
        journal_ = std::move(*j);
        take_over_from_relay(*journal_);
    }
    record_end(*journal_, report, /*take_over=*/false);
}

// session.end for the relay, unless the journal already holds one (the relay died right
// after writing it). `take_over`: what the relay left is taken over first.
void Keeper::record_end(journal::Journal& journal, const TeardownReport& report, bool take_over) {
    journal::Filter f;
    f.session = cfg_.session_id;
    auto rows = journal::list_sessions(journal.paths().db, f);
    if (rows && !rows->empty() && rows->front().state == "ended") return;
    if (take_over) take_over_from_relay(journal);
    if (end_reason_.empty()) {
        // Read after the take-over: the relay's session.client_lost may be in its intents.
        auto now = journal::list_sessions(journal.paths().db, f);
        const bool lost = now && !now->empty() && now->front().state == "client_lost";
        end_reason_ = lost ? "client_lost" : "relay_died";
    }
    auto status = child_ && child_->exit_status() ? child_->exit_status() : report.root_status;
    journal::Event e = journal::session_end(session_end_record(
        cfg_.session_id, end_reason_, status, journal::teardown_report_json(report)));
    e.data["recorded_by"] = "keeper";
    if (auto a = journal.append(e); !a)
        log("mcpwarden: journal: " + a.error().message + " (session.end not recorded)\n");
}

// True when the lifeline closes before "ended" (bounded by kRelayEndBound).
bool Keeper::relay_died_before_ending() {
    return !await_control_line("ended", kRelayEndBound).value_or(true);
}

// What the relay would have recorded as session.start, as far as the keeper knows it:
// used only if the relay died before its record was durable. The client is unknown
// here (the keeper's parent was the relay), and the record says who wrote it.
journal::SessionStart Keeper::session_start_of_keeper() const {
    journal::SessionStart s;
    s.session = cfg_.session_id;
    s.server_name = cfg_.server_name;
    s.writer = journal::WriterIdentity::self();
    s.keeper = s.writer.process;
    if (child_) s.server = child_->id();
    s.server_argv = cfg_.command;
    char cwd[4096];
    if (::getcwd(cwd, sizeof cwd)) s.cwd = cwd;
    if (containment_)
        for (const LayerState* l : containment_->layers().all())
            if (l->on) s.layers.push_back(l->name);
    s.extra = journal::Json{{"recorded_by", "keeper"},
                            {"eof_grace_ms", static_cast<int64_t>(cfg_.eof_grace.count())},
                            {"term_grace_ms", static_cast<int64_t>(cfg_.term_grace.count())}};
    if (cfg_.sandbox) s.extra["sandbox"] = sandbox_record(*cfg_.sandbox);
    return s;
}

}  // namespace warden::shim
