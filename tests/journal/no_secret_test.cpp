// No secret on record, whatever record it would be in: every credential shape is planted in the
// command lines of servers that `run` tears down (one SIGTERMed, one that must be SIGKILLed),
// of a tree `reap` removes (and `inspect --record` took first), of a drill's server, of a server
// that hibernates and wakes
// (--idle-stop) and of a --lazy server that leaves its catalog; then the journal's files (the
// database, its -wal, the intent files) and everything the journal commands print (`journal
// show`, every export format) are searched, byte for byte, for each secret. The negative
// control records a teardown with redaction switched off (MCPWARDEN_FAULT=record_unredacted)
// and finds it.
#include <dirent.h>
#include <sys/stat.h>

#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/cli_run.hpp"
#include "common/testing.hpp"
#include "journal/query.hpp"

namespace warden::testing {
namespace {

// Each shape, with a value found nowhere else: what the search looks for.
const std::vector<std::string> kSecrets = {
    "hunter3",                // postgresql://admin:hunter3@db (URL user-info)
    "hunter6",                // PGPASSWORD=hunter6 in the `sh -c` script
    "tokVALUE7",              // --token X
    "pwVALUE8",               // --password X
    "akVALUE9",               // --api-key=X
    "SNAPvalue10",            // --api-key sk-live-SNAPvalue10
    "xyzBEARER11",            // Authorization: Bearer X
    "GHPsecret0123456789ab",  // ghp_… on its own
    "SKPROJsecret12",         // sk-… on its own
    "AKIAIOSFODNN7SECRETX",   // an AWS access key id (AKIA and 16) …
    "wJalrXUtnAWSsecret13",   // … and its secret, in the script
};

// A server command carrying every shape: `sh` is the process with the secrets in its argv (it
// waits for the fixture, so it is a member of the tree to the end, as the `npx` and `sh -c`
// wrappers of real servers are); `script` runs the fixture with the flags given.
std::vector<std::string> secret_server(const std::string& fixture_flags, bool trap_term = false) {
    std::string script = std::string(trap_term ? "trap '' TERM; " : "") +
                         "AWS_SECRET_ACCESS_KEY=wJalrXUtnAWSsecret13 PGPASSWORD=hunter6 \"$0\" " +
                         fixture_flags + "; true";
    return {"/bin/sh",
            "-c",
            script,
            kFixture,
            "postgresql://admin:hunter3@db/prod",
            "--api-key",
            "sk-live-SNAPvalue10",
            "--token",
            "tokVALUE7",
            "--password",
            "pwVALUE8",
            "--api-key=akVALUE9",
            "Authorization: Bearer xyzBEARER11",
            "ghp_GHPsecret0123456789ab",
            "sk-proj-SKPROJsecret12",
            "AKIAIOSFODNN7SECRETX"};
}

std::vector<std::string> mcpwarden_run_argv(const std::string& db, std::vector<std::string> flags,
                                            const std::vector<std::string>& server) {
    std::vector<std::string> a{kCli,          "run",   "--journal",    db,
                               "--eof-grace", "200ms", "--term-grace", "300ms"};
    a.insert(a.end(), flags.begin(), flags.end());
    a.push_back("--");
    a.insert(a.end(), server.begin(), server.end());
    return a;
}

std::string whole_file(const std::string& path) {
    std::string out;
    if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
        char buf[65536];
        size_t n;
        while ((n = std::fread(buf, 1, sizeof buf, f)) > 0)
            out.append(buf, n);
        std::fclose(f);
    }
    return out;
}

// Every regular file under `dir` (bounded in depth), by path.
void files_under(const std::string& dir, std::vector<std::string>& out, int depth = 0) {
    if (depth > 4) return;
    DIR* d = ::opendir(dir.c_str());
    if (!d) return;
    while (dirent* e = ::readdir(d)) {
        std::string name = e->d_name;
        if (name == "." || name == "..") continue;
        std::string path = dir + "/" + name;
        struct stat st;
        if (::lstat(path.c_str(), &st) != 0) continue;
        if (S_ISDIR(st.st_mode))
            files_under(path, out, depth + 1);
        else if (S_ISREG(st.st_mode))
            out.push_back(path);
    }
    ::closedir(d);
}

// "SECRET in WHERE" for each secret found in `text`.
std::vector<std::string> secrets_in(const std::string& text, const std::string& where) {
    std::vector<std::string> found;
    for (const std::string& s : kSecrets)
        if (text.find(s) != std::string::npos) found.push_back(s + " in " + where);
    return found;
}

// Every file of the journal's directory as it is now: the database, its -wal and -shm, the
// intent files, the checkpoints. Which kinds of file were there is added to `seen`.
std::vector<std::string> secrets_in_files(const std::string& dir, std::set<std::string>& seen) {
    std::vector<std::string> files, found;
    files_under(dir, files);
    for (const std::string& f : files) {
        if (f.ends_with("-wal")) seen.insert("wal");
        if (f.find("/intents/") != std::string::npos) seen.insert("intents");
        if (f.ends_with(".db")) seen.insert("db");
        for (auto& s : secrets_in(whole_file(f), f))
            found.push_back(std::move(s));
    }
    return found;
}

// What the journal commands print: `journal show` (text and --jsonl) of every session, and
// every export format, with the argument previews and without.
std::vector<std::string> secrets_in_output(const TempDir& dir, const std::string& db) {
    std::vector<std::string> found;
    auto take = [&](std::vector<std::string> args) {
        args.push_back("--journal");
        args.push_back(db);
        CliRun r = run_cli(dir, args, 30s);
        EXPECT_EQ(r.code, 0) << r.err;
        std::string where;
        for (const auto& a : args)
            where += a + " ";
        for (auto& s : secrets_in(r.out + r.err, where))
            found.push_back(std::move(s));
        return r.out;
    };
    std::set<std::string> sessions;
    auto st = journal::for_each_record(db, 0, [&](const journal::Record& r) {
        if (!r.session.empty()) sessions.insert(r.session);
        return true;
    });
    EXPECT_TRUE(st.ok()) << st.error().message;
    EXPECT_FALSE(sessions.empty());
    for (const std::string& s : sessions) {
        take({"journal", "show", s});
        take({"journal", "show", s, "--jsonl"});
    }
    for (const char* format : {"ndjson", "otlp-json"}) {
        EXPECT_NE(take({"journal", "export", "--format", format}), "") << format;
        take({"journal", "export", "--format", format, "--include-content"});
    }
    return found;
}

// The kinds of the records in `db`, each once, and how many `kind` records there are.
std::set<std::string> kinds_in(const std::string& db) {
    std::set<std::string> kinds;
    auto st = journal::for_each_record(db, 0, [&](const journal::Record& r) {
        kinds.insert(r.kind);
        return true;
    });
    EXPECT_TRUE(st.ok()) << st.error().message;
    return kinds;
}

// The body of every record of `kind`, joined.
std::string bodies_of(const std::string& db, const std::string& kind) {
    std::string out;
    auto st = journal::for_each_record(db, 0, [&](const journal::Record& r) {
        if (r.kind == kind) out += r.body + "\n";
        return true;
    });
    EXPECT_TRUE(st.ok()) << st.error().message;
    return out;
}

// A session of `server` under `run` with `flags`, its client past the handshake.
std::unique_ptr<TestChild> initialized_session(
    const std::string& db, const std::vector<std::string>& flags,
    const std::vector<std::string>& server,
    std::vector<std::pair<std::string, std::string>> env = {}) {
    ChildOptions co;
    co.env = std::move(env);
    auto c = std::make_unique<TestChild>(mcpwarden_run_argv(db, flags, server), co);
    EXPECT_TRUE(c->started()) << c->error();
    EXPECT_TRUE(c->write_line(rpc_initialize(1)));
    EXPECT_TRUE(read_response(*c, 1, 10s));
    EXPECT_TRUE(c->write_line(rpc_initialized()));
    return c;
}

// The client leaves: `run` tears the tree down and exits, nothing of the session left.
void leave(TestChild& c) {
    c.close_stdin();
    EXPECT_TRUE(c.wait_exit(20s));
    EXPECT_TRUE(nothing_tagged_left(c.tag()));
}

void run_and_leave(const std::string& db, const std::vector<std::string>& server,
                   std::vector<std::pair<std::string, std::string>> env = {}) {
    leave(*initialized_session(db, {}, server, std::move(env)));
}

// The session's teardown targets in session.end: how each ended.
std::string teardown_outcomes(const std::string& db) {
    std::string hows;
    auto st = journal::for_each_record(db, 0, [&](const journal::Record& r) {
        if (r.kind != "session.end") return true;
        auto j = nlohmann::json::parse(r.body, nullptr, false);
        for (const auto& t : j["data"]["teardown"]["targets"])
            hows += t.value("how", "?") + " ";
        return true;
    });
    EXPECT_TRUE(st.ok()) << st.error().message;
    return hows;
}

TEST(NoSecretOnRecord, TeardownReapDrillHibernationAndLazyCatalog) {
    TempDir dir;
    const std::string jdir = dir.file("j");
    ASSERT_EQ(::mkdir(jdir.c_str(), 0700), 0);
    const std::string db = jdir + "/journal.db";
    std::set<std::string> seen;
    std::vector<std::string> found;
    auto search_files = [&] {
        for (auto& s : secrets_in_files(jdir, seen))
            found.push_back(std::move(s));
    };

    // A server that ignores EOF: SIGTERMed, the `sh` holding the secrets with it.
    run_and_leave(db, secret_server("--on-eof ignore"));
    EXPECT_NE(teardown_outcomes(db).find("exited after SIGTERM"), std::string::npos)
        << teardown_outcomes(db);
    search_files();
    // One that ignores SIGTERM too, its `sh` as well: SIGKILLed.
    run_and_leave(db, secret_server("--on-eof ignore --ignore-term", true));
    EXPECT_NE(teardown_outcomes(db).find("killed"), std::string::npos) << teardown_outcomes(db);
    search_files();
    // What is evidence stays: the command, each credential replaced where it was.
    const std::string ends = bodies_of(db, "session.end");
    for (const char* kept : {"postgresql://***@db/prod --api-key *** --token *** --password *** "
                             "--api-key=*** Authorization: Bearer *** *** *** ***",
                             "AWS_SECRET_ACCESS_KEY=*** PGPASSWORD=*** "})
        EXPECT_NE(ends.find(kept), std::string::npos) << kept << " not in\n" << ends;

    // A tree left by nobody's session, its top process holding the secrets: reaped.
    {
        std::vector<std::string> orphan = secret_server("--on-eof ignore --ignore-term", true);
        std::string line;
        for (size_t i = 0; i < orphan.size(); ++i)
            line += (i ? " '" : "'") + orphan[i] + "'";  // none of them holds a quote
        TestChild spawner({"/bin/sh", "-c", line + " </dev/null >/dev/null 2>&1 & echo $!"});
        ASSERT_TRUE(spawner.started()) << spawner.error();
        auto pid = spawner.read_line(10s);
        ASSERT_TRUE(pid);
        ASSERT_TRUE(spawner.wait_exit(10s));
        ASSERT_TRUE(wait_until([&] { return live_tagged(spawner.tag()).size() >= 2; }, 10s));
        // Its incident record first (`inspect --record`: a process.snapshot), as an operator
        // would take it before acting.
        CliRun inspected = run_cli(dir, {"inspect", *pid, "--record", "--journal", db}, 30s);
        EXPECT_EQ(inspected.code, 0) << inspected.out << inspected.err;
        EXPECT_NE(bodies_of(db, "process.snapshot").find("\"reason\":\"inspect\""),
                  std::string::npos);
        CliRun r =
            run_cli(dir, {"reap", "--pid", *pid, "--grace", "300ms", "--yes", "--journal", db});
        EXPECT_EQ(r.code, 0) << r.out << r.err;
        EXPECT_TRUE(nothing_tagged_left(spawner.tag()));
        EXPECT_NE(bodies_of(db, "reap.target").find("\"outcome\":\"reaped\""), std::string::npos)
            << bodies_of(db, "reap.target");
        search_files();
    }

    // A drill of the server (its client SIGKILLed while idle).
    {
        std::vector<std::string> args{"drill", "--crash-at",  "idle",  "--journal",
                                      db,      "--eof-grace", "200ms", "--term-grace",
                                      "300ms", "--"};
        auto server = secret_server("--on-eof ignore");
        args.insert(args.end(), server.begin(), server.end());
        CliRun r = run_cli(dir, args);
        EXPECT_EQ(r.code, 0) << r.out << r.err;
        // Its report is not a record, but it is written to be shared: redacted too.
        for (auto& s : secrets_in(r.out + r.err, "the drill's report"))
            found.push_back(std::move(s));
        search_files();
    }

    // Asleep while idle, woken by a call (--idle-stop); then a --lazy session that starts the
    // server only for initialize and leaves its catalog.
    {
        auto c =
            initialized_session(db, {"--idle-stop", "300ms"}, secret_server("--on-eof ignore"));
        EXPECT_TRUE(wait_until([&] { return kinds_in(db).contains("session.hibernate"); }, 10s));
        search_files();  // the session's intent file is there while it runs
        ASSERT_TRUE(c->write_line(rpc_tools_call(2, "echo", {{"text", "hi"}})));
        EXPECT_TRUE(read_response(*c, 2, 10s));
        leave(*c);
        EXPECT_NE(bodies_of(db, "session.wake"), "");
        search_files();
    }
    {
        auto c = initialized_session(db, {"--lazy"}, secret_server("--on-eof ignore"));
        ASSERT_TRUE(c->write_line(rpc_tools_list(2)));
        EXPECT_TRUE(read_response(*c, 2, 10s));
        leave(*c);
        EXPECT_NE(bodies_of(db, "server.catalog"), "");
        search_files();
    }

    // Each scenario is on record (the search looked at something), in each file kind.
    const auto kinds = kinds_in(db);
    for (const char* k : {"session.end", "process.snapshot", "reap.target", "session.hibernate",
                          "session.wake", "server.catalog"})
        EXPECT_TRUE(kinds.contains(k)) << k;
    EXPECT_TRUE(seen.contains("db"));
    EXPECT_TRUE(seen.contains("wal"));
    EXPECT_TRUE(seen.contains("intents"));
    for (auto& s : secrets_in_output(dir, db))
        found.push_back(std::move(s));
    std::string all;
    for (const auto& s : found)
        all += s + "\n";
    EXPECT_TRUE(found.empty()) << all;

    // Negative control: a teardown's targets recorded as they stand are found, in the
    // database and in the exports alike.
    TempDir control;
    const std::string cdb = control.file("journal.db");
    run_and_leave(cdb, secret_server("--on-eof ignore"),
                  {{"MCPWARDEN_FAULT", "record_unredacted"}});
    std::set<std::string> cseen;
    EXPECT_FALSE(secrets_in_files(control.path(), cseen).empty());
    EXPECT_NE(bodies_of(cdb, "session.end").find("hunter3"), std::string::npos);
    EXPECT_FALSE(secrets_in_output(control, cdb).empty());
}

}  // namespace
}  // namespace warden::testing
