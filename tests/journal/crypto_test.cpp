// The journal's signing key file (src/journal/crypto.cpp).
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "journal/crypto.hpp"
#include "journal_test_util.hpp"

namespace warden::journal {
namespace {

using namespace testing_util;

// Writers racing to create the key on a journal's first use all end up with the one key
// that is on disk, and none of them reads it half-written. The key appears whole: it is
// linked into place once written (created in place, a relay SIGKILLed between create and
// write left an empty key, and `journal reconcile` then failed with "not a 64-hex-digit
// Ed25519 seed" for ever; seen in the fault matrix's relay_before_init cell).
TEST(Key, RacingCreatorsAllGetTheOneWholeKey) {
    constexpr int kWriters = 8;
    for (int round = 0; round < 5; ++round) {
        TempDir dir;
        const std::string path = dir.path + "/journal.key";
        int fds[kWriters][2];
        std::vector<pid_t> pids;
        for (int i = 0; i < kWriters; ++i) {
            ASSERT_EQ(::pipe(fds[i]), 0);
            pid_t pid = ::fork();
            ASSERT_GE(pid, 0);
            if (pid == 0) {
                auto k = SigningKey::load_or_create(path);
                std::string out = k ? "ok" : "error: " + k.error().message;
                (void)!::write(fds[i][1], out.data(), out.size());
                ::_exit(0);
            }
            ::close(fds[i][1]);
            pids.push_back(pid);
        }
        for (int i = 0; i < kWriters; ++i) {
            char buf[512];
            ssize_t n = ::read(fds[i][0], buf, sizeof buf);
            ::close(fds[i][0]);
            EXPECT_EQ(std::string(buf, n > 0 ? static_cast<size_t>(n) : 0), "ok");
        }
        for (pid_t p : pids)
            ::waitpid(p, nullptr, 0);
        std::string text = file_text(path);
        EXPECT_EQ(text.size(), 65u) << "key file: '" << text << "'";
        auto k = SigningKey::load(path);
        EXPECT_TRUE(k.ok()) << (k ? "" : k.error().message);
        // Nothing but the key is left in the directory.
        struct stat st {};
        for (pid_t p : pids)
            EXPECT_NE(::stat((path + ".tmp." + std::to_string(p)).c_str(), &st), 0);
    }
}

}  // namespace
}  // namespace warden::journal
