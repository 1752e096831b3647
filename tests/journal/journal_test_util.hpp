// Helpers shared by the journal tests: a temporary directory, raw SQLite access (as an
// attacker or an inspector would use it), and a forked child runner.
#pragma once

#include <sqlite3.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace warden::journal::testing_util {

struct TempDir {
    std::string path;
    // base "/dev/shm" for tests whose subject is locking, not the disk: fsync there is free.
    explicit TempDir(const char* base = "/tmp") {
        std::string tmpl = std::string(base) + "/mcpwarden-journal-test-XXXXXX";
        if (::mkdtemp(tmpl.data())) path = tmpl;
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
};

inline std::string upper(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    return s;
}

// Runs SQL directly on the database (no triggers dropped unless the SQL does it).
inline bool exec_sql(const std::string& db, const std::string& sql, std::string* err = nullptr) {
    sqlite3* h = nullptr;
    if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) return false;
    sqlite3_busy_timeout(h, 5000);
    char* e = nullptr;
    int rc = sqlite3_exec(h, sql.c_str(), nullptr, nullptr, &e);
    if (e && err) *err = e;
    sqlite3_free(e);
    sqlite3_close(h);
    return rc == SQLITE_OK;
}

inline std::string query_text(const std::string& db, const std::string& sql) {
    sqlite3* h = nullptr;
    std::string out;
    if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
        sqlite3_stmt* s = nullptr;
        if (sqlite3_prepare_v2(h, sql.c_str(), -1, &s, nullptr) == SQLITE_OK &&
            sqlite3_step(s) == SQLITE_ROW) {
            auto* p = reinterpret_cast<const char*>(sqlite3_column_blob(s, 0));
            if (p) out.assign(p, static_cast<size_t>(sqlite3_column_bytes(s, 0)));
        }
        sqlite3_finalize(s);
    }
    sqlite3_close(h);
    return out;
}

inline long long query_int(const std::string& db, const std::string& sql) {
    std::string t = query_text(db, sql);
    return t.empty() ? -1 : std::stoll(t);
}

// The file's text, "" when it cannot be read.
inline std::string file_text(const std::string& path) {
    std::ifstream f(path);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

}  // namespace warden::journal::testing_util
