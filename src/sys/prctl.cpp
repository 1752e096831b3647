#include "sys/prctl.hpp"

#include <sys/prctl.h>

#include <string>

#include "sys/fd.hpp"

namespace warden {

Status set_child_subreaper(bool on) {
    if (::prctl(PR_SET_CHILD_SUBREAPER, on ? 1UL : 0UL, 0UL, 0UL, 0UL) != 0)
        return Error::sys("prctl", "PR_SET_CHILD_SUBREAPER", errno);
    // Trust what the kernel says, not what we asked for (tini's reaper_check).
    auto now = is_child_subreaper();
    if (!now) return now.error();
    if (*now != on) return Error::msg("prctl(PR_SET_CHILD_SUBREAPER): did not take effect");
    return {};
}

Result<bool> is_child_subreaper() {
    int v = 0;
    if (::prctl(PR_GET_CHILD_SUBREAPER, &v, 0UL, 0UL, 0UL) != 0)
        return Error::sys("prctl", "PR_GET_CHILD_SUBREAPER", errno);
    return v != 0;
}

Status set_pdeathsig(int sig) {
    if (::prctl(PR_SET_PDEATHSIG, static_cast<unsigned long>(sig), 0UL, 0UL, 0UL) != 0)
        return Error::sys("prctl", "PR_SET_PDEATHSIG", errno);
    return {};
}

Result<int> get_pdeathsig() {
    int v = 0;
    if (::prctl(PR_GET_PDEATHSIG, &v, 0UL, 0UL, 0UL) != 0)
        return Error::sys("prctl", "PR_GET_PDEATHSIG", errno);
    return v;
}

}  // namespace warden
