// tests/clients-real/real_clients.sh takes the mcpwarden and the fixture to test as paths,
// then runs every client in a scratch directory of its own: relative paths are resolved from
// where it was started, before any `cd`, and one that names no executable is refused there.
// (Without the real clients installed, the script then stops with 77, skipped; with them,
// the ctest `clients_real.mcp_list_through_wrap` runs it whole.)
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "clients_test_util.hpp"
#include "common/testing.hpp"

namespace warden::clients::testing {
namespace {

const std::string kScript = std::string(WARDEN_SOURCE_DIR) + "/tests/clients-real/real_clients.sh";

TEST(RealClientsScript, TakesRelativePathsFromWhereItWasStarted) {
    if (std::filesystem::exists(std::string(WARDEN_SOURCE_DIR) +
                                "/tests/clients-real/node_modules/.bin/claude"))
        GTEST_SKIP() << "the real clients are installed: ctest -L clients-real runs the script";
    const std::filesystem::path cli = std::filesystem::canonical(warden::testing::kCli);
    const std::filesystem::path fixture = std::filesystem::canonical(warden::testing::kFixture);
    const std::string dir = cli.parent_path().string();
    ASSERT_EQ(fixture.parent_path().string(), dir) << "both are built into one directory";
    warden::testing::TempDir home;
    const std::vector<std::string> relative = {"/bin/sh", kScript, "./" + cli.filename().string(),
                                               fixture.filename().string()};

    // Relative to the directory it is started in: accepted, then skipped for want of clients.
    CliResult here = run_program(relative, home.path(), dir);
    EXPECT_EQ(here.exit_code, 77) << here.out << here.err;
    EXPECT_NE(here.out.find("skipped: the real clients are not installed"), std::string::npos)
        << here.out << here.err;

    // The control: the same relative paths from another directory name no file, and are
    // refused with the path they were taken for.
    CliResult elsewhere = run_program(relative, home.path(), home.path());
    EXPECT_EQ(elsewhere.exit_code, 2) << elsewhere.out << elsewhere.err;
    EXPECT_NE(elsewhere.err.find("real_clients.sh: ./" + cli.filename().string() +
                                 ": not an executable file (" + home.path() + "/./" +
                                 cli.filename().string() + ")"),
              std::string::npos)
        << elsewhere.err;
}

}  // namespace
}  // namespace warden::clients::testing
