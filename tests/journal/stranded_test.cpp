// No record stranded (src/journal/reconcile.cpp, src/journal/intents.hpp): every intent file is
// either recovered into the chain or reported with its reason, by `journal reconcile` and by
// `audit verify`, and no session's records are on record without its session.start (recovered,
// or synthesized from what is known and marked so). What a user would notice if that went
// wrong: intent files that stay forever while verify keeps saying reconcile records them, and
// sessions `journal sessions` does not list although their records are there.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/cli_run.hpp"
#include "common/procfs.hpp"
#include "common/testing.hpp"
#include "journal/intents.hpp"
#include "journal/journal.hpp"
#include "journal/query.hpp"
#include "journal/verify.hpp"

namespace warden::testing {
namespace {

// Session ids present in any record of `db`, and those with a session.start, and which of the
// starts say "synthesized".
struct StartTally {
    std::set<std::string> sessions, started, synthesized;
    std::set<std::string> unstarted() const {
        std::set<std::string> out;
        for (const auto& s : sessions)
            if (!started.count(s)) out.insert(s);
        return out;
    }
};

StartTally tally_starts(const std::string& db) {
    StartTally t;
    auto st = journal::for_each_record(db, 0, [&](const journal::Record& r) {
        if (r.session.empty()) return true;
        t.sessions.insert(r.session);
        if (r.kind == "session.start") {
            t.started.insert(r.session);
            if (nlohmann::json::parse(r.body)["data"].value("synthesized", false))
                t.synthesized.insert(r.session);
        }
        return true;
    });
    EXPECT_TRUE(st) << st.error().message;
    return t;
}

// Records of `session` (of `kind`, when given).
int64_t records_of(const std::string& db, const std::string& session, std::string_view kind = {}) {
    int64_t n = 0;
    (void)journal::for_each_record(db, 0, [&](const journal::Record& r) {
        n += r.session == session && (kind.empty() || r.kind == kind);
        return true;
    });
    return n;
}

std::string listed_sessions(const std::set<std::string>& s) {
    std::string out;
    for (const auto& x : s)
        out += x + " ";
    return out;
}

// A writer process that leaves `session`'s records behind without a session.start and dies
// (as a relay SIGKILLed before its start was committed): a request in its intent file (never
// chained), and a teardown record committed on its own. With `hold_fd` (the read end of a
// pipe), it stays alive, holding the file, until the test closes `release_fd`, the write end.
// Returns its pid.
pid_t leave_unstarted(const std::string& db, const std::string& session, int hold_fd = -1,
                      int release_fd = -1) {
    pid_t pid = ::fork();
    if (pid != 0) return pid;
    if (release_fd >= 0) ::close(release_fd);  // the test's end: its close is the release
    journal::Options o;
    o.path = db;
    o.intents = true;
    o.hold_intents = true;  // never chained: it waits in the file, as after a SIGKILL
    auto j = journal::Journal::open(o);
    if (!j) ::_exit(2);
    journal::Request r;
    r.session = session;
    r.id = journal::Json{{"n", 7}};
    r.method = "tools/call";
    r.tool = "echo";
    if (!(*j)->append_intent(journal::activity_request(r))) ::_exit(3);
    journal::Event exit_rec{"process.exit", session, 0, journal::Json{{"phase", "after_kill"}}};
    if (!(*j)->append(exit_rec)) ::_exit(4);
    if (hold_fd >= 0) {
        char c;
        (void)!::read(hold_fd, &c, 1);  // until the test closes its end
    }
    ::_exit(0);  // no close: the intent file stays, as a killed writer leaves it
}

struct Reconciled {
    int code = -1;
    std::string out;
    std::vector<std::string> verify_warnings;
};

Reconciled reconcile_and_verify(const TempDir& dir, const std::string& db,
                                const std::vector<std::pair<std::string, std::string>>& env) {
    Reconciled r;
    auto rec = run_cli(dir, {"journal", "reconcile", "--journal", db}, 60s, env);
    r.code = rec.code;
    r.out = rec.out + rec.err;
    auto v = journal::verify({.path = db});
    r.verify_warnings = v.warnings;
    return r;
}

bool mentions(const std::vector<std::string>& lines, const std::string& what) {
    for (const auto& l : lines)
        if (l.find(what) != std::string::npos) return true;
    return false;
}

// The cause: a session whose start never reached the log names no writer, so reconcile took
// its intent file for a live one and left it for ever. Now a file nobody holds is recovered
// and its session gets a synthesized start; a file still held is reported as left, with why.
// Negative control: intents_left_unstarted (the old rule) leaves the file, the session has
// no start, and verify says only that reconcile records it.
TEST(Stranded, AnUnstartedSessionsIntentFileIsRecoveredWithASynthesizedStart) {
    for (const bool guard : {true, false}) {
        SCOPED_TRACE(guard ? "guarded" : "negative control");
        TempDir dir;
        std::string db = dir.file("j.db");
        { ASSERT_TRUE(journal::Journal::open({.path = db}).ok()); }
        int status = 0;
        pid_t dead = leave_unstarted(db, "unstarted-dead");
        ASSERT_EQ(::waitpid(dead, &status, 0), dead);
        ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
        int hold[2];
        ASSERT_EQ(::pipe(hold), 0);
        pid_t alive = leave_unstarted(db, "unstarted-alive", hold[0], hold[1]);
        ::close(hold[0]);
        const auto paths = journal::Paths::for_db(db);
        ASSERT_TRUE(wait_until(
            [&] {
                return journal::intent_file_held(paths.intent_file("unstarted-alive")) &&
                       records_of(db, "unstarted-alive") > 0;
            },
            10s));

        std::vector<std::pair<std::string, std::string>> env;
        if (!guard) env.push_back({"MCPWARDEN_FAULT", "intents_left_unstarted"});
        auto r = reconcile_and_verify(dir, db, env);
        EXPECT_EQ(r.code, 0) << r.out;
        auto t = tally_starts(db);
        const bool dead_file_left =
            ::access(paths.intent_file("unstarted-dead").c_str(), F_OK) == 0;
        if (guard) {
            EXPECT_FALSE(dead_file_left) << r.out;
            EXPECT_TRUE(t.synthesized.count("unstarted-dead")) << listed_sessions(t.unstarted());
            EXPECT_EQ(records_of(db, "unstarted-dead", "activity.request"), 1)
                << "the request in the file was not recovered";
            // The live writer's file is left, and said so, with why, by both.
            EXPECT_NE(r.out.find(paths.intent_file("unstarted-alive")), std::string::npos) << r.out;
            EXPECT_NE(r.out.find("still runs"), std::string::npos) << r.out;
            EXPECT_FALSE(t.synthesized.count("unstarted-alive")) << "a live session was ended";
        } else {
            EXPECT_TRUE(dead_file_left) << "the control proves nothing";
            EXPECT_TRUE(t.unstarted().count("unstarted-dead")) << listed_sessions(t.unstarted());
            EXPECT_TRUE(mentions(r.verify_warnings, "unstarted-dead"));
        }
        ::close(hold[1]);
        ASSERT_EQ(::waitpid(alive, &status, 0), alive);
        if (guard) {
            // Its writer gone, the next reconcile recovers it, and verify has nothing to say.
            auto again = reconcile_and_verify(dir, db, {});
            EXPECT_EQ(journal::intent_sessions(paths).size(), 0u) << again.out;
            EXPECT_FALSE(mentions(again.verify_warnings, "intent")) << again.out;
            EXPECT_EQ(tally_starts(db).unstarted().size(), 0u)
                << listed_sessions(tally_starts(db).unstarted());
        }
    }
}

// The audit's stress, smaller: 4 relays at a time through the binary, each SIGKILLed at a
// random moment of its start or its calls, 20 times over; then `journal reconcile`. No intent
// file is left unless reconcile and verify both name it with its reason, and every session id
// on record has a session.start. (The deterministic negative control is the test above: the
// race this stress hits is not certain to occur in any one run.)
TEST(Stranded, KilledRelaysUnderConcurrencyLeaveNoRecordStranded) {
    TempDir dir;
    std::string db = dir.file("state/journal.db");
    ASSERT_EQ(::mkdir(dir.file("state").c_str(), 0700), 0);
    std::mt19937 rng(20261206);
    constexpr int kWriters = 4, kRounds = 20;
    for (int round = 0; round < kRounds; ++round) {
        std::vector<TestChild> relays;
        for (int w = 0; w < kWriters; ++w) {
            ChildOptions o;
            o.capture_stderr = true;
            relays.emplace_back(
                std::vector<std::string>{kCli, "run", "--eof-grace", "200ms", "--term-grace",
                                         "300ms", "--journal", db, "--", kFixture},
                o);
            ASSERT_TRUE(relays.back().started()) << relays.back().error();
        }
        for (auto& c : relays) {
            (void)c.write_line(rpc_initialize(1));
            (void)c.write_line(rpc_tools_call(2, "echo", {{"text", "x"}}));
        }
        for (auto& c : relays) {
            ::usleep(std::uniform_int_distribution<useconds_t>(0, 40000)(rng));
            ASSERT_TRUE(c.signal(SIGKILL));
        }
        for (auto& c : relays) {
            ASSERT_TRUE(c.wait_exit(20s));
            // Its keeper tears the tree down once the lifeline closes: the next round only
            // once it is done.
            EXPECT_TRUE(wait_until([&] { return live_tagged(c.tag()).empty(); }, 20s))
                << "round " << round;
        }
    }
    auto r = reconcile_and_verify(dir, db, {});
    EXPECT_EQ(r.code, 0) << r.out;
    const auto paths = journal::Paths::for_db(db);
    for (const auto& s : journal::intent_sessions(paths)) {
        EXPECT_NE(r.out.find(paths.intent_file(s)), std::string::npos)
            << "intent file of " << s << " left without a reason from reconcile:\n"
            << r.out;
        EXPECT_TRUE(mentions(r.verify_warnings, s)) << "nor from verify";
    }
    auto t = tally_starts(db);
    EXPECT_EQ(t.unstarted().size(), 0u)
        << "sessions without a start: " << listed_sessions(t.unstarted());
    EXPECT_GT(t.sessions.size(), 0u) << "nothing reached the journal: the test proves nothing";
}

}  // namespace
}  // namespace warden::testing
