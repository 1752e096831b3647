// `mcpwarden run --sandbox`: a hostile server (the fixture's "try" tool) attempts what a
// malicious MCP package would, once confined and once with --sandbox off (the negative
// control: every attempt must succeed there, or the confined failures prove nothing).
//
// The server is started as a real one is: `npx --package <tarball> mcpwarden-hostile-fixture`,
// the fixture packed with a Node launcher (tests/e2e/hostile-fixture) into a local tarball
// that npx unpacks into the user's npx store and runs from there (npx → sh → node → the
// native server): no download, and the sandbox must find the package where npx put it.
// Without node and npx the fixture is started directly.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/cli_run.hpp"
#include "common/e2e.hpp"
#include "common/testing.hpp"
#include "journal/query.hpp"

namespace warden::testing {
namespace {

void plant(const std::string& path, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path) << text;
}

// A listening 127.0.0.1 socket on a kernel-chosen port, closed with the object.
struct Listener {
    int fd = -1;
    uint16_t port = 0;
    Listener() {
        fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0 ||
            ::listen(fd, 8) != 0 || ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
            return;
        port = ntohs(a.sin_port);
    }
    ~Listener() {
        if (fd >= 0) ::close(fd);
    }
};

// One user's machine in a directory: planted secrets, a journal of another session, a
// setuid-root copy of id(1) in a directory uid 65534 can enter, a listener the server may
// reach and one it may not, and a process standing for the client (ptrace/signal target).
struct Scene {
    TempDir home, suid;
    Listener allowed, forbidden;
    std::unique_ptr<TestChild> target;
    Scene() {
        plant(home.file(".ssh/id_ed25519"), "-----BEGIN OPENSSH PRIVATE KEY-----\n");
        plant(home.file(".aws/credentials"), "[default]\naws_secret_access_key = x\n");
        plant(home.file(".bashrc"), "# bashrc\n");
        plant(home.file("state/mcpwarden/other.db"), "another session's journal\n");
        std::filesystem::create_directories(home.file("tmp"));
        // No ~/.npm: a user who never ran npx, whose store the relay makes before confining.
        ::chmod(suid.path().c_str(), 0755);
        std::filesystem::copy_file("/usr/bin/id", suid.file("id"));
        ::chmod(suid.file("id").c_str(), 04755);
        target = std::make_unique<TestChild>(std::vector<std::string>{"sleep", "60"});
    }
};

// The fixture as an npm package tarball (package/ inside, as npm packs it), built in `dir`
// from tests/e2e/hostile-fixture and the fixture binary just built. "" when tar fails.
std::string pack_hostile_package(const TempDir& dir) {
    namespace fs = std::filesystem;
    const std::string pkg = dir.file("package");
    fs::create_directories(pkg);
    const std::string src = e2e_dir() + "/hostile-fixture";
    for (const char* f : {"package.json", "bin.cjs"})
        fs::copy_file(src + "/" + f, pkg + "/" + f);
    fs::copy_file(kFixture, pkg + "/mcpwarden-fixture");
    ::chmod((pkg + "/bin.cjs").c_str(), 0755);
    std::string tgz = dir.file("mcpwarden-hostile-fixture-1.0.0.tgz");
    TestChild tar({"tar", "-czf", tgz, "-C", dir.path(), "package"});
    auto st = tar.wait_exit(30s);
    return st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0 ? tgz : "";
}

// How the hostile server is started: through npx from the packed tarball when node and npx
// are here, else the fixture itself.
std::vector<std::string> hostile_server(const TempDir& dir) {
    struct stat st {};
    if (::stat("/usr/bin/node", &st) != 0 || ::stat("/usr/bin/npx", &st) != 0) return {kFixture};
    std::string tgz = pack_hostile_package(dir);
    if (tgz.empty()) {
        ADD_FAILURE() << "cannot pack tests/e2e/hostile-fixture with tar";
        return {kFixture};
    }
    return {"npx", "--yes", "--offline", "--package", tgz, "--", "mcpwarden-hostile-fixture"};
}

struct Attempt {
    std::string name;
    nlohmann::json args;
};

// Runs the fixture through `mcpwarden run FLAGS -- fixture`, makes every attempt, returns
// name → the tool's answer ("ok", "ok: 0", "EACCES", …), plus "exit" and "stderr".
// What `during` is given: the relay's pid (the run), and a way to make one more attempt.
using TryOne = std::function<std::string(const nlohmann::json& args)>;
using During = std::function<void(pid_t relay, const TryOne& try_one)>;

// `during`: called once the attempts are answered, the session still running. `fault`: the
// run's MCPWARDEN_FAULT.
std::map<std::string, std::string> run_attempts(const Scene& s, std::vector<std::string> flags,
                                                const std::vector<Attempt>& attempts,
                                                const std::vector<std::string>& server,
                                                const During& during = {},
                                                const std::string& fault = "") {
    // The sanitizers' options pass too: the filtered environment would otherwise turn on
    // LeakSanitizer in an instrumented fixture, whose ptrace the sandbox refuses.
    std::vector<std::string> argv{kCli,           "run",          "--eof-grace", "200ms",
                                  "--term-grace", "500ms",        "--env-allow", kTagVar,
                                  "--env-allow",  "ASAN_OPTIONS", "--env-allow", "UBSAN_OPTIONS"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.push_back("--");
    argv.insert(argv.end(), server.begin(), server.end());
    ChildOptions o;
    o.capture_stderr = true;
    o.env = {{"HOME", s.home.path()},
             {"XDG_STATE_HOME", s.home.file("state")},
             {"TMPDIR", s.home.file("tmp")}};
    if (!fault.empty()) o.env.emplace_back("MCPWARDEN_FAULT", fault);
    o.unset_env = {"MCPWARDEN_JOURNAL", "MCPWARDEN_SESSION"};
    TestChild c(argv, o);
    std::map<std::string, std::string> out;
    EXPECT_TRUE(c.write_line(rpc_initialize(0)));
    EXPECT_TRUE(read_response(c, 0, 30s));
    int id = 1;
    for (const auto& a : attempts) {
        EXPECT_TRUE(c.write_line(rpc_tools_call(id, "try", a.args)));
        auto r = read_response(c, id, 20s);
        out[a.name] = r ? result_text(*r) : "no answer";
        ++id;
    }
    if (during)
        during(c.pid(), [&](const nlohmann::json& args) {
            EXPECT_TRUE(c.write_line(rpc_tools_call(id, "try", args)));
            auto r = read_response(c, id, 20s);
            ++id;
            return r ? result_text(*r) : std::string("no answer");
        });
    c.close_stdin();
    auto st = c.wait_exit(20s);
    out["exit"] = st && WIFEXITED(*st) ? std::to_string(WEXITSTATUS(*st)) : "?";
    out["stderr"] = c.read_stderr(2s);
    return out;
}

std::vector<Attempt> hostile_attempts(const Scene& s) {
    const std::string h = s.home.path();
    return {
        {"read ssh key", {{"action", "read"}, {"path", h + "/.ssh/id_ed25519"}}},
        {"read aws", {{"action", "read"}, {"path", h + "/.aws/credentials"}}},
        {"write bashrc", {{"action", "write"}, {"path", h + "/.bashrc"}}},
        {"create outside", {{"action", "create"}, {"path", h + "/planted-by-server"}}},
        {"read journal", {{"action", "read"}, {"path", h + "/state/mcpwarden/other.db"}}},
        {"connect forbidden", {{"action", "connect"}, {"port", s.forbidden.port}}},
        {"connect allowed", {{"action", "connect"}, {"port", s.allowed.port}}},
        {"create private tmp", {{"action", "create"}, {"path", "$TMPDIR/scratch"}}},
        {"read system", {{"action", "read"}, {"path", "/etc/hostname"}}},
        {"read shadow", {{"action", "read"}, {"path", "/etc/shadow"}}},
        {"exec setuid", {{"action", "exec-setuid"}, {"path", s.suid.file("id")}}},
        {"ptrace client", {{"action", "ptrace"}, {"pid", s.target->pid()}}},
        {"signal client", {{"action", "kill"}, {"pid", s.target->pid()}}},
    };
}

TEST(SandboxRun, HostileServerIsConfinedByStrictAndUnconfinedWithSandboxOff) {
    Scene s;
    ASSERT_NE(s.allowed.port, 0);
    ASSERT_NE(s.forbidden.port, 0);
    ASSERT_TRUE(s.target->started());
    const bool root = ::geteuid() == 0;
    auto attempts = hostile_attempts(s);
    const std::string allow = std::to_string(s.allowed.port);
    TempDir package;
    const auto server = hostile_server(package);
    const bool via_npx = server.front() == "npx";
    SCOPED_TRACE(via_npx ? "started through npx" : "started directly (no node/npx here)");

    auto confined = run_attempts(s,
                                 {"--sandbox", "strict", "--allow-connect", allow, "--allow-read",
                                  s.suid.path(), "--journal", s.home.file("state/j.db")},
                                 attempts, server);
    SCOPED_TRACE(confined["stderr"]);
    EXPECT_EQ(confined["read ssh key"], "EACCES");
    EXPECT_EQ(confined["read aws"], "EACCES");
    EXPECT_EQ(confined["write bashrc"], "EACCES");
    EXPECT_EQ(confined["create outside"], "EACCES");
    EXPECT_FALSE(std::filesystem::exists(s.home.file("planted-by-server")));
    EXPECT_EQ(confined["read journal"], "EACCES");
    EXPECT_EQ(confined["connect forbidden"], "EACCES");  // Landlock's answer to a TCP port
    EXPECT_EQ(confined["connect allowed"], "ok");
    EXPECT_EQ(confined["create private tmp"], "ok");
    EXPECT_EQ(confined["read system"], "ok");
    EXPECT_EQ(confined["read shadow"], "EACCES");
    if (root) {
        EXPECT_EQ(confined["exec setuid"], "ok: 65534");  // the setuid bit was ignored
    }
    EXPECT_EQ(confined["ptrace client"], "EPERM");
    EXPECT_EQ(confined["signal client"], "EPERM");
    EXPECT_EQ(confined["exit"], "0");
    if (via_npx) {
        // npx unpacked the package into the user's store, which the relay made for it
        // (writable under strict: "npx store"), and ran the server from there.
        EXPECT_TRUE(std::filesystem::exists(s.home.file(".npm/_npx")));
    }
    // The private temporary directory went with the session.
    EXPECT_TRUE(std::filesystem::is_empty(s.home.file("tmp")));

    // session.start says which profile ran and how fully it was enforced.
    nlohmann::json sandbox;
    auto st = journal::for_each_record(s.home.file("state/j.db"), 0, [&](const journal::Record& r) {
        if (r.kind != "session.start") return true;
        auto body = nlohmann::json::parse(r.body, nullptr, false);
        if (body.is_object()) sandbox = body["data"].value("sandbox", nlohmann::json());
        return false;
    });
    ASSERT_TRUE(st.ok()) << st.error().message;
    EXPECT_EQ(sandbox.value("profile", ""), "strict") << sandbox.dump();
    EXPECT_EQ(sandbox.value("level", ""), "full") << sandbox.dump();

    // Negative control: the same server, the same attempts, --sandbox off.
    auto open = run_attempts(s, {"--sandbox", "off", "--no-journal"}, attempts, server);
    SCOPED_TRACE(open["stderr"]);
    for (const auto& a : attempts) {
        if (a.name == "exec setuid") continue;
        if (a.name == "read shadow" && !root) continue;
        EXPECT_EQ(open[a.name].substr(0, 2), "ok") << a.name << ": " << open[a.name];
    }
    if (root) {
        EXPECT_EQ(open["exec setuid"], "ok: 0");  // the setuid bit made it root again
    }
    EXPECT_TRUE(std::filesystem::exists(s.home.file("planted-by-server")));
}

// Closes the run's stdin and waits for it: its exit code (-1: it did not exit) and stderr.
std::pair<int, std::string> close_and_wait(TestChild& c) {
    c.close_stdin();
    auto st = c.wait_exit(20s);
    int code = st && WIFEXITED(*st) ? WEXITSTATUS(*st) : -1;
    return {code, c.read_stderr(2s)};
}

// The negative control of the npx store that the relay makes for a fresh user (the hostile
// server above starts through npx from a home without ~/.npm): with that step switched off,
// npx under strict cannot create its store and the server never starts.
TEST(SandboxRun, NpxOfAFreshUserFailsUnderStrictWithoutItsStoreMadeFirst) {
    TempDir package, home;
    const auto server = hostile_server(package);
    if (server.front() != "npx") GTEST_SKIP() << "no node/npx here";
    std::vector<std::string> argv{kCli, "run", "--no-journal", "--sandbox", "strict", "--"};
    argv.insert(argv.end(), server.begin(), server.end());
    ChildOptions o;
    o.capture_stderr = true;
    o.env = {{"HOME", home.path()}, {"TMPDIR", home.path()}, {"MCPWARDEN_FAULT", "runner_store"}};
    o.unset_env = {"MCPWARDEN_JOURNAL", "MCPWARDEN_SESSION"};
    TestChild c(argv, o);
    EXPECT_TRUE(c.write_line(rpc_initialize(0)));
    // The initialize is answered only by mcpwarden's error saying the server died.
    auto r = read_response(c, 0, 30s);
    EXPECT_TRUE(!r || r->contains("error")) << "the server started without its store";
    auto [code, err] = close_and_wait(c);
    EXPECT_GT(code, 0) << err;
    EXPECT_NE(err.find("EACCES"), std::string::npos) << err;
    EXPECT_NE(err.find(home.file(".npm")), std::string::npos) << err;
    EXPECT_FALSE(std::filesystem::exists(home.file(".npm")));
}

// What a run left in its temporary directory: the names of the private directories.
std::vector<std::string> private_tmps_in(const std::string& dir) {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec))
        if (e.path().filename().string().rfind("mcpwarden-", 0) == 0)
            out.push_back(e.path().filename().string());
    return out;
}

// The keeper (the relay's one child but its run's background worker, mcpwarden-sweep) and the
// server (the keeper's first child) of a run whose server has answered; 0 where there is none.
std::pair<pid_t, pid_t> keeper_and_server(pid_t relay) {
    std::vector<pid_t> keepers;
    for (pid_t c : children_of(relay))
        if (auto st = read_stat(c); st && st->comm != "mcpwarden-sweep") keepers.push_back(c);
    if (keepers.size() != 1) return {0, 0};
    auto servers = children_of(keepers[0]);
    return {keepers[0], servers.empty() ? 0 : servers[0]};
}

// The relay adds the plan's path rules after forking the keeper, while the keeper sets up
// the containment, and the keeper starts the server only on its "sandbox-ready". Confined
// that way, the server answers, and its private directory is gone with the session.
// For that time the keeper may run on every CPU but the relay's (so that the two do not
// share one); it takes back the relay's whole set on "sandbox-ready", so the keeper and the
// server end with exactly the CPUs the relay has. Negative control: with
// MCPWARDEN_FAULT=keeper_cpus_kept the keeper keeps the smaller set and the server inherits
// it: one CPU fewer (where the run may use two or more; on one CPU nothing is moved).
// Negative control: MCPWARDEN_FAULT=sandbox_ready_early says "sandbox-ready" before the
// rules are in: the server's execve meets a ruleset without them (EACCES, exit 126), which
// is what the wait prevents (and shows that such a race fails closed). A plan that cannot be
// completed after the fork (its private directory cannot be made) ends the run with 125
// before any server, and the keeper leaves no process and no cgroup behind.
TEST(SandboxRun, ServerStartsOnlyOnceThePlanIsComplete) {
    TempDir home;
    std::filesystem::create_directories(home.file("tmp"));
    ChildOptions o;
    o.capture_stderr = true;
    o.env = {{"HOME", home.path()}, {"TMPDIR", home.file("tmp")}};
    o.unset_env = {"MCPWARDEN_JOURNAL", "MCPWARDEN_SESSION", "MCPWARDEN_FAULT"};
    // The CPUs of each process of a confined run while its server runs, and whether it
    // ended well and left its private directory behind. The sanitizers' options pass, as in
    // run_attempts (an instrumented fixture would otherwise start LeakSanitizer, whose ptrace
    // the sandbox refuses).
    struct Cpus {
        std::string relay, keeper, server;
    };
    auto confined_run = [&](const char* fault) {
        ChildOptions co = o;
        if (*fault) co.env.push_back({"MCPWARDEN_FAULT", fault});
        TestChild c({kCli, "run", "--no-journal", "--sandbox", "strict", "--env-allow",
                     "ASAN_OPTIONS", "--env-allow", "UBSAN_OPTIONS", "--", kFixture},
                    co);
        Cpus cpus;
        EXPECT_TRUE(c.write_line(rpc_initialize(0)));
        EXPECT_TRUE(read_response(c, 0, 30s));
        auto [keeper, server] = keeper_and_server(c.pid());
        EXPECT_GT(server, 0);
        if (server > 0) cpus = {cpus_allowed(c.pid()), cpus_allowed(keeper), cpus_allowed(server)};
        auto [code, err] = close_and_wait(c);
        EXPECT_EQ(code, 0) << fault << " " << err;
        EXPECT_TRUE(private_tmps_in(home.file("tmp")).empty()) << fault;
        return cpus;
    };
    Cpus cpus = confined_run("");
    EXPECT_FALSE(cpus.relay.empty());
    EXPECT_EQ(cpus.keeper, cpus.relay);
    EXPECT_EQ(cpus.server, cpus.relay);
    cpu_set_t ours;
    CPU_ZERO(&ours);
    if (::sched_getaffinity(0, sizeof ours, &ours) == 0 && CPU_COUNT(&ours) > 1) {
        Cpus kept = confined_run("keeper_cpus_kept");
        EXPECT_FALSE(kept.server.empty());
        EXPECT_NE(kept.server, kept.relay);
        EXPECT_EQ(kept.server, kept.keeper);
    }

    auto early =
        run_cli(home, {"run", "--no-journal", "--sandbox", "strict", "--", kFixture}, 30s,
                {{"TMPDIR", home.file("tmp")}, {"MCPWARDEN_FAULT", "sandbox_ready_early"}});
    EXPECT_EQ(early.code, 126) << early.err;
    EXPECT_NE(early.err.find("cannot run '" + std::string(kFixture) + "': Permission denied"),
              std::string::npos)
        << early.err;
    EXPECT_TRUE(private_tmps_in(home.file("tmp")).empty());

    auto failed = run_cli(home, {"run", "--no-journal", "--sandbox", "strict", "--", kFixture}, 30s,
                          {{"TMPDIR", home.file("missing")}});
    EXPECT_EQ(failed.code, 125) << failed.err;
    EXPECT_NE(failed.err.find("--sandbox strict: mkdir(" + home.file("missing") + "/mcpwarden-"),
              std::string::npos)
        << failed.err;
    EXPECT_NE(failed.err.find("No such file or directory"), std::string::npos) << failed.err;
    EXPECT_TRUE(failed.left_after.empty());
    if (failed.cgroup_checked) {
        EXPECT_TRUE(failed.cgroups_left.empty()) << cgroups_left_text(failed);
    }
}

TEST(SandboxRun, RequireSandboxRefusesWhatCannotBeEnforcedAndExplainSaysWhy) {
    TempDir home;
    ChildOptions o;
    o.capture_stderr = true;
    o.env = {{"HOME", home.path()}, {"TMPDIR", home.path()}};
    o.unset_env = {"MCPWARDEN_JOURNAL", "MCPWARDEN_SESSION"};
    // A kernel without Landlock is simulated by the sandbox's own fault hook: every rule is
    // then "not enforced", which --require-sandbox must refuse (125) and plain --sandbox
    // must say on stderr while it starts anyway.
    o.env.push_back({"MCPWARDEN_FAULT", "landlock"});
    {
        TestChild c({kCli, "run", "--no-journal", "--sandbox", "strict", "--require-sandbox", "--",
                     kFixture},
                    o);
        auto [code, err] = close_and_wait(c);
        EXPECT_EQ(code, 125);
        EXPECT_NE(err.find("--require-sandbox"), std::string::npos) << err;
        EXPECT_NE(err.find("not enforced: files"), std::string::npos) << err;
    }
    {
        // --net any: without Landlock's port rules the loopback policy refuses INET sockets
        // outright, and the fixture's port holder needs one.
        TestChild c({kCli, "run", "--no-journal", "--explain", "--sandbox", "strict", "--net",
                     "any", "--", kFixture},
                    o);
        ASSERT_TRUE(c.write_line(rpc_initialize(0)));
        ASSERT_TRUE(read_response(c, 0, 30s));
        c.close_stdin();
        ASSERT_TRUE(c.wait_exit(20s));
        std::string err = c.read_stderr(2s);
        EXPECT_NE(err.find("only partly enforced"), std::string::npos) << err;
        EXPECT_NE(err.find("NOT ENFORCED: files"), std::string::npos) << err;
        EXPECT_NE(err.find("[seccomp]"), std::string::npos) << err;
    }
    // Bad input names the option and the value.
    TestChild bad({kCli, "run", "--sandbox", "tight", "--", kFixture}, o);
    bad.close_stdin();
    auto st = bad.wait_exit(20s);
    ASSERT_TRUE(st && WIFEXITED(*st));
    EXPECT_EQ(WEXITSTATUS(*st), 2);
    EXPECT_NE(
        bad.read_stderr(2s).find("--sandbox: cannot parse 'tight' as off, strict or workspace"),
        std::string::npos);
}

}  // namespace
}  // namespace warden::testing

namespace warden::testing {
namespace {

// The journal's sandbox.denied records, oldest first, and whether one came after a
// session.end.
struct DeniedRecords {
    std::vector<nlohmann::json> records;
    bool after_end = false;
};

DeniedRecords denied_records(const std::string& journal) {
    DeniedRecords out;
    bool ended = false;
    auto st = journal::for_each_record(journal, 0, [&](const journal::Record& r) {
        if (r.kind == "sandbox.denied") {
            auto body = nlohmann::json::parse(r.body, nullptr, false);
            out.records.push_back(body.is_object() ? body["data"] : nlohmann::json());
            out.after_end = out.after_end || ended;
        }
        ended = ended || r.kind == "session.end";
        return true;
    });
    EXPECT_TRUE(st.ok()) << st.error().message;
    return out;
}

// What a user sees while the session runs: `status --json`'s sandbox_denied of its one
// session, once it counts `want` (bounded: the record is paced at one a second).
nlohmann::json status_denied(const Scene& s, const std::string& journal, int64_t want) {
    nlohmann::json last;
    for (int i = 0; i < 50; ++i) {
        auto r = run_cli(s.home, {"status", "--json", "--journal", journal}, 20s);
        auto j = nlohmann::json::parse(r.out, nullptr, false);
        if (j.is_object() && j["sessions"].is_array() && j["sessions"].size() == 1) {
            last = j["sessions"][0].value("sandbox_denied", nlohmann::json());
            if (last.is_object() && last.value("total", int64_t{0}) >= want) return last;
        }
        std::this_thread::sleep_for(100ms);
    }
    return last;
}

// /proc/RELAY/fd/N of the relay's seccomp listener, or "" when it holds none.
std::string listener_of(pid_t relay) {
    const std::string dir = "/proc/" + std::to_string(relay) + "/fd";
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
        auto target = std::filesystem::read_symlink(e.path(), ec);
        if (!ec && target.string() == "anon_inode:seccomp notify") return e.path().string();
    }
    return "";
}

std::vector<Attempt> refused_call_attempts(const Scene& s) {
    return {
        {"udp", {{"action", "udp"}}},
        {"netlink", {{"action", "netlink"}}},
        {"keyctl", {{"action", "keyctl"}}},
        {"ptrace client", {{"action", "ptrace"}, {"pid", s.target->pid()}}},
        {"read ssh key", {{"action", "read"}, {"path", s.home.file(".ssh/id_ed25519")}}},
        {"read system", {{"action", "read"}, {"path", "/etc/hostname"}}},
        {"connect allowed", {{"action", "connect"}, {"port", s.allowed.port}}},
    };
}

// What the filter refuses a confined server is counted per session: on record
// (sandbox.denied, before session.end) and in `mcpwarden status` while it runs, with the
// same errno the server would get uncounted. Landlock's denials (the key read) are not
// counted: the kernel tells no one but audit (docs/SANDBOX.md).
TEST(SandboxRun, RefusedCallsAreCountedPerSessionAndShownByStatus) {
    Scene s;
    ASSERT_TRUE(s.target->started());
    const std::string journal = s.home.file("state/j.db");
    const std::vector<std::string> flags{"--sandbox",       "strict",
                                         "--allow-connect", std::to_string(s.allowed.port),
                                         "--journal",       journal};
    nlohmann::json live;
    std::string table;
    std::string listener, reach, reach_unconfined;
    auto counted = run_attempts(
        s, flags, refused_call_attempts(s), {kFixture}, [&](pid_t relay, const TryOne& try_one) {
            live = status_denied(s, journal, 4);
            table = run_cli(s.home, {"status", "--journal", journal}, 20s).out;
            // The listener, in the relay alone, is beyond the server's reach through /proc
            // (docs/SANDBOX.md, "Denials counted"): Landlock refuses the server the relay's fd
            // table (EACCES); the test, unconfined, gets past that check to the kernel's own
            // refusal to reopen an anonymous inode (ENXIO).
            listener = listener_of(relay);
            if (listener.empty()) return;
            reach = try_one({{"action", "read"}, {"path", listener}});
            int fd = ::open(listener.c_str(), O_RDONLY | O_CLOEXEC);
            reach_unconfined = fd >= 0 ? "ok" : ::strerrorname_np(errno);
            if (fd >= 0) ::close(fd);
        });
    SCOPED_TRACE(counted["stderr"]);
    EXPECT_EQ(counted["udp"], "EACCES");
    EXPECT_EQ(counted["netlink"], "EAFNOSUPPORT");
    EXPECT_EQ(counted["keyctl"], "EPERM");
    EXPECT_EQ(counted["ptrace client"], "EPERM");
    EXPECT_EQ(counted["read ssh key"], "EACCES");
    EXPECT_EQ(counted["read system"], "ok");
    EXPECT_EQ(counted["connect allowed"], "ok");
    EXPECT_EQ(counted["exit"], "0");
    // While it ran: status counted the four refused calls, by call.
    ASSERT_TRUE(live.is_object()) << live.dump();
    EXPECT_EQ(live.value("total", 0), 4) << live.dump();
    EXPECT_EQ(live["by_call"].value("socket", 0), 2) << live.dump();
    EXPECT_EQ(live["by_call"].value("keyctl", 0), 1) << live.dump();
    EXPECT_EQ(live["by_call"].value("ptrace", 0), 1) << live.dump();
    EXPECT_NE(table.find("): 4 calls refused (socket 2, keyctl 1, ptrace 1)"), std::string::npos)
        << table;
    ASSERT_FALSE(listener.empty()) << "no seccomp listener in the relay";
    EXPECT_EQ(reach, "EACCES") << listener;
    EXPECT_EQ(reach_unconfined, "ENXIO") << listener;
    // On record: the newest sandbox.denied has the whole count, the calls named, and the
    // session's end comes after it.
    auto rec = denied_records(journal);
    ASSERT_FALSE(rec.records.empty());
    const nlohmann::json& last = rec.records.back();
    EXPECT_EQ(last.value("total", 0), 4) << last.dump();
    const std::string first = last["first"].dump();
    EXPECT_NE(first.find("socket(AF_INET, SOCK_DGRAM)"), std::string::npos) << first;
    EXPECT_NE(first.find("socket(AF_NETLINK, SOCK_RAW)"), std::string::npos) << first;
    EXPECT_NE(first.find("keyctl"), std::string::npos) << first;
    EXPECT_FALSE(rec.after_end);

    // Negative control: the plan's filter answering by errno itself (as on a kernel without
    // user notification): the same errnos, and nothing counted anywhere.
    const std::string journal2 = s.home.file("state/j2.db");
    std::vector<std::string> flags2 = flags;
    flags2.back() = journal2;
    nlohmann::json live2 = "not asked";
    auto uncounted = run_attempts(
        s, flags2, refused_call_attempts(s), {kFixture},
        [&](pid_t relay, const TryOne&) {
            EXPECT_EQ(listener_of(relay), "");  // uncounted: the relay holds no listener
            auto r = run_cli(s.home, {"status", "--json", "--journal", journal2}, 20s);
            auto j = nlohmann::json::parse(r.out, nullptr, false);
            if (j.is_object() && j["sessions"].is_array() && j["sessions"].size() == 1)
                live2 = j["sessions"][0].value("sandbox_denied", nlohmann::json());
        },
        "denials_uncounted");
    for (const char* a : {"udp", "netlink", "keyctl", "ptrace client", "read ssh key",
                          "read system", "connect allowed"})
        EXPECT_EQ(uncounted[a], counted[a]) << a;
    EXPECT_TRUE(live2.is_null()) << live2.dump();
    EXPECT_TRUE(denied_records(journal2).records.empty());
}

// A supervisor gone opens nothing: with the counter's listener closed as it arrives (as a
// relay that crashed leaves it), every refused call is still refused (ENOSYS, the kernel's
// answer without a listener) and every allowed one still runs. The negative control is the
// same server unconfined, where each refused call succeeds.
TEST(SandboxRun, RefusedCallsStayRefusedWhenTheCounterIsGone) {
    Scene s;
    ASSERT_TRUE(s.target->started());
    const auto attempts = refused_call_attempts(s);
    auto gone =
        run_attempts(s,
                     {"--sandbox", "strict", "--allow-connect", std::to_string(s.allowed.port),
                      "--journal", s.home.file("state/j.db")},
                     attempts, {kFixture}, {}, "denials_supervisor_gone");
    SCOPED_TRACE(gone["stderr"]);
    for (const char* a : {"udp", "netlink", "keyctl", "ptrace client"})
        EXPECT_EQ(gone[a], "ENOSYS") << a;
    EXPECT_EQ(gone["read ssh key"], "EACCES");
    EXPECT_EQ(gone["read system"], "ok");
    EXPECT_EQ(gone["connect allowed"], "ok");
    EXPECT_EQ(gone["exit"], "0");
    EXPECT_TRUE(denied_records(s.home.file("state/j.db")).records.empty());

    auto open = run_attempts(s, {"--sandbox", "off", "--no-journal"}, attempts, {kFixture});
    SCOPED_TRACE(open["stderr"]);
    for (const char* a : {"udp", "netlink", "keyctl", "ptrace client", "read ssh key"})
        EXPECT_EQ(open[a], "ok") << a;
}

}  // namespace
}  // namespace warden::testing
