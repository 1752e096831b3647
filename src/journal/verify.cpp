// Offline verification of the journal: one pass over the records in seq order, checkpoints
// read alongside through a second cursor, memory flat (a bitmap of request seqs and one
// entry per session are the only things that grow, and they grow by bits and sessions, not
// by records). See verify.hpp for the list of checks and exit codes. The pass's state and
// steps are verifier.hpp's; the records and the projections they rebuild are read in
// verify_records.cpp, the rest (keys, checkpoints, the prune proof, the tail, the verdict) here.
#include "journal/verify.hpp"

#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <unordered_map>

#include <fmt/format.h>
#include <simdjson.h>
#include <nlohmann/json.hpp>

#include "fault/faults.hpp"
#include "journal/checkpoint.hpp"
#include "journal/intents.hpp"
#include "journal/losses.hpp"
#include "journal/prune.hpp"
#include "journal/store.hpp"
#include "journal/verifier.hpp"
#include "sys/fd.hpp"

namespace warden::journal {

namespace verification {

std::string short_key(const std::string& hex) {
    return hex.substr(0, 16);
}

bool Verifier::check_anchor(const Anchor& a) {
    const auto& cp = a.cp;
    std::string key_hex = to_hex(cp.public_key.data(), cp.public_key.size());
    if (cp.public_key != trusted_key_) {
        fail(cp.seq,
             fmt::format("key mismatch at checkpoint {} ({}): signed by key {}, the pinned key is "
                         "{} ({})",
                         cp.seq, a.where, short_key(key_hex), short_key(trusted_key_hex_),
                         trusted_key_source_));
        return false;
    }
    if (cp.origin != r_.origin) {
        fail(cp.seq,
             fmt::format(
                 "checkpoint {} ({}) belongs to another journal: origin {}, this journal is {}",
                 cp.seq, a.where, cp.origin, r_.origin));
        return false;
    }
    if (!checkpoint_signature_valid(cp)) {
        fail(cp.seq, fmt::format("bad signature on checkpoint {} ({})", cp.seq, a.where));
        return false;
    }
    return true;
}

// Requests written on a relay's path and not chained yet (journal.cpp, "Intents"). A running
// session's file is how its requests are on record until its writer thread chains them:
// normal, not worth a word. One whose writer died holds requests the log lacks until
// `journal reconcile` (a warning, not a gap in the chain); one that is not the journal
// owner's is never recovered (intents.hpp) and is named as such.
void Verifier::check_intent_files() {
    const auto sessions = intent_sessions(paths_);
    if (sessions.empty()) return;
    if (auto st = check_intents_dir(paths_); !st) {
        r_.warnings.push_back(st.error().message + " (its intent files are not recovered)");
        return;
    }
    for (const auto& s : sessions) {
        const std::string file = paths_.intent_file(s);
        struct stat st {};
        if (::lstat(file.c_str(), &st) != 0) continue;  // recovered meanwhile
        Status trusted =
            S_ISLNK(st.st_mode)
                ? Status(Error::msg(fmt::format(
                      "journal intent file {}: is a symbolic link; refusing to follow it", file)))
                : check_intent_file(file, st);
        if (!trusted) {
            r_.warnings.push_back(trusted.error().message + " (not recovered)");
            continue;
        }
        if (session_writer_alive(db_, s) == true || intent_file_held(file))
            continue;  // in use by the running session
        r_.warnings.push_back(fmt::format(
            "uncommitted intents: {} (session {}): requests forwarded but not yet in the log, "
            "and the session's writer is gone; `mcpwarden journal reconcile` records them",
            file, s));
    }
}

void Verifier::load_outside_anchors() {
    auto dir = read_checkpoint_dir(paths_.checkpoints);
    if (!dir) {
        r_.warnings.push_back(dir.error().message);
    } else {
        for (auto& [path, bad] : dir->bad)
            r_.warnings.push_back(fmt::format("unreadable checkpoint file: {}", bad));
        for (auto& [path, cp] : dir->files)
            outside_.emplace(cp.seq, Anchor{path, cp});
    }
    check_intent_files();
    for (const auto& t : opt_.trusted_checkpoints) {
        auto text = read_file(t);
        if (!text) {
            io_error(fmt::format("--trusted-checkpoint {}: {}", t, text.error().message));
            return;
        }
        auto cp = parse_checkpoint(*text, t);
        if (!cp) {
            io_error(cp.error().message);
            return;
        }
        outside_.emplace(cp->seq, Anchor{"trusted " + t, *cp});
    }
}

// Pruned, and proven. A prune removes the oldest records; what is kept must show that the
// journal's own writer pruned it and where it cut, or whoever can write the file removes
// evidence by deleting rows and setting one meta value. So the pruning writer states the
// seam in a `journal.pruned` record of the chain that remains (the anchor, the first seq
// kept and a signed checkpoint; the chain value of the record before it, from which the
// anchor's link follows; the anchor's own chain value) and signs that record with a
// checkpoint in the transaction that removes the rows. A log that starts past seq 1 then
// passes only if
//   - the newest journal.pruned record names the seq it starts at: rows removed by hand
//     leave no such record or one naming an older anchor ("unexplained prune", "prune
//     anchor moved");
//   - the anchor's chain value is the one stated and follows, by the anchor's leaf, from the
//     one stated before it ("prune seam broken");
//   - a valid signed checkpoint covers the record ("not covered by a signed checkpoint"):
//     a record appended to the unanchored tail proves nothing;
//   - every checkpoint kept elsewhere for a seq before the anchor names the chain value of
//     the journal's signed checkpoint at that seq (the table keeps every checkpoint). Its
//     records are gone, so it vouches for none that are kept; a trusted one says so.
// Whoever holds the private key can write and sign such a record too: docs/JOURNAL.md
// ("What an attacker can do") says what is left then.
void Verifier::check_prune() {
    const int64_t anchor = r_.anchor_seq;
    if (anchor == 0) return;
    check_anchors_before(anchor);
    if (Faults::from_env().prune_unproven) return;  // the guard off (a negative control)
    if (!newest_prune_) {
        fail(anchor, fmt::format("unexplained prune: the log starts at seq {0} but no "
                                 "journal.pruned record in it names seq {0} as its anchor",
                                 anchor));
        return;
    }
    const PruneClaim& p = *newest_prune_;
    if (p.anchor_seq != anchor) {
        fail(anchor, fmt::format("prune anchor moved: the log starts at seq {} but the newest "
                                 "journal.pruned record (seq {}) names anchor seq {}",
                                 anchor, p.seq, p.anchor_seq));
        return;
    }
    if (!p.prev_chain || !p.anchor_chain) {
        r_.warnings.push_back(fmt::format(
            "the journal.pruned record at seq {} states no chain values (an older mcpwarden "
            "wrote it): the anchor's link rests on its checkpoint's signature alone",
            p.seq));
    } else if (*p.anchor_chain != anchor_chain_ ||
               Hasher().chain(*p.prev_chain, anchor_leaf_) != anchor_chain_) {
        fail(anchor, fmt::format("prune seam broken at seq {}: its chain value does not follow "
                                 "from the one the journal.pruned record (seq {}) states",
                                 anchor, p.seq));
        return;
    }
    if (p.seq > anchored_) {
        fail(p.seq, fmt::format("the journal.pruned record at seq {} is not covered by a signed "
                                "checkpoint: nothing shows the journal's key signed it",
                                p.seq));
        return;
    }
    r_.prune_record_seq = p.seq;
}

void Verifier::check_anchors_before(int64_t anchor) {
    auto table = db_.prepare("SELECT chain FROM checkpoints WHERE seq = ?1");
    if (!table) {
        io_error(table.error().message);
        return;
    }
    for (auto it = outside_.begin(); it != outside_.end() && it->first < anchor; ++it) {
        const Anchor& a = it->second;
        if (!check_anchor(a)) continue;
        table->bind(1, a.cp.seq);
        std::optional<Hash> kept;
        if (table->step() == SQLITE_ROW && table->blob(0).size() == 32) {
            kept.emplace();
            std::memcpy(kept->data(), table->blob(0).data(), 32);
        }
        table->reset();
        if (kept != a.cp.chain) {
            fail(a.cp.seq,
                 fmt::format("checkpoint mismatch at seq {0}: checkpoint ({1}) signed chain {2}, "
                             "the journal's checkpoint at seq {0} (pruned) has {3}",
                             a.cp.seq, a.where, to_hex(a.cp.chain).substr(0, 16),
                             kept ? to_hex(*kept).substr(0, 16) : "none"));
            continue;
        }
        ++r_.checkpoints;
        if (a.where.rfind("trusted ", 0) != 0) continue;
        ++trusted_before_anchor_;
        r_.warnings.push_back(fmt::format(
            "checkpoint {} ({}) is older than the prune anchor (seq {}): it matches the "
            "journal's signed checkpoint at seq {}, but its records were pruned, so it "
            "vouches for none that are kept; keep a newer one (`mcpwarden audit anchor`)",
            a.cp.seq, a.where, anchor, a.cp.seq));
    }
}

void Verifier::check_tail() {
    // Checkpoints beyond the last row: the log was cut below them.
    for (auto it = outside_.upper_bound(last_row_); it != outside_.end(); ++it) {
        if (!check_anchor(it->second)) continue;
        fail(last_row_ + 1,
             fmt::format("truncated: checkpoint {} ({}) covers seq {} but the log ends at seq {}",
                         it->first, it->second.where, it->first, last_row_));
        break;
    }
    auto beyond = db_.prepare("SELECT min(seq) FROM checkpoints WHERE seq > ?1");
    if (beyond) {
        beyond->bind(1, last_row_);
        if (beyond->step() == SQLITE_ROW && !beyond->is_null(0))
            fail(last_row_ + 1,
                 fmt::format(
                     "truncated: checkpoint {} (table) covers seq {} but the log ends at seq {}",
                     beyond->int64(0), beyond->int64(0), last_row_));
    }
    auto head = db_.prepare("SELECT seq, chain FROM head WHERE id = 1");
    if (!head || head->step() != SQLITE_ROW) {
        fail(last_row_ + 1, "head row missing");
        return;
    }
    r_.head = head->int64(0);
    auto hc = head->blob(1);
    if (r_.head > last_row_) {
        fail(last_row_ + 1,
             fmt::format("truncated: the head says seq {} but the log ends at seq {}", r_.head,
                         last_row_));
    } else if (r_.head < last_row_) {
        fail(r_.head + 1,
             fmt::format("head mismatch: the head says seq {} but the log goes on to seq {}",
                         r_.head, last_row_));
    } else if (hc.size() != 32 || std::memcmp(hc.data(), last_chain_.data(), 32) != 0) {
        fail(last_row_,
             fmt::format("head mismatch: the head's chain hash differs from seq {}", last_row_));
    }
}

// Opens the journal read-only in one read transaction (a consistent snapshot even while
// writers append) and reads its origin and the key it pins; false (after io_error) if not.
bool Verifier::open_snapshot() {
    auto path = resolve_path(opt_.path);
    if (!path) {
        io_error(path.error().message);
        return false;
    }
    paths_ = Paths::for_db(*path);
    r_.private_key_path = paths_.key;
    if (auto st = check_location(paths_, /*create=*/false); !st) {
        io_error(st.error().message);
        return false;
    }
    auto db = Db::open(paths_.db, Db::Mode::read, 10000);
    if (!db) {
        io_error(db.error().message);
        return false;
    }
    db_ = std::move(*db);
    if (auto st = db_.exec("BEGIN"); !st) {
        io_error(st.error().message);
        return false;
    }
    auto origin = read_meta(db_, "origin");
    auto pinned = read_meta(db_, "public_key");
    if (!origin || !pinned) {
        io_error(!origin ? origin.error().message : pinned.error().message);
        return false;
    }
    r_.origin = *origin;
    r_.pinned_key = *pinned;
    trusted_key_hex_ = *pinned;
    trusted_key_source_ = "pinned in the journal";
    return true;
}

// The key checkpoints must be signed with: the outside pin (--public-key, else NAME.pub beside
// the database) when there is one, which must be the journal's; false (after io_error) when
// it cannot be read.
bool Verifier::pin_key() {
    const std::string pinned = r_.pinned_key;
    std::string pin_file = !opt_.public_key_file.empty() ? opt_.public_key_file : paths_.pub;
    auto pin_text = read_file(pin_file);
    if (!pin_text && !opt_.public_key_file.empty()) {
        io_error(fmt::format("--public-key {}: {}", pin_file, pin_text.error().message));
        return false;
    }
    if (pin_text) {
        std::string t = *pin_text;
        while (!t.empty() && (t.back() == '\n' || t.back() == ' '))
            t.pop_back();
        PublicKey k{};
        if (!from_hex(t, k.data(), k.size())) {
            io_error(fmt::format("public key file {}: not 64 hex digits", pin_file));
            return false;
        }
        trusted_key_hex_ = to_hex(k.data(), k.size());
        trusted_key_source_ = pin_file;
        if (trusted_key_hex_ != pinned)
            fail(0, fmt::format("key mismatch: the journal pins key {} but {} pins key {}",
                                short_key(pinned), pin_file, short_key(trusted_key_hex_)));
    } else {
        r_.warnings.push_back(
            fmt::format("no outside copy of the public key ({} missing): a journal regenerated "
                        "with a new key cannot be told "
                        "apart",
                        paths_.pub));
    }
    if (!from_hex(trusted_key_hex_, trusted_key_.data(), trusted_key_.size())) {
        io_error(fmt::format("journal {}: pinned key is not 64 hex digits", paths_.db));
        return false;
    }
    return true;
}

// A key mismatch against the outside pin is reported at the first checkpoint it concerns.
void Verifier::place_key_mismatch() {
    if (r_.exit_code != 1 || r_.first_bad_seq != 0) return;
    std::string reason = r_.reason;
    r_.exit_code = 0;
    auto first = db_.prepare("SELECT min(seq) FROM checkpoints");
    int64_t at = 0;
    if (first && first->step() == SQLITE_ROW && !first->is_null(0)) at = first->int64(0);
    if (!outside_.empty() && (at == 0 || outside_.begin()->first < at))
        at = outside_.begin()->first;
    fail(at, reason);
}

// What the whole pass says beyond its first failure: checkpoint records nothing signs, how
// much of the tail no checkpoint covers, and the exit code --require-anchored makes of it.
void Verifier::conclude() {
    for (int64_t s : checkpoint_records_without_anchor_)
        r_.warnings.push_back(fmt::format(
            "checkpoint record at seq {} has no signed checkpoint in the table or in {} (deleted?)",
            s, paths_.checkpoints));
    r_.last_checkpoint_seq = anchored_;
    r_.unanchored = last_row_ - anchored_;
    if (!any_anchor_)
        r_.warnings.insert(
            r_.warnings.begin(),
            "NO CHECKPOINT: nothing anchors this journal; a rewritten or truncated log would pass "
            "unnoticed");
    else if (r_.unanchored > 0)
        r_.warnings.push_back(
            fmt::format("{} unanchored records after checkpoint {}: a truncation there would go "
                        "unnoticed",
                        r_.unanchored, anchored_));
    // Checkpoints kept off the host that all predate the prune anchor vouch for no record kept.
    const bool trusted_all_pruned = !opt_.trusted_checkpoints.empty() &&
                                    trusted_before_anchor_ == opt_.trusted_checkpoints.size();
    if (r_.exit_code == 0 && opt_.require_anchored &&
        (!any_anchor_ || r_.unanchored > 0 || trusted_all_pruned))
        r_.exit_code = 3;
    r_.ok = r_.exit_code == 0 || r_.exit_code == 3;
}

VerifyReport Verifier::run() {
    auto t0 = std::chrono::steady_clock::now();
    if (!open_snapshot() || !pin_key()) return r_;
    load_outside_anchors();
    if (r_.exit_code == 2) return r_;
    place_key_mismatch();
    stream_records();
    if (r_.exit_code == 2) return r_;
    if (streamed_) check_prune();
    if (r_.exit_code == 2) return r_;
    check_tail();
    check_projections();
    r_.lost_pending = pending_losses_total(paths_.lock);
    (void)db_.exec("COMMIT");
    conclude();
    r_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r_;
}

}  // namespace verification

VerifyReport verify(const VerifyOptions& options) {
    return verification::Verifier(options).run();
}

Result<std::string> anchor_line(const std::string& flag_path) {
    auto path = resolve_path(flag_path);
    if (!path) return path.error();
    Paths paths = Paths::for_db(*path);
    if (auto st = check_location(paths, /*create=*/false); !st) return st.error();
    auto db = Db::open(paths.db, Db::Mode::read, 10000);
    if (!db) return db.error();
    auto origin = read_meta(*db, "origin");
    if (!origin) return origin.error();
    auto pinned = read_meta(*db, "public_key");
    if (!pinned) return pinned.error();
    auto s = db->prepare(
        "SELECT seq, origin, chain, public_key, signature, ts FROM checkpoints ORDER BY seq DESC "
        "LIMIT 1");
    if (!s) return s.error();
    if (s->step() != SQLITE_ROW)
        return Error::msg(fmt::format("journal {}: no checkpoint yet", paths.db));
    CheckpointFile cp;
    cp.seq = s->int64(0);
    cp.origin = std::string(s->text(1));
    auto chain = s->blob(2);
    auto sig = s->blob(4);
    if (chain.size() != 32 || sig.size() != 64 || s->text(3) != *pinned ||
        !from_hex(s->text(3), cp.public_key.data(), cp.public_key.size()))
        return Error::msg(
            fmt::format("journal {}: checkpoint {} is malformed or not signed by "
                        "the pinned key; run audit verify",
                        paths.db, cp.seq));
    std::memcpy(cp.chain.data(), chain.data(), 32);
    std::memcpy(cp.signature.data(), sig.data(), 64);
    cp.ts = s->int64(5);
    if (cp.origin != *origin || !checkpoint_signature_valid(cp))
        return Error::msg(fmt::format(
            "journal {}: checkpoint {} has a bad signature; run audit verify", paths.db, cp.seq));
    return checkpoint_text(cp);
}

std::string format_report(const VerifyReport& r) {
    std::string out;
    if (r.exit_code == 2) return fmt::format("verify: {}\n", r.reason);
    if (r.exit_code == 1) {
        out += fmt::format("INTEGRITY FAILURE at seq {}: {}\n", r.first_bad_seq, r.reason);
    } else {
        if (r.anchor_seq > 0)
            out += fmt::format(
                "OK: verified from anchor seq {} (records before it pruned, as the signed "
                "journal.pruned record at seq {} states): {} records, head at seq {}, chain "
                "intact\n",
                r.anchor_seq, r.prune_record_seq, r.records, r.head);
        else
            out += fmt::format("OK: {} records, head at seq {}, chain intact\n", r.records, r.head);
    }
    out += fmt::format("origin: {}\n", r.origin);
    if (r.checkpoints > 0)
        out +=
            fmt::format("checkpoints: {} verified, newest at seq {}; unanchored tail: {} records\n",
                        r.checkpoints, r.last_checkpoint_seq, r.unanchored);
    else
        out += "checkpoints: none verified\n";
    out += fmt::format("pinned key: {}\n", r.pinned_key);
    out += fmt::format(
        "private key: {} (anyone who can read it, i.e. this user or root, can re-sign a rewritten "
        "log; keep "
        "journal.pub or a checkpoint file off this host and pass it back with --public-key or "
        "--trusted-checkpoint)\n",
        r.private_key_path);
    if (r.lost_records > 0 || r.lost_pending > 0)
        out += fmt::format(
            "not recorded: {} records counted in {} journal.degraded records; {} counted in the "
            "lock file, recorded by the next writer (`mcpwarden journal reconcile`)\n",
            r.lost_records, r.degraded_records, r.lost_pending);
    for (const auto& w : r.warnings)
        out += fmt::format("warning: {}\n", w);
    if (r.seconds > 0)
        out += fmt::format("verified {} records in {:.3f} s ({:.0f} records/s)\n", r.records,
                           r.seconds, r.records / r.seconds);
    if (r.exit_code == 3)
        out += "exit 3: the journal is intact but not fully anchored (--require-anchored)\n";
    return out;
}

std::string report_json(const VerifyReport& r) {
    nlohmann::json j{{"schema", "mcpwarden.audit.verify"},
                     {"schema_version", 1},
                     {"ok", r.ok},
                     {"exit_code", r.exit_code},
                     {"records", r.records},
                     {"head", r.head},
                     {"origin", r.origin},
                     {"checkpoints", r.checkpoints},
                     {"last_checkpoint_seq", r.last_checkpoint_seq},
                     {"unanchored", r.unanchored},
                     {"lost_records", r.lost_records},
                     {"degraded_records", r.degraded_records},
                     {"lost_pending", r.lost_pending},
                     {"anchor_seq", r.anchor_seq},
                     {"prune_record_seq", r.prune_record_seq},
                     {"pinned_key", r.pinned_key},
                     {"private_key_path", r.private_key_path},
                     {"warnings", r.warnings},
                     {"seconds", r.seconds}};
    if (r.exit_code == 1) {
        j["first_bad_seq"] = r.first_bad_seq;
        j["reason"] = r.reason;
    } else if (r.exit_code == 2) {
        j["error"] = r.reason;
    }
    return j.dump() + "\n";
}

}  // namespace warden::journal
