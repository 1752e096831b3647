// The commands inside a command line (src/sandbox/command_line.hpp): shell strings, env,
// `python -m`.
#include "sandbox/command_line.hpp"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/testing.hpp"

namespace warden::testing {
namespace {

using Words = std::vector<std::vector<std::string>>;

TEST(CommandLine, ShellStringsSplitIntoSimpleCommands) {
    EXPECT_EQ(sandbox::shell_commands("python3 server.py"), (Words{{"python3", "server.py"}}));
    EXPECT_EQ(sandbox::shell_commands("cd '/srv/my dir' && exec node \"server.js\" --x"),
              (Words{{"cd", "/srv/my dir"}, {"node", "server.js", "--x"}}));
    EXPECT_EQ(sandbox::shell_commands("FOO=1 BAR=2 nohup a\\ b; c | d # not e\nf"),
              (Words{{"a b"}, {"c"}, {"d"}, {"f"}}));
    // What the shell expands at run time is not guessed at: the word stays, empty.
    EXPECT_EQ(sandbox::shell_commands("node $HOME/x.js \"$(pwd)/y.js\" z.js"),
              (Words{{"node", "", "", "z.js"}}));
}

TEST(CommandLine, InvocationsFollowShellsEnvAndCd) {
    auto inv = sandbox::invocations_of(
        {"env", "-i", "A=1", "bash", "-lc", "cd /srv/mcp && node server.js"}, "/home/u");
    ASSERT_EQ(inv.size(), 3u);
    EXPECT_EQ(inv[1].argv[0], "bash");
    EXPECT_EQ(inv[2].argv, (std::vector<std::string>{"node", "server.js"}));
    EXPECT_EQ(inv[2].cwd, "/srv/mcp");
    auto chdir = sandbox::invocations_of({"env", "-C", "sub", "python3", "s.py"}, "/w");
    ASSERT_EQ(chdir.size(), 2u);
    EXPECT_EQ(chdir[1].cwd, "/w/sub");
    // A shell given a script file runs that file: an argument, not a string to read.
    EXPECT_EQ(sandbox::invocations_of({"sh", "run.sh"}, "/w").size(), 1u);
}

TEST(CommandLine, PythonModuleFoundWhereTheInterpreterLooks) {
    TempDir cwd, extra;
    std::filesystem::create_directories(extra.path() + "/pkg");
    std::ofstream(extra.path() + "/pkg/__main__.py") << "\n";
    std::ofstream(cwd.file("single.py")) << "\n";
    auto search = sandbox::python_search_path(cwd.path(), "rel:" + extra.path(), "");
    ASSERT_EQ(search.size(), 3u);
    EXPECT_EQ(search[1], cwd.path() + "/rel");
    auto pkg = sandbox::python_module_path("pkg.server", search);
    EXPECT_EQ(pkg.search_dir, extra.path());
    EXPECT_EQ(pkg.top, extra.path() + "/pkg");
    EXPECT_EQ(sandbox::python_module_path("single", search).top, cwd.file("single.py"));
    EXPECT_TRUE(sandbox::python_module_path("json", search).top.empty())
        << "the standard library is the interpreter's installation";
}

}  // namespace
}  // namespace warden::testing
