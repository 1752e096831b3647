// Small local helpers for the proc tests: children the test forks and always cleans up.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <thread>

#include "proc/process.hpp"

namespace warden::proc_testing {

// Polls `pred` every 2 ms for at most `limit`; returns its last value.
inline bool wait_until(const std::function<bool()>& pred,
                       std::chrono::milliseconds limit = std::chrono::seconds(5)) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (!pred()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
}

// A forked child running `body` (which must not return normally: it is followed by
// _exit(0)). SIGKILLed and reaped on destruction unless already reaped.
class Child {
  public:
    explicit Child(const std::function<void()>& body) {
        pid_ = ::fork();
        if (pid_ == 0) {
            body();
            ::_exit(0);
        }
    }
    Child(const Child&) = delete;
    Child& operator=(const Child&) = delete;
    ~Child() { kill_and_reap(); }

    pid_t pid() const { return pid_; }
    bool started() const { return pid_ > 0; }
    // Reaps the child, bounded: SIGKILL if it has not exited within `limit`.
    int reap(std::chrono::milliseconds limit = std::chrono::seconds(5)) {
        if (pid_ <= 0) return -1;
        int status = -1;
        bool done = wait_until([&] { return ::waitpid(pid_, &status, WNOHANG) == pid_; }, limit);
        if (!done) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, &status, 0);
        }
        pid_ = -1;
        return status;
    }
    void kill_and_reap() {
        if (pid_ <= 0) return;
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        pid_ = -1;
    }

  private:
    pid_t pid_ = -1;
};

// A process that is not our child (e.g. a double-forked grandchild): killed on
// destruction only if it is still the same process (pid and starttime).
class Stray {
  public:
    explicit Stray(ProcessId id = {}) : id_(id) {}
    Stray(const Stray&) = delete;
    Stray& operator=(const Stray&) = delete;
    ~Stray() { kill(); }
    void set(ProcessId id) { id_ = id; }
    const ProcessId& id() const { return id_; }
    void kill() {
        if (id_.pid <= 0) return;
        if (is_alive(id_)) ::kill(id_.pid, SIGKILL);
        wait_until([&] { return !is_alive(id_); });
        id_ = {};
    }

  private:
    ProcessId id_;
};

// Blocks in the child until killed; never returns.
[[noreturn]] inline void pause_forever() {
    for (;;)
        ::pause();
}

}  // namespace warden::proc_testing
