// TestChild: a real process a test starts (fork + exec, no shell) with its stdin and stdout
// (and optionally stderr) on pipes, tagged with kTagVar so that everything it starts can be
// found again. Its destructor SIGKILLs the child and every process of its tree, escapees
// included (TreeGuard), and reaps it: tests clean up even when an assertion fails.
//
//   TestChild c({kFixture, "--shape", "setsid", "--port-file", dir.file("port")});
//   ASSERT_TRUE(c.started()) << c.error();
//   c.write_line(rpc_initialize(1));
//   auto line = c.read_line(5s);
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/tree_guard.hpp"
#include "sys/fd.hpp"

namespace warden::testing {

struct ChildOptions {
    std::vector<std::pair<std::string, std::string>> env{};  // added or overridden
    std::vector<std::string> unset_env{};
    std::string tag{};               // value of kTagVar; empty: a fresh unique_tag()
    bool capture_stderr = false;     // else the child writes to the test's stderr
    bool new_session = false;        // setsid() before exec
    bool new_process_group = false;  // setpgid(0, 0) before exec
    std::string cwd{};               // empty: the test's
    // What the child's destruction kills: everything carrying the tag (true), or only the
    // child and its descendants (false), for a child that leaves a detached process behind
    // on purpose (`run --share` starts the user's broker) whose own end the test waits for:
    // a SIGKILL of the broker's trees would leave their session cgroups behind.
    bool kill_tagged = true;
};

class TestChild {
  public:
    explicit TestChild(std::vector<std::string> argv, ChildOptions opts = {});
    ~TestChild();
    TestChild(TestChild&& o) noexcept;
    TestChild& operator=(TestChild&&) = delete;
    TestChild(const TestChild&) = delete;
    TestChild& operator=(const TestChild&) = delete;

    // False when fork or exec failed; error() says which and why.
    bool started() const { return pid_ > 0; }
    const std::string& error() const { return error_; }
    pid_t pid() const { return pid_; }
    const std::string& tag() const { return tag_; }
    TreeGuard& tree() { return guard_; }

    // Writes all of `data` to the child's stdin (false on EPIPE, or when it would block for
    // longer than `timeout`). write_line appends '\n'.
    bool write(std::string_view data, std::chrono::milliseconds timeout = std::chrono::seconds(10));
    bool write_line(std::string_view line,
                    std::chrono::milliseconds timeout = std::chrono::seconds(10));
    void close_stdin() { stdin_.reset(); }

    // The next stdout line without its '\n'; nullopt on timeout or EOF (see stdout_eof()).
    std::optional<std::string> read_line(std::chrono::milliseconds timeout);
    // The next line containing `needle`, skipping others; nullopt on timeout or EOF.
    std::optional<std::string> read_line_containing(std::string_view needle,
                                                    std::chrono::milliseconds timeout);
    bool stdout_eof() const { return stdout_eof_; }
    // Reads stdout until EOF or timeout; returns everything not yet consumed by read_line.
    std::string read_all_stdout(std::chrono::milliseconds timeout);

    // With capture_stderr: reads stderr until EOF or timeout; returns all captured so far.
    std::string read_stderr(std::chrono::milliseconds timeout);

    // The raw wait status once the child exited (reaping it), or nullopt after `timeout`.
    std::optional<int> wait_exit(std::chrono::milliseconds timeout);
    bool exited() const { return reaped_; }
    // kill(2) on the child itself, if not yet reaped (so never a recycled pid).
    bool signal(int sig);

    int stdin_fd() const { return stdin_.get(); }
    int stdout_fd() const { return stdout_.get(); }
    int stderr_fd() const { return stderr_.get(); }

  private:
    bool fill(Fd& fd, std::string& buf, bool& eof, std::chrono::milliseconds timeout);

    pid_t pid_ = -1;
    bool reaped_ = false;
    int status_ = 0;
    std::string error_;
    Fd stdin_, stdout_, stderr_;
    std::string out_buf_, err_buf_;
    bool stdout_eof_ = false, stderr_eof_ = false;
    std::string tag_;
    TreeGuard guard_;
};

// Human-readable wait status: "exited 0", "killed by signal 9".
std::string describe_status(int status);

}  // namespace warden::testing
