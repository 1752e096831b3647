// Recovery of intent files: requests written on the relay's path before the writer thread
// chained them (journal.cpp, "Intents"). Whoever finds a session's file once its writer is
// gone appends, in file order, each intent the log does not hold yet, and removes the file.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "journal/journal.hpp"
#include "journal/store.hpp"
#include "sys/fd.hpp"

namespace warden::journal {

struct IntentRecovery {
    int64_t recovered = 0;              // intents appended now
    int64_t already = 0;                // intents the log held already
    int64_t bad = 0;                    // lines that are no record: counted as lost requests
    int64_t synthesized = 0;            // a session.start made up: its session had none
    bool refused = false;               // not the journal owner's: left alone, not read
    std::vector<std::string> problems;  // one line each: file, line number, why
};

// Whether the intents directory (Paths::intents) and an intent file in it may be trusted, as
// the other sidecars (store.hpp, check_sidecar): owned by the journal's owner, not writable
// by group or others, a directory and a regular file, never a symbolic link. Recovery appends
// what an intent file says to the log as this user's records: a file another local user
// planted (in a directory she could write once) would put words in our mouth. A missing
// directory is fine: it is created 0700.
Status check_intents_dir(const Paths& paths);
Status check_intent_file(const std::string& file, const struct stat& st);

// Opens `session`'s intent file for appending, creating it (0600) and its directory (0700),
// both checked as above. O_APPEND: each write() lands whole at the file's end, whoever else
// writes to it.
Result<Fd> open_intent_file(const Paths& paths, const std::string& session);

// `events` (each with its ts_ns set: the record committed later carries the same, so that
// recovery finds it on record) as lines of an intent file, their origin left to whoever
// recovers them.
Result<std::string> intent_lines(std::span<const Event> events);

// One line of an intent file (intent_lines) as the record it was prepared as; false: not one.
bool parse_intent_line(std::string_view line, Event& e);

// The teardown's records (process.snapshot, process.signal, process.exit) are the keeper's:
// it writes them to the relay's session's intent file as a second writer (IntentFile), and
// they are no tickets of the relay's (a relay's ticket -k names its k-th line).
bool is_teardown_record(std::string_view kind);

// A second writer of a session's intent file (the keeper, whose teardown records must survive
// it before its first signal: shim/keeper.cpp, "The keeper's journal"). Writes lines, queues
// nothing: whoever commits the records later gives them the same ts, and whoever recovers the
// file finds them (relay, keeper, the next run's sweep, `reap`).
class IntentFile {
  public:
    static Result<IntentFile> open(const Paths& paths, const std::string& session);
    // One write(): all of `events`, or (a death inside it) a torn last line, which recovery
    // counts. A short write is cut off, as the relay's (journal.cpp).
    Status write(std::span<const Event> events);
    // The same for lines already made (intent_lines, each ending in a newline).
    Status write_lines(std::string_view text);

  private:
    Fd fd_;
    std::string path_;
};

// Recovers the intent file `file` (Paths::intent_file) into `journal`: each line not yet on
// record (a record of its session with the same kind and ts) is appended, in file order, in
// one transaction; a torn or garbled line is reported and counted as a lost activity.request
// (journal.degraded); then the file is removed. The file's writer must be gone (or be the
// caller, at close). No file: nothing to do. A file or directory check_intent_file or
// check_intents_dir refuses is not read and not removed: `refused`, and problems says why.
Result<IntentRecovery> recover_intents(Journal& journal, const std::string& file);
// The same for `session`'s file.
Result<IntentRecovery> recover_session_intents(Journal& journal, std::string_view session);
// The same, only if the writer `session`'s session.start names is dead: a live writer chains
// its own lines, and a session not on record names none to ask. An empty recovery otherwise.
Result<IntentRecovery> recover_dead_writers_session(Journal& journal, const std::string& session);
// The relay whose keeper died in a teardown: only the keeper's lines (is_teardown_record) of
// `session`'s file, which stays (the relay, its writer, still runs; its own lines are its to
// commit, and the file its to remove at close).
Result<IntentRecovery> recover_keepers_intents(Journal& journal, std::string_view session);

// Appends those of `events` (each with its ts_ns set) not on record yet (a record of their
// session with the same kind and ts: recovery may have put them there), in order, in one
// transaction. The number appended.
Result<int64_t> append_missing(Journal& journal, std::span<const Event> events);

// Whether the writer `session`'s session.start names (the sessions projection) still runs:
// its intent file is then in use, not left behind. nullopt: no such session on record.
std::optional<bool> session_writer_alive(Db& db, const std::string& session);

// Whether some process holds `file` open as its writer (open_intent_file takes a shared flock
// that dies with it). A session whose start never reached the log names no writer to ask:
// its file is left behind exactly when nobody holds it.
bool intent_file_held(const std::string& file);

// A session.start made up for `session`, whose records are on record without one (its
// writer died, or could not write, before its start was committed): "synthesized": true,
// `from` says what it was made from, and no writer is known (pid 0, so reconcile ends it).
Event synthesized_start(const std::string& session, int64_t ts, std::string_view from);

// The sessions that have an intent file in `paths.intents`.
std::vector<std::string> intent_sessions(const Paths& paths);

}  // namespace warden::journal
