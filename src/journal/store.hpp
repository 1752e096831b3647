// The SQLite side of the journal: safe opening (no symlinks, no network filesystems,
// modes 0700/0600), the schema, and small RAII wrappers over sqlite3 handles. Internal to
// src/journal; the CLI and other layers use journal.hpp, verify.hpp and export.hpp.
#pragma once

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
    // Opens `path` (SQLITE_OPEN_NOFOLLOW). `write` creates it if missing; `read` requires it
    // and sets query_only. Both set WAL, synchronous=FULL, busy_timeout.
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

// meta table values.
Result<std::string> read_meta(Db& db, const char* key);

}  // namespace warden::journal
