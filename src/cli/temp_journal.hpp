// Where `demo` and `drill` keep their journal when the user names none: a fresh directory
// $TMPDIR/mcpwarden-<what>-XXXXXX (mode 0700, from mkdtemp) holding journal.db, so that a
// practice run never writes into the user's real journal. It is removed with everything in
// it (the journal, its WAL, lock, keys and checkpoints) when the run is over — unless the
// run failed: then it is kept for a look, and the command says where.
#pragma once

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace warden::cli {

class TempJournal {
  public:
    explicit TempJournal(const char* what) {
        const char* tmp = std::getenv("TMPDIR");
        std::string tmpl =
            std::string(tmp && *tmp ? tmp : "/tmp") + "/mcpwarden-" + what + "-XXXXXX";
        std::vector<char> buf(tmpl.begin(), tmpl.end());
        buf.push_back('\0');
        if (::mkdtemp(buf.data())) dir_ = buf.data();
    }
    ~TempJournal() {
        std::error_code ec;
        if (!keep_ && !dir_.empty()) std::filesystem::remove_all(dir_, ec);
    }
    TempJournal(const TempJournal&) = delete;
    TempJournal& operator=(const TempJournal&) = delete;

    // The journal path inside the directory, or "" when it could not be created.
    std::string path() const { return dir_.empty() ? "" : dir_ + "/journal.db"; }
    void keep() { keep_ = true; }

  private:
    std::string dir_;
    bool keep_ = false;
};

}  // namespace warden::cli
