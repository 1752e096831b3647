// prctl(2) bits that containment relies on, each read back where the kernel allows.
#pragma once

#include "sys/result.hpp"

namespace warden {

// PR_SET_CHILD_SUBREAPER, then PR_GET_CHILD_SUBREAPER to check it took (tini's
// reaper_check): orphaned descendants reparent to us instead of PID 1.
Status set_child_subreaper(bool on = true);
Result<bool> is_child_subreaper();

// PR_SET_PDEATHSIG for the calling thread's children-to-be... of the calling process: the
// signal arrives when the *thread* that forked us exits. Callers in a freshly forked child
// must re-check getppid() afterwards (see spawner.cpp); this wrapper is not for that path
// (which must stay async-signal-safe) but for tests and single-threaded setup.
Status set_pdeathsig(int sig);
Result<int> get_pdeathsig();

}  // namespace warden
