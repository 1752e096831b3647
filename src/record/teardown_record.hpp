// The teardown on the record: the journal's rows for the teardown engine's hooks
// (contain/teardown.hpp), for the shim's keeper and relay and for `reap` alike. A layer of
// its own above both: the engine reports and knows no journal, the journal stores records and
// knows no engine, and this is where the one meets the other.
//
// Evidence before force: every target gets a process.snapshot before the first signal of its
// round, every signal a process.signal row and every end a process.exit row, in that order.
// A lock wait never delays a teardown: once a record cannot be written the rest are only
// counted (journal.degraded when the journal can be written again), so the signals go out on
// time; the caller opens the journal with a short lock wait for the same reason.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "contain/teardown.hpp"
#include "journal/intents.hpp"
#include "journal/journal.hpp"

namespace warden::journal {

// The report as a record holds it (session.end's and session.hibernate's `teardown`,
// reap.target's): every command and note of the tree redacted (redact.hpp). The one
// serialization of a TeardownReport that goes on record, the keeper's included.
std::string teardown_report_json(const TeardownReport& report);

class TeardownRecorder : public TeardownObserver {
  public:
    // The `reason` of the process.snapshot rows: `first` for the snapshot before the first
    // signal, `rescan` for each later round (a fork seen during the teardown).
    struct Reasons {
        std::string first = "before_first_signal";
        std::string rescan = "rescan";
    };

    // Records into `journal`, which must outlive the recorder. Processes in `snapshotted`
    // (pid, starttime) are on record already and get no second snapshot.
    TeardownRecorder(Journal& journal, std::string session, Reasons reasons,
                     std::set<std::pair<pid_t, uint64_t>> snapshotted = {});
    // The same, owning the journal.
    TeardownRecorder(std::unique_ptr<Journal> journal, std::string session, Reasons reasons);
    // No journal to write to (it could not be opened in time): every record is kept for
    // take_unrecorded(), so that whoever can open the journal later counts them as lost.
    TeardownRecorder(std::nullptr_t, std::string session, Reasons reasons);
    // No journal yet, by design (the keeper signals first and commits after): every record is
    // kept for take_unrecorded() with its ts, and written to `intents` before what it
    // precedes (the snapshot before the first signal, a signal before it is sent, an exit
    // once seen), so that a death of ours loses none of them (IntentFile).
    TeardownRecorder(IntentFile intents, std::string session, Reasons reasons);

    // The records that were not written: those made without a journal. (Those a journal
    // refused are counted in that journal already.)
    std::vector<Event> take_unrecorded() { return std::exchange(unrecorded_, {}); }
    // The intents mode: each of those records as the line written for it to the intent file
    // (intent_lines, without its newline), in the same order, for whoever commits them
    // (Journal::post_intent_line) to take as it stands instead of serializing it again. Whole
    // only while intents_failed() is empty: the records after a failure have no line.
    std::vector<std::string> take_unrecorded_lines() { return std::exchange(lines_, {}); }
    // Why the intent file stopped taking records, if it did: those after are in memory only.
    const std::optional<Error>& intents_failed() const { return intents_failed_; }

    // A further pass of the engine (reap's sweeps): its round 0 is round `round`, a rescan.
    void set_first_round(int round) { first_round_ = round; }

    void on_snapshot(int round, const std::vector<const Target*>& targets) override;
    void on_signalling(const Target& t, int sig) override;
    void on_signal(const Target& t, int sig, const Status& result) override;
    void on_exit(const Target& t, warden::Outcome how) override;

    // After the last pass: every process on record here that no pass saw end, and that is
    // gone now, gets its process.exit ("before_signal"). Reap snapshots a tree from its own
    // scan before the engine plans it, and a member that exits in between is in no pass: a
    // snapshot with no exit would read as a survivor to whoever audits the journal.
    void record_exits_no_pass_saw();

  private:
    void record(std::span<const Event> events);
    void post(Event e);
    // The intents mode: each record gets its ts now, and its line in the file.
    void stamp(std::span<Event> events);
    // Each of `events` (records about to join unrecorded_) as its line, in lines_, written to
    // the file in one write().
    void write_intents(std::span<const Event> events);
    std::optional<std::string> line_of(const Event& e);
    void write_lines(std::string_view text);

    std::unique_ptr<Journal> owned_;
    Journal* journal_;
    std::vector<Event> unrecorded_;
    std::vector<std::string> lines_;  // take_unrecorded_lines()
    std::string session_;
    Reasons reasons_;
    std::set<std::pair<pid_t, uint64_t>> snapshotted_, exited_;
    int first_round_ = 0;
    std::optional<Error> failed_;
    std::optional<IntentFile> intents_;
    std::optional<Error> intents_failed_;
    int64_t last_ts_ = 0;
    // A signal's intent, written before it was sent (on_signalling), for its record: the
    // same ts, and the same line when the record reads as the intent did.
    struct Signalling {
        int64_t ts = 0;
        Json data;
        std::string line;
    };
    std::map<std::tuple<pid_t, uint64_t, int>, Signalling> signalling_;
};

}  // namespace warden::journal
