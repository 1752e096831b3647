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
//   file (append_lock.hpp); the queue orders, the flock excludes.
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
#include <pwd.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "fault/faults.hpp"
#include "journal/checkpoint.hpp"
#include "journal/intents.hpp"
#include "journal/journal_impl.hpp"
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

// ---- Opening ----------------------------------------------------------------------------

namespace {

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

// The append lock's file, opened (created 0600), and the sidecars checked before any is
// used: another user's lock (or one others can open) would let them stall every append.
Result<Fd> open_lock_and_check_sidecars(const Paths& paths) {
    Fd lock(::open(paths.lock.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!lock.valid())
        return Error{fmt::format("journal lock {}: {}", paths.lock, std::strerror(errno)), errno};
    struct stat lst {};
    if (::fstat(lock.get(), &lst) != 0) return Error::sys("fstat", paths.lock, errno);
    if (auto st = check_sidecar("journal lock", paths.lock, lst, /*private_only=*/true); !st)
        return st.error();
    if (auto st = check_sidecar_path("journal key", paths.key, /*private_only=*/true); !st)
        return st.error();
    if (auto st = check_sidecar_path("journal public key", paths.pub, /*private_only=*/false); !st)
        return st.error();
    if (auto st = check_sidecar_path("journal checkpoint directory", paths.checkpoints,
                                     /*private_only=*/false);
        !st)
        return st.error();
    if (auto st = check_intents_dir(paths); !st) return st.error();
    return lock;
}

// The signing key, made on first use (under the append lock, so that two writers never make
// two), checked again now that it exists: it may have appeared since the first check.
Result<SigningKey> load_signing_key(const Paths& paths) {
    bool created = false;
    auto k = SigningKey::load_or_create(paths.key, &created);
    if (!k) return k.error();
    if (auto st = check_sidecar_path("journal key", paths.key, /*private_only=*/true); !st)
        return st.error();
    // OpenSSL 3 looks the Ed25519 signature's implementation up in its provider at a
    // process's first signature (EVP_DigestSignInit: ~150 µs of CPU here, ~30 µs for each one
    // after). A writer's first checkpoint is most often its session.end, on the way to `run`'s
    // exit; one signature now, while the journal opens (the relay's start-up thread), takes it.
    if (auto warm = k->sign("mcpwarden-checkpoint-warm-up"); !warm) return warm.error();
    return k;
}

// A new journal's origin: the host, the user and 8 bytes no other journal shares.
std::string new_origin() {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    uint8_t rnd[8];
    auto seed = sha256(fmt::format("{}:{}:{}", now_ns(), ::getpid(), host));
    std::memcpy(rnd, seed.data(), sizeof rnd);
    return fmt::format("mcpwarden:{}:{}:{}", host, ::geteuid(), to_hex(rnd, sizeof rnd));
}

// The journal's origin, in one transaction with the schema: read, with the key pinned at its
// creation compared to ours (another key is refused), or made now with ours pinned.
Result<std::string> pin_origin(Db& db, const Paths& paths, const std::string& pub_hex) {
    if (auto st = db.exec("BEGIN IMMEDIATE"); !st) return st.error();
    auto fail = [&](Error e) {
        (void)db.exec("ROLLBACK");
        return e;
    };
    if (auto st = ensure_schema(db); !st) return fail(st.error());
    std::string origin;
    if (auto o = read_meta(db, "origin")) {
        origin = *o;
        auto pinned = read_meta(db, "public_key");
        if (!pinned) return fail(pinned.error());
        if (*pinned != pub_hex)
            return fail(Error::msg(fmt::format(
                "journal {}: signing key {} ({}) does not match the key pinned in the journal "
                "({}); restore the original key or start a new journal",
                paths.db, paths.key, pub_hex.substr(0, 16), pinned->substr(0, 16))));
    } else {
        origin = new_origin();
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
    return origin;
}

}  // namespace

Status Journal::Impl::init() {
    if (auto st = check_location(paths, /*create=*/true); !st) return st;
    auto lock = open_lock_and_check_sidecars(paths);
    if (!lock) return lock.error();
    lock_fd = std::move(*lock);
    if (options.fair_lock) (void)turns.map(lock_fd.get());
    if (options.keep_given_up_turns) turns.keep_given_up();
    lock_wait_ms = options.busy_timeout.count();
    // The database is opened under the lock: a new journal's conversion to WAL needs it to
    // itself, and SQLite answers another connection's conversion under way with "database is
    // locked" at once, without waiting (its busy handler is not called there). Writers that
    // open a new journal together (a client's sessions started at once, a shared tree's
    // broker and its clients) would otherwise lose all but one opening.
    const bool unlocked = Faults::from_env().journal_opened_unlocked;  // the guard off
    auto open_db = [&]() -> Status {
        auto opened =
            Db::open(paths.db, Db::Mode::write, static_cast<int>(options.busy_timeout.count()));
        if (!opened) return opened.error();
        db = std::move(*opened);
        return {};
    };
    if (auto st = unlocked ? open_db() : Status{}; !st) return st;
    AppendLock guard(&turns, &timing);
    if (auto st = guard.acquire(lock_fd.get(), paths.lock, lock_wait_ms); !st) return st;
    if (auto st = unlocked ? Status{} : open_db(); !st) return st;
    if (options.sync == JournalSync::Periodic) {
        if (auto st = db.exec("PRAGMA synchronous=NORMAL"); !st) return st;
    }
    // Replaces SQLite's auto-checkpoint on this connection (writer_thread.cpp, "WAL checkpoints").
    sqlite3_wal_hook(db.get(), &wal_grew, this);
    // The loss slots (losses.hpp), reserved while there is room; without them, counts are
    // kept in memory only, as journal.degraded's transaction waits for room.
    (void)LossSlot::reserve(lock_fd.get());
    auto k = load_signing_key(paths);
    if (!k) return k.error();
    key.emplace(std::move(*k));
    pub = key->public_key();
    const std::string pub_hex = to_hex(pub.data(), pub.size());
    auto o = pin_origin(db, paths, pub_hex);
    if (!o) return o.error();
    origin = std::move(*o);
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

void fdatasync_wal(const Paths& paths) {
    Fd wal(::open((paths.db + "-wal").c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (wal.valid()) ::fdatasync(wal.get());
}

void start_wal_writeback(const Paths& paths) {
    Fd wal(::open((paths.db + "-wal").c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (wal.valid()) (void)::sync_file_range(wal.get(), 0, 0, SYNC_FILE_RANGE_WRITE);
}

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
    if (intent_fd.valid() && session == intent_session) return {};
    auto fd = open_intent_file(paths, session);
    if (!fd) return fd.error();
    intent_fd = std::move(*fd);
    intent_path = paths.intent_file(session);
    intent_session = session;
    return {};
}

Result<int64_t> Journal::append_intent(const Event& event) {
    Event copy = event;
    return append_intent(std::move(copy));
}

Result<int64_t> Journal::append_intent(Event&& event) {
    std::vector<Prepared> prepared(1);
    prepared.front().event = std::move(event);
    auto tickets = impl_->write_intents(prepared);
    if (!tickets) {
        event = std::move(prepared.front().event);  // the caller's, for the synchronous way
        return tickets.error();
    }
    return tickets->front();
}

Result<std::vector<int64_t>> Journal::append_intents(std::span<const Event> events) {
    std::vector<Prepared> prepared(events.size());
    for (size_t i = 0; i < events.size(); ++i)
        prepared[i].event = events[i];
    return impl_->write_intents(prepared);
}

Result<std::vector<int64_t>> Journal::Impl::write_intents(std::vector<Prepared>& prepared) {
    if (!options.intents || options.sync != JournalSync::Periodic)
        return Error::msg("journal: intents are off");
    if (prepared.empty()) return std::vector<int64_t>{};
    const std::string& session = prepared.front().event.session;
    std::string text;
    for (auto& p : prepared) {
        if (p.event.session != session)
            return Error::msg("journal: intents of one session per write");
        if (auto st = prepare_into(p); !st) return st.error();
        append_intent_line(text, p);
    }
    std::lock_guard ik(intent_mu);  // the file's order is the queue's
    {
        std::lock_guard lk(q_mu);
        if (queue.size() + prepared.size() > options.queue_limit)
            return Error::msg(fmt::format("journal {}: queue full", paths.db));
    }
    if (intent_fd.valid() && intent_session != session)
        return Error::msg("journal: intents of one session per Journal");
    if (auto st = open_intent_file_locked(session); !st) return st.error();
    // One write(): all of these records survive the process, or (a death inside it) a torn
    // last line does, which recovery counts.
    ssize_t n = ::write(intent_fd.get(), text.data(), text.size());
    if (n != static_cast<ssize_t>(text.size())) {
        int err = n < 0 ? errno : ENOSPC;
        // These records go the synchronous way (and are counted there if that fails too): a
        // torn line left behind would be counted again by recovery, so it is cut off.
        if (n > 0) {
            off_t end = ::lseek(intent_fd.get(), 0, SEEK_END);
            if (end >= n) (void)!::ftruncate(intent_fd.get(), end - n);
        }
        return Error::sys("write", intent_path, err);
    }
    // Ticket -k is the file's k-th line: recovery resolves a request_seq given as a ticket
    // by that (intents.cpp).
    std::vector<int64_t> tickets;
    tickets.reserve(prepared.size());
    std::unique_lock lk(q_mu);
    for (auto& p : prepared) {
        p.ticket = --last_ticket;
        ++intents_written;
        tickets.push_back(p.ticket);
        ++posted;
        queue.push_back(std::move(p));
    }
    enqueue_locked_wake(lk);
    return tickets;
}

Status Journal::adopt_intent_file(const std::string& session) {
    auto& m = *impl_;
    std::lock_guard ik(m.intent_mu);
    if (m.intent_fd.valid() && m.intent_session != session)
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

// Not under commit_mu: a commit in progress may be waiting for the append lock that
// another writer holds, and the teardown that calls this must not wait with it. The flag is
// read where each fsync is decided; a commit that decided before it is set syncs as it would
// have, on the writer thread, which the teardown does not wait for.
void Journal::leave_end_sync_to_next_writer() {
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
