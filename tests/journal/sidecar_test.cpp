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

}  // namespace
}  // namespace warden::testing
