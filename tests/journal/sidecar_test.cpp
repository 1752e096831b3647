// Other users' files beside the journal: in a shared directory, a key planted by another
// user would sign our checkpoints and a lock she holds would stall every request. Sidecars
// are trusted only when they belong to the journal's owner and no one else can use them;
// otherwise the journal is refused with an error naming the file, and (warn, the default)
// the server is served anyway.
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/cli_run.hpp"
#include "common/testing.hpp"
#include "journal/intents.hpp"
#include "journal/journal.hpp"
#include "journal/query.hpp"
#include "sys/fd.hpp"

namespace warden::testing {
namespace {

// The file's text, "" when it cannot be read.
std::string file_text(const std::string& path) {
    auto t = warden::read_file(path);
    return t ? *t : std::string();
}

// Runs `script` with /bin/sh as uid/gid 65534 (nobody); its exit status.
int as_nobody(const std::string& script) {
    TestChild c({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--",
                 "/bin/sh", "-c", script});
    if (!c.started()) return -1;
    c.close_stdin();
    auto st = c.wait_exit(10s);
    return st && WIFEXITED(*st) ? WEXITSTATUS(*st) : -1;
}

struct Served {
    bool answered = false;
    std::string err;
};

// One echo call through `run --journal db`; whether it was answered, and stderr.
Served serve_one(const std::string& db) {
    Served s;
    TestChild c({kCli, "run", "--eof-grace", "200ms", "--term-grace", "300ms", "--journal", db,
                 "--", kFixture},
                {.capture_stderr = true});
    if (!c.started()) return s;
    c.write_line(rpc_tools_call(1, "echo", {{"text", "hi"}}));
    auto reply = read_response(c, 1, 10s);
    s.answered = reply && result_text(*reply) == "hi";
    c.close_stdin();
    (void)c.wait_exit(20s);
    s.err = c.read_stderr(5s);
    return s;
}

TEST(JournalSidecars, OtherUsersKeyAndLockAreRefused) {
    if (::geteuid() != 0) GTEST_SKIP() << "planting files as another user needs root";
    TempDir dir;
    ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
    std::string shared = dir.file("shared");
    ASSERT_EQ(::mkdir(shared.c_str(), 0700), 0);
    ASSERT_EQ(::chmod(shared.c_str(), 01777), 0);  // like /tmp
    // A valid key, made by a journal elsewhere: what she plants.
    std::string gen = dir.file("gen.db");
    ASSERT_TRUE(journal::Journal::open({.path = gen}).ok());
    std::string key_text = file_text(dir.file("gen.key"));
    ASSERT_FALSE(key_text.empty());
    std::string db = shared + "/j.db", key = shared + "/j.key", lock = shared + "/j.lock";
    ASSERT_EQ(as_nobody("umask 0; printf '%s' '" + key_text + "' > " + key + "; : > " + lock), 0);

    auto s = serve_one(db);
    EXPECT_TRUE(s.answered) << "a refused journal must not take the server down";
    EXPECT_NE(s.err.find("journal lock " + lock + ": owned by uid 65534"), std::string::npos)
        << s.err;
    ASSERT_EQ(::unlink(lock.c_str()), 0);

    s = serve_one(db);
    EXPECT_TRUE(s.answered);
    EXPECT_NE(s.err.find("journal key " + key + ": owned by uid 65534"), std::string::npos)
        << s.err;
    EXPECT_NE(::access((shared + "/j.pub").c_str(), F_OK), 0) << "nothing was signed";

    // Negative control: the same key, once it is the owner's and private, is used — the
    // check above is all that kept her key from signing our checkpoints.
    ASSERT_EQ(::chown(key.c_str(), 0, 0), 0);
    ASSERT_EQ(::chmod(key.c_str(), 0600), 0);
    s = serve_one(db);
    EXPECT_TRUE(s.answered);
    EXPECT_EQ(s.err.find("mcpwarden: "), std::string::npos) << s.err;
    EXPECT_EQ(file_text(shared + "/j.pub"), file_text(dir.file("gen.pub")));
    auto rows = journal::list_sessions(db, {});
    ASSERT_TRUE(rows) << rows.error().message;
    EXPECT_EQ(rows->size(), 1u);
}

// A key of ours that others can read is refused too: whoever reads it can re-sign.
TEST(JournalSidecars, OwnKeyReadableByOthersIsRefused) {
    TempDir dir;
    std::string db = dir.file("j.db");
    ASSERT_TRUE(journal::Journal::open({.path = db}).ok());
    ASSERT_EQ(::chmod(dir.file("j.key").c_str(), 0644), 0);
    auto j = journal::Journal::open({.path = db});
    ASSERT_FALSE(j.ok());
    EXPECT_EQ(j.error().message,
              "journal key " + dir.file("j.key") +
                  ": mode 0644 lets other users read or write it: refusing to use it; chmod 600 "
                  "it or remove it");
    ASSERT_EQ(::chmod(dir.file("j.key").c_str(), 0600), 0);
    EXPECT_TRUE(journal::Journal::open({.path = db}).ok()) << "control: 0600 is accepted";
}

// The activity.request records whose tool is `tool`.
int requests_for_tool(const std::string& db, const std::string& tool) {
    int n = 0;
    auto st = journal::for_each_record(db, 0, [&](const journal::Record& r) {
        if (r.kind == "activity.request" &&
            r.body.find("\"tool\":\"" + tool + "\"") != std::string::npos)
            ++n;
        return true;
    });
    EXPECT_TRUE(st) << st.error().message;
    return n;
}

// Intent files (journal.cpp, "Intents") are appended to the log as this user's records by
// whoever recovers them. One that another user planted, in a directory she could write once,
// must never be: `journal reconcile` and `audit verify` name it and leave it alone; an
// intents directory that is hers refuses the journal, as her key or lock would.
TEST(JournalSidecars, OtherUsersIntentFileIsNeverRecoveredAndHerIntentsDirectoryIsRefused) {
    if (::geteuid() != 0) GTEST_SKIP() << "planting files as another user needs root";
    TempDir dir;
    ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
    const std::string db = dir.file("j.db");
    const std::string session = "s-planted";
    {
        // A session whose writer is gone (our pid with another start time): its intent file
        // is what reconcile recovers.
        auto j = journal::Journal::open({.path = db});
        ASSERT_TRUE(j) << j.error().message;
        journal::SessionStart s;
        s.session = session;
        s.server_name = "fixture";
        s.writer.process = {::getpid(), 1};
        s.writer.boot_id = journal::current_boot_id();
        ASSERT_TRUE((*j)->append(journal::session_start(s)));
        ASSERT_TRUE((*j)->close());
    }
    const auto paths = journal::Paths::for_db(db);
    const std::string file = paths.intent_file(session);
    ASSERT_EQ(::mkdir(paths.intents.c_str(), 0700), 0);
    ASSERT_EQ(::chmod(paths.intents.c_str(), 0777), 0);  // writable by her for a moment
    const std::string line =
        R"({"data":{"id":{"n":7},"method":"tools/call","tool":"planted"},"kind":"activity.request",)"
        R"("origin":"x","seq":0,"session":")" +
        session + R"(","ts":1234,"v":1})";
    ASSERT_EQ(as_nobody("umask 0; printf '%s\n' '" + line + "' > " + file), 0);
    ASSERT_EQ(::chmod(paths.intents.c_str(), 0700), 0);  // and ours alone again

    const std::string refused = "journal intent file " + file +
                                ": owned by uid 65534, not by the journal's owner (uid 0): "
                                "refusing to use it";
    auto r = run_cli(dir, {"journal", "reconcile", "--journal", db}, 30s);
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    EXPECT_NE(r.err.find(refused), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("(not recovered)"), std::string::npos) << r.err;
    EXPECT_EQ(requests_for_tool(db, "planted"), 0) << "her request was appended as ours";
    EXPECT_EQ(::access(file.c_str(), F_OK), 0) << "her file was removed, not reported";
    auto v = run_cli(dir, {"audit", "verify", "--journal", db}, 30s);
    EXPECT_EQ(v.code, 0) << v.out << v.err;
    EXPECT_NE((v.out + v.err).find(refused), std::string::npos) << v.out << v.err;
    EXPECT_EQ((v.out + v.err).find("uncommitted intents"), std::string::npos) << v.out;

    // Negative control: the same file, once it is ours and not writable by others, is
    // recovered — the check is all that kept her line out of the log.
    ASSERT_EQ(::chown(file.c_str(), 0, 0), 0);
    ASSERT_EQ(::chmod(file.c_str(), 0600), 0);
    r = run_cli(dir, {"journal", "reconcile", "--journal", db}, 30s);
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    EXPECT_EQ(r.err.find("refusing"), std::string::npos) << r.err;
    EXPECT_EQ(requests_for_tool(db, "planted"), 1);
    EXPECT_NE(::access(file.c_str(), F_OK), 0);

    // Her intents directory beside a journal in a shared directory refuses the journal
    // (the server is still served); ours, with other users kept out, does not.
    const std::string shared = dir.file("shared");
    ASSERT_EQ(::mkdir(shared.c_str(), 0700), 0);
    ASSERT_EQ(::chmod(shared.c_str(), 01777), 0);  // like /tmp
    const std::string db2 = shared + "/k.db", intents2 = shared + "/k.intents";
    ASSERT_EQ(as_nobody("umask 0; mkdir " + intents2), 0);
    auto s = serve_one(db2);
    EXPECT_TRUE(s.answered) << "a refused journal must not take the server down";
    EXPECT_NE(s.err.find("journal intents directory " + intents2 +
                         ": owned by uid 65534, not by the journal's owner (uid 0): refusing "
                         "to use it"),
              std::string::npos)
        << s.err;
    ASSERT_EQ(::chown(intents2.c_str(), 0, 0), 0);
    auto j = journal::Journal::open({.path = db2});
    ASSERT_FALSE(j.ok()) << "an intents directory others can write must be refused";
    EXPECT_EQ(j.error().message,
              "journal intents directory " + intents2 +
                  ": mode 0777 lets other users write it: refusing to use it; chmod go-w it or "
                  "remove it");
    ASSERT_EQ(::chmod(intents2.c_str(), 0700), 0);
    EXPECT_TRUE(journal::Journal::open({.path = db2}).ok()) << "control: ours, 0700, is used";
}

}  // namespace
}  // namespace warden::testing
