// How the MCP clients people use end a stdio server, each played by this test against
// `mcpwarden run`: the same signals, to the same processes (the child, its process group or
// its tree), after the same waits. docs/CLIENTS.md ("Stop sequences") has the table and
// where each sequence comes from.
//
// The server is the hard case: a double-forked daemon holds a port, and the server ignores
// both EOF and SIGTERM, so only mcpwarden's teardown (EOF window 200 ms, SIGTERM window
// 300 ms, then SIGKILL) removes it. Whatever the client does, afterwards the tree must be
// gone (no process carries the test's tag), its port must bind again, and the journal must
// hold the session's end. Where the client waits long enough for that teardown (every client
// but Claude Code, whose whole sequence is 500 ms), `mcpwarden run` must also have exited
// before the client reached for SIGKILL. The control plays Claude Code's sequence against
// the same server started without mcpwarden: the daemon keeps its port.
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/testing.hpp"

namespace warden::testing {
namespace {

// Where the client starts the server: in its own process group (what kill(-pgid) reaches)
// or session, or in the client's group.
enum class Spawn { ClientsGroup, OwnGroup, OwnSession };

enum class Act {
    CloseStdin,   // end the server's stdin
    Signal,       // kill(child)
    SignalGroup,  // kill(-pgid of the child)
    SignalTree,   // the child and every descendant (VS Code's killTree)
};

struct Step {
    Millis after;  // how long the client waits for the child to exit before this step
    Act act;
    int sig = 0;
};

struct StopSequence {
    std::string client;
    Spawn spawn;
    std::vector<Step> steps;
    bool patient = true;  // waits longer than mcpwarden's teardown of this server takes
    // The EOF window `run` is given: short, so that the teardown fits in a patient client's
    // wait, or the default where the client's timing falls inside it (Codex).
    std::string eof_grace = "200ms";
};

std::vector<StopSequence> sequences() {
    return {
        {"claude_code",
         Spawn::ClientsGroup,
         {{0ms, Act::Signal, SIGINT}, {100ms, Act::Signal, SIGTERM}, {400ms, Act::Signal, SIGKILL}},
         false},
        {"ts_sdk",
         Spawn::ClientsGroup,
         {{0ms, Act::CloseStdin}, {2s, Act::Signal, SIGTERM}, {2s, Act::Signal, SIGKILL}}},
        {"vscode",
         Spawn::ClientsGroup,
         {{0ms, Act::CloseStdin},
          {10s, Act::SignalTree, SIGTERM},
          {10s, Act::SignalTree, SIGKILL}}},
        // stdin closed and SIGTERM to the group at once; SIGKILL to the relay 270-640 ms later
        // (measured): inside the default 1 s EOF window, before the relay asked for the
        // teardown. The keeper tears down and records the end.
        {"codex",
         Spawn::OwnGroup,
         {{0ms, Act::CloseStdin}, {0ms, Act::SignalGroup, SIGTERM}, {270ms, Act::Signal, SIGKILL}},
         false,
         "1s"},
        {"codex_late",
         Spawn::OwnGroup,
         {{0ms, Act::SignalGroup, SIGTERM}, {0ms, Act::CloseStdin}, {640ms, Act::Signal, SIGKILL}},
         false,
         "1s"},
        // Its SDK's close() aborts the spawn (SIGTERM to the child, stdin left open); the
        // server's stdin ends when the relaunched client exits, ~400 ms later.
        {"gemini_cli",
         Spawn::ClientsGroup,
         {{0ms, Act::Signal, SIGTERM}, {400ms, Act::CloseStdin}}},
        // ^C in its terminal: SIGINT to the foreground group, the server included.
        {"terminal_ctrl_c", Spawn::OwnGroup, {{0ms, Act::SignalGroup, SIGINT}}},
        {"python_sdk",
         Spawn::OwnSession,
         {{0ms, Act::CloseStdin},
          {2s, Act::SignalGroup, SIGTERM},
          {2s, Act::SignalGroup, SIGKILL}}},
    };
}

// Signals a process found under our child through a pidfd bound to the identity read from
// /proc, never by a bare pid.
void signal_verified(pid_t pid, int sig) {
    auto st = read_stat(pid);
    if (!st) return;
    int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (fd < 0) return;
    if (is_same_live_process(pid, st->starttime))
        ::syscall(SYS_pidfd_send_signal, fd, sig, nullptr, 0);
    ::close(fd);
}

struct Ending {
    int status = 0;
    size_t steps_taken = 0;  // steps the client had to take before the child exited
    bool exited = false;
};

// Plays `seq` on `child`: before each step, waits up to its delay for the child to exit.
Ending play(const StopSequence& seq, TestChild& child) {
    Ending o;
    for (const auto& step : seq.steps) {
        if (auto st = child.wait_exit(step.after)) {
            o.status = *st;
            o.exited = true;
            return o;
        }
        ++o.steps_taken;
        switch (step.act) {
            case Act::CloseStdin:
                child.close_stdin();
                break;
            case Act::Signal:
                child.signal(step.sig);
                break;
            case Act::SignalGroup:  // the group the child leads (Spawn::OwnGroup/OwnSession)
                if (auto st = read_stat(child.pid()); st && st->pgid == child.pid())
                    ::kill(-child.pid(), step.sig);
                break;
            case Act::SignalTree:
                for (pid_t d : descendants_of(child.pid()))
                    signal_verified(d, step.sig);
                child.signal(step.sig);
                break;
        }
    }
    if (auto st = child.wait_exit(10s)) {
        o.status = *st;
        o.exited = true;
    }
    return o;
}

ChildOptions spawn_options(Spawn spawn) {
    ChildOptions o;
    o.new_process_group = spawn == Spawn::OwnGroup;
    o.new_session = spawn == Spawn::OwnSession;
    o.unset_env = {"MCPWARDEN_JOURNAL", "MCPWARDEN_SESSION"};
    return o;
}

FixtureOptions hard_server() {
    FixtureOptions f;
    f.shape = "doublefork";
    f.on_eof_ignore = true;
    f.ignore_term = true;
    return f;
}

// The sessions `mcpwarden journal sessions --json` lists in `journal`.
nlohmann::json journal_sessions(const std::string& journal) {
    TestChild c({kCli, "journal", "sessions", "--json", "--journal", journal});
    if (!c.started()) return nullptr;
    c.close_stdin();
    std::string out = c.read_all_stdout(30s);
    c.wait_exit(10s);
    return nlohmann::json::parse(out, nullptr, false);
}

// The session.end record of `session` as `journal show --jsonl` prints it (null if none).
nlohmann::json session_end_of(const std::string& journal, const std::string& session) {
    TestChild c({kCli, "journal", "show", session, "--jsonl", "--journal", journal});
    if (!c.started()) return nullptr;
    c.close_stdin();
    std::string out = c.read_all_stdout(30s);
    c.wait_exit(10s);
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);) {
        auto j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_object() && j.value("kind", "") == "session.end") return j;
    }
    return nullptr;
}

class ClientStops : public ::testing::TestWithParam<StopSequence> {};

TEST_P(ClientStops, TreeGoneAndSessionEndedOnRecord) {
    const StopSequence& seq = GetParam();
    TempDir dir;
    std::string journal = dir.file("journal.db");
    std::vector<std::string> argv = {kCli,           "run",   "--name",      seq.client,
                                     "--journal",    journal, "--eof-grace", seq.eof_grace,
                                     "--term-grace", "300ms", "--"};
    for (auto& a : fixture_argv(hard_server(), dir.file("port")))
        argv.push_back(a);
    TestChild relay(argv, spawn_options(seq.spawn));
    ASSERT_TRUE(relay.started()) << relay.error();
    ASSERT_TRUE(wait_for_file(dir.file("port"), 10s));
    uint16_t port = read_port_file(dir.file("port")).value_or(0);
    ASSERT_NE(port, 0);
    ASSERT_TRUE(relay.write_line(rpc_initialize(1)));
    ASSERT_TRUE(read_response(relay, 1, 10s).has_value());
    ASSERT_FALSE(port_bindable(port));  // the daemon holds it

    Ending o = play(seq, relay);
    ASSERT_TRUE(o.exited) << seq.client << ": mcpwarden run did not exit";
    RecordProperty("steps_taken", static_cast<int>(o.steps_taken));
    RecordProperty("exit", describe_status(o.status));

    EXPECT_TRUE(wait_until([&] { return live_tagged(relay.tag()).empty(); }, 8s))
        << seq.client << ": left " << live_tagged(relay.tag()).size() << " processes";
    EXPECT_TRUE(port_bindable(port)) << seq.client << ": port " << port << " still held";
    auto sessions = journal_sessions(journal);
    ASSERT_TRUE(sessions.is_array() && sessions.size() == 1) << sessions.dump();
    EXPECT_TRUE(sessions[0].contains("ended_ns"))
        << seq.client << ": no session.end on record: " << sessions.dump();
    auto end = session_end_of(journal, sessions[0].value("session", ""));
    EXPECT_TRUE(end.is_object() && end["data"]["teardown"].is_object())
        << seq.client << ": no session.end with its teardown in `journal show`: " << end.dump();
    if (seq.patient) {
        bool sigkilled = WIFSIGNALED(o.status) && WTERMSIG(o.status) == SIGKILL;
        EXPECT_FALSE(sigkilled) << seq.client
                                << ": the client had to SIGKILL mcpwarden run after step "
                                << o.steps_taken;
    }
}

INSTANTIATE_TEST_SUITE_P(Clients, ClientStops, ::testing::ValuesIn(sequences()),
                         [](const auto& p) { return p.param.client; });

// The control: Claude Code's sequence on the same server without mcpwarden. SIGINT ends the
// server, and its daemon lives on with the port (the TestChild's guard removes it).
TEST(ClientStopsControl, WithoutMcpwardenTheDaemonKeepsThePort) {
    TempDir dir;
    TestChild server(fixture_argv(hard_server(), dir.file("port")),
                     spawn_options(Spawn::ClientsGroup));
    ASSERT_TRUE(server.started()) << server.error();
    ASSERT_TRUE(wait_for_file(dir.file("port"), 10s));
    uint16_t port = read_port_file(dir.file("port")).value_or(0);
    ASSERT_NE(port, 0);
    StopSequence claude = sequences()[0];
    ASSERT_EQ(claude.client, "claude_code");
    Ending o = play(claude, server);
    ASSERT_TRUE(o.exited);
    EXPECT_TRUE(WIFSIGNALED(o.status)) << describe_status(o.status);
    EXPECT_FALSE(port_bindable(port));
    EXPECT_FALSE(live_tagged(server.tag()).empty());
}

}  // namespace
}  // namespace warden::testing
