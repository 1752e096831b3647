// The SQLite side of the journal: safe opening (no symlinks, no network filesystems,
// modes 0700/0600), the schema, and small RAII wrappers over sqlite3 handles. Internal to
// src/journal; the CLI and other layers use journal.hpp, verify.hpp and export.hpp.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "journal/journal.hpp"
#include "sys/result.hpp"

struct sqlite3;
struct sqlite3_stmt;

namespace warden::journal {

class Stmt {
  public:
    Stmt() = default;
    Stmt(Stmt&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
    Stmt& operator=(Stmt&& o) noexcept;
    ~Stmt();
    sqlite3_stmt* get() const { return s_; }
    explicit operator bool() const { return s_ != nullptr; }

    // Bind helpers (1-based) and column readers (0-based), thin over sqlite3_*.
    Stmt& bind(int i, int64_t v);
    Stmt& bind(int i, std::string_view text);
    Stmt& bind_blob(int i, const void* p, size_t n);
    // Borrowed: SQLite reads the caller's bytes instead of copying them, so they must stay
    // valid and unchanged until step(), and the parameter be bound again before the next one.
    // For the journal's hot insert, whose body is bound once per record.
    Stmt& bind_borrowed(int i, std::string_view text);
    Stmt& bind_blob_borrowed(int i, const void* p, size_t n);
    Stmt& bind_null(int i);
    int step();  // SQLITE_ROW / SQLITE_DONE / error code
    void reset();
    int64_t int64(int col) const;
    bool is_null(int col) const;
    std::string_view text(int col) const;
    std::string_view blob(int col) const;

  private:
    friend class Db;
    explicit Stmt(sqlite3_stmt* s) : s_(s) {}
    sqlite3_stmt* s_ = nullptr;
};

class Db {
  public:
    Db() = default;
    Db(Db&& o) noexcept : db_(std::exchange(o.db_, nullptr)), path_(std::move(o.path_)) {}
    Db& operator=(Db&& o) noexcept;
    ~Db();

    enum class Mode { write, read };
    // Opens `path` (SQLITE_OPEN_NOFOLLOW). `write` creates it if missing and sets WAL and
    // synchronous=FULL; `read` requires it, opens it read-only (immutable when its directory
    // cannot be written and there is no WAL: a read-only filesystem) and sets query_only.
    static Result<Db> open(const std::string& path, Mode mode, int busy_timeout_ms);

    sqlite3* get() const { return db_; }
    const std::string& path() const { return path_; }
    Status exec(const char* sql);
    Result<Stmt> prepare(const char* sql);
    // "journal PATH: WHAT: sqlite message (code)"
    Error error(std::string_view what) const;
    Error error(std::string_view what, int rc) const;

  private:
    sqlite3* db_ = nullptr;
    std::string path_;
};

// Creates the schema if missing (idempotent). Run inside a write transaction.
Status ensure_schema(Db& db);

// Checks that `paths.db` may be used: the directory exists or is created (0700), is not on a
// network filesystem, and the database path is not a symlink. With `create`, creates the
// file with mode 0600 (O_NOFOLLOW) when it does not exist yet.
Status check_location(const Paths& paths, bool create);

// Whether a sidecar of the journal (lock, key, checkpoint directory) may be trusted: it
// belongs to the journal's owner (this user: check_location refuses a database that is not
// ours) and, for the key and the lock, no one else may read or write it (`private_only`),
// for a directory no one else may write it. In a shared directory another user could
// otherwise plant a key that signs our checkpoints, or hold the append lock so that every
// request waits and fails. `what` names it in the error: "journal key /x/j.key: owned by
// uid 1001, not by the journal's owner (uid 0): refusing to use it; remove it".
// A missing file is fine (nullptr st): it is created with the right owner and mode.
Status check_sidecar(const char* what, const std::string& path, const struct stat& st,
                     bool private_only);
// The same for a path, not following a symlink (a symlink is refused). Missing: fine.
Status check_sidecar_path(const char* what, const std::string& path, bool private_only);

// meta table values.
Result<std::string> read_meta(Db& db, const char* key);

}  // namespace warden::journal
