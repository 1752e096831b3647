#include "common/child.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <thread>

#include "common/procfs.hpp"
#include "common/util.hpp"
#include "sys/pipe.hpp"

extern char** environ;

namespace warden::testing {
namespace {

using Clock = std::chrono::steady_clock;

int remaining_ms(Clock::time_point deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    return left.count() < 0 ? 0 : static_cast<int>(left.count());
}

std::vector<std::string> child_environment(const ChildOptions& opts, const std::string& tag) {
    auto overridden = [&](std::string_view entry) {
        auto name = entry.substr(0, entry.find('='));
        if (name == kTagVar) return true;
        for (const auto& n : opts.unset_env)
            if (name == n) return true;
        for (const auto& [k, v] : opts.env)
            if (name == k) return true;
        return false;
    };
    std::vector<std::string> env;
    for (char** e = environ; e && *e; ++e)
        if (!overridden(*e)) env.emplace_back(*e);
    for (const auto& [k, v] : opts.env)
        env.push_back(k + "=" + v);
    env.push_back(std::string(kTagVar) + "=" + tag);
    return env;
}

// Everything below runs in the forked child before exec: only async-signal-safe calls.
[[noreturn]] void exec_child(const ChildOptions& opts, char* const* argv, char* const* envp,
                             int in_fd, int out_fd, int err_fd, int report_fd) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig : {SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGCHLD, SIGQUIT})
        ::signal(sig, SIG_DFL);
    int err = 0;
    if (opts.new_session && ::setsid() < 0) err = errno;
    if (!err && opts.new_process_group && !opts.new_session && ::setpgid(0, 0) < 0) err = errno;
    if (!err && !opts.cwd.empty() && ::chdir(opts.cwd.c_str()) < 0) err = errno;
    if (!err && (::dup2(in_fd, 0) < 0 || ::dup2(out_fd, 1) < 0)) err = errno;
    if (!err && err_fd >= 0 && ::dup2(err_fd, 2) < 0) err = errno;
    if (!err) {
        ::execvpe(argv[0], argv, envp);
        err = errno;
    }
    ssize_t ignored = ::write(report_fd, &err, sizeof err);
    (void)ignored;
    ::_exit(127);
}

}  // namespace

TestChild::TestChild(std::vector<std::string> argv, ChildOptions opts)
    : tag_(opts.tag.empty() ? unique_tag() : opts.tag), guard_(0, opts.kill_tagged ? tag_ : "") {
    // Writing to a child that died must fail with EPIPE, not kill the test.
    ::signal(SIGPIPE, SIG_IGN);
    if (argv.empty()) {
        error_ = "TestChild: empty argv";
        return;
    }
    auto in = make_pipe();
    auto out = make_pipe();
    auto err = make_pipe();
    auto report = make_pipe();
    if (!in.ok() || !out.ok() || !err.ok() || !report.ok()) {
        error_ = "TestChild: pipe2 failed";
        return;
    }
    std::vector<std::string> env = child_environment(opts, tag_);
    std::vector<char*> argv_p, env_p;
    for (auto& a : argv)
        argv_p.push_back(a.data());
    argv_p.push_back(nullptr);
    for (auto& e : env)
        env_p.push_back(e.data());
    env_p.push_back(nullptr);

    pid_t pid = ::fork();
    if (pid < 0) {
        error_ = std::string("fork: ") + std::strerror(errno);
        return;
    }
    if (pid == 0)
        exec_child(opts, argv_p.data(), env_p.data(), in->read.get(), out->write.get(),
                   opts.capture_stderr ? err->write.get() : -1, report->write.get());

    guard_.set_root(pid, /*reap_root=*/false);
    report->write.reset();
    int exec_errno = 0;
    ssize_t n;
    do {
        n = ::read(report->read.get(), &exec_errno, sizeof exec_errno);
    } while (n < 0 && errno == EINTR);
    if (n == static_cast<ssize_t>(sizeof exec_errno)) {
        error_ = "exec(" + argv[0] + "): " + std::strerror(exec_errno);
        while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
        }
        return;
    }
    pid_ = pid;
    stdin_ = std::move(in->write);
    stdout_ = std::move(out->read);
    if (opts.capture_stderr) stderr_ = std::move(err->read);
    (void)set_nonblocking(stdin_.get());
    (void)set_nonblocking(stdout_.get());
    if (stderr_) (void)set_nonblocking(stderr_.get());
}

TestChild::TestChild(TestChild&& o) noexcept
    : pid_(std::exchange(o.pid_, -1)),
      reaped_(o.reaped_),
      status_(o.status_),
      error_(std::move(o.error_)),
      stdin_(std::move(o.stdin_)),
      stdout_(std::move(o.stdout_)),
      stderr_(std::move(o.stderr_)),
      out_buf_(std::move(o.out_buf_)),
      err_buf_(std::move(o.err_buf_)),
      stdout_eof_(o.stdout_eof_),
      stderr_eof_(o.stderr_eof_),
      tag_(std::move(o.tag_)),
      guard_(std::move(o.guard_)) {}

TestChild::~TestChild() {
    guard_.kill_all();
    if (pid_ > 0 && !reaped_) {
        ::kill(pid_, SIGKILL);
        wait_exit(std::chrono::seconds(10));
    }
}

bool TestChild::write(std::string_view data, std::chrono::milliseconds timeout) {
    auto deadline = Clock::now() + timeout;
    while (!data.empty()) {
        if (!stdin_) return false;
        ssize_t n = ::write(stdin_.get(), data.data(), data.size());
        if (n > 0) {
            data.remove_prefix(static_cast<size_t>(n));
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno != EAGAIN) return false;
        pollfd p{stdin_.get(), POLLOUT, 0};
        if (::poll(&p, 1, remaining_ms(deadline)) <= 0 && Clock::now() >= deadline) return false;
    }
    return true;
}

bool TestChild::write_line(std::string_view line, std::chrono::milliseconds timeout) {
    std::string s(line);
    s.push_back('\n');
    return write(s, timeout);
}

bool TestChild::fill(Fd& fd, std::string& buf, bool& eof, std::chrono::milliseconds timeout) {
    if (!fd || eof) return false;
    pollfd p{fd.get(), POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(timeout.count()));
    if (r <= 0) return false;
    char tmp[65536];
    for (;;) {
        ssize_t n = ::read(fd.get(), tmp, sizeof tmp);
        if (n > 0) {
            buf.append(tmp, static_cast<size_t>(n));
            if (static_cast<size_t>(n) < sizeof tmp) return true;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return true;
        eof = true;
        return false;
    }
}

std::optional<std::string> TestChild::read_line(std::chrono::milliseconds timeout) {
    auto deadline = Clock::now() + timeout;
    for (;;) {
        auto nl = out_buf_.find('\n');
        if (nl != std::string::npos) {
            std::string line = out_buf_.substr(0, nl);
            out_buf_.erase(0, nl + 1);
            return line;
        }
        if (stdout_eof_ || Clock::now() >= deadline) return std::nullopt;
        fill(stdout_, out_buf_, stdout_eof_, std::chrono::milliseconds(remaining_ms(deadline)));
    }
}

std::optional<std::string> TestChild::read_line_containing(std::string_view needle,
                                                           std::chrono::milliseconds timeout) {
    auto deadline = Clock::now() + timeout;
    for (int i = 0; i < 1'000'000; ++i) {
        auto line = read_line(std::chrono::milliseconds(remaining_ms(deadline)));
        if (!line) return std::nullopt;
        if (line->find(needle) != std::string::npos) return line;
    }
    return std::nullopt;
}

std::string TestChild::read_all_stdout(std::chrono::milliseconds timeout) {
    auto deadline = Clock::now() + timeout;
    while (!stdout_eof_ && Clock::now() < deadline)
        fill(stdout_, out_buf_, stdout_eof_, std::chrono::milliseconds(remaining_ms(deadline)));
    return std::exchange(out_buf_, {});
}

std::string TestChild::read_stderr(std::chrono::milliseconds timeout) {
    auto deadline = Clock::now() + timeout;
    while (stderr_ && !stderr_eof_ && Clock::now() < deadline)
        fill(stderr_, err_buf_, stderr_eof_, std::chrono::milliseconds(remaining_ms(deadline)));
    return err_buf_;
}

std::optional<int> TestChild::wait_exit(std::chrono::milliseconds timeout) {
    if (pid_ <= 0) return std::nullopt;
    if (reaped_) return status_;
    auto deadline = Clock::now() + timeout;
    for (;;) {
        int st = 0;
        pid_t r = ::waitpid(pid_, &st, WNOHANG);
        if (r == pid_) {
            reaped_ = true;
            status_ = st;
            return status_;
        }
        if (r < 0 && errno != EINTR) return std::nullopt;  // ECHILD: not ours any more
        if (Clock::now() >= deadline) return std::nullopt;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
}

bool TestChild::signal(int sig) {
    if (pid_ <= 0 || reaped_) return false;
    return ::kill(pid_, sig) == 0;
}

std::string describe_status(int status) {
    if (WIFEXITED(status)) return "exited " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
    return "status " + std::to_string(status);
}

}  // namespace warden::testing
