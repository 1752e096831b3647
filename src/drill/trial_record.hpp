// The journal's record of one drill trial's session: read back, in order (trial_record.cpp).
#pragma once

#include <string>

#include "drill/drill.hpp"

namespace warden::drill {

// The records of session `t.tag` in the journal at `path`: an excerpt, the loss, the
// abandoned call (when `call_outstanding`), snapshots before signals, the end; the server's
// fate and its helpers' from the teardown report, into `t`.
JournalFindings read_the_record(const std::string& path, TrialResult& t, bool call_outstanding);

}  // namespace warden::drill
