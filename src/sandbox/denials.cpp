#include "sandbox/denials.hpp"

#include <linux/audit.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "sandbox/sandbox.hpp"
#include "sys/fd_passing.hpp"
#include "sys/seccomp.hpp"

namespace warden::sandbox {
namespace {

constexpr int64_t kNewsIntervalMs = 1000;

int64_t monotonic_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

bool native(const seccomp_data& d) {
#if defined(__x86_64__) && !defined(__ILP32__)
    return d.arch == AUDIT_ARCH_X86_64 && (d.nr & 0x40000000) == 0;
#elif defined(__aarch64__)
    return d.arch == AUDIT_ARCH_AARCH64;
#else
    return true;
#endif
}

std::string family_name(uint64_t f) {
    switch (f) {
        case AF_UNSPEC:
            return "AF_UNSPEC";
        case AF_UNIX:
            return "AF_UNIX";
        case AF_INET:
            return "AF_INET";
        case AF_INET6:
            return "AF_INET6";
        case AF_NETLINK:
            return "AF_NETLINK";
        case AF_PACKET:
            return "AF_PACKET";
        case AF_BLUETOOTH:
            return "AF_BLUETOOTH";
        case AF_VSOCK:
            return "AF_VSOCK";
        default:
            return "family " + std::to_string(f);
    }
}

std::string type_name(uint64_t t) {
    switch (t & 0xf) {
        case SOCK_STREAM:
            return "SOCK_STREAM";
        case SOCK_DGRAM:
            return "SOCK_DGRAM";
        case SOCK_RAW:
            return "SOCK_RAW";
        case SOCK_RDM:
            return "SOCK_RDM";
        case SOCK_SEQPACKET:
            return "SOCK_SEQPACKET";
        case SOCK_PACKET:
            return "SOCK_PACKET";
        default:
            return "type " + std::to_string(t & 0xf);
    }
}

std::string namespace_flags(uint64_t flags) {
    static constexpr std::pair<uint64_t, const char*> kNames[] = {
        {0x00020000, "CLONE_NEWNS"},  {0x02000000, "CLONE_NEWCGROUP"}, {0x04000000, "CLONE_NEWUTS"},
        {0x08000000, "CLONE_NEWIPC"}, {0x10000000, "CLONE_NEWUSER"},   {0x20000000, "CLONE_NEWPID"},
        {0x40000000, "CLONE_NEWNET"}, {0x00000080, "CLONE_NEWTIME"}};
    std::string out;
    for (const auto& [bit, name] : kNames)
        if (flags & bit) out += (out.empty() ? "" : "|") + std::string(name);
    return out;
}

}  // namespace

int refusal_errno(const seccomp_data& d) {
    if (!native(d)) return EPERM;
    if (d.nr == __NR_socket) {
        const uint64_t family = d.args[0];
        const bool inet = family == AF_INET || family == AF_INET6;
        return family == AF_UNIX || inet ? EACCES : EAFNOSUPPORT;
    }
    return EPERM;
}

std::string describe_call(const seccomp_data& d) {
    if (!native(d)) return fmt::format("32-bit call {}", d.nr);
    const std::string name = seccomp_syscall_name(d.nr);
    if (d.nr == __NR_socket)
        return fmt::format("socket({}, {})", family_name(d.args[0]), type_name(d.args[1]));
    if (d.nr == __NR_unshare || d.nr == __NR_clone) {
        const std::string flags = namespace_flags(d.args[0]);
        if (!flags.empty()) return fmt::format("{}({})", name, flags);
    }
    return name;
}

Result<std::unique_ptr<DenialCounter>> DenialCounter::start(Fd receiver, bool drop_listeners) {
    std::unique_ptr<DenialCounter> c(new DenialCounter());
    c->receiver_ = std::move(receiver);
    c->drop_ = drop_listeners;
    c->notif_size_ = seccomp_notif_size();
    c->stop_ = Fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    c->ready_ = Fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!c->stop_.valid() || !c->ready_.valid())
        return Error::sys("eventfd", "the sandbox's denial counter", errno);
    try {
        c->thread_ = std::thread([raw = c.get()] { raw->loop(); });
    } catch (const std::system_error& e) {
        return Error::msg(std::string("the sandbox's denial counter: no thread: ") + e.what());
    }
    return c;
}

DenialCounter::~DenialCounter() {
    const uint64_t one = 1;
    if (::write(stop_.get(), &one, sizeof one) < 0) {
    }
    if (thread_.joinable()) thread_.join();
}

Denials DenialCounter::take(bool* changed) {
    uint64_t v = 0;
    if (::read(ready_.get(), &v, sizeof v) < 0) {
    }
    std::lock_guard lk(mu_);
    if (changed) *changed = counted_.total != taken_total_;
    taken_total_ = counted_.total;
    return counted_;
}

bool DenialCounter::listening() const {
    std::lock_guard lk(mu_);
    return listening_;
}

void DenialCounter::signal_news_locked(int64_t now_ms) {
    const uint64_t one = 1;
    if (::write(ready_.get(), &one, sizeof one) < 0) {
    }
    last_signal_ms_ = now_ms;
    news_pending_ = false;
}

// The thread: the receiver (a listener per server started), the stop eventfd, the listeners.
// Bounded by the session: it ends when stopped.
void DenialCounter::loop() {
    bool receiving = true;
    for (;;) {
        std::vector<pollfd> fds{{stop_.get(), POLLIN, 0},
                                {receiving ? receiver_.get() : -1, POLLIN, 0}};
        for (const Fd& l : listeners_)
            fds.push_back({l.get(), POLLIN, 0});
        int timeout = -1;
        {
            std::lock_guard lk(mu_);
            if (news_pending_)
                timeout = static_cast<int>(
                    std::max<int64_t>(0, last_signal_ms_ + kNewsIntervalMs - monotonic_ms()));
        }
        int n = ::poll(fds.data(), fds.size(), timeout);
        if (n < 0 && errno != EINTR) return;
        if (n == 0) {
            std::lock_guard lk(mu_);
            if (news_pending_) signal_news_locked(monotonic_ms());
            continue;
        }
        if (fds[0].revents) return;
        if (fds[1].revents & POLLIN) {
            auto got = recv_fds(receiver_.get(), 1);
            if (got && !drop_) {
                listeners_.push_back(std::move(got->front()));
                std::lock_guard lk(mu_);
                listening_ = true;
            } else if (!got && got.error().code == EPIPE) {
                receiving = false;  // every sender is gone: no server can start any more
            }
        } else if (fds[1].revents & (POLLHUP | POLLERR)) {
            receiving = false;
        }
        // Backwards, so that erasing one leaves the indexes before it valid. A listener that
        // hangs up has no process left under its filter (the server's tree is gone), and so
        // nothing pending: it is closed, whether or not POLLIN came with the hang-up.
        for (size_t i = fds.size(); i-- > 2;) {
            const size_t l = i - 2;
            if (fds[i].revents & (POLLHUP | POLLERR | POLLNVAL))
                listeners_.erase(listeners_.begin() + static_cast<ptrdiff_t>(l));
            else if (fds[i].revents & POLLIN)
                on_notification(listeners_[l].get());
        }
    }
}

void DenialCounter::on_notification(int listener) {
    // Zeroed, as the kernel requires, and as large as this kernel writes it.
    std::vector<unsigned char> buf(notif_size_, 0);
    if (::ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, buf.data()) != 0) return;  // gone meanwhile
    seccomp_notif req;
    std::memcpy(&req, buf.data(), sizeof req);
    // Counted before it is answered, so that a count taken once the server has its answer
    // (or has exited) includes the call.
    const std::string call = describe_call(req.data);
    const std::string name = call.substr(0, call.find('('));
    const int64_t now = monotonic_ms();
    {
        std::lock_guard lk(mu_);
        ++counted_.total;
        ++counted_.by_call[name];
        if (counted_.first.size() < Denials::kFirstKept)
            counted_.first.push_back(fmt::format("{} by pid {}", call, req.pid));
        if (last_signal_ms_ < 0 || now - last_signal_ms_ >= kNewsIntervalMs)
            signal_news_locked(now);
        else
            news_pending_ = true;
    }
    // Never SECCOMP_USER_NOTIF_FLAG_CONTINUE: the call does not run, it returns the errno.
    seccomp_notif_resp resp;
    std::memset(&resp, 0, sizeof resp);
    resp.id = req.id;
    resp.error = -refusal_errno(req.data);
    // ENOENT: the caller was interrupted or died meanwhile; the attempt still counts.
    (void)::ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp);
}

// The plan's refusals made notifications for the relay's counter (denials.hpp), where that
// is safe and possible; otherwise the program answers by errno itself, and the plan says why
// its denials are not counted.
void Plan::count_denials() {
    Plan& plan = *this;
    if (plan.seccomp_.empty()) return;
    if (!plan.ruleset_) {
        // The listener's safety leans on Landlock's ptrace rule (denials.hpp).
        plan.denials_uncounted_ =
            "denials are not counted: no Landlock here to keep the "
            "server away from the counter's listener";
        return;
    }
    if (!seccomp_user_notif_available()) {
        plan.denials_uncounted_ =
            "denials are not counted: no seccomp user notification on this kernel (Linux < 5.0)";
        return;
    }
    auto pair = make_socket_pair();
    if (!pair) {
        plan.denials_uncounted_ = "denials are not counted: " + pair.error().message;
        return;
    }
    // clone3's ENOSYS is no denial: libc falls back to clone at every thread it starts.
    plan.seccomp_ = notifying_refusals(plan.seccomp_, {ENOSYS});
    plan.denial_receive_ = std::move(pair->a);
    plan.denial_send_ = std::move(pair->b);
}

}  // namespace warden::sandbox
