#include "sys/signalfd.hpp"

#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace warden {

Result<SignalFd> SignalFd::create(std::initializer_list<int> signals) {
    sigset_t set;
    sigemptyset(&set);
    for (int s : signals)
        sigaddset(&set, s);
    sigset_t previous;
    if (int err = ::pthread_sigmask(SIG_BLOCK, &set, &previous); err != 0)
        return Error::sys("pthread_sigmask", "SIG_BLOCK", err);
    int fd = ::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
        return Error::sys("signalfd", "", err);
    }
    return SignalFd(Fd(fd), previous);
}

SignalFd::SignalFd(SignalFd&& o) noexcept
    : fd_(std::move(o.fd_)), previous_(o.previous_), restore_(std::exchange(o.restore_, false)) {}

SignalFd::~SignalFd() {
    if (!restore_) return;
    // Close first so nothing more is queued on the fd, then restore the old mask: signals
    // still pending are delivered to their normal dispositions, as if we had never looked.
    fd_.reset();
    ::pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
}

Result<std::optional<signalfd_siginfo>> SignalFd::read() {
    signalfd_siginfo info;
    for (;;) {
        ssize_t n = ::read(fd_.get(), &info, sizeof info);
        if (n == static_cast<ssize_t>(sizeof info)) return std::optional<signalfd_siginfo>(info);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return std::optional<signalfd_siginfo>();
        if (n < 0) return Error::sys("read", "signalfd " + std::to_string(fd_.get()), errno);
        return Error::msg("read(signalfd " + std::to_string(fd_.get()) + "): short record");
    }
}

SavedSignals::SavedSignals(std::initializer_list<int> dispositions) {
    ::pthread_sigmask(SIG_BLOCK, nullptr, &mask_);
    for (int sig : dispositions) {
        Saved s{sig, {}};
        if (::sigaction(sig, nullptr, &s.action) == 0) actions_.push_back(s);
    }
}

SavedSignals::~SavedSignals() {
    // Dispositions first: a signal left pending meets the host's handler once unblocked.
    for (const Saved& s : actions_)
        ::sigaction(s.signal, &s.action, nullptr);
    ::pthread_sigmask(SIG_SETMASK, &mask_, nullptr);
}

void unblock_all_signals() noexcept {
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

}  // namespace warden
