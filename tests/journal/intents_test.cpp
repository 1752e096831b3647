// Intents (src/journal/journal.cpp, "Intents"; src/journal/intents.hpp): a request is one
// write() to its session's intent file before it is forwarded, and the writer thread chains
// it later. What a user would notice if that went wrong: a request that was forwarded and
// answered is missing from the log after its relay was killed, or a damaged intent file
// vanishes without a word.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <functional>
#include <map>
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
#include "sys/fd.hpp"

namespace warden::testing {
namespace {

// A journal in `dir` whose requests go through intents, as the relay's.
journal::Options with_intents(const TempDir& dir) {
    journal::Options o;
    o.path = dir.file("j.db");
    o.intents = true;
    return o;
}

struct RequestRow {
    int64_t seq = 0;
    int64_t id = 0;
};

// The tools/call and initialize requests on record, in log order, and the kinds counted.
std::vector<RequestRow> requests_on_record(const std::string& db,
                                           std::map<std::string, int64_t>* kinds = nullptr) {
    std::vector<RequestRow> out;
    auto st = journal::for_each_record(db, 0, [&](const journal::Record& r) {
        if (kinds) ++(*kinds)[r.kind];
        if (r.kind != "activity.request") return true;
        auto d = nlohmann::json::parse(r.body)["data"];
        if (d["id"].contains("n")) out.push_back({r.seq, d["id"]["n"].get<int64_t>()});
        return true;
    });
    EXPECT_TRUE(st) << st.error().message;
    return out;
}

struct KilledRelay {
    std::string intent_file;
    bool keeper_finished = false;
    std::string err;  // the run's stderr, the keeper's lines included
};

// A session whose relay is SIGKILLed right after three requests were forwarded and answered,
// with its writer thread holding every intent back (journal_hold_intents: as if the relay
// always died before chaining them). Waits for the keeper to finish its teardown.
// `while_running`, if given, is called once the requests are answered, before the SIGKILL.
KilledRelay kill_relay_after_requests(const std::string& db, const std::string& faults,
                                      const std::function<void()>& while_running = {}) {
    KilledRelay out;
    TestChild c({kCli, "run", "--eof-grace", "200ms", "--term-grace", "300ms", "--journal", db,
                 "--", kFixture},
                {.env = {{"MCPWARDEN_FAULT", faults}}, .capture_stderr = true});
    EXPECT_TRUE(c.started()) << c.error();
    EXPECT_TRUE(c.write_line(rpc_initialize(1)));
    EXPECT_TRUE(read_response(c, 1, 10s));
    for (int id = 2; id <= 3; ++id) {
        EXPECT_TRUE(c.write_line(rpc_tools_call(id, "echo", {{"text", std::to_string(id)}})));
        EXPECT_TRUE(read_response(c, id, 10s)) << "id " << id;
    }
    std::optional<ProcStat> keeper;
    for (pid_t kid : children_of(c.pid()))
        if (auto st = read_stat(kid); st && st->comm == "mcpwarden-keep") keeper = st;
    EXPECT_TRUE(keeper) << "the relay's keeper not found";
    auto session = journal::list_sessions(db, {});
    if (session && !session->empty())
        out.intent_file = journal::Paths::for_db(db).intent_file(session->front().session);
    EXPECT_EQ(::access(out.intent_file.c_str(), F_OK), 0)
        << "no intent file while the session runs: " << out.intent_file;
    if (while_running) while_running();
    EXPECT_TRUE(c.signal(SIGKILL));
    EXPECT_TRUE(c.wait_exit(10s));
    if (keeper)
        out.keeper_finished =
            wait_until([&] { return !is_same_live_process(keeper->pid, keeper->starttime); }, 20s);
    return out;
}

TEST(Intents, RelayKilledAfterForwardingTheKeeperRecoversTheRequestsInOrder) {
    TempDir dir;
    std::string db = dir.file("j.db");
    auto killed = kill_relay_after_requests(db, "journal_hold_intents");
    ASSERT_TRUE(killed.keeper_finished) << "the keeper did not finish its teardown";

    std::map<std::string, int64_t> kinds;
    auto rows = requests_on_record(db, &kinds);
    ASSERT_EQ(rows.size(), 3u) << "forwarded requests missing from the log\n" << killed.err;
    for (size_t i = 0; i < rows.size(); ++i)
        EXPECT_EQ(rows[i].id, static_cast<int64_t>(i + 1)) << "requests out of order";
    EXPECT_GE(kinds["process.signal"], 1) << "the keeper's teardown is not on record";
    EXPECT_NE(::access(killed.intent_file.c_str(), F_OK), 0) << "the intent file was left";

    auto v = run_cli(dir, {"audit", "verify", "--journal", db}, 30s);
    EXPECT_EQ(v.code, 0) << v.out << v.err;
    EXPECT_EQ(v.out.find("uncommitted intents"), std::string::npos) << v.out;
}

// Negative control: the keeper does not recover (keeper_intents). The forwarded requests are
// missing; `audit verify` reports the intent file as uncommitted intents, not as tampering
// (exit 0); `journal reconcile`, the writer being dead, records them and removes the file.
// While the relay still ran, the same file was its session's, in use: verify said nothing.
TEST(Intents, NegativeControlWithoutTheKeepersRecoveryVerifyReportsThemAndReconcileRecords) {
    TempDir dir;
    std::string db = dir.file("j.db");
    CliRun running;
    auto killed = kill_relay_after_requests(db, "journal_hold_intents,keeper_intents", [&] {
        running = run_cli(dir, {"audit", "verify", "--journal", db}, 30s);
    });
    EXPECT_EQ(running.code, 0) << running.out << running.err;
    EXPECT_EQ((running.out + running.err).find("uncommitted intents"), std::string::npos)
        << "a running session's intent file read as a warning\n"
        << running.out << running.err;
    ASSERT_TRUE(killed.keeper_finished) << "the keeper did not finish its teardown";
    EXPECT_TRUE(requests_on_record(db).empty())
        << "with the keeper's recovery off, the held requests should be missing";

    auto v = run_cli(dir, {"audit", "verify", "--journal", db}, 30s);
    EXPECT_EQ(v.code, 0) << v.out << v.err;
    EXPECT_NE((v.out + v.err).find("uncommitted intents: " + killed.intent_file), std::string::npos)
        << v.out << v.err;

    auto r = run_cli(dir, {"journal", "reconcile", "--journal", db}, 30s);
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    auto rows = requests_on_record(db);
    ASSERT_EQ(rows.size(), 3u) << "reconcile did not recover the intents";
    for (size_t i = 0; i < rows.size(); ++i)
        EXPECT_EQ(rows[i].id, static_cast<int64_t>(i + 1));
    EXPECT_NE(::access(killed.intent_file.c_str(), F_OK), 0);
    auto again = run_cli(dir, {"audit", "verify", "--journal", db}, 30s);
    EXPECT_EQ(again.code, 0) << again.out << again.err;
}

// A damaged intent file (a torn last line, a garbled line) is reported and counted as lost
// requests in journal.degraded; the good lines are recovered, none twice.
TEST(Intents, TornAndGarbledLinesAreReportedAndCounted) {
    TempDir dir;
    journal::Options o = with_intents(dir);
    o.hold_intents = true;  // nothing chained by the writer: the file is the only copy
    auto j = journal::Journal::open(o);
    ASSERT_TRUE(j) << j.error().message;
    const std::string session = "s1";
    for (int id = 1; id <= 2; ++id) {
        journal::Event e{"activity.request", session, 0,
                         journal::Json{{"id", journal::Json{{"n", id}}}, {"method", "ping"}}};
        ASSERT_TRUE((*j)->append_intent(e));
    }
    std::string file = (*j)->paths().intent_file(session);
    {
        Fd f(::open(file.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC));
        ASSERT_TRUE(f.valid());
        std::string damage = "not json at all\n{\"data\":{},\"kind\":\"activity.req";
        ASSERT_EQ(::write(f.get(), damage.data(), damage.size()),
                  static_cast<ssize_t>(damage.size()));
    }
    auto r = journal::recover_intents(**j, file);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->recovered, 2);
    EXPECT_EQ(r->bad, 2);
    ASSERT_EQ(r->problems.size(), 2u);
    EXPECT_NE(r->problems[0].find("line 3"), std::string::npos) << r->problems[0];
    EXPECT_NE(r->problems[1].find("line 4"), std::string::npos) << r->problems[1];
    EXPECT_NE(r->problems[1].find("torn"), std::string::npos) << r->problems[1];
    EXPECT_NE(::access(file.c_str(), F_OK), 0);

    // Recovering again finds nothing; the writer's own close recovers nothing twice.
    auto twice = journal::recover_session_intents(**j, session);
    ASSERT_TRUE(twice);
    EXPECT_EQ(twice->recovered, 0);
    ASSERT_TRUE((*j)->close());
    std::map<std::string, int64_t> kinds;
    EXPECT_EQ(requests_on_record(o.path, &kinds).size(), 2u);
    EXPECT_EQ(kinds["journal.degraded"], 1);
    int64_t lost_requests = 0;
    (void)journal::for_each_record(o.path, 0, [&](const journal::Record& rec) {
        if (rec.kind == "journal.degraded")
            lost_requests += nlohmann::json::parse(rec.body)["data"]["lost_kinds"].value(
                "activity_request", int64_t{0});
        return true;
    });
    EXPECT_EQ(lost_requests, 2) << "the damaged lines are not counted";
}

// The keeper hands its teardown's records to the relay as the lines it wrote for them to the
// intent file, and the relay commits each line as it stands (Journal::post_intent_line)
// instead of parsing it into a Json and serializing it again. What a user would notice if
// that went wrong: a record whose body is not what the keeper wrote (the relay's origin
// missing, the data altered), or a line that is not a teardown record of this session (a
// garbled pipe, another session's, a request) put on record as one.
TEST(Intents, ATeardownRecordsLineIsCommittedAsItsRecordAndAnythingElseIsRefused) {
    TempDir dir;
    const journal::Options o = with_intents(dir);
    auto j = journal::Journal::open(o);
    ASSERT_TRUE(j) << j.error().message;
    const std::string session = "0123456789abcdef";
    ProcessId id{4242, 777};
    Process p;
    p.id = id;
    p.ppid = 1;
    p.cmdline = std::string("server\0caf\xc3\xa9 \"quoted\"\0", 22);  // escapes in the data
    std::vector<journal::Event> events = {
        journal::process_snapshot(session, p, "before_first_signal", {}),
        journal::process_signal(session, id, SIGTERM, "pidfd", 0),
        journal::process_exit(session, id, std::nullopt, std::nullopt, "after_sigterm")};
    int64_t ts = journal::now_ns();
    for (auto& e : events)
        e.ts_ns = ++ts;
    std::vector<std::string> lines;
    for (const auto& e : events) {
        auto l = journal::intent_lines(std::span(&e, 1));
        ASSERT_TRUE(l) << l.error().message;
        lines.push_back(l->substr(0, l->size() - 1));
    }
    for (const auto& l : lines)
        ASSERT_TRUE((*j)->post_intent_line(l, session));
    // The same records posted as events: the bodies post() makes, to compare with.
    for (const auto& e : events)
        (*j)->post(e);
    ASSERT_TRUE((*j)->flush());

    auto refused = [&](const std::string& line, std::string_view in_session = "") {
        auto st = (*j)->post_intent_line(line, in_session.empty() ? session : in_session);
        return st ? std::string("accepted") : st.error().message;
    };
    const std::string& exit_line = lines[2];
    auto replaced = [&](std::string_view what, std::string_view with) {
        std::string l = exit_line;
        size_t at = l.find(what);
        EXPECT_NE(at, std::string::npos) << what;
        return at == std::string::npos ? l : l.replace(at, what.size(), with);
    };
    const std::string request = *journal::intent_lines(std::vector<journal::Event>{
        journal::Event{"activity.request", session, ts + 1, journal::Json{{"method", "ping"}}}});
    const std::map<std::string, std::string> cases = {
        {"not json at all", "that is not a JSON object"},
        {exit_line + "x", "that is not a JSON object"},
        {exit_line.substr(0, exit_line.size() - 1), "that is not a JSON object"},
        {request.substr(0, request.size() - 1), "of kind activity.request"},
        {replaced(",\"v\":1}", ",\"v\":1,\"w\":2}"), "that is not a record"},
        {replaced("{\"data\":{", "{\"data\":[{\"a\":1}],\"x\":{"), "that is not a record"},
        {replaced("\"seq\":0", "\"seq\":7"), "not as an intent line is written"},
        {replaced("\"origin\":\"\"", "\"origin\":\"someone\""), "not as an intent line is written"},
        {replaced("{\"data\":{", "{\"data\": {"), "whose data is not canonical"},
        {replaced("\"pid\":4242", "\"pid\": 4242"), "whose data is not canonical"},
        {replaced("\"pid\":4242,\"starttime\":777", "\"starttime\":777,\"pid\":4242"),
         "whose data is not canonical"},
        {replaced("\"pid\":4242", "\"pid\":4242.5"), "whose data is not canonical"},
    };
    for (const auto& [line, why] : cases)
        EXPECT_NE(refused(line).find(why), std::string::npos)
            << "line: " << line << "\nanswer: " << refused(line);
    EXPECT_NE(refused(exit_line, "another0session0").find("of another session"), std::string::npos);
    ASSERT_TRUE((*j)->close());

    auto records = journal::session_records(o.path, session);
    ASSERT_TRUE(records) << records.error().message;
    ASSERT_EQ(records->size(), 6u) << "a refused line was put on record";
    auto without_seq = [](const journal::Record& r) {
        auto b = nlohmann::json::parse(r.body);
        b.erase("seq");
        return b.dump();
    };
    for (size_t i = 0; i < 3; ++i) {
        EXPECT_EQ((*records)[i].kind, events[i].kind);
        EXPECT_EQ(without_seq((*records)[i]), without_seq((*records)[i + 3]))
            << "the line's record is not the one post() makes of its event";
        EXPECT_EQ(nlohmann::json::parse((*records)[i].body)["origin"], (*j)->origin());
    }
    auto v = journal::verify(journal::VerifyOptions{.path = o.path});
    EXPECT_EQ(v.exit_code, 0) << v.reason;
}

// An oversize request is named by two records, its activity.oversize (at the end of its line)
// and its answer, which the writer may commit in different batches. Both must name the
// request's seq: an answer with request_seq 0 settles nothing and the request stays in flight
// on record for ever (Run.OversizeRequestIsJournaledAndItsAnswerResolvesIt saw it under load).
TEST(Intents, EveryRecordNamingARequestGetsItsSeqWhateverTheBatch) {
    TempDir dir;
    const journal::Options o = with_intents(dir);
    auto j = journal::Journal::open(o);
    ASSERT_TRUE(j) << j.error().message;
    const std::string session = "s1";
    journal::Event request{
        "activity.request", session, 0,
        journal::Json{{"id", journal::Json{{"n", 8}}}, {"method", "tools/call"}}};
    auto ticket = (*j)->append_intent(request);
    ASSERT_TRUE(ticket) << ticket.error().message;
    ASSERT_LT(*ticket, 0);
    ASSERT_TRUE((*j)->flush());  // the request is chained on its own, as under load
    (*j)->post(journal::Event{
        "activity.oversize", session, 0,
        journal::Json{
            {"direction", "client_to_server"}, {"bytes", 300000}, {"request_seq", *ticket}}});
    ASSERT_TRUE((*j)->flush());  // the answer comes in a later batch
    journal::Response r;
    r.session = session;
    r.request_seq = *ticket;
    r.id = journal::Json{{"n", 8}};
    // request_seq not the data's last key: the writer cannot put the seq in place in the
    // prepared text and serialises the record again (the other path).
    (*j)->post(journal::Event{"activity.note", session, 0,
                              journal::Json{{"request_seq", *ticket}, {"zz_after", 1}}});
    (*j)->post(journal::activity_response(r));
    ASSERT_TRUE((*j)->close());

    int64_t request_seq = 0;
    std::map<std::string, int64_t> named;  // kind -> the request_seq it names
    auto st = journal::for_each_record(o.path, 0, [&](const journal::Record& rec) {
        if (rec.kind == "activity.request") request_seq = rec.seq;
        auto d = nlohmann::json::parse(rec.body)["data"];
        if (d.is_object() && d.contains("request_seq"))
            named[rec.kind] = d["request_seq"].get<int64_t>();
        return true;
    });
    ASSERT_TRUE(st) << st.error().message;
    ASSERT_GT(request_seq, 0);
    EXPECT_EQ(named["activity.oversize"], request_seq);
    EXPECT_EQ(named["activity.response"], request_seq) << "the answer lost its request";
    EXPECT_EQ(named["activity.note"], request_seq);
    // The seq written into each record's body is the one its chain hashes.
    auto v = journal::verify(journal::VerifyOptions{.path = o.path});
    EXPECT_EQ(v.exit_code, 0) << v.reason;
    auto rows = journal::list_activity(o.path, {});
    ASSERT_TRUE(rows) << rows.error().message;
    ASSERT_EQ(rows->size(), 1u);
    EXPECT_EQ((*rows)[0].outcome, "ok") << "the request is still in flight on record";
}

// A batch that fails (here: the append lock held by someone else past the wait) leaves its
// intents in their file, to be recovered at close; their tickets never get a seq. An answer
// committed meanwhile cannot name its request: it must not be written as request_seq 0
// (an answer to nothing, the request in flight for ever once recovered), but counted as lost
// in journal.degraded, with its id.
TEST(Intents, AnAnswerWhoseRequestsBatchFailedIsCountedLostNotWrittenAsAnswerToNothing) {
    TempDir dir;
    journal::Options o = with_intents(dir);
    o.busy_timeout = 50ms;
    auto j = journal::Journal::open(o);
    ASSERT_TRUE(j) << j.error().message;
    const std::string session = "s1";
    journal::Event request{
        "activity.request", session, 0,
        journal::Json{{"id", journal::Json{{"n", 9}}}, {"method", "tools/call"}}};
    {
        Fd held(::open((*j)->paths().lock.c_str(), O_RDWR | O_CLOEXEC));
        ASSERT_TRUE(held.valid());
        ASSERT_EQ(::flock(held.get(), LOCK_EX), 0);
        auto ticket = (*j)->append_intent(request);
        ASSERT_TRUE(ticket) << ticket.error().message;
        EXPECT_FALSE((*j)->flush()) << "the batch should have failed on the held lock";
        journal::Response r;
        r.session = session;
        r.request_seq = *ticket;
        r.id = journal::Json{{"n", 9}};
        (*j)->post(journal::activity_response(r));
    }  // the lock is free again: the answer's batch commits
    ASSERT_TRUE((*j)->flush());
    ASSERT_TRUE((*j)->close());  // recovers the request from its intent file

    int requests = 0, answers_to_nothing = 0;
    int64_t lost_answers = 0;
    nlohmann::json lost_ids = nlohmann::json::array();
    auto st = journal::for_each_record(o.path, 0, [&](const journal::Record& rec) {
        auto d = nlohmann::json::parse(rec.body)["data"];
        if (rec.kind == "activity.request") ++requests;
        if (rec.kind == "activity.response" && d.value("request_seq", int64_t{-1}) <= 0)
            ++answers_to_nothing;
        if (rec.kind == "journal.degraded") {
            lost_answers += d["lost_kinds"].value("activity_response", int64_t{0});
            for (auto& id : d["request_ids"])
                lost_ids.push_back(id);
        }
        return true;
    });
    ASSERT_TRUE(st) << st.error().message;
    EXPECT_EQ(requests, 1) << "the request was not recovered from its intent file";
    EXPECT_EQ(answers_to_nothing, 0) << "an answer on record names no request";
    EXPECT_EQ(lost_answers, 1) << "the answer that could not name its request is not counted";
    EXPECT_NE(lost_ids.dump().find(R"({"n":9})"), std::string::npos) << lost_ids.dump();
}

}  // namespace
}  // namespace warden::testing
