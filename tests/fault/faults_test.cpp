// MCPWARDEN_FAULT as Faults reads it (src/fault/faults.hpp).
#include "fault/faults.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace warden {
namespace {

TEST(Faults, ParseReadsTheCommaList) {
    Faults f = Faults::parse("clone3,cgroup_kill");
    EXPECT_TRUE(f.clone3);
    EXPECT_TRUE(f.cgroup_kill);
    EXPECT_FALSE(f.pidfd_open);
    EXPECT_FALSE(f.cgroup);
    EXPECT_FALSE(Faults::parse("").any());
    Faults g = Faults::parse("pidfd_getfd,proc_children");
    EXPECT_TRUE(g.pidfd_getfd);
    EXPECT_TRUE(g.proc_children);
    EXPECT_TRUE(g.any());
}

// A name that is no fault is ignored by parse() and listed by unknown(): a misspelt fault
// would otherwise run as none, and an A/B compare a run with itself. "none" and empty
// tokens are no fault and not unknown.
TEST(Faults, ANameThatIsNoFaultIsListedAsUnknown) {
    Faults f = Faults::parse("journal_slow_open,journal_slow_opne");
    EXPECT_TRUE(f.journal_slow_open);
    EXPECT_EQ(Faults::unknown("journal_slow_open,journal_slow_opne,,none,relay_setles"),
              (std::vector<std::string>{"journal_slow_opne", "relay_setles"}));
    EXPECT_TRUE(Faults::unknown("none").empty());
    EXPECT_TRUE(Faults::unknown("").empty());
    EXPECT_TRUE(Faults::unknown("plan_ahead_only,keeper_no_intents").empty());
}

}  // namespace
}  // namespace warden
