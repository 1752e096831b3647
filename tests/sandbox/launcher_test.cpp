// Package launchers as the plan sees them (src/sandbox/launcher.hpp): which command lines are
// launchers, the packages they name, their caches, and whether npx has the package already.
#include "sandbox/launcher.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/testing.hpp"

namespace warden::testing {
namespace {

using sandbox::launcher_of;

std::vector<std::string> packages(const std::vector<std::string>& argv) {
    auto l = launcher_of(argv, "/home/u", "/nowhere");
    return l ? l->packages : std::vector<std::string>{"<not a launcher>"};
}

TEST(Launcher, EachLauncherAndThePackageItRuns) {
    using V = std::vector<std::string>;
    EXPECT_EQ(packages({"npx", "-y", "@modelcontextprotocol/server-everything", "stdio"}),
              V{"@modelcontextprotocol/server-everything"});
    EXPECT_EQ(packages({"/usr/bin/npx", "--yes", "--package=@a/b@1.2", "b-server", "-x"}),
              V{"@a/b@1.2"});
    EXPECT_EQ(packages({"npm", "exec", "--yes", "--", "pkg@2", "--port", "1"}), V{"pkg@2"});
    EXPECT_EQ(packages({"uvx", "--from", "git+https://x/y", "mcp-y"}), V{"git+https://x/y"});
    EXPECT_EQ(packages({"uvx", "--python", "3.12", "mcp-server-fetch"}), V{"mcp-server-fetch"});
    EXPECT_EQ(packages({"uv", "tool", "run", "mcp-server-time"}), V{"mcp-server-time"});
    EXPECT_EQ(packages({"pipx", "run", "--spec", "mcp-x==1.0", "mcp-x"}), V{"mcp-x==1.0"});
    EXPECT_EQ(packages({"bunx", "some-server"}), V{"some-server"});
    EXPECT_EQ(packages({"pnpm", "dlx", "some-server"}), V{"some-server"});
    EXPECT_EQ(packages({"yarn", "dlx", "-p", "pkg", "bin"}), V{"pkg"});
    EXPECT_EQ(packages({"node", "server.js"}), V{"<not a launcher>"});
    EXPECT_EQ(packages({"npm", "start"}), V{"<not a launcher>"});
    EXPECT_EQ(packages({"pipx", "install", "x"}), V{"<not a launcher>"});

    EXPECT_EQ(sandbox::package_name("@scope/name@^1.2"), "@scope/name");
    EXPECT_EQ(sandbox::package_name("name@latest"), "name");
    EXPECT_EQ(sandbox::package_name("mcp-x==1.0"), "mcp-x");
    EXPECT_EQ(sandbox::package_name("mcp-x[cli]>=2"), "mcp-x");
}

TEST(Launcher, CacheWrittenConfigReadAndTheOfflineSwitch) {
    auto npx = launcher_of({"npx", "-y", "x"}, "/home/u", "/nowhere");
    ASSERT_TRUE(npx);
    ASSERT_GE(npx->paths.size(), 2u);
    EXPECT_EQ(npx->paths[0].path, "/home/u/.npm");
    EXPECT_TRUE(npx->paths[0].write);
    EXPECT_EQ(npx->paths[1].path, "/home/u/.npmrc");
    EXPECT_FALSE(npx->paths[1].write);
    EXPECT_EQ(npx->offline_env.front(), "npm_config_offline=true");
    auto uvx = launcher_of({"uvx", "mcp-server-time"}, "/home/u", "/nowhere");
    ASSERT_TRUE(uvx);
    EXPECT_EQ(uvx->paths[0].path, "/home/u/.cache/uv");
    EXPECT_EQ(uvx->offline_env, std::vector<std::string>{"UV_OFFLINE=1"});
    EXPECT_FALSE(uvx->cached.has_value()) << "uv's layout does not tell";
    EXPECT_FALSE(launcher_of({"npx", "-y", "x"}, "", "/nowhere")) << "no home, no cache";
}

// pipx picks its home by its version; confined, it is told which one the plan opened: the one
// an earlier run left, else today's default.
TEST(Launcher, PipxIsToldTheHomeItsRuleOpens) {
    TempDir home;
    auto env_of = [&] {
        auto l = launcher_of({"pipx", "run", "mcp-x"}, home.path(), "/nowhere");
        EXPECT_TRUE(l && l->paths[0].write);
        return l ? std::make_pair(l->paths[0].path, l->home_env)
                 : std::make_pair(std::string(), std::vector<std::string>());
    };
    auto [fresh, fresh_env] = env_of();
    EXPECT_EQ(fresh, home.path() + "/.local/share/pipx");
    EXPECT_NE(std::find(fresh_env.begin(), fresh_env.end(), "PIPX_HOME=" + fresh), fresh_env.end());
    EXPECT_NE(std::find(fresh_env.begin(), fresh_env.end(), "PIPX_BIN_DIR=" + fresh + "/bin"),
              fresh_env.end());
    std::filesystem::create_directories(home.path() + "/.local/pipx");
    auto [old, old_env] = env_of();
    EXPECT_EQ(old, home.path() + "/.local/pipx") << "the home a pipx before 1.3 left";
    EXPECT_NE(std::find(old_env.begin(), old_env.end(), "PIPX_HOME=" + old), old_env.end());
}

// npx's own layout: ~/.npm/_npx/<hash>/package.json listing the packages, node_modules
// holding them; or the project's node_modules.
TEST(Launcher, NpxKnowsWhetherThePackageIsCached) {
    TempDir home, project;
    const std::string spec = "@modelcontextprotocol/server-everything";
    auto cached = [&] {
        auto l = launcher_of({"npx", "-y", spec}, home.path(), project.path());
        return l && l->cached.value_or(false);
    };
    EXPECT_FALSE(cached());
    const std::string dir = home.path() + "/.npm/_npx/0123456789abcdef";
    std::filesystem::create_directories(dir + "/node_modules/" + spec);
    std::ofstream(dir + "/package.json") << R"({"_npx":{"packages":[")" << spec << R"("]}})";
    EXPECT_FALSE(cached()) << "a directory without the package's manifest is no install";
    std::ofstream(dir + "/node_modules/" + spec + "/package.json") << "{}";
    EXPECT_TRUE(cached());
    // The same package under another spec is another install for npx.
    auto pinned = launcher_of({"npx", "-y", spec + "@1.0.0"}, home.path(), project.path());
    EXPECT_FALSE(pinned->cached.value_or(true));
    // A project that has it in its node_modules: npx runs it from there.
    TempDir fresh;
    std::filesystem::create_directories(project.path() + "/node_modules/" + spec);
    std::ofstream(project.path() + "/node_modules/" + spec + "/package.json") << "{}";
    auto local = launcher_of({"npx", "-y", spec}, fresh.path(), project.path());
    EXPECT_TRUE(local->cached.value_or(false));
}

}  // namespace
}  // namespace warden::testing
