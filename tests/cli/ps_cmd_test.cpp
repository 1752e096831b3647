// `mcpwarden ps`, driven as a user would: the built binary, its JSON and its table.
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/child.hpp"
#include "common/paths.hpp"
#include "common/util.hpp"
#include "proc/process.hpp"

namespace warden {
namespace {

using namespace std::chrono_literals;
using testing::ChildOptions;
using testing::kCli;
using testing::TestChild;

struct CliRun {
    std::string out, err;
    int status = -1;
};

CliRun run_cli(std::vector<std::string> args, ChildOptions opts = {}) {
    args.insert(args.begin(), kCli);
    opts.capture_stderr = true;
    TestChild c(std::move(args), std::move(opts));
    CliRun r;
    if (!c.started()) {
        r.err = c.error();
        return r;
    }
    c.close_stdin();
    r.out = c.read_all_stdout(20s);
    r.err = c.read_stderr(5s);
    r.status = c.wait_exit(20s).value_or(-1);
    return r;
}

nlohmann::json ps_json(std::vector<std::string> args) {
    args.insert(args.begin(), {"ps", "--json"});
    CliRun r = run_cli(std::move(args));
    EXPECT_EQ(r.status, 0) << r.err;
    auto j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(j.is_discarded()) << r.out.substr(0, 400);
    return j;
}

const nlohmann::json* find_pid(const nlohmann::json& doc, pid_t pid) {
    for (const auto& p : doc["processes"])
        if (p["pid"] == pid) return &p;
    return nullptr;
}

TestChild start_sleep() {
    return TestChild({"/bin/sleep", "60"});
}

TEST(PsCmd, JsonFollowsTheDocumentedSchema) {
    auto doc = ps_json({"--all"});
    ASSERT_TRUE(doc.is_object());
    EXPECT_EQ(doc["schema"], "mcpwarden.ps");
    EXPECT_EQ(doc["schema_version"], 1);
    EXPECT_EQ(doc["boot_id"], boot_id());
    EXPECT_TRUE(doc["observed_at"].is_string());
    EXPECT_TRUE(doc["clock_ticks"].is_number_integer());
    ASSERT_TRUE(doc["processes"].is_array());
    ASSERT_FALSE(doc["processes"].empty());
    for (const auto& p : doc["processes"]) {
        for (const char* k : {"pid", "ppid", "pgid", "sid", "tty_nr", "threads"})
            EXPECT_TRUE(p[k].is_number_integer()) << k << " in " << p.dump();
        for (const char* k : {"starttime", "rss_kb"})
            EXPECT_TRUE(p[k].is_number_unsigned()) << k << " in " << p.dump();
        EXPECT_TRUE(p["uid"].is_number_unsigned() || p["uid"].is_null());
        for (const char* k : {"user", "state", "stat", "comm", "command"})
            EXPECT_TRUE(p[k].is_string()) << k << " in " << p.dump();
        EXPECT_TRUE(p["zombie"].is_boolean());
        EXPECT_TRUE(p["elapsed_seconds"].is_number());
        EXPECT_TRUE(p["argv"].is_array());
        EXPECT_EQ(p["state"].get<std::string>().size(), 1u);
        EXPECT_FALSE(p.contains("depth"));  // only with --tree
    }
}

TEST(PsCmd, StartedProcessAppearsWithItsParentAndIdentity) {
    TestChild child = start_sleep();
    ASSERT_TRUE(child.started()) << child.error();
    auto id = read_identity(child.pid());
    ASSERT_TRUE(id.ok());
    // --mcp is the default now: every process is --all.
    auto doc = ps_json({"--all"});
    const nlohmann::json* p = find_pid(doc, child.pid());
    ASSERT_NE(p, nullptr);
    EXPECT_EQ((*p)["ppid"], ::getpid());
    EXPECT_EQ((*p)["starttime"], id->starttime);
    EXPECT_EQ((*p)["uid"], ::getuid());
    EXPECT_EQ((*p)["command"], "/bin/sleep 60");
    EXPECT_EQ((*p)["argv"], nlohmann::json::array({"/bin/sleep", "60"}));
    // The ps process itself is a child of ours too: it lists itself.
    std::string ps_comm = std::string(kCli).substr(std::string(kCli).rfind('/') + 1).substr(0, 15);
    bool saw_ps = false;
    for (const auto& q : doc["processes"])
        saw_ps |= q["ppid"] == ::getpid() && q["comm"] == ps_comm;
    EXPECT_TRUE(saw_ps);
}

TEST(PsCmd, DescendantsOfListsTheChildNotTheRoot) {
    TestChild shell({"/bin/sh", "-c", "/bin/sleep 60 & wait"});
    ASSERT_TRUE(shell.started()) << shell.error();
    pid_t sleeper = 0;
    ASSERT_TRUE(testing::wait_until(
        [&] {
            auto doc = ps_json({"--descendants-of", std::to_string(shell.pid())});
            for (const auto& p : doc["processes"])
                if (p["comm"] == "sleep") sleeper = p["pid"];
            return sleeper != 0;
        },
        5s));
    auto doc = ps_json({"--descendants-of", std::to_string(shell.pid()), "--tree"});
    EXPECT_EQ(find_pid(doc, shell.pid()), nullptr);
    const nlohmann::json* s = find_pid(doc, sleeper);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ((*s)["ppid"], shell.pid());
    EXPECT_EQ((*s)["depth"], 0);
    // Negative control: an unrelated process of ours is not listed.
    TestChild other = start_sleep();
    auto doc2 = ps_json({"--descendants-of", std::to_string(shell.pid())});
    EXPECT_EQ(find_pid(doc2, other.pid()), nullptr);
    EXPECT_NE(find_pid(doc2, sleeper), nullptr);
}

TEST(PsCmd, TreeIndentsChildrenUnderParents) {
    TestChild shell({"/bin/sh", "-c", "/bin/sleep 60 & wait"});
    ASSERT_TRUE(shell.started()) << shell.error();
    nlohmann::json doc;
    ASSERT_TRUE(testing::wait_until(
        [&] {
            doc = ps_json({"--tree", "--pid",
                           std::to_string(::getpid()) + "," + std::to_string(shell.pid())});
            return find_pid(doc, shell.pid()) != nullptr;
        },
        5s));
    const nlohmann::json* me = find_pid(doc, ::getpid());
    const nlohmann::json* sh = find_pid(doc, shell.pid());
    ASSERT_NE(me, nullptr);
    ASSERT_NE(sh, nullptr);
    EXPECT_EQ((*sh)["depth"], (*me)["depth"].get<int>() + 1);
}

TEST(PsCmd, TableFitsColumnsAndPipesAreNotCut) {
    // The shell stays (it has work after the sleep) with a 150-byte argument in its argv.
    TestChild child({"/bin/sh", "-c", "/bin/sleep 60; :", std::string(150, 'x')});
    ASSERT_TRUE(child.started()) << child.error();
    ChildOptions narrow;
    narrow.env = {{"COLUMNS", "60"}};
    CliRun r = run_cli({"ps", "--pid", std::to_string(child.pid())}, narrow);
    ASSERT_EQ(r.status, 0) << r.err;
    // PID is right-aligned to the widest pid (the machine's PIDs may have wrapped to fewer
    // digits than usual).
    const size_t digits = std::to_string(child.pid()).size();
    EXPECT_EQ(r.out.substr(0, r.out.find('\n')).find("PID"), digits > 3 ? digits - 3 : 0) << r.out;
    size_t lines = 0, start = 0;
    for (size_t nl; (nl = r.out.find('\n', start)) != std::string::npos; start = nl + 1) {
        std::string line = r.out.substr(start, nl - start);
        // Count code points: the cut adds a one-column "…".
        size_t cols = 0;
        for (char c : line)
            cols += (static_cast<unsigned char>(c) & 0xc0) != 0x80;
        EXPECT_LE(cols, 60u) << line;
        ++lines;
    }
    EXPECT_EQ(lines, 2u);
    EXPECT_NE(r.out.find("\u2026"), std::string::npos);

    ChildOptions piped;
    piped.unset_env = {"COLUMNS"};
    CliRun full = run_cli({"ps", "--pid", std::to_string(child.pid())}, piped);
    ASSERT_EQ(full.status, 0) << full.err;
    EXPECT_NE(full.out.find("/bin/sh -c /bin/sleep 60; : " + std::string(150, 'x')),
              std::string::npos);
}

TEST(PsCmd, DefaultListsOnlyMcpServers) {
    TestChild sleeper = start_sleep();
    ASSERT_TRUE(sleeper.started()) << sleeper.error();
    auto doc = ps_json({});
    EXPECT_EQ(doc["mode"], "mcp");
    EXPECT_TRUE(doc["servers"].is_array());
    EXPECT_EQ(find_pid(doc, sleeper.pid()), nullptr);
    // Negative control: --all shows it.
    EXPECT_NE(find_pid(ps_json({"--all"}), sleeper.pid()), nullptr);
}

TEST(PsCmd, UnknownPidIsAnError) {
    TestChild gone({"/bin/true"});
    ASSERT_TRUE(gone.started());
    ASSERT_TRUE(gone.wait_exit(5s).has_value());
    CliRun r = run_cli({"ps", "--pid", std::to_string(gone.pid())});
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.err.find("mcpwarden ps: no process " + std::to_string(gone.pid())),
              std::string::npos)
        << r.err;
}

// A negative threshold would call every live session with a journal wedged: a usage error
// (exit 2) that names the option and what it is for. Control: 0 is a threshold and is taken.
TEST(PsCmd, NegativeWedgedAfterIsAUsageError) {
    CliRun bad = run_cli({"ps", "--no-journal", "--wedged-after", "-1"});
    EXPECT_TRUE(WIFEXITED(bad.status) && WEXITSTATUS(bad.status) == 2) << bad.status;
    EXPECT_EQ(bad.err,
              "mcpwarden ps: --wedged-after -1: expected seconds of 0 or more (how long a live "
              "session may go without traffic before it counts as wedged)\n");
    EXPECT_TRUE(bad.out.empty()) << bad.out;
    CliRun zero = run_cli({"ps", "--no-journal", "--wedged-after", "0"});
    EXPECT_EQ(zero.status, 0) << zero.err;
}

}  // namespace
}  // namespace warden
