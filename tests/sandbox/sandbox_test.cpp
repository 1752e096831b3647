// The sandbox's plan (profiles → rules) and its enforcement in a real forked child, each
// with the same child run under --sandbox off as the negative control.
#include "sandbox/sandbox.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/testing.hpp"
#include "sandbox/confined_child.hpp"
#include "sandbox/launch_of.hpp"
#include "sys/landlock.hpp"

namespace warden::testing {
namespace {

using sandbox::Plan;

const sandbox::PathRule* rule_for(const Plan& p, const std::string& path) {
    for (const auto& r : p.paths())
        if (r.path == path) return &r;
    return nullptr;
}

// Forks; the child applies `plan` and opens each path with `flags` (a directory as a
// directory); returns the errno each open met (0: it succeeded), or {} when the plan itself
// could not be applied.
std::vector<int> errnos_in_confined_child(const Plan& plan, const std::vector<std::string>& paths,
                                          int flags) {
    return errnos_in_child(plan, paths.size(), [&](auto report) {
        for (const auto& p : paths) {
            int fd = ::open(p.c_str(), flags | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, 0600);
            int e = fd >= 0 ? 0 : errno;
            if (fd >= 0) ::close(fd);
            report(e);
        }
    });
}

// The same for one path: its errno, or -1 when the plan could not be applied.
int errno_in_confined_child(const Plan& plan, const std::string& path, int flags) {
    auto e = errnos_in_confined_child(plan, {path}, flags);
    return e.empty() ? -1 : e[0];
}

TEST(Sandbox, StrictAllowsTheSystemAndTheCommandButNotHomeOrSecrets) {
    TempDir home;
    RunOptions s;
    s.sandbox = Sandbox::Strict;
    auto plan = sandbox::prepare(s, launch_of(home, {kFixture}));
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    ASSERT_NE(rule_for(*plan, "/usr"), nullptr);
    EXPECT_FALSE(rule_for(*plan, "/usr")->write);
    std::string install = std::filesystem::path(kFixture).parent_path().string();
    ASSERT_NE(rule_for(*plan, install), nullptr) << "the command's own directory";
    EXPECT_EQ(rule_for(*plan, "/etc/shadow"), nullptr);
    EXPECT_EQ(rule_for(*plan, "/etc/gshadow"), nullptr);
    if (std::filesystem::exists("/etc/passwd")) {
        EXPECT_NE(rule_for(*plan, "/etc/passwd"), nullptr);
    }
    EXPECT_EQ(rule_for(*plan, home.path()), nullptr);

    // The private temporary directory: created for the session, 0700, writable, removed.
    const std::string tmp = plan->private_tmp();
    ASSERT_FALSE(tmp.empty());
    struct stat st {};
    ASSERT_EQ(::stat(tmp.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    ASSERT_NE(rule_for(*plan, tmp), nullptr);
    EXPECT_TRUE(rule_for(*plan, tmp)->write);
    sandbox::remove_private_tmp(tmp);
    EXPECT_FALSE(std::filesystem::exists(tmp));
}

TEST(Sandbox, ConfinedChildMeetsEaccesWhereTheUnconfinedOneDoesNot) {
    TempDir home;
    std::ofstream(home.file("secret")) << "token\n";
    RunOptions s;
    s.sandbox = Sandbox::Strict;
    auto plan = sandbox::prepare(s, launch_of(home, {kFixture}));
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    if (plan->landlock_abi() == 0) GTEST_SKIP() << "no Landlock on this kernel";
    EXPECT_EQ(errno_in_confined_child(*plan, home.file("secret"), O_RDONLY), EACCES);
    EXPECT_EQ(errno_in_confined_child(*plan, home.file("new"), O_WRONLY | O_CREAT), EACCES);
    EXPECT_EQ(errno_in_confined_child(*plan, plan->private_tmp() + "/scratch", O_WRONLY | O_CREAT),
              0);
    EXPECT_EQ(errno_in_confined_child(*plan, "/usr/bin/env", O_RDONLY), 0);
    sandbox::remove_private_tmp(plan->private_tmp());

    // Negative control: the plan of --sandbox off changes nothing.
    auto off = sandbox::prepare(RunOptions{}, launch_of(home, {kFixture}));
    ASSERT_TRUE(off.ok());
    EXPECT_EQ(off->level(), "off");
    EXPECT_EQ(errno_in_confined_child(*off, home.file("secret"), O_RDONLY), 0);
    EXPECT_EQ(errno_in_confined_child(*off, home.file("new"), O_WRONLY | O_CREAT), 0);
}

// The shim's keeper is forked between the plan's two halves: it holds a ruleset fd from
// prepare_ahead(), and the relay adds the path rules through its own fd afterwards. A child
// forked before add_path_rules() and applying the plan after it is confined by every rule
// (the fd names one kernel object); negative control: a child applying it before the rules
// are in is refused even the command it is about to exec, so the order fails closed. The
// private directory exists only once add_path_rules() made it.
// Where Landlock can log (ABI 7), the server's denials go to the kernel's audit log: the
// plan restricts with LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON, without which Landlock logs
// only those of the process that restricted itself, and that process execs the server next.
// (The flag once sat in the branch for a kernel without Landlock, where it was never set.)
TEST(Sandbox, DenialsOfTheExecutedServerReachTheAuditLogWhereLandlockLogs) {
    TempDir home;
    RunOptions s;
    s.sandbox = Sandbox::Strict;
    auto plan = sandbox::prepare_ahead(s, launch_of(home, {kFixture}));
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    if (plan->landlock_abi() < 7) GTEST_SKIP() << "Landlock ABI < 7: no audit logging";
    EXPECT_EQ(plan->restrict_flags() & landlock::kLogNewExecOn, landlock::kLogNewExecOn);
}

TEST(Sandbox, PathRulesAddedAfterTheForkReachTheChildThatAppliesLater) {
    TempDir home;
    std::ofstream(home.file("secret")) << "token\n";
    RunOptions s;
    s.sandbox = Sandbox::Strict;
    auto plan = sandbox::prepare_ahead(s, launch_of(home, {kFixture}));
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    if (plan->landlock_abi() == 0) GTEST_SKIP() << "no Landlock on this kernel";
    EXPECT_FALSE(plan->complete());
    EXPECT_FALSE(std::filesystem::exists(plan->private_tmp()));
    EXPECT_EQ(errno_in_confined_child(*plan, kFixture, O_RDONLY), EACCES);

    int go[2], result[2];
    ASSERT_EQ(::pipe2(go, O_CLOEXEC), 0);
    ASSERT_EQ(::pipe2(result, O_CLOEXEC), 0);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        char c;
        if (::read(go[0], &c, 1) != 1 || plan->apply_in_child() != 0) ::_exit(1);
        int errs[2];
        for (int i = 0; i < 2; ++i) {
            int fd = ::open(i == 0 ? kFixture : home.file("secret").c_str(), O_RDONLY | O_CLOEXEC);
            errs[i] = fd >= 0 ? 0 : errno;
        }
        ::_exit(::write(result[1], errs, sizeof errs) == sizeof errs ? 0 : 1);
    }
    ::close(go[0]);
    ::close(result[1]);
    const auto added = plan->add_path_rules();
    EXPECT_TRUE(added.ok()) << (added.ok() ? "" : added.error().message);
    EXPECT_EQ(::write(go[1], "g", 1), 1);
    ::close(go[1]);
    int errs[2] = {-1, -1};
    EXPECT_EQ(::read(result[0], errs, sizeof errs), static_cast<ssize_t>(sizeof errs));
    ::close(result[0]);
    int st = 0;
    ::waitpid(pid, &st, 0);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    EXPECT_EQ(errs[0], 0) << "the command, allowed by a rule added after the fork";
    EXPECT_EQ(errs[1], EACCES) << "the home directory, still not allowed";
    EXPECT_TRUE(plan->complete());
    struct stat dir {};
    ASSERT_EQ(::stat(plan->private_tmp().c_str(), &dir), 0);
    EXPECT_EQ(dir.st_mode & 0777, 0700u);
    sandbox::remove_private_tmp(plan->private_tmp());
}

TEST(Sandbox, WorkspaceAddsArgumentDirectoriesThatStrictDoesNot) {
    TempDir home, data;
    RunOptions s;
    s.sandbox = Sandbox::Workspace;
    auto ws = sandbox::prepare(s, launch_of(home, {kFixture, data.path(), "--flag", "missing"}));
    ASSERT_TRUE(ws.ok()) << ws.error().message;
    std::string real_data = std::filesystem::canonical(data.path()).string();
    ASSERT_NE(rule_for(*ws, real_data), nullptr);
    EXPECT_TRUE(rule_for(*ws, real_data)->write);
    EXPECT_EQ(rule_for(*ws, real_data)->why, "argument");
    if (ws->landlock_abi() > 0) {
        EXPECT_EQ(errno_in_confined_child(*ws, data.path() + "/out", O_WRONLY | O_CREAT), 0);
    }
    sandbox::remove_private_tmp(ws->private_tmp());

    s.sandbox = Sandbox::Strict;
    auto strict = sandbox::prepare(s, launch_of(home, {kFixture, data.path()}));
    ASSERT_TRUE(strict.ok());
    EXPECT_EQ(rule_for(*strict, real_data), nullptr);
    if (strict->landlock_abi() > 0) {
        EXPECT_EQ(errno_in_confined_child(*strict, data.path() + "/out2", O_WRONLY | O_CREAT),
                  EACCES);
    }
    sandbox::remove_private_tmp(strict->private_tmp());
}

TEST(Sandbox, EnvironmentKeepsTheBaseSetAndWhatIsAllowed) {
    TempDir home;
    ::setenv("WARDEN_SANDBOX_TEST_TOKEN", "s3cret", 1);
    RunOptions s;
    s.sandbox = Sandbox::Strict;
    auto has = [](const Plan& p, const std::string& prefix) {
        return std::any_of(p.env().begin(), p.env().end(),
                           [&](const std::string& e) { return e.rfind(prefix, 0) == 0; });
    };
    auto plan = sandbox::prepare(s, launch_of(home, {kFixture}));
    ASSERT_TRUE(plan.ok());
    EXPECT_FALSE(has(*plan, "WARDEN_SANDBOX_TEST_TOKEN="));
    EXPECT_TRUE(has(*plan, "TMPDIR=" + plan->private_tmp()));
    if (std::getenv("PATH")) {
        EXPECT_TRUE(has(*plan, "PATH="));
    }
    sandbox::remove_private_tmp(plan->private_tmp());

    s.env_allow = {"WARDEN_SANDBOX_TEST_*"};
    auto allowed = sandbox::prepare(s, launch_of(home, {kFixture}));
    ASSERT_TRUE(allowed.ok());
    EXPECT_TRUE(has(*allowed, "WARDEN_SANDBOX_TEST_TOKEN=s3cret"));
    sandbox::remove_private_tmp(allowed->private_tmp());
    ::unsetenv("WARDEN_SANDBOX_TEST_TOKEN");
}

// docs/SANDBOX.md's secrets of /etc, as it lists them (relative to /etc).
bool documented_etc_secret(const std::string& rel) {
    for (const char* s :
         {"shadow", "shadow-", "gshadow", "gshadow-", "sudoers", "sudoers.d", ".pwd.lock",
          "krb5.keytab", "ppp", "ipsec.secrets", "wireguard", "NetworkManager", "security/opasswd",
          "ssl/private", "docker/key.json", "subuid-", "subgid-"})
        if (rel == s) return true;
    return rel.rfind("ssh/ssh_host_", 0) == 0 && rel.size() > 4 &&
           rel.compare(rel.size() - 4, 4, "_key") == 0;
}

// Every entry of /etc (and of the directories that mix secrets with what programs read)
// opens under strict exactly as it does unconfined, but the documented secrets, which fail
// with EACCES, and the mixed directories themselves, which cannot be listed (their entries
// are allowed one by one, as /etc's are). Negative control: unconfined, root opens the
// secrets (as any other user opens the secrets its groups may read).
TEST(Sandbox, EtcReadsAsUnconfinedButForItsDocumentedSecrets) {
    auto mixed = [](const std::string& name) {
        return name == "ssh" || name == "ssl" || name == "security" || name == "docker";
    };
    std::vector<std::string> rels;
    for (const auto& e : std::filesystem::directory_iterator("/etc")) {
        std::string name = e.path().filename().string();
        rels.push_back(name);
        if (mixed(name) && e.is_directory()) {
            std::error_code ec;
            for (const auto& f : std::filesystem::directory_iterator(e.path(), ec))
                rels.push_back(name + "/" + f.path().filename().string());
        }
    }
    std::vector<std::string> paths;
    for (const auto& r : rels)
        paths.push_back("/etc/" + r);
    TempDir home;
    RunOptions s;
    s.sandbox = Sandbox::Strict;
    auto plan = sandbox::prepare(s, launch_of(home, {kFixture}));
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    sandbox::remove_private_tmp(plan->private_tmp());
    if (plan->landlock_abi() == 0) GTEST_SKIP() << "no Landlock on this kernel";
    auto off = sandbox::prepare(RunOptions{}, launch_of(home, {kFixture}));
    ASSERT_TRUE(off.ok());
    auto confined = errnos_in_confined_child(*plan, paths, O_RDONLY);
    auto open = errnos_in_confined_child(*off, paths, O_RDONLY);
    ASSERT_EQ(confined.size(), paths.size());
    ASSERT_EQ(open.size(), paths.size());
    size_t secrets = 0;
    for (size_t i = 0; i < paths.size(); ++i) {
        if (mixed(rels[i]) && open[i] == 0) {
            EXPECT_EQ(confined[i], EACCES) << paths[i] << " is not listable";
        } else if (documented_etc_secret(rels[i])) {
            ++secrets;
            EXPECT_EQ(confined[i], EACCES) << paths[i] << " is a secret";
            if (::geteuid() == 0) {
                EXPECT_EQ(open[i], 0) << paths[i] << " (negative control)";
            }
        } else {
            EXPECT_EQ(confined[i], open[i]) << paths[i] << ": " << std::strerror(confined[i]);
        }
    }
    if (std::filesystem::exists("/etc/shadow")) {
        EXPECT_GT(secrets, 0u);
    }
}

// npx and uvx write their store as they start; a user who never ran them has none, and a
// confined runner cannot make it in the home directory. The relay makes it before the rules
// are fixed. Negative control: with the hook that skips that (MCPWARDEN_FAULT=runner_store),
// the store is missing, has no rule, and the confined runner cannot create it.
TEST(Sandbox, RunnerStoreOfAFreshUserIsMadeBeforeConfining) {
    RunOptions s;
    s.sandbox = Sandbox::Strict;
    s.allow_fetch = true;  // a fresh user's npx has nothing cached: it must fetch
    auto mode_of = [](const std::string& p) {
        struct stat st {};
        return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode) ? st.st_mode & 0777 : 0u;
    };
    for (auto [runner, store] : {std::pair{"npx", "/.npm"}, {"uvx", "/.cache/uv"}}) {
        SCOPED_TRACE(runner);
        TempDir home;
        auto plan = sandbox::prepare(s, launch_of(home, {runner, "some-server"}));
        ASSERT_TRUE(plan.ok()) << plan.error().message;
        EXPECT_EQ(mode_of(home.path() + store), 0700u);
        ASSERT_NE(rule_for(*plan, home.path() + store), nullptr);
        EXPECT_TRUE(rule_for(*plan, home.path() + store)->write);
        if (plan->landlock_abi() > 0) {
            EXPECT_EQ(
                errno_in_confined_child(*plan, home.path() + store + "/log", O_WRONLY | O_CREAT),
                0);
        }
        sandbox::remove_private_tmp(plan->private_tmp());

        TempDir fresh;
        auto l = launch_of(fresh, {runner, "some-server"});
        l.no_runner_store = true;
        auto skipped = sandbox::prepare(s, l);
        ASSERT_TRUE(skipped.ok()) << skipped.error().message;
        EXPECT_EQ(mode_of(fresh.path() + store), 0u);
        EXPECT_EQ(rule_for(*skipped, fresh.path() + store), nullptr);
        if (skipped->landlock_abi() > 0) {
            EXPECT_EQ(errno_in_confined_child(*skipped, fresh.path() + "/.npm-like-store",
                                              O_WRONLY | O_CREAT),
                      EACCES);
        }
        sandbox::remove_private_tmp(skipped->private_tmp());
    }
}

bool has_env(const Plan& p, const std::string& kv) {
    return std::find(p.env().begin(), p.env().end(), kv) != p.env().end();
}

// A launcher's package: cached, it runs offline over the profile's network; missing, the plan
// is refused at once, naming the package and --allow-fetch; with --allow-fetch it may fetch
// over --net any. Negative control (sandbox_launcher's hook): the launcher is planned as any
// command, neither offline nor refused, so npm would try the closed network and hang in
// retries.
TEST(Sandbox, LauncherRunsOfflineFromItsCacheAndIsRefusedWhenThePackageIsMissing) {
    TempDir home;
    const std::string spec = "@modelcontextprotocol/server-everything";
    RunOptions s;
    s.sandbox = Sandbox::Strict;
    auto missing = sandbox::prepare(s, launch_of(home, {"npx", "-y", spec}));
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.error().message.find(spec), std::string::npos) << missing.error().message;
    EXPECT_NE(missing.error().message.find("--allow-fetch"), std::string::npos);

    const std::string dir = home.path() + "/.npm/_npx/0123456789abcdef";
    std::filesystem::create_directories(dir + "/node_modules/" + spec);
    std::ofstream(dir + "/package.json") << R"({"_npx":{"packages":[")" << spec << R"("]}})";
    std::ofstream(dir + "/node_modules/" + spec + "/package.json") << "{}";
    auto cached = sandbox::prepare(s, launch_of(home, {"npx", "-y", spec}));
    ASSERT_TRUE(cached.ok()) << cached.error().message;
    EXPECT_TRUE(has_env(*cached, "npm_config_offline=true"));
    EXPECT_EQ(cached->net(), SandboxNet::Loopback);
    ASSERT_NE(rule_for(*cached, home.path() + "/.npm"), nullptr);
    EXPECT_NE(cached->render_text().find("runs offline"), std::string::npos);
    sandbox::remove_private_tmp(cached->private_tmp());

    TempDir fresh;
    s.allow_fetch = true;
    auto fetching = sandbox::prepare(s, launch_of(fresh, {"npx", "-y", spec}));
    ASSERT_TRUE(fetching.ok()) << fetching.error().message;
    EXPECT_FALSE(has_env(*fetching, "npm_config_offline=true"));
    EXPECT_EQ(fetching->net(), SandboxNet::Any);
    sandbox::remove_private_tmp(fetching->private_tmp());
    auto not_launcher = sandbox::prepare(s, launch_of(fresh, {kFixture}));
    ASSERT_FALSE(not_launcher.ok());
    EXPECT_NE(not_launcher.error().message.find("not a package launcher"), std::string::npos);

    s.allow_fetch = false;
    auto l = launch_of(fresh, {"npx", "-y", spec});
    l.no_launcher = true;
    auto blind = sandbox::prepare(s, l);
    ASSERT_TRUE(blind.ok()) << "negative control: not refused";
    EXPECT_FALSE(has_env(*blind, "npm_config_offline=true"));
    sandbox::remove_private_tmp(blind->private_tmp());
}

// A script named inside `sh -c` gets its directory read-only, as an argument file does.
// Negative control (sandbox_inner_commands's hook): no rule, and the confined child meets
// EACCES on it.
TEST(Sandbox, ScriptNamedInsideAShellStringIsReadable) {
    TempDir home, dir;
    std::ofstream(dir.file("server.py")) << "print()\n";
    RunOptions s;
    s.sandbox = Sandbox::Strict;
    auto l = launch_of(home, {"/bin/sh", "-c", "cd " + dir.path() + " && python3 server.py"});
    auto plan = sandbox::prepare(s, l);
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    const std::string real_dir = std::filesystem::canonical(dir.path()).string();
    ASSERT_NE(rule_for(*plan, real_dir), nullptr);
    EXPECT_FALSE(rule_for(*plan, real_dir)->write);
    l.no_inner_commands = true;
    auto blind = sandbox::prepare(s, l);
    ASSERT_TRUE(blind.ok()) << blind.error().message;
    EXPECT_EQ(rule_for(*blind, real_dir), nullptr);
    if (plan->landlock_abi() > 0) {
        EXPECT_EQ(errno_in_confined_child(*plan, dir.file("server.py"), O_RDONLY), 0);
        EXPECT_EQ(errno_in_confined_child(*blind, dir.file("server.py"), O_RDONLY), EACCES);
    }
    sandbox::remove_private_tmp(plan->private_tmp());
    sandbox::remove_private_tmp(blind->private_tmp());
}

TEST(Sandbox, BadInputIsRefusedWithItsName) {
    EXPECT_FALSE(sandbox::parse_port("0").ok());
    EXPECT_FALSE(sandbox::parse_port("65536").ok());
    EXPECT_FALSE(sandbox::parse_port("80x").ok());
    EXPECT_EQ(*sandbox::parse_port("8080"), 8080);
    TempDir home;
    RunOptions s;
    s.sandbox = Sandbox::Strict;
    s.allow_read = {home.file("does-not-exist")};
    auto plan = sandbox::prepare(s, launch_of(home, {kFixture}));
    ASSERT_FALSE(plan.ok());
    EXPECT_NE(plan.error().message.find("--allow-read"), std::string::npos) << plan.error().message;
    EXPECT_NE(plan.error().message.find("does-not-exist"), std::string::npos);
    // Nothing is left behind by a plan that failed.
    for (const auto& e : std::filesystem::directory_iterator(home.path()))
        EXPECT_EQ(e.path().filename().string().rfind("mcpwarden-", 0), std::string::npos);
}

}  // namespace
}  // namespace warden::testing
