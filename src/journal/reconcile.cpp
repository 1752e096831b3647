// Reconcile: sessions whose writer died without a session.end.
//
// A relay killed by SIGKILL (or a machine that lost power) cannot write its own ending. The
// journal still knows the writer's identity from session.start: (pid, starttime, boot_id).
// If that process is gone, no record can ever come from it, so the session is marked
// session.orphaned and each request it never resolved gets activity.unresolved. The decision
// and the records are made inside one append transaction under the flock, so two reconciles
// running at once cannot both write them.
#include <sqlite3.h>

#include <fmt/format.h>

#include "fault/faults.hpp"

#include "journal/intents.hpp"
#include "journal/journal.hpp"
#include "journal/store.hpp"

namespace warden::journal {

namespace {

// The intent files whose writers are gone (intents.hpp): recovered first, so that their
// requests are on record, and unresolved, before the session is called orphaned. Gone is
// what the session's start says of its writer (pid, starttime, boot) when the log has a
// start; a session whose start never reached the log names no writer, and its file is left
// behind when nobody holds it (intent_file_held). A file refused as another user's
// (intents.hpp) is not recovered: it is in `problems`.
Status recover_dead_writers_intents(Journal& journal, std::vector<std::string>& problems) {
    auto sessions = intent_sessions(journal.paths());
    if (sessions.empty()) return {};
    const bool unstarted_left = Faults::from_env().intents_left_unstarted;
    std::vector<std::string> dead;
    auto find_dead = [&](Db& db) -> Result<std::vector<Event>> {
        dead.clear();
        for (const auto& s : sessions) {
            auto alive = session_writer_alive(db, s);
            if (alive == false ||
                (!alive && !unstarted_left && !intent_file_held(journal.paths().intent_file(s))))
                dead.push_back(s);
        }
        return std::vector<Event>{};
    };
    if (auto r = journal.append_produced(find_dead); !r) return r.error();
    for (const auto& s : dead) {
        auto r = recover_session_intents(journal, s);
        if (!r) {
            problems.push_back(fmt::format("intent file {}: not recovered: {}",
                                           journal.paths().intent_file(s), r.error().message));
            continue;
        }
        problems.insert(problems.end(), r->problems.begin(), r->problems.end());
    }
    return {};
}

// The intent files still there after recovery, each with why: a running writer's, or one
// refused or failed above (said there already).
void report_intent_files_left(Journal& journal, std::vector<std::string>& problems) {
    for (const auto& s : intent_sessions(journal.paths())) {
        std::string file = journal.paths().intent_file(s);
        bool said = false;
        for (const auto& p : problems)
            said = said || p.find(file) != std::string::npos;
        if (said) continue;
        problems.push_back(fmt::format("intent file {} (session {}): left: {}", file, s,
                                       intent_file_held(file)
                                           ? "its writer still runs and chains it itself"
                                           : "its session's writer still runs"));
    }
}

// Records of a session with no session.start (its relay died, or could not write, before its
// start was committed; the keeper's records then came alone) get a synthesized one, so that
// no session's records are on record without its start, and the session can be ended below.
// A session whose intent file is held still has a writer that may yet write its own.
Result<std::vector<Event>> synthesize_missing_starts(Journal& journal, Db& db) {
    std::vector<Event> out;
    if (Faults::from_env().intents_left_unstarted) return out;
    auto unstarted = db.prepare(
        "SELECT session, min(ts) FROM records WHERE session != '' AND session NOT IN "
        "(SELECT session FROM sessions) GROUP BY session ORDER BY min(seq)");
    if (!unstarted) return unstarted.error();
    int rc;
    while ((rc = unstarted->step()) == SQLITE_ROW) {
        std::string session(unstarted->text(0));
        if (intent_file_held(journal.paths().intent_file(session))) continue;
        out.push_back(synthesized_start(session, unstarted->int64(1) - 1, "records"));
    }
    if (rc != SQLITE_DONE) return db.error("scan sessions without a start", rc);
    return out;
}

}  // namespace

Result<ReconcileReport> reconcile(Journal& journal) {
    std::vector<std::string> problems;
    if (auto st = recover_dead_writers_intents(journal, problems); !st) return st.error();
    report_intent_files_left(journal, problems);
    auto starts =
        journal.append_produced([&](Db& db) { return synthesize_missing_starts(journal, db); });
    if (!starts) return starts.error();
    ReconcileReport report;
    auto produce = [&](Db& db) -> Result<std::vector<Event>> {
        report = {};
        report.problems = problems;
        std::vector<Event> out;
        auto open_sessions = db.prepare(
            "SELECT session, writer_pid, writer_starttime, writer_boot_id, start_seq FROM sessions "
            "WHERE state IN ('running', 'client_lost') ORDER BY start_seq");
        if (!open_sessions) return open_sessions.error();
        auto last_seq = db.prepare("SELECT max(seq) FROM records WHERE session = ?1");
        if (!last_seq) return last_seq.error();
        auto in_flight = db.prepare(
            "SELECT request_seq, request_id, method, tool FROM activity "
            "WHERE session = ?1 AND outcome = 'in_flight' ORDER BY request_seq");
        if (!in_flight) return in_flight.error();
        auto ended =
            db.prepare("SELECT 1 FROM records WHERE session = ?1 AND kind = 'session.end' LIMIT 1");
        if (!ended) return ended.error();
        int rc;
        while ((rc = open_sessions->step()) == SQLITE_ROW) {
            std::string session(open_sessions->text(0));
            WriterIdentity w;
            w.process.pid = static_cast<pid_t>(open_sessions->int64(1));
            w.process.starttime = static_cast<uint64_t>(open_sessions->int64(2));
            w.boot_id = std::string(open_sessions->text(3));
            if (writer_alive(w)) {
                ++report.alive;
                continue;
            }
            // A start synthesized after its session's end (its start came after: the end
            // committed, the start did not) leaves the projection running; the end is there.
            ended->bind(1, session);
            const bool has_end = ended->step() == SQLITE_ROW;
            ended->reset();
            if (has_end) continue;
            last_seq->bind(1, session);
            int64_t last = last_seq->step() == SQLITE_ROW ? last_seq->int64(0) : 0;
            last_seq->reset();
            std::vector<Event> unresolved;
            in_flight->bind(1, session);
            while (in_flight->step() == SQLITE_ROW) {
                Json id = Json::parse(in_flight->text(1), nullptr, false);
                if (id.is_discarded()) id = nullptr;
                unresolved.push_back(Event{"activity.unresolved", session, 0,
                                           Json{{"request_seq", in_flight->int64(0)},
                                                {"id", id},
                                                {"method", std::string(in_flight->text(2))},
                                                {"tool", std::string(in_flight->text(3))},
                                                {"reason", "writer_dead"}}});
            }
            in_flight->reset();
            out.push_back(Event{
                "session.orphaned", session, 0,
                Json{{"writer", Json{{"pid", static_cast<int64_t>(w.process.pid)},
                                     {"starttime", w.process.starttime},
                                     {"boot_id", w.boot_id}}},
                     {"last_seq", last},
                     {"unresolved", static_cast<int64_t>(unresolved.size())},
                     {"reason", w.boot_id != current_boot_id() ? "rebooted" : "writer_dead"}}});
            report.unresolved += static_cast<int64_t>(unresolved.size());
            for (auto& e : unresolved)
                out.push_back(std::move(e));
            report.orphaned.push_back(session);
        }
        if (rc != SQLITE_DONE) return db.error("scan open sessions", rc);
        // Requests of ended sessions still in flight: their answer was due and is not on
        // record (counted in journal.degraded, or never given). An ended session has nothing
        // in flight, so they are resolved as unresolved, saying so.
        auto ended_in_flight = db.prepare(
            "SELECT a.session, a.request_seq, a.request_id, a.method, a.tool FROM activity a "
            "JOIN sessions s ON s.session = a.session "
            "WHERE s.state = 'ended' AND a.outcome = 'in_flight' ORDER BY a.request_seq");
        if (!ended_in_flight) return ended_in_flight.error();
        while ((rc = ended_in_flight->step()) == SQLITE_ROW) {
            Json id = Json::parse(ended_in_flight->text(2), nullptr, false);
            if (id.is_discarded()) id = nullptr;
            out.push_back(Event{"activity.unresolved", std::string(ended_in_flight->text(0)), 0,
                                Json{{"request_seq", ended_in_flight->int64(1)},
                                     {"id", id},
                                     {"method", std::string(ended_in_flight->text(3))},
                                     {"tool", std::string(ended_in_flight->text(4))},
                                     {"reason", "no_answer_on_record"}}});
            ++report.unresolved;
        }
        if (rc != SQLITE_DONE) return db.error("scan requests of ended sessions", rc);
        return out;
    };
    auto r = journal.append_produced(produce);
    if (!r) return r.error();
    return report;
}

}  // namespace warden::journal
