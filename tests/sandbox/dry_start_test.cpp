// The dry start (src/sandbox/dry_start.hpp): a real server started once under a plan, asked
// initialize and tools/list, torn down, its denials read from strace with the flag for each.
#include "sandbox/dry_start.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/testing.hpp"
#include "sandbox/launch_of.hpp"

namespace warden::testing {
namespace {

bool has(const std::vector<sandbox::Denial>& ds, const std::string& what,
         const std::string& allow) {
    return std::any_of(ds.begin(), ds.end(), [&](const sandbox::Denial& d) {
        return d.what == what && d.allow == allow;
    });
}

TEST(DryStart, TraceLinesBecomeDenialsWithTheFlagForEach) {
    TempDir home;
    std::ofstream(home.file("secret")) << "x\n";
    RunOptions s;
    s.sandbox = Sandbox::Strict;
    auto plan = sandbox::prepare(s, launch_of(home, {"/bin/true"}));
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    const std::string trace =
        "41 openat(AT_FDCWD, \"" + home.file("secret") +
        "\", O_RDONLY|O_CLOEXEC) = -1 EACCES (Permission denied)\n"
        "41 openat(AT_FDCWD, \"" +
        home.file("new.log") +
        "\", O_WRONLY|O_CREAT|O_APPEND, 0666) = -1 EACCES (Permission denied)\n"
        "42 connect(5, {sa_family=AF_INET, sin_port=htons(443), "
        "sin_addr=inet_addr(\"10.0.0.1\")}, 16) = -1 EACCES (Permission denied)\n"
        "42 socket(AF_INET, SOCK_DGRAM|SOCK_CLOEXEC, IPPROTO_IP) = -1 EACCES (Permission denied)\n"
        "43 ptrace(PTRACE_TRACEME) = -1 EPERM (Operation not permitted)\n"
        "43 openat(AT_FDCWD, \"/nonexistent\", O_RDONLY) = -1 ENOENT (No such file or directory)\n"
        "41 openat(AT_FDCWD, \"" +
        home.file("secret") + "\", O_RDONLY) = -1 EACCES (Permission denied)\n";
    auto ds = sandbox::denials_in_trace(trace, *plan);
    EXPECT_EQ(ds.size(), 5u) << "each once, ENOENT none";
    EXPECT_TRUE(has(ds, "read", "--allow-read " + home.file("secret")));
    EXPECT_TRUE(has(ds, "write", "--allow-write " + home.path()));
    EXPECT_TRUE(has(ds, "connect", "--allow-connect 443"));
    EXPECT_TRUE(has(ds, "socket", "--net any"));
    EXPECT_TRUE(has(ds, "call", "no flag: refused by every profile"));
    sandbox::remove_private_tmp(plan->private_tmp());
}

// A server that has a file of the home directory read as it starts, then answers. Under strict
// the dry start sees it answer and names the read it was denied; the negative control is the
// same server under an empty plan (--sandbox off), where nothing is denied.
TEST(DryStart, RealServerAnswersAndItsDenialIsNamed) {
    if (::access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3";
    TempDir home, code;
    std::ofstream(home.file("settings.json")) << "{}\n";
    // The read is made by a forked cat, and the server writes to stderr after it: strace must
    // follow the fork (and outlive its own messages about it).
    std::ofstream(code.file("server.py"))
        << "import json, subprocess, sys\n"
           "subprocess.run(['/bin/cat', '"
        << home.file("settings.json")
        << "'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
           "print('started', file=sys.stderr, flush=True)\n"
           "for line in sys.stdin:\n"
           "    m = json.loads(line)\n"
           "    if 'id' not in m: continue\n"
           "    r = {'tools': [{'name': 'hello', 'inputSchema': {}}]} if m['method'] == "
           "'tools/list' else {'capabilities': {}}\n"
           "    print(json.dumps({'jsonrpc': '2.0', 'id': m['id'], 'result': r}), flush=True)\n";
    const std::vector<std::string> argv{"/usr/bin/python3", code.file("server.py")};
    for (Sandbox profile : {Sandbox::Strict, Sandbox::Off}) {
        SCOPED_TRACE(profile == Sandbox::Strict ? "strict" : "off");
        RunOptions s;
        s.sandbox = profile;
        auto plan = sandbox::prepare(s, launch_of(home, argv));
        ASSERT_TRUE(plan.ok()) << plan.error().message;
        if (profile == Sandbox::Strict && plan->landlock_abi() == 0)
            GTEST_SKIP() << "no Landlock on this kernel";
        auto d = sandbox::dry_start(*plan, argv, argv[0], std::chrono::seconds(20));
        ASSERT_TRUE(d.ok()) << d.error().message;
        EXPECT_TRUE(d->answered) << sandbox::render_dry_start(*d);
        EXPECT_EQ(d->tools, std::vector<std::string>{"hello"});
        if (!d->traced) {
            sandbox::remove_private_tmp(plan->private_tmp());
            GTEST_SKIP() << "strace absent or not allowed to attach here";
        }
        const bool denied = has(d->denials, "read", "--allow-read " + home.file("settings.json"));
        EXPECT_EQ(denied, profile == Sandbox::Strict) << sandbox::render_dry_start(*d);
        sandbox::remove_private_tmp(plan->private_tmp());
    }
}

}  // namespace
}  // namespace warden::testing
