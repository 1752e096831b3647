#include "journal/store.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cstdlib>

#include <fmt/format.h>

#include "sys/fd.hpp"

namespace warden::journal {

// ---- Stmt -------------------------------------------------------------------------------

Stmt& Stmt::operator=(Stmt&& o) noexcept {
    if (this != &o) {
        sqlite3_finalize(s_);
        s_ = std::exchange(o.s_, nullptr);
    }
    return *this;
}
Stmt::~Stmt() {
    sqlite3_finalize(s_);
}
Stmt& Stmt::bind(int i, int64_t v) {
    sqlite3_bind_int64(s_, i, v);
    return *this;
}
Stmt& Stmt::bind(int i, std::string_view t) {
    sqlite3_bind_text(s_, i, t.data(), static_cast<int>(t.size()), SQLITE_TRANSIENT);
    return *this;
}
Stmt& Stmt::bind_blob(int i, const void* p, size_t n) {
    sqlite3_bind_blob(s_, i, p, static_cast<int>(n), SQLITE_TRANSIENT);
    return *this;
}
Stmt& Stmt::bind_borrowed(int i, std::string_view t) {
    sqlite3_bind_text(s_, i, t.data(), static_cast<int>(t.size()), SQLITE_STATIC);
    return *this;
}
Stmt& Stmt::bind_blob_borrowed(int i, const void* p, size_t n) {
    sqlite3_bind_blob(s_, i, p, static_cast<int>(n), SQLITE_STATIC);
    return *this;
}
Stmt& Stmt::bind_null(int i) {
    sqlite3_bind_null(s_, i);
    return *this;
}
int Stmt::step() {
    return sqlite3_step(s_);
}
void Stmt::reset() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
}
int64_t Stmt::int64(int col) const {
    return sqlite3_column_int64(s_, col);
}
bool Stmt::is_null(int col) const {
    return sqlite3_column_type(s_, col) == SQLITE_NULL;
}
std::string_view Stmt::text(int col) const {
    auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s_, col));
    return p ? std::string_view(p, static_cast<size_t>(sqlite3_column_bytes(s_, col)))
             : std::string_view();
}
std::string_view Stmt::blob(int col) const {
    auto* p = static_cast<const char*>(sqlite3_column_blob(s_, col));
    return p ? std::string_view(p, static_cast<size_t>(sqlite3_column_bytes(s_, col)))
             : std::string_view();
}

// ---- Db ---------------------------------------------------------------------------------

Db& Db::operator=(Db&& o) noexcept {
    if (this != &o) {
        sqlite3_close_v2(db_);
        db_ = std::exchange(o.db_, nullptr);
        path_ = std::move(o.path_);
    }
    return *this;
}
Db::~Db() {
    sqlite3_close_v2(db_);
}

Error Db::error(std::string_view what) const {
    return error(what, db_ ? sqlite3_errcode(db_) : SQLITE_ERROR);
}
Error Db::error(std::string_view what, int rc) const {
    const char* msg = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    return Error::msg(fmt::format("journal {}: {}: {} (sqlite code {})", path_, what, msg, rc));
}

namespace {

// A path as an SQLite URI ("file:" + the path with '%', '?' and '#' escaped).
std::string file_uri(const std::string& path, std::string_view query) {
    std::string uri = "file:";
    for (char c : path) {
        if (c == '%' || c == '?' || c == '#')
            uri += fmt::format("%{:02X}", static_cast<unsigned char>(c));
        else
            uri += c;
    }
    uri += '?';
    uri += query;
    return uri;
}

}  // namespace

// Reading never needs write access. A WAL database is normally read through its -shm file,
// which a reader creates (and maps writable) when it is missing: on a read-only filesystem,
// or in a directory the reader may not write, that fails with "unable to open database
// file". When the directory is not writable and there is no -wal file, everything is in the
// main file and nothing can change it under us (no writer can create the WAL there either),
// so it is opened `immutable`: no locks, no -shm. With a -wal file present, `mode=ro` reads
// it through the existing -shm (SQLite >= 3.22 does so without write access).
Result<Db> Db::open(const std::string& path, Mode mode, int busy_timeout_ms) {
    // SQLite counts every allocation it makes, under a global mutex, for sqlite3_memory_used()
    // and heap limits, which mcpwarden never asks for: some fifty lock pairs a journaled call.
    // Off, before the first connection: sqlite3_config() is only taken before SQLite
    // initializes, so a library host that initialized it first keeps its counts
    // (docs/LIBRARY.md, "What embedding changes in the host").
    static const int memstatus_off = sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    (void)memstatus_off;
    Db db;
    db.path_ = path;
    int flags = SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_NOMUTEX;
    std::string name = path;
    if (mode == Mode::write) {
        flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    } else {
        flags |= SQLITE_OPEN_READONLY | SQLITE_OPEN_URI;
        auto slash = path.find_last_of('/');
        std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
        bool read_only_dir = ::access(dir.c_str(), W_OK) != 0;
        bool has_wal = ::access((path + "-wal").c_str(), F_OK) == 0;
        name = file_uri(path, read_only_dir && !has_wal ? "immutable=1" : "mode=ro");
    }
    int rc = sqlite3_open_v2(name.c_str(), &db.db_, flags, nullptr);
    if (rc != SQLITE_OK) {
        if (rc == SQLITE_CANTOPEN && mode == Mode::read && ::access(path.c_str(), F_OK) != 0)
            return Error::msg(
                fmt::format("journal {}: no such file (nothing recorded yet?)", path));
        return db.error("cannot open", rc);
    }
    sqlite3_busy_timeout(db.db_, busy_timeout_ms);
    sqlite3_extended_result_codes(db.db_, 1);
    if (mode == Mode::read) {
        if (auto st = db.exec("PRAGMA query_only=1"); !st) return st.error();
        return db;
    }
    if (auto st = db.exec("PRAGMA journal_mode=WAL"); !st) return st.error();
    if (auto st = db.exec("PRAGMA synchronous=FULL"); !st) return st.error();
    return db;
}

Status Db::exec(const char* sql) {
    char* err = nullptr;
    int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &err);
    if (rc != SQLITE_OK) {
        std::string msg = err ? err : sqlite3_errstr(rc);
        sqlite3_free(err);
        std::string_view s(sql);
        return Error::msg(fmt::format("journal {}: {}: {} (sqlite code {})", path_,
                                      s.substr(0, s.find_first_of("(;")), msg, rc));
    }
    return {};
}

Result<Stmt> Db::prepare(const char* sql) {
    sqlite3_stmt* s = nullptr;
    int rc = sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr);
    if (rc != SQLITE_OK) return error(fmt::format("prepare `{}`", sql), rc);
    return Stmt(s);
}

Status ensure_schema(Db& db) {
    // records is the evidence; the triggers stop accidents (an attacker drops them, and the
    // hashes catch that). sessions and activity are caches projected from records.
    return db.exec(R"sql(
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS head(id INTEGER PRIMARY KEY CHECK (id = 1),
                                seq INTEGER NOT NULL, chain BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS records(
  seq INTEGER PRIMARY KEY, ts INTEGER NOT NULL, kind TEXT NOT NULL, session TEXT NOT NULL,
  origin TEXT NOT NULL, body BLOB NOT NULL, leaf BLOB NOT NULL, chain BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS records_session ON records(session, seq);
CREATE INDEX IF NOT EXISTS records_catalog ON records(seq) WHERE kind = 'server.catalog';
CREATE TABLE IF NOT EXISTS checkpoints(
  seq INTEGER PRIMARY KEY, origin TEXT NOT NULL, chain BLOB NOT NULL, public_key TEXT NOT NULL,
  signature BLOB NOT NULL, ts INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS sessions(
  session TEXT PRIMARY KEY, start_seq INTEGER NOT NULL, started_ns INTEGER NOT NULL,
  server TEXT NOT NULL, writer_pid INTEGER NOT NULL, writer_starttime INTEGER NOT NULL,
  writer_boot_id TEXT NOT NULL, state TEXT NOT NULL, state_seq INTEGER NOT NULL,
  ended_ns INTEGER, end_reason TEXT, exit_status INTEGER);
CREATE TABLE IF NOT EXISTS activity(
  request_seq INTEGER PRIMARY KEY, session TEXT NOT NULL, request_id TEXT NOT NULL,
  method TEXT NOT NULL, tool TEXT NOT NULL, started_ns INTEGER NOT NULL,
  outcome TEXT NOT NULL, resolved_seq INTEGER, ended_ns INTEGER, duration_ns INTEGER,
  bytes INTEGER);
CREATE INDEX IF NOT EXISTS activity_session ON activity(session, outcome);
CREATE TRIGGER IF NOT EXISTS records_no_update BEFORE UPDATE ON records
  BEGIN SELECT RAISE(ABORT, 'journal records are append-only'); END;
CREATE TRIGGER IF NOT EXISTS records_no_delete BEFORE DELETE ON records
  BEGIN SELECT RAISE(ABORT, 'journal records are append-only'); END;
CREATE TRIGGER IF NOT EXISTS checkpoints_no_update BEFORE UPDATE ON checkpoints
  BEGIN SELECT RAISE(ABORT, 'journal checkpoints are append-only'); END;
CREATE TRIGGER IF NOT EXISTS checkpoints_no_delete BEFORE DELETE ON checkpoints
  BEGIN SELECT RAISE(ABORT, 'journal checkpoints are append-only'); END;
)sql");
}

Result<std::string> read_meta(Db& db, const char* key) {
    auto st = db.prepare("SELECT value FROM meta WHERE key = ?1");
    if (!st) return st.error();
    st->bind(1, std::string_view(key));
    int rc = st->step();
    if (rc == SQLITE_ROW) return std::string(st->text(0));
    if (rc == SQLITE_DONE)
        return Error::msg(
            fmt::format("journal {}: meta `{}` missing: not an mcpwarden journal", db.path(), key));
    return db.error(fmt::format("read meta {}", key), rc);
}

// ---- Location checks --------------------------------------------------------------------

const char* network_filesystem_name(int64_t t) {
    switch (static_cast<uint64_t>(t) & 0xffffffffu) {
        case 0x6969:
            return "nfs";
        case 0x517B:
            return "smb";
        case 0xFF534D42:
            return "cifs";
        case 0xFE534D42:
            return "smb2";
        case 0x73757245:
            return "coda";
        case 0x5346414F:
            return "afs";
        case 0x6B414653:
            return "kafs";
        case 0x01021997:
            return "9p";
        case 0x00C36400:
            return "ceph";
        case 0x564C:
            return "ncp";
        case 0x0BD00BD0:
            return "lustre";
        case 0x19830326:
            return "fhgfs";
        case 0x47504653:
            return "gpfs";
        case 0x013111A8:
            return "ibrix";
        case 0x65735546:
            return nullptr;  // FUSE: local or not, we cannot tell; allowed
        default:
            return nullptr;
    }
}

namespace {

Status make_dirs(const std::string& dir) {
    struct stat st {};
    if (::stat(dir.c_str(), &st) == 0) {
        if (!S_ISDIR(st.st_mode))
            return Error::msg(
                fmt::format("journal directory {}: exists and is not a directory", dir));
        return {};
    }
    if (errno != ENOENT) return Error::sys("stat", dir, errno);
    auto slash = dir.find_last_of('/');
    if (slash != std::string::npos && slash > 0) {
        if (auto s = make_dirs(dir.substr(0, slash)); !s) return s;
    }
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
        return Error{
            fmt::format("cannot create journal directory {}: {}", dir, std::strerror(errno)),
            errno};
    return {};
}

}  // namespace

Status check_sidecar(const char* what, const std::string& path, const struct stat& st,
                     bool private_only) {
    uid_t owner = ::geteuid();
    if (st.st_uid != owner)
        return Error::msg(fmt::format(
            "{} {}: owned by uid {}, not by the journal's owner (uid {}): refusing to use it; "
            "remove it, or keep the journal in a directory only its owner can write",
            what, path, st.st_uid, owner));
    mode_t others = private_only ? 077 : 022;
    if ((st.st_mode & others) != 0)
        return Error::msg(
            fmt::format("{} {}: mode {:04o} lets other users {} it: refusing to use it; "
                        "chmod {} it or remove it",
                        what, path, st.st_mode & 07777, private_only ? "read or write" : "write",
                        private_only ? "600" : "go-w"));
    return {};
}

Status check_sidecar_path(const char* what, const std::string& path, bool private_only) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) {
        if (errno == ENOENT) return {};
        return Error::sys("lstat", path, errno);
    }
    if (S_ISLNK(st.st_mode))
        return Error::msg(
            fmt::format("{} {}: is a symbolic link; refusing to follow it", what, path));
    return check_sidecar(what, path, st, private_only);
}

Status check_location(const Paths& paths, bool create) {
    if (create) {
        if (auto s = make_dirs(paths.dir); !s)
            return Error{fmt::format("journal {}: {}", paths.db, s.error().message),
                         s.error().code};
    }
    struct statfs fs {};
    if (::statfs(paths.dir.c_str(), &fs) != 0) {
        int err = errno;
        return Error{fmt::format("journal directory {}: {}", paths.dir, std::strerror(err)), err};
    }
    if (const char* name = network_filesystem_name(static_cast<int64_t>(fs.f_type)))
        return Error::msg(fmt::format(
            "journal {}: {} is on a network filesystem ({}); the journal needs local flock and "
            "fsync semantics: choose a local path with --journal or MCPWARDEN_JOURNAL",
            paths.db, paths.dir, name));
    struct stat st {};
    if (::lstat(paths.db.c_str(), &st) == 0) {
        if (S_ISLNK(st.st_mode))
            return Error::msg(fmt::format(
                "journal {}: is a symbolic link; refusing to follow it (point --journal at the "
                "real file)",
                paths.db));
        if (!S_ISREG(st.st_mode))
            return Error::msg(fmt::format("journal {}: not a regular file", paths.db));
        if (st.st_uid != ::geteuid())
            return Error::msg(fmt::format("journal {}: owned by uid {}, not by us (uid {})",
                                          paths.db, st.st_uid, ::geteuid()));
        return {};
    }
    if (errno != ENOENT) return Error::sys("lstat", paths.db, errno);
    if (!create)
        return Error{fmt::format("journal {}: no such file (nothing recorded yet?)", paths.db),
                     ENOENT};
    int fd = ::open(paths.db.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        int err = errno;
        return Error{fmt::format("cannot create journal {}: {}", paths.db, std::strerror(err)),
                     err};
    }
    ::close(fd);
    return {};
}

}  // namespace warden::journal
