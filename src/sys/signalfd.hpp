// SignalFd: a set of signals delivered as readable records on an fd instead of handlers.
//
// create() blocks the signals in the calling thread (do it before any thread is started so
// every thread inherits the mask) and opens a non-blocking, close-on-exec signalfd for them.
// The destructor closes the fd and restores the mask that was in force before, so a scope
// that watches signals leaves the process as it found it.
//
// A blocked mask survives fork and exec: whoever spawns a child from a process holding a
// SignalFd must reset the child's mask (see unblock_all_signals()).
#pragma once

#include <signal.h>
#include <sys/signalfd.h>

#include <initializer_list>
#include <optional>
#include <vector>

#include "sys/fd.hpp"

namespace warden {

class SignalFd {
  public:
    static Result<SignalFd> create(std::initializer_list<int> signals);

    SignalFd(SignalFd&& o) noexcept;
    SignalFd& operator=(SignalFd&&) = delete;
    SignalFd(const SignalFd&) = delete;
    SignalFd& operator=(const SignalFd&) = delete;
    ~SignalFd();

    // One pending signal, or nullopt when none is pending (EAGAIN).
    Result<std::optional<signalfd_siginfo>> read();

    int fd() const { return fd_.get(); }

  private:
    SignalFd(Fd fd, sigset_t previous) : fd_(std::move(fd)), previous_(previous) {}
    Fd fd_;
    sigset_t previous_;
    bool restore_ = true;
};

// The calling thread's signal mask and the dispositions of some signals, saved when made and
// put back when destroyed: what a library call owes its host when it blocks or ignores
// signals process-wide while it runs. Signals that came while blocked and are still pending
// then meet the host's own dispositions, as if they had come after.
class SavedSignals {
  public:
    explicit SavedSignals(std::initializer_list<int> dispositions);
    ~SavedSignals();
    SavedSignals(const SavedSignals&) = delete;
    SavedSignals& operator=(const SavedSignals&) = delete;

  private:
    sigset_t mask_;
    struct Saved {
        int signal;
        struct sigaction action;
    };
    std::vector<Saved> actions_;
};

// Empties the calling thread's signal mask (for a child between fork and exec).
// Async-signal-safe.
void unblock_all_signals() noexcept;

}  // namespace warden
