// Reported faults, reproduced: a destructive decision only on proof, nothing hostile steers or
// crashes it. Each guard here comes with its negative control (the old rule, or the guard switched
// off, gives the bad outcome).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "reap/reap.hpp"
#include "reap_test_util.hpp"

namespace warden::testing {
namespace {

using json = nlohmann::json;

json parse_doc(const std::string& s) {
    return json::parse(s, nullptr, false);
}

bool every_gone(const std::vector<std::pair<pid_t, uint64_t>>& procs) {
    return std::none_of(procs.begin(), procs.end(),
                        [](auto p) { return is_same_live_process(p.first, p.second); });
}

bool every_alive(const std::vector<std::pair<pid_t, uint64_t>>& procs) {
    return !procs.empty() && std::all_of(procs.begin(), procs.end(), [](auto p) {
        return is_same_live_process(p.first, p.second);
    });
}

// Every pid listed in a reap plan, planned or refused.
std::vector<pid_t> plan_pids(const json& doc) {
    std::vector<pid_t> out;
    for (const char* part : {"trees", "refused"})
        if (doc["plan"].contains(part))
            for (const auto& t : doc["plan"][part]) {
                if (t.contains("root")) out.push_back(t["root"]["pid"].get<pid_t>());
                if (t.contains("pid")) out.push_back(t["pid"].get<pid_t>());
            }
    return out;
}

// A process whose command line is a little over 1 MiB (nine 120 KB arguments: one argument
// may be at most 128 KiB), "T" at the start of the first, "Q" at the end of the last.
TEST(ReapMatch, MegabyteCommandLineIsMatchedWithoutCrashing) {
    std::vector<std::string> argv{"/bin/sh", "-c", "sleep 60; true", "sh"};
    for (int i = 0; i < 9; ++i)
        argv.push_back(std::string(i == 0 ? "T" : "") + std::string(120000, 'a') +
                       std::string(i == 8 ? "Q" : ""));
    TestChild big(argv);
    ASSERT_TRUE(big.started()) << big.error();
    ASSERT_TRUE(wait_until(
        [&] {
            return read_file("/proc/" + std::to_string(big.pid()) + "/cmdline")
                       .value_or("")
                       .size() > (1u << 20);
        },
        5s));
    CliEnv env;
    // It is the test's own child, with the test on its stdin: planned, then refused as live.
    // Either way it is listed only when --match matched its command line.
    const std::string pid = std::to_string(big.pid());
    CliRun hit = env.run({"reap", "--pid", pid, "--match", "T.*Q", "--dry-run", "--json"});
    ASSERT_EQ(hit.exit_code(), 0) << "status " << hit.status << ": " << hit.err;
    json doc = parse_doc(hit.out);
    ASSERT_FALSE(doc.is_discarded()) << hit.out.substr(0, 400);
    EXPECT_EQ(plan_pids(doc), std::vector<pid_t>{big.pid()}) << doc["plan"].dump().substr(0, 400);

    CliRun miss = env.run({"reap", "--pid", pid, "--match", "T.*Z", "--dry-run", "--json"});
    ASSERT_EQ(miss.exit_code(), 0) << "status " << miss.status << ": " << miss.err;
    json none = parse_doc(miss.out);
    ASSERT_FALSE(none.is_discarded());
    EXPECT_TRUE(plan_pids(none).empty()) << none["plan"].dump().substr(0, 400);

    // What std::regex could not compile either way is refused up front, with RE2's reason.
    CliRun bad = env.run({"reap", "--pid", pid, "--match", "(a)\\1", "--dry-run"});
    EXPECT_EQ(bad.exit_code(), 2) << bad.err;
    EXPECT_NE(bad.err.find("--match '(a)\\1': not a regular expression: invalid escape sequence"),
              std::string::npos)
        << bad.err;
}

// ---- Liveness looks at both pipes; a name alone is a suspect -------------------------------

// A live pipeline: `echo y | bash -c 'exec -a npx … TAG' | cat >log`. The "npx"
// (argv[0] renamed, an MCP-looking runner with pipes on both ends: a heuristic) has lost its
// stdin writer (echo is done) while `cat` still reads its stdout. It is live: not selected
// even with --include-suspects. Negative control: once the cat is gone, the same command
// selects it, and only as a suspect that --orphans alone refuses with the reason.
TEST(ReapTrust, ServerWhoseOutputIsStillReadIsLiveAndANameAloneIsOnlyASuspect) {
    const std::string tag = unique_tag();
    TempDir dir;
    ChildOptions o;
    o.tag = tag;
    TestChild pipeline({"/bin/sh", "-c",
                        "echo y | bash -c 'exec -a npx perl -e \"sleep 300\" \"$0\"' \"$1\" | "
                        "cat >\"$2\"; true",
                        "sh", tag, dir.file("log")},
                       o);
    ASSERT_TRUE(pipeline.started()) << pipeline.error();
    pid_t npx = 0, cat = 0;
    ASSERT_TRUE(wait_until(
        [&] {
            for (pid_t p : descendants_of(pipeline.pid())) {
                auto st = read_stat(p);
                if (!st) continue;
                if (st->comm == "perl") npx = p;
                if (st->comm == "cat") cat = p;
            }
            // echo has finished: the npx's stdin has no writer left.
            return npx && cat && children_of(pipeline.pid()).size() == 2;
        },
        10s));
    CliEnv env;
    auto plan_of = [&](std::vector<std::string> extra) {
        std::vector<std::string> args{"reap", "--orphans", "--match", tag, "--dry-run", "--json"};
        args.insert(args.end(), extra.begin(), extra.end());
        CliRun r = env.run(args);
        EXPECT_EQ(r.exit_code(), 0) << r.err << r.out;
        return parse_doc(r.out);
    };
    json live = plan_of({"--include-suspects"});
    ASSERT_FALSE(live.is_discarded());
    EXPECT_TRUE(plan_pids(live).empty())
        << "a server whose stdout cat reads was selected: " << live["plan"].dump(1);
    CliRun ps = env.run({"ps", "--json"});
    json psdoc = parse_doc(ps.out);
    bool shown_live = false;
    for (const auto& t : psdoc["servers"])
        if (t["server"]["pid"] == npx) {
            shown_live = t["state"] == "live";
            EXPECT_NE(t["client"]["how"].get<std::string>().find("read end"), std::string::npos)
                << t.dump(1);
            EXPECT_EQ(t["client"]["pid"], cat) << t.dump(1);
        }
    EXPECT_TRUE(shown_live) << "ps does not show the npx live: " << ps.out.substr(0, 2000);

    // Negative control: the reader gone, it is an orphan; a name is all that says MCP.
    ASSERT_EQ(::kill(cat, SIGKILL), 0);
    ASSERT_TRUE(wait_until([&] { return children_of(pipeline.pid()).size() == 1; }, 5s));
    json refused = plan_of({});
    ASSERT_FALSE(refused.is_discarded());
    EXPECT_TRUE(refused["plan"]["trees"].empty()) << refused["plan"].dump(1);
    ASSERT_EQ(refused["plan"]["refused"].size(), 1u) << refused["plan"].dump(1);
    const std::string why = refused["plan"]["refused"][0]["why"];
    EXPECT_EQ(why.rfind("suspect: only a name heuristic", 0), 0u) << why;
    EXPECT_NE(why.find("--include-suspects"), std::string::npos) << why;

    json suspect = plan_of({"--include-suspects"});
    ASSERT_EQ(suspect["plan"]["trees"].size(), 1u) << suspect["plan"].dump(1);
    const json& t = suspect["plan"]["trees"][0];
    EXPECT_EQ(t["root"]["pid"], npx);
    EXPECT_EQ(t["selected_as"], "suspect");
    EXPECT_NE(t["reasons"].dump().find("selected by --include-suspects"), std::string::npos)
        << t.dump(1);
}

// ---- Markers: only the session owner's, printed escaped ---------------------------------

// Runs `argv` as the unprivileged test user (scripts/deps.sh creates it), its stdin on a pipe
// the test holds (a live writer) and MCPWARDEN_SESSION=marker in its environment.
std::optional<TestChild> as_other_user(const std::string& tag, const std::string& marker) {
    if (::geteuid() != 0 || ::access("/usr/bin/setpriv", X_OK) != 0) return std::nullopt;
    auto uid = read_file("/etc/passwd");
    if (!uid || uid->find("\nmcpwarden-test:") == std::string::npos) return std::nullopt;
    ChildOptions o;
    o.tag = tag;
    o.env = {{"MCPWARDEN_SESSION", marker}};
    return std::optional<TestChild>(
        std::in_place,
        std::vector<std::string>{"/usr/bin/setpriv", "--reuid", "mcpwarden-test", "--regid",
                                 "mcpwarden-test", "--clear-groups", "/bin/sleep", "300"},
        o);
}

// Root's session remnant (a pair whose client crashed, carrying MCPWARDEN_SESSION=ID) and
// another user's process planting the same id with a live stdin writer. `reap --session ID`
// reaps root's remnant; the planted process neither blocks it nor is counted in the plan,
// and survives. Negative control: the same planted process under root's own uid joins the
// session (it is counted, and its live writer makes the reap refuse), as before.
TEST(ReapTrust, AnotherUsersPlantedMarkerNeitherBlocksNorJoinsTheSession) {
    const std::string tag = unique_tag();
    const std::string session = "trust" + std::to_string(::getpid()) + tag.substr(tag.size() - 6);
    auto planted = as_other_user(tag, session);
    if (!planted) GTEST_SKIP() << "needs root and the user mcpwarden-test (scripts/deps.sh)";
    ASSERT_TRUE(planted->started()) << planted->error();
    FakeClient remnant(1, tag, pair_argv(tag), {"MCPWARDEN_SESSION=" + session});
    ASSERT_TRUE(remnant.ready());
    auto leaked = remnant.members();
    remnant.kill();
    pid_t foreign = 0;
    ASSERT_TRUE(wait_until(
        [&] {
            auto st = read_stat(planted->pid());
            foreign = planted->pid();
            return st && st->comm == "sleep";
        },
        5s));

    CliEnv env;
    CliRun dry = env.run({"reap", "--session", session, "--dry-run", "--json"});
    json plan = parse_doc(dry.out);
    ASSERT_FALSE(plan.is_discarded()) << dry.err;
    EXPECT_TRUE(plan["plan"]["refused"].empty()) << plan["plan"].dump(1);
    ASSERT_EQ(plan["plan"]["trees"].size(), 1u) << plan["plan"].dump(1);
    for (const auto& m : plan["plan"]["trees"][0]["members"])
        EXPECT_NE(m["pid"], foreign) << "another user's process is counted in root's plan";

    CliRun r = env.run({"reap", "--session", session, "--yes", "--json", "--grace", "1s"});
    ASSERT_EQ(r.exit_code(), 0) << r.err << r.out;
    EXPECT_TRUE(every_gone(leaked)) << r.out;
    EXPECT_TRUE(is_live(foreign)) << "another user's process was signalled";

    // Negative control: a process of root's own uid with the marker and a live writer.
    ChildOptions o;
    o.tag = tag;
    o.env = {{"MCPWARDEN_SESSION", session}};
    TestChild own({"/bin/sleep", "300"}, o);
    ASSERT_TRUE(own.started());
    FakeClient again(1, tag, pair_argv(tag), {"MCPWARDEN_SESSION=" + session});
    ASSERT_TRUE(again.ready());
    again.kill();
    CliRun blocked = env.run({"reap", "--session", session, "--dry-run", "--json"});
    json b = parse_doc(blocked.out);
    ASSERT_FALSE(b.is_discarded()) << blocked.err;
    EXPECT_TRUE(b["plan"]["trees"].empty()) << b["plan"].dump(1);
    ASSERT_EQ(b["plan"]["refused"].size(), 1u) << b["plan"].dump(1);
    EXPECT_EQ(b["plan"]["refused"][0]["why"].get<std::string>().rfind("live:", 0), 0u);
}

// A marker value with ESC and CR is printed escaped by inspect (text and JSON) and is not a
// session: it names no journal session or cgroup, so no SESSION column shows it.
TEST(ReapTrust, HostileMarkerIsPrintedEscapedAndIsNoSession) {
    const std::string tag = unique_tag();
    const std::string marker = "x\x1b]0;pwned\x07\rFAKE\xe2\x80\xae";
    ChildOptions o;
    o.tag = tag;
    o.env = {{"MCPWARDEN_SESSION", marker}};
    TestChild p({"/bin/sleep", "300"}, o);
    ASSERT_TRUE(p.started());
    ASSERT_TRUE(
        wait_until([&] { return read_stat(p.pid()) && read_stat(p.pid())->comm == "sleep"; }, 5s));
    CliEnv env;
    CliRun text = env.run({"inspect", std::to_string(p.pid())});
    ASSERT_EQ(text.exit_code(), 0) << text.err;
    for (char c : {'\x1b', '\x07', '\r'})
        EXPECT_EQ(text.out.find(c), std::string::npos) << "raw control byte in: " << text.out;
    EXPECT_EQ(text.out.find("\xe2\x80\xae"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("x\\x1b]0;pwned\\x07\\x0dFAKE\\u{202e}"), std::string::npos)
        << text.out;
    CliRun js = env.run({"inspect", std::to_string(p.pid()), "--json"});
    ASSERT_EQ(js.exit_code(), 0) << js.err;
    json doc = parse_doc(js.out);
    ASSERT_FALSE(doc.is_discarded()) << js.out;
    EXPECT_EQ(doc["session"], "x\\x1b]0;pwned\\x07\\x0dFAKE\\u{202e}");
    EXPECT_TRUE(doc["evidence"].empty()) << "an invalid marker is no session marker evidence";
}

// ---- The reported leak, unwrapped: proof from the client's config ------------------------

// Declares `name` in the Cursor config of the CLI's HOME.
void declare_server(const CliEnv& env, const std::string& name, const std::string& command,
                    const std::vector<std::string>& args) {
    ::mkdir(env.dir.file(".cursor").c_str(), 0700);
    json cfg = {{"mcpServers", {{name, {{"command", command}, {"args", args}}}}}};
    std::ofstream(env.dir.file(".cursor/mcp.json")) << cfg.dump(2);
}

// server.py: starts a helper (stdin /dev/null) and never reads its stdin, so it outlives its
// client, as the leaking servers of the report did.
std::string write_server_py(const TempDir& dir) {
    std::string path = dir.file("server.py");
    std::ofstream(path) << "import subprocess, sys, time\n"
                           "subprocess.Popen([sys.executable, '-c', 'import time; "
                           "time.sleep(300)', 'helper'], stdin=subprocess.DEVNULL)\n"
                           "time.sleep(300)\n";
    return path;
}

// Whether wrapper `w` has its server and the server its helper.
bool python_pair_ready(pid_t w) {
    return descendants_of(w).size() >= 2;
}

// A client that was never wrapped starts `sh -c 'python3 server.py'` pairs (the server and a
// helper, stdio on pipes to the client) and is SIGKILLed on five restarts, while one pair
// stays attached to a live client; beside them, a decoy with the same argv whose stdout a
// live `cat` reads. The client's config declares `sh -c "python3 server.py TAG"`: the pairs
// match it once normalised (shell wrapper peeled, interpreter + script). `ps --orphans`
// lists the five dead pairs with their config evidence and nothing else; `reap --orphans
// --yes` removes all fifteen processes and leaves the live pair and the decoy. Negative
// control: without the config, the very same pairs are not found at all (the miss).
TEST(ReapTrust, UnwrappedClientRestartsLeaveSixPairsFiveAreReapedOnConfigEvidence) {
    const std::string tag = unique_tag();
    CliEnv env;
    const std::string server = write_server_py(env.dir);
    const std::vector<std::string> argv{"/bin/sh", "-c", "/usr/bin/python3 \"$0\" \"$1\"; true",
                                        server, tag};
    std::vector<std::unique_ptr<FakeClient>> clients;
    for (int i = 0; i < 6; ++i)
        clients.push_back(std::make_unique<FakeClient>(1, tag, argv));
    ChildOptions o;
    o.tag = tag;
    TestChild decoy({"/bin/sh", "-c", "\"$@\" </dev/null | cat >/dev/null; true", "decoy", argv[0],
                     argv[1], argv[2], argv[3], argv[4]},
                    o);
    ASSERT_TRUE(decoy.started());
    pid_t decoy_sh = 0;
    ASSERT_TRUE(wait_until(
        [&] {
            for (auto& c : clients)
                if (c->wrappers().empty() || !python_pair_ready(c->wrappers().front()))
                    return false;
            for (pid_t k : children_of(decoy.pid()))
                if (auto st = read_stat(k); st && st->comm == "sh" && python_pair_ready(k))
                    decoy_sh = k;
            return decoy_sh != 0;
        },
        15s));
    std::vector<std::pair<pid_t, uint64_t>> leaked;
    std::set<pid_t> dead_wrappers;
    for (int i = 0; i < 5; ++i) {
        for (auto m : clients[i]->members())
            leaked.push_back(m);
        dead_wrappers.insert(clients[i]->wrappers().front());
        clients[i]->kill();
    }
    ASSERT_EQ(leaked.size(), 15u) << "5 x (sh, server.py, helper)";
    auto live_pair = identities_below(clients[5]->wrappers().front());
    auto decoy_pair = identities_below(decoy_sh);

    // The miss: nothing names them MCP without the config.
    CliRun missed = env.run({"ps", "--orphans", "--json"});
    json before = parse_doc(missed.out);
    ASSERT_FALSE(before.is_discarded()) << missed.err;
    for (const auto& t : before["servers"])
        EXPECT_FALSE(dead_wrappers.count(t["root"]["pid"].get<pid_t>())) << t.dump(1);

    declare_server(env, "leaky", "sh", {"-c", "python3 server.py " + tag});
    CliRun ps = env.run({"ps", "--orphans", "--json"});
    json doc = parse_doc(ps.out);
    ASSERT_FALSE(doc.is_discarded()) << ps.err;
    std::set<pid_t> listed;
    for (const auto& t : doc["servers"]) {
        pid_t root = t["root"]["pid"];
        if (!dead_wrappers.count(root)) continue;  // another test's, or none of these
        listed.insert(root);
        EXPECT_EQ(t["state"], "logical-orphan") << t.dump(1);
        EXPECT_TRUE(t["proven"].get<bool>()) << t.dump(1);
        EXPECT_EQ(t["members"].size(), 3u) << t.dump(1);
        EXPECT_NE(t["evidence"].dump().find("\"kind\":\"config\""), std::string::npos) << t.dump(1);
        EXPECT_NE(t["evidence"].dump().find("[leaky]"), std::string::npos) << t.dump(1);
    }
    EXPECT_EQ(listed, dead_wrappers) << ps.out.substr(0, 3000);
    for (const auto& t : doc["servers"]) {
        pid_t root = t["root"]["pid"];
        EXPECT_NE(root, clients[5]->wrappers().front()) << "the live pair is listed as orphan";
        EXPECT_NE(root, decoy_sh) << "the decoy is listed as orphan";
    }

    CliRun r = env.run({"reap", "--orphans", "--match", tag, "--yes", "--json", "--grace", "1s"});
    ASSERT_EQ(r.exit_code(), 0) << r.err << r.out;
    json reaped = parse_doc(r.out);
    ASSERT_EQ(reaped["results"].size(), 5u) << r.out;
    for (const auto& res : reaped["results"])
        EXPECT_EQ(res["outcome"], "reaped") << res.dump(1);
    for (const auto& t : reaped["plan"]["trees"])
        EXPECT_EQ(t["selected_as"], "logical-orphan") << t.dump(1);
    EXPECT_TRUE(every_gone(leaked)) << "all fifteen leaked processes are gone";
    EXPECT_TRUE(every_alive(live_pair)) << "the pair of the live client survives";
    EXPECT_TRUE(every_alive(decoy_pair)) << "the decoy whose stdout cat reads survives";
}

// A tree of `ps --json` whose root is `pid`, or null.
json tree_rooted_at(const json& doc, pid_t pid) {
    for (const auto& t : doc["servers"])
        if (t["root"]["pid"] == pid) return t;
    return nullptr;
}

// Three identical trees, `sh -c 'python3 server.py TAG; true'` under a live client, declared
// in the client's config: ps labels them alike, by their shape — the `sh` its wrapper,
// `python3 server.py` the server, its child a helper. The shell matches the declared command
// too, and its child often starts in its clock tick: both once decided the labels, so that
// the same trees came out with the shell as the server and its python3 as a wrapper in some
// and a helper in others.
TEST(PsLabels, IdenticalShellWrappedTreesAreLabelledAlikeByTheirShape) {
    const std::string tag = unique_tag();
    CliEnv env;
    const std::string server = write_server_py(env.dir);
    FakeClient client(3, tag,
                      {"/bin/sh", "-c", "/usr/bin/python3 \"$0\" \"$1\"; true", server, tag});
    ASSERT_EQ(client.wrappers().size(), 3u);
    ASSERT_TRUE(wait_until(
        [&] {
            for (pid_t w : client.wrappers())
                if (!python_pair_ready(w)) return false;
            return true;
        },
        15s));
    declare_server(env, "leaky", "sh", {"-c", "python3 server.py " + tag});
    CliRun ps = env.run({"ps", "--json"});
    json doc = parse_doc(ps.out);
    ASSERT_FALSE(doc.is_discarded()) << ps.err;
    for (pid_t w : client.wrappers()) {
        json t = tree_rooted_at(doc, w);
        ASSERT_FALSE(t.is_null()) << "tree of " << w << " not listed: " << ps.out.substr(0, 3000);
        const std::vector<pid_t> below = children_of(w);
        ASSERT_EQ(below.size(), 1u);
        const pid_t py = below.front();
        EXPECT_EQ(t["server"]["pid"], py) << t.dump(1);
        std::vector<std::string> roles;
        for (const auto& m : t["members"]) {
            pid_t pid = m["pid"];
            std::string want = pid == w ? "wrapper" : pid == py ? "server" : "helper";
            EXPECT_EQ(m["role"], want) << "pid " << pid << ": " << t.dump(1);
            roles.push_back(m["role"]);
        }
        EXPECT_EQ(roles, (std::vector<std::string>{"wrapper", "server", "helper"})) << t.dump(1);
    }
}

// ---- Remnants: what a dead server left, unwrapped ------------------------------------------

// A client that was never wrapped, in a process group of its own (as a client started from a
// terminal is), starts two `sh -c 'python3 server.py TAG'` pairs; each server starts a helper
// with stdin and stdout on /dev/null. Pair 1's server dies: its helper is re-parented with nothing
// left to talk to, no marker, no cgroup — and was not listed at all ("no MCP servers found"). Now:
//  - while the client lives, ps lists the helper as a `remnant` suspect (its process group is
//    the client's, which has live processes besides orphans); reap --orphans refuses it;
//  - once the client is gone too, the whole job is dead (nothing alive in the group but pair
//    2, a proven orphan by its config, and the helper): `dead-job`, proven, and reap --orphans
//    removes it with pair 2.
// Negative control: a daemon with the helper's very argv, stdin /dev/null and re-parented
// too, but in a process group of its own, is never listed nor selected.
TEST(ReapTrust, HelperLeftByADeadServerOfAnUnwrappedClientIsFoundByItsDeadJob) {
    const std::string tag = unique_tag();
    CliEnv env;
    const std::string server = env.dir.file("server.py");
    std::ofstream(server) << "import subprocess, sys, time\n"
                             "subprocess.Popen([sys.executable, '-c', 'import time; "
                             "time.sleep(300)', 'helper', sys.argv[1]], "
                             "stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)\n"
                             "time.sleep(300)\n";
    const std::string client_py = env.dir.file("client.py");
    std::ofstream(client_py)
        << "import os, subprocess, sys, time\n"
           "server, tag, out = sys.argv[1:4]\n"
           "ps = [subprocess.Popen(['/bin/sh', '-c', "
           "'/usr/bin/python3 \"$0\" \"$1\"; true', server, tag], "
           "stdin=subprocess.PIPE, stdout=subprocess.PIPE) for _ in range(2)]\n"
           "open(out + '.tmp', 'w').write(' '.join(str(p.pid) for p in ps))\n"
           "os.rename(out + '.tmp', out)\n"
           "time.sleep(300)\n";
    declare_server(env, "leaky", "sh", {"-c", "python3 server.py " + tag});
    ChildOptions o;
    o.tag = tag;
    o.new_process_group = true;
    const std::string wrappers_file = env.dir.file("wrappers");
    TestChild client({"/usr/bin/python3", client_py, server, tag, wrappers_file}, o);
    ASSERT_TRUE(client.started()) << client.error();
    pid_t sh1 = 0, sh2 = 0;
    ASSERT_TRUE(wait_until(
        [&] {
            std::istringstream in(read_file(wrappers_file).value_or(""));
            return in >> sh1 >> sh2 && python_pair_ready(sh1) && python_pair_ready(sh2);
        },
        15s));
    const std::vector<pid_t> servers1 = children_of(sh1);
    ASSERT_EQ(servers1.size(), 1u);
    const pid_t server1 = servers1.front();
    const std::vector<pid_t> helpers1 = children_of(server1);
    ASSERT_EQ(helpers1.size(), 1u);
    const pid_t helper = helpers1.front();
    const auto helper_stat = read_stat(helper);
    ASSERT_TRUE(helper_stat);
    const std::pair<pid_t, uint64_t> helper_id{helper, helper_stat->starttime};
    auto pair2 = identities_below(sh2);
    pair2.push_back({sh2, read_stat(sh2)->starttime});

    TestChild daemon({"/bin/sh", "-c",
                      "/usr/bin/python3 -c 'import time; time.sleep(300)' helper \"$0\" "
                      "</dev/null >/dev/null 2>&1 & echo $!",
                      tag},
                     {.tag = tag, .new_session = true});
    ASSERT_TRUE(daemon.started());
    auto daemon_line = daemon.read_line(5s);
    ASSERT_TRUE(daemon_line);
    const pid_t daemon_pid = static_cast<pid_t>(std::stol(*daemon_line));
    const std::pair<pid_t, uint64_t> daemon_id{daemon_pid, read_stat(daemon_pid)->starttime};

    // Pair 1's server dies; its helper goes to PID 1 (or a subreaper).
    auto server1_stat = read_stat(server1);
    ASSERT_TRUE(server1_stat && is_same_live_process(server1, server1_stat->starttime));
    ASSERT_EQ(::kill(server1, SIGKILL), 0);
    ASSERT_TRUE(wait_until(
        [&] {
            auto st = read_stat(helper);
            auto d = read_stat(daemon_pid);
            return st && st->ppid != server1 && d && d->ppid != daemon.pid();
        },
        5s));

    auto plan_of = [&](const std::vector<std::string>& extra) {
        std::vector<std::string> args{"reap", "--orphans", "--match", tag, "--json"};
        args.insert(args.end(), extra.begin(), extra.end());
        CliRun r = env.run(args);
        EXPECT_EQ(r.exit_code(), 0) << r.err << r.out;
        return parse_doc(r.out);
    };
    auto selected = [](const json& doc, pid_t pid) {
        for (const auto& t : doc["plan"]["trees"])
            if (t["root"]["pid"] == pid) return true;
        return false;
    };

    // The client lives: a suspect, listed with its reason, refused by --orphans.
    CliRun ps = env.run({"ps", "--json"});
    json doc = parse_doc(ps.out);
    ASSERT_FALSE(doc.is_discarded()) << ps.err;
    json t = tree_rooted_at(doc, helper);
    ASSERT_FALSE(t.is_null()) << "the helper of the dead server is not listed: " << ps.out;
    EXPECT_EQ(t["state"], "logical-orphan") << t.dump(1);
    EXPECT_FALSE(t["proven"].get<bool>()) << t.dump(1);
    EXPECT_EQ(t["evidence"][0]["kind"], "remnant") << t.dump(1);
    EXPECT_NE(t["suspect"].get<std::string>().find("only its process group"), std::string::npos)
        << t.dump(1);
    EXPECT_TRUE(tree_rooted_at(doc, daemon_pid).is_null()) << "the daemon is listed";
    json dry = plan_of({"--dry-run"});
    EXPECT_FALSE(selected(dry, helper)) << dry["plan"].dump(1);
    EXPECT_FALSE(selected(dry, daemon_pid)) << dry["plan"].dump(1);
    EXPECT_NE(dry["plan"]["refused"].dump().find("only its process group"), std::string::npos)
        << dry["plan"].dump(1);

    // The client dies: the whole job is dead, the helper is proven and reaped with pair 2.
    ASSERT_TRUE(client.signal(SIGKILL));
    ASSERT_TRUE(client.wait_exit(5s));
    ps = env.run({"ps", "--json"});
    doc = parse_doc(ps.out);
    t = tree_rooted_at(doc, helper);
    ASSERT_FALSE(t.is_null()) << ps.out;
    EXPECT_TRUE(t["proven"].get<bool>()) << t.dump(1);
    EXPECT_EQ(t["evidence"][0]["kind"], "dead-job") << t.dump(1);
    EXPECT_TRUE(tree_rooted_at(doc, daemon_pid).is_null()) << "the daemon is listed";
    json reaped = plan_of({"--yes", "--grace", "1s"});
    EXPECT_TRUE(selected(reaped, helper)) << reaped["plan"].dump(1);
    EXPECT_TRUE(selected(reaped, sh2)) << reaped["plan"].dump(1);
    EXPECT_FALSE(selected(reaped, daemon_pid)) << reaped["plan"].dump(1);
    EXPECT_TRUE(every_gone({helper_id})) << "the dead server's helper survived the reap";
    EXPECT_TRUE(every_gone(pair2));
    EXPECT_TRUE(every_alive({daemon_id})) << "the daemon was reaped";
}

// The same leak through `npx -y <local package>`: npm renames the npx process to
// `npm exec <package> …`, which still matches the declared `npx -y <package> …` (both
// normalise to the package). ps shows the config evidence on the `npm exec` process; reap
// removes it with its `sh -c` and the node server. Negative control: without the config the
// tree is not found at all.
TEST(ReapTrust, NpxDeclaredServerIsMatchedAsNpmExecAndReaped) {
    if (::access("/usr/bin/npx", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/npx";
    const std::string tag = unique_tag();
    CliEnv env;
    const std::string pkg = env.dir.file("demo-pkg");
    ::mkdir(pkg.c_str(), 0700);
    std::ofstream(pkg + "/package.json")
        << R"({"name":"demo-pkg","version":"1.0.0","bin":{"demo-server":"server.js"}})";
    std::ofstream(pkg + "/server.js") << "#!/usr/bin/env node\nsetInterval(() => {}, 1000);\n";
    ::chmod((pkg + "/server.js").c_str(), 0755);
    FakeClient client(1, tag, {"/usr/bin/npx", "-y", pkg, tag},
                      {"npm_config_cache=" + env.dir.file("npm-cache"), "npm_config_offline=true",
                       "npm_config_update_notifier=false"});
    ASSERT_FALSE(client.wrappers().empty());
    const pid_t npm = client.wrappers().front();
    ASSERT_TRUE(wait_until(
        [&] {
            for (pid_t d : descendants_of(npm))
                if (auto st = read_stat(d); st && st->comm == "node") return true;
            return false;
        },
        30s))
        << "npx did not start the package's server";
    auto leaked = client.members();
    client.kill();
    auto cmdline = read_file("/proc/" + std::to_string(npm) + "/cmdline").value_or("");
    ASSERT_EQ(cmdline.rfind("npm exec ", 0), 0u) << "npm did not rename the process: " << cmdline;

    auto tree_of_npm = [&](const json& doc) -> json {
        for (const auto& t : doc["servers"])
            if (t["root"]["pid"] == npm) return t;
        return nullptr;
    };
    CliRun missed = env.run({"ps", "--orphans", "--json"});
    EXPECT_TRUE(tree_of_npm(parse_doc(missed.out)).is_null()) << missed.out.substr(0, 2000);

    declare_server(env, "demo", "npx", {"-y", pkg, tag});
    CliRun ps = env.run({"ps", "--orphans", "--json"});
    json t = tree_of_npm(parse_doc(ps.out));
    ASSERT_FALSE(t.is_null()) << ps.out.substr(0, 3000);
    EXPECT_EQ(t["state"], "logical-orphan") << t.dump(1);
    EXPECT_EQ(t["name"], "demo");
    bool on_npm = false;
    for (const auto& e : t["evidence"])
        on_npm |= e["kind"] == "config" && e["pid"] == npm;
    EXPECT_TRUE(on_npm) << t["evidence"].dump(1);

    CliRun r = env.run({"reap", "--orphans", "--match", tag, "--yes", "--json", "--grace", "1s"});
    ASSERT_EQ(r.exit_code(), 0) << r.err << r.out;
    json doc = parse_doc(r.out);
    ASSERT_EQ(doc["results"].size(), 1u) << r.out;
    EXPECT_EQ(doc["results"][0]["outcome"], "reaped") << r.out;
    EXPECT_TRUE(every_gone(leaked)) << r.out;
}

// ---- A remnant's proof covers everything a teardown of it would signal -----------------

// Whether `doc` (a `reap --json` document) plans a tree rooted at `pid`; its member count.
size_t planned_members(const json& doc, pid_t pid) {
    for (const auto& t : doc["plan"]["trees"])
        if (t["root"]["pid"] == pid) return t["members"].size();
    return 0;
}

// Why `doc` refused the tree rooted at `pid`, or "".
std::string refusal_of(const json& doc, pid_t pid) {
    for (const auto& r : doc["plan"]["refused"])
        if (r["pid"] == pid) return r["why"];
    return {};
}

// The live processes of process group `pgid`.
std::vector<pid_t> group_of(pid_t pgid) {
    std::vector<pid_t> out;
    for (pid_t p : list_pids())
        if (auto st = read_stat(p); st && st->pgid == pgid && !is_zombie_state(st->state))
            out.push_back(p);
    return out;
}

// The first live process of group `pgid` whose command line has `word`; 0 if none.
pid_t group_member_with(pid_t pgid, const std::string& word) {
    for (pid_t p : group_of(pgid))
        if (read_file("/proc/" + std::to_string(p) + "/cmdline").value_or("").find(word) !=
            std::string::npos)
            return p;
    return 0;
}

uint64_t starttime_of(pid_t pid) {
    auto st = read_stat(pid);
    return st ? st->starttime : 0;
}

// A job as a shell leaves one when it backgrounds its work and exits: `script` runs as
// `bash -c SCRIPT TAG DIR` in a process group of its own, prints the pid of the process the
// test asks about (the remnant candidate) and exits, so that what it started is re-parented
// and nothing else of the group is alive. `ready` says when the group has its shape.
struct Job {
    Job(const std::string& script, const std::string& tag, const std::string& dir,
        const std::function<bool(const Job&)>& ready)
        : shell({"/bin/bash", "-c", script, tag, dir}, {.tag = tag, .new_process_group = true}) {
        if (!shell.started()) return;
        if (auto line = shell.read_line(10s); line && !line->empty()) remnant = std::stoi(*line);
        if (!shell.wait_exit(10s)) remnant = 0;
        if (remnant && !wait_until([&] { return ready(*this); }, 10s)) remnant = 0;
    }
    pid_t pgid() const { return shell.pid(); }
    TestChild shell;
    pid_t remnant = 0;
};

// An MCP server tree proven a logical orphan: a trusted session marker, stdin and stdout on
// pipes whose other ends are gone. Then `$0-server` names it in the job's group.
constexpr const char* kOrphanServer =
    "true | MCPWARDEN_SESSION=\"s$0\" perl -e 'sleep 300' \"$0-server\" | true & ";
// Enough for the next fork to come at least one clock tick later (five at USER_HZ 100).
constexpr const char* kNextTick = "sleep 0.05; ";

// One member of the family: how the job starts its orphaned server and its remnant
// candidate R, what `ps` and `reap --orphans` must make of R, and the fault that switches off
// the rule that catches it (its negative control: with the fault, R is selected).
struct NearMiss {
    std::string name;
    std::string script;
    size_t live_in_group;   // processes of the job alive once it has its shape
    bool same_tick;         // R and the server must share a clock tick (retried until they do)
    std::string caught_by;  // "" for the proof that holds (R is a dead job)
    std::string fault;
};

// The live pipeline above, `depth` processes below R: a process that only MCP naming
// calls `npx` (argv[0] renamed, a harmless sleep) with a live `cat` reading its stdout, under
// depth - 1 levels of shells. Written as scripts into `dir`; R is `bash DIR/level<depth>.sh`.
void write_levels(const TempDir& dir, int depth) {
    std::ofstream(dir.file("level1.sh"))
        << "true | (exec -a npx perl -e 'sleep 300' vite --port 5173 \"$1\") | cat >/dev/null; "
           "true\n";
    for (int k = 2; k <= depth; ++k)
        std::ofstream(dir.file("level" + std::to_string(k) + ".sh"))
            << "bash \"$(dirname \"$0\")/level" << k - 1 << ".sh\" \"$1\"; true\n";
}

std::vector<NearMiss> near_misses() {
    const std::string plain_r =
        "perl -e 'sleep 300' \"$0-remnant\" </dev/null >/dev/null 2>&1 & echo $!; ";
    std::vector<NearMiss> family{
        {"born a tick after the server, nothing live below: a dead job (the proof that holds)",
         std::string(kOrphanServer) + kNextTick + plain_r, 2, false, "", ""},
        {"born in the server's own clock tick", std::string(kOrphanServer) + plain_r, 2, true,
         "equal start times are never an order", "equal_ticks_ordered"},
        {"born before the server", plain_r + kNextTick + kOrphanServer, 2, false,
         "born before every server tree of its group", ""},
    };
    for (int depth = 1; depth <= 3; ++depth)
        family.push_back({"a live reader " + std::to_string(depth) + " level(s) below it",
                          std::string(kOrphanServer) + kNextTick + "bash \"$1/level" +
                              std::to_string(depth) +
                              ".sh\" \"$0\" </dev/null >/dev/null 2>&1 & echo $!; ",
                          static_cast<size_t>(3 + depth), false,
                          "its whole tree is not proven not live", "remnant_tree_unchecked"});
    return family;
}

// The family of near-misses around a dead job, each generated from the one proof that holds
// by changing one thing: R born in the server's clock tick, R born before it, a live reader
// 1 to 3 levels below R. Each is refused by the rule that catches it, and each is that
// rule's negative control twice over: the one-change-away member that holds is selected, and
// the same scenario under the fault that switches the rule off is selected too, with the
// live server and its reader among the processes a --yes would signal. Only dry runs: no
// member of a near-miss is ever signalled; the live ones are alive at the end.
TEST(ReapTrust, NearMissesOfADeadJobAreEachCaughtByTheirRule) {
    const std::string tag = unique_tag();
    CliEnv env;
    write_levels(env.dir, 3);
    auto plan_of = [&](std::vector<std::string> extra, const std::string& fault) {
        std::vector<std::string> args{"reap", "--orphans", "--match", tag, "--dry-run", "--json"};
        args.insert(args.end(), extra.begin(), extra.end());
        CliRun r = env.run(args, {{"MCPWARDEN_FAULT", fault.empty() ? "none" : fault}});
        EXPECT_EQ(r.exit_code(), 0) << r.err << r.out;
        return parse_doc(r.out);
    };
    for (const NearMiss& m : near_misses()) {
        SCOPED_TRACE(m.name);
        std::optional<Job> job;
        pid_t server = 0;
        auto shaped = [&](const Job& j) {
            server = group_member_with(j.pgid(), tag + "-server");
            return server && group_of(j.pgid()).size() == m.live_in_group;
        };
        for (int attempt = 0; attempt < 40; ++attempt) {
            job.emplace(m.script, tag, env.dir.path(), shaped);
            ASSERT_TRUE(job->remnant) << "the job did not take its shape";
            bool same = starttime_of(server) == starttime_of(job->remnant);
            if (same == m.same_tick) break;
            job.reset();  // its guard ends what it started
        }
        ASSERT_TRUE(job) << "40 jobs and none had the clock ticks this case needs";
        const pid_t r = job->remnant;
        const auto group_before = group_of(job->pgid());

        CliRun ps = env.run({"ps", "--json"});
        json tree = tree_rooted_at(parse_doc(ps.out), r);
        json plain = plan_of({}, "");
        if (m.caught_by.empty()) {
            ASSERT_FALSE(tree.is_null()) << ps.out.substr(0, 3000);
            EXPECT_EQ(tree["evidence"][0]["kind"], "dead-job") << tree.dump(1);
            EXPECT_EQ(planned_members(plain, r), 1u) << plain["plan"].dump(1);
            continue;
        }
        EXPECT_EQ(planned_members(plain, r), 0u) << m.caught_by << ": " << plain["plan"].dump(1);
        if (m.fault == "remnant_tree_unchecked") {
            // Listed, as a suspect that says what below it is live; refused even when
            // suspects are asked for, because that member is live.
            ASSERT_FALSE(tree.is_null()) << ps.out.substr(0, 3000);
            EXPECT_EQ(tree["evidence"][0]["kind"], "remnant") << tree.dump(1);
            EXPECT_NE(tree["evidence"][0]["detail"].get<std::string>().find("in its own tree"),
                      std::string::npos)
                << tree.dump(1);
            json suspects = plan_of({"--include-suspects"}, "");
            EXPECT_EQ(planned_members(suspects, r), 0u) << suspects["plan"].dump(1);
            EXPECT_EQ(refusal_of(suspects, r).rfind("live: ", 0), 0u) << suspects["plan"].dump(1);
            // Named with --pid, the whole of it is planned: the server's client goes with it
            // because the user said so, not because anything proved it left over.
            CliRun named = env.run({"reap", "--pid", std::to_string(r), "--dry-run", "--json"});
            EXPECT_EQ(planned_members(parse_doc(named.out), r), m.live_in_group - 1) << named.out;
        } else {
            EXPECT_TRUE(tree.is_null()) << "listed as a remnant: " << tree.dump(1);
        }
        if (!m.fault.empty()) {
            json unguarded = plan_of({}, m.fault);
            EXPECT_EQ(planned_members(unguarded, r), m.live_in_group - 1)
                << "without " << m.fault << " it is not selected: " << unguarded["plan"].dump(1);
        }
        EXPECT_EQ(group_of(job->pgid()), group_before) << "a near-miss lost a process";
    }
}

// A job's subshell runs `npx vite` (its stdout read by a live `cat`); when it and the npx
// start in the same clock tick it must not read as a dead job (`reap --orphans --yes` would
// say "reaped 3 processes"). The subshell's stdout goes to /dev/null here (a terminal in
// real use): a pipe to the test would be a live reader. Nothing is planned, even with
// --include-suspects, and all three live on. Negative control: the same tick, both guards switched
// off, selects the subshell with the live npx and its cat (a dry run: what --yes would have
// signalled).
TEST(ReapTrust, SubshellOfALiveNpxInTheSameTickIsNeverReaped) {
    const std::string tag = unique_tag();
    CliEnv env;
    const std::string script =
        "(true | (exec -a npx perl -e 'sleep 300' vite --port 5173 \"$0\") | cat >/dev/null) "
        ">/dev/null & echo $!";
    std::optional<Job> job;
    pid_t npx = 0, cat = 0;
    auto shaped = [&](const Job& j) {
        npx = cat = 0;
        for (pid_t c : children_of(j.remnant))
            if (auto st = read_stat(c); st && st->comm == "perl")
                npx = c;
            else if (st && st->comm == "cat")
                cat = c;
        return npx && cat && group_of(j.pgid()).size() == 3;
    };
    for (int attempt = 0; attempt < 40; ++attempt) {
        job.emplace(script, tag, env.dir.path(), shaped);
        ASSERT_TRUE(job->remnant) << "the job did not take its shape";
        if (starttime_of(job->remnant) == starttime_of(npx)) break;
        job.reset();
    }
    ASSERT_TRUE(job) << "40 jobs and none started the subshell and the npx in one tick";
    const pid_t sub = job->remnant;
    const std::vector<std::pair<pid_t, uint64_t>> three{
        {sub, starttime_of(sub)}, {npx, starttime_of(npx)}, {cat, starttime_of(cat)}};

    const std::pair<std::string, std::string> faults{"MCPWARDEN_FAULT",
                                                     "equal_ticks_ordered,remnant_tree_unchecked"};
    CliRun dry = env.run({"reap", "--orphans", "--match", tag, "--dry-run", "--json"}, {faults});
    json unguarded = parse_doc(dry.out);
    EXPECT_EQ(planned_members(unguarded, sub), 3u)
        << "without the guards the subshell is not selected: " << dry.out;

    CliRun r = env.run(
        {"reap", "--orphans", "--include-suspects", "--match", tag, "--yes", "--grace", "1s"});
    EXPECT_EQ(r.exit_code(), 0) << r.err << r.out;
    EXPECT_NE(r.out.find("Nothing to reap."), std::string::npos) << r.out;
    EXPECT_TRUE(every_alive(three)) << r.out;
}

}  // namespace
}  // namespace warden::testing
