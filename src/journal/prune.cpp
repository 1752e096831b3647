#include "journal/prune.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <optional>

#include <fmt/format.h>

#include "fault/faults.hpp"
#include "journal/export_position.hpp"
#include "journal/query.hpp"
#include "journal/store.hpp"
#include "sys/fd.hpp"

namespace warden::journal {

int64_t pruned_before(Db& db) {
    auto v = read_meta(db, "pruned_before");
    if (!v) return 0;
    int64_t seq = 0;
    std::from_chars(v->data(), v->data() + v->size(), seq);
    return seq;
}

namespace {

// About what a record costs on disk besides its body: leaf and chain (64 bytes), the index
// columns, the page and index overhead.
constexpr int64_t kRecordOverhead = 160;

Result<int64_t> single_int(Db& db, const char* sql, int64_t a, int64_t b = 0) {
    auto s = db.prepare(sql);
    if (!s) return s.error();
    s->bind(1, a).bind(2, b);
    int rc = s->step();
    if (rc == SQLITE_ROW) return s->is_null(0) ? int64_t{0} : s->int64(0);
    if (rc == SQLITE_DONE) return int64_t{0};
    return db.error("prune: query", rc);
}

// The newest checkpoint at or before the first event younger than `cutoff_ns` (checkpoint
// records, signed when written, do not count as events). Reads from the oldest record on and
// stops at the first young one: cheap when there is nothing to prune.
Result<int64_t> anchor_by_age(Db& db, int64_t cutoff_ns, int64_t from) {
    auto s = db.prepare(
        "SELECT seq FROM records WHERE seq >= ?1 AND kind != 'checkpoint' AND ts >= ?2 "
        "ORDER BY seq LIMIT 1");
    if (!s) return s.error();
    s->bind(1, from).bind(2, cutoff_ns);
    int rc = s->step();
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return db.error("prune: query", rc);
    int64_t first_young = rc == SQLITE_ROW ? s->int64(0) : INT64_MAX;
    return single_int(db,
                      "SELECT max(c.seq) FROM checkpoints c JOIN records r ON r.seq = c.seq "
                      "WHERE c.seq <= ?1",
                      first_young);
}

// The oldest checkpoint from which on the records fit in `max_bytes`.
Result<int64_t> anchor_by_size(Db& db, int64_t max_bytes) {
    auto s = db.prepare("SELECT seq, length(body) FROM records ORDER BY seq DESC");
    if (!s) return s.error();
    int64_t total = 0, first_kept = 0;
    int rc;
    while ((rc = s->step()) == SQLITE_ROW) {
        total += s->int64(1) + kRecordOverhead;
        if (total > max_bytes) break;
        first_kept = s->int64(0);
    }
    if (rc != SQLITE_ROW) return int64_t{0};  // everything fits
    if (first_kept == 0) first_kept = s->int64(0) + 1;
    return single_int(db,
                      "SELECT min(c.seq) FROM checkpoints c JOIN records r ON r.seq = c.seq "
                      "WHERE c.seq >= ?1",
                      first_kept);
}

// The chain value stored at `seq`, as hex ("" when there is no such row).
Result<std::string> chain_hex_at(Db& db, int64_t seq) {
    auto s = db.prepare("SELECT chain FROM records WHERE seq = ?1");
    if (!s) return s.error();
    s->bind(1, seq);
    int rc = s->step();
    if (rc == SQLITE_DONE) return std::string();
    if (rc != SQLITE_ROW) return db.error("prune: query", rc);
    auto chain = s->blob(0);
    if (chain.size() != 32) return std::string();
    return to_hex(reinterpret_cast<const uint8_t*>(chain.data()), chain.size());
}

Status export_records(Db& db, int64_t before, const std::string& path) {
    auto fd = open_file(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
    if (!fd) return Error::msg(fmt::format("prune --export-to: {}", fd.error().message));
    auto s = db.prepare(
        "SELECT seq, ts, kind, session, origin, body FROM records WHERE seq < ?1 ORDER BY seq");
    if (!s) return s.error();
    s->bind(1, before);
    std::string buf;
    int rc;
    while ((rc = s->step()) == SQLITE_ROW) {
        Record r{s->int64(0),
                 s->int64(1),
                 std::string(s->text(2)),
                 std::string(s->text(3)),
                 std::string(s->text(4)),
                 std::string(s->blob(5))};
        buf += export_line(r, ExportFormat::Ndjson, /*include_content=*/true);
        if (buf.size() >= (1 << 20)) {
            if (auto st = write_all(fd->get(), buf, path); !st) return st;
            buf.clear();
        }
    }
    if (rc != SQLITE_DONE) return db.error("prune: export", rc);
    if (auto st = write_all(fd->get(), buf, path); !st) return st;
    if (::fsync(fd->get()) != 0) return Error::sys("fsync", path, errno);
    return {};
}

// Exporters behind the anchor: each whose position lies before the last record that would go.
// An unreadable position file is an error, not "nothing to keep" (export_position.hpp).
Result<std::vector<ExportHold>> exporters_behind(const std::string& db_path, int64_t anchor) {
    auto positions = read_export_positions(db_path);
    if (!positions) return positions.error();
    std::vector<ExportHold> behind;
    for (const auto& p : *positions)
        if (p.seq + 1 < anchor) behind.push_back({p.destination, p.seq, anchor - 1 - p.seq});
    return behind;
}

// The exporters a prune waits for, as journal.export_held and journal.pruned list them.
Json holds_json(const std::vector<ExportHold>& holds) {
    Json out = Json::array();
    for (const auto& h : holds)
        out.push_back(
            {{"destination", h.destination}, {"position", h.position}, {"records", h.records}});
    return out;
}

// The `journal.export_held` record, written once for each exporter position that holds the
// prune back (the meta key remembers the last one said), so that a retention running at
// every start does not repeat it while an exporter stays down.
Result<std::optional<Event>> export_held_record(Db& db, const std::vector<ExportHold>& held,
                                                int64_t wanted_anchor, int64_t anchor) {
    std::string said;
    for (const auto& h : held)
        said += fmt::format("{}:{};", h.destination, h.position);
    auto last = read_meta(db, "export_held");
    if (last && *last == said) return std::optional<Event>();
    auto s = db.prepare("INSERT OR REPLACE INTO meta(key, value) VALUES('export_held', ?1)");
    if (!s) return s.error();
    s->bind(1, said);
    if (int rc = s->step(); rc != SQLITE_DONE) return db.error("prune: meta", rc);
    Json data{{"exporters", holds_json(held)},
              {"wanted_anchor_seq", wanted_anchor},
              {"anchor_seq", anchor},
              {"reason", "not_exported"}};
    return std::optional<Event>(Event{"journal.export_held", "", 0, std::move(data)});
}

// The number of records: one contiguous run of seqs, so it comes from the ends of the key,
// not a scan.
Result<int64_t> records_kept(Db& db) {
    return single_int(db, "SELECT coalesce(max(seq) - min(seq) + 1, 0) FROM records", 0);
}

// Where a prune would cut, and which option asked for it: the later of the two anchors.
struct Cut {
    int64_t anchor = 0;
    std::string reason;
};

Result<Cut> wanted_cut(Db& db, const PruneOptions& o, int64_t previous) {
    Cut cut;
    if (o.older_than_ns > 0) {
        auto a = anchor_by_age(db, now_ns() - o.older_than_ns, previous);
        if (!a) return a.error();
        if (*a > cut.anchor) cut = {*a, "older_than"};
    }
    if (o.max_bytes > 0) {
        auto a = anchor_by_size(db, o.max_bytes);
        if (!a) return a.error();
        if (*a > cut.anchor) cut = {*a, "max_size"};
    }
    return cut;
}

// Records an exporter has not delivered: kept, and said so (the cut moves back to the newest
// checkpoint before the first of them, journal.export_held joins `notes`), unless the user
// chose to let them go (then journal.pruned names them).
Status hold_for_exporters(Db& db, const std::string& db_path, const PruneOptions& o, Cut& cut,
                          PruneReport& report, std::vector<Event>& notes) {
    auto behind = exporters_behind(db_path, cut.anchor);
    if (!behind) return behind.error();
    if (behind->empty()) return {};
    if (o.export_gap_allow) {
        report.unexported = std::move(*behind);
        return {};
    }
    int64_t first_unexported = cut.anchor;
    for (const auto& h : *behind)
        first_unexported = std::min(first_unexported, h.position + 1);
    auto a = single_int(db,
                        "SELECT max(c.seq) FROM checkpoints c JOIN records r "
                        "ON r.seq = c.seq WHERE c.seq <= ?1",
                        first_unexported);
    if (!a) return a.error();
    auto note = export_held_record(db, *behind, cut.anchor, *a);
    if (!note) return note.error();
    if (*note) notes.push_back(std::move(**note));
    report.held = std::move(*behind);
    cut.anchor = *a;
    return {};
}

// Removes the records before the cut (exported first, when asked) and returns the
// journal.pruned record that states the seam.
Result<Event> remove_before(Db& db, const PruneOptions& o, const Cut& cut, int64_t previous,
                            PruneReport& report) {
    const int64_t anchor = cut.anchor;
    auto removed = single_int(db, "SELECT count(*) FROM records WHERE seq < ?1", anchor);
    if (!removed) return removed.error();
    // What the record states of the seam, read before the rows go: the chain value the
    // anchor's link starts from, and the anchor's own (journal.pruned in JOURNAL.md).
    auto prev_chain = chain_hex_at(db, anchor - 1);
    if (!prev_chain) return prev_chain.error();
    auto anchor_chain = chain_hex_at(db, anchor);
    if (!anchor_chain) return anchor_chain.error();
    if (!o.export_to.empty()) {
        if (auto st = export_records(db, anchor, o.export_to); !st) return st.error();
        report.exported = o.export_to;
    }
    // The append-only trigger stops accidents; this is no accident. It is back before
    // the transaction commits.
    std::string sql = fmt::format(
        "DROP TRIGGER IF EXISTS records_no_delete;"
        "DELETE FROM records WHERE seq < {0};"
        "DELETE FROM sessions WHERE start_seq < {0};"
        "DELETE FROM activity WHERE request_seq < {0};"
        "INSERT OR REPLACE INTO meta(key, value) VALUES('pruned_before', '{0}');",
        anchor);
    if (auto st = db.exec(sql.c_str()); !st) return st.error();
    if (auto st = ensure_schema(db); !st) return st.error();
    auto kept = records_kept(db);
    if (!kept) return kept.error();
    report.anchor_seq = anchor;
    report.removed = *removed;
    report.kept = *kept + 2;  // and the journal.pruned record, and the checkpoint after it
    Json data{{"anchor_seq", anchor},
              {"anchor_chain", *anchor_chain},
              {"first_removed_seq", std::max<int64_t>(previous, 1)},
              {"prev_chain", *prev_chain},
              {"previous_anchor_seq", previous},
              {"removed", *removed},
              {"reason", cut.reason}};
    if (!o.export_to.empty()) data["exported_to"] = bytes_value(o.export_to);
    if (!report.unexported.empty()) data["unexported"] = holds_json(report.unexported);
    return Event{"journal.pruned", "", 0, std::move(data)};
}

}  // namespace

Result<bool> prune_due(const std::string& path, int64_t older_than_ns) {
    auto db = Db::open(path, Db::Mode::read, 1000);
    if (!db) return db.error();
    // The first record is the anchor after a prune (old by nature): the one after it says.
    auto ts = single_int(*db,
                         "SELECT ts FROM records WHERE seq > (SELECT min(seq) FROM records) "
                         "ORDER BY seq LIMIT 1",
                         0);
    if (!ts) return ts.error();
    return *ts != 0 && *ts < now_ns() - older_than_ns;
}

Result<PruneReport> prune(Journal& journal, const PruneOptions& o) {
    if (o.older_than_ns <= 0 && o.max_bytes <= 0)
        return Error::msg("journal prune: give --older-than DURATION or --max-size SIZE");
    PruneReport report;
    auto produce = [&](Db& db) -> Result<std::vector<Event>> {
        const int64_t previous = pruned_before(db);
        const int64_t nothing_before = std::max<int64_t>(previous, 1);
        auto cut = wanted_cut(db, o, previous);
        if (!cut) return cut.error();
        std::vector<Event> notes;
        if (cut->anchor > nothing_before && !Faults::from_env().export_prune_unheld)
            if (auto st = hold_for_exporters(db, journal.paths().db, o, *cut, report, notes); !st)
                return st.error();
        if (cut->anchor <= nothing_before) {
            // Nothing to prune, the common case (every run's start).
            auto kept = records_kept(db);
            if (!kept) return kept.error();
            report.kept = *kept;
            return notes;
        }
        auto pruned = remove_before(db, o, *cut, previous, report);
        if (!pruned) return pruned.error();
        notes.push_back(std::move(*pruned));
        return notes;
    };
    // Signed in the transaction that removes the rows: a journal.pruned record no checkpoint
    // covers explains nothing (verify.cpp, "Pruned, and proven").
    auto r = journal.append_produced(produce, /*seqs_in_order=*/false, "prune");
    if (!r) return r.error();
    if (report.anchor_seq > 0 && o.compact) {
        if (auto st = journal.compact(); !st) return st.error();
    }
    return report;
}

}  // namespace warden::journal
