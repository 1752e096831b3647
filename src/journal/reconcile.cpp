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

#include "journal/intents.hpp"
#include "journal/journal.hpp"
#include "journal/store.hpp"

namespace warden::journal {

namespace {

// The intent files of sessions whose writer is dead (intents.hpp): recovered first, so that
// their requests are on record, and unresolved, before the session is called orphaned.
// A file refused as another user's (intents.hpp) is not recovered: it is in `problems`.
Status recover_dead_writers_intents(Journal& journal, std::vector<std::string>& problems) {
    auto sessions = intent_sessions(journal.paths());
    if (sessions.empty()) return {};
    std::vector<std::string> dead;
    auto find_dead = [&](Db& db) -> Result<std::vector<Event>> {
        dead.clear();
        for (const auto& s : sessions)
            if (session_writer_alive(db, s) == false) dead.push_back(s);
        return std::vector<Event>{};
    };
    if (auto r = journal.append_produced(find_dead); !r) return r.error();
    for (const auto& s : dead) {
        auto r = recover_session_intents(journal, s);
        if (!r) return r.error();
        problems.insert(problems.end(), r->problems.begin(), r->problems.end());
    }
    return {};
}

}  // namespace

Result<ReconcileReport> reconcile(Journal& journal) {
    std::vector<std::string> problems;
    if (auto st = recover_dead_writers_intents(journal, problems); !st) return st.error();
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
        return out;
    };
    auto r = journal.append_produced(produce);
    if (!r) return r.error();
    return report;
}

}  // namespace warden::journal
