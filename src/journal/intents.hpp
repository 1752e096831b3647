// Recovery of intent files: requests written on the relay's path before the writer thread
// chained them (journal.cpp, "Intents"). Whoever finds a session's file once its writer is
// gone appends, in file order, each intent the log does not hold yet, and removes the file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "journal/journal.hpp"

namespace warden::journal {

struct IntentRecovery {
    int64_t recovered = 0;              // intents appended now
    int64_t already = 0;                // intents the log held already
    int64_t bad = 0;                    // lines that are no record: counted as lost requests
    std::vector<std::string> problems;  // one line each: file, line number, why
};

// Recovers the intent file `file` (Paths::intent_file) into `journal`: each line not yet on
// record (a record of its session with the same kind and ts) is appended, in file order, in
// one transaction; a torn or garbled line is reported and counted as a lost activity.request
// (journal.degraded); then the file is removed. The file's writer must be gone (or be the
// caller, at close). No file: nothing to do.
Result<IntentRecovery> recover_intents(Journal& journal, const std::string& file);
// The same for `session`'s file.
Result<IntentRecovery> recover_session_intents(Journal& journal, std::string_view session);

// The sessions that have an intent file in `paths.intents`.
std::vector<std::string> intent_sessions(const Paths& paths);

}  // namespace warden::journal
