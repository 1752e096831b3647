// Denials counted while a confined server runs: what the server tried that the sandbox's
// seccomp filter refused, by call, for the journal (`sandbox.denied`) and `mcpwarden status`.
//
// Why only the filter's refusals. A denial is seen where it is made, and an ordinary user has
// one place to see any: Landlock (paths, TCP ports, scopes) reports a denial to the kernel's
// audit subsystem alone (CAP_AUDIT_READ to read, and off unless auditd runs), and a seccomp
// `RET_ERRNO` reports nothing. Tracing every session (ptrace, strace) would cost every system
// call the server makes, allowed or not. What remains is seccomp's user notification
// (SECCOMP_RET_USER_NOTIF, Linux 5.0): a filter may hand a call to a supervisor holding its
// listener fd instead of answering it. So the plan's filter is the same program with each of
// its refusals (`return ERRNO(e)`) turned into `return USER_NOTIF` (sys/seccomp.hpp,
// notifying_refusals), and this counter, a thread of the relay, answers each notified call
// with the errno the program would have given (refusal_errno), after counting and naming it.
//
// Why that cannot make the sandbox weaker:
//   - Only refusals are notified. Every decision is the program's, on the same instructions:
//     an allowed call returns ALLOW where it did and never reaches the supervisor (nothing on
//     the allowed path changes, so it costs nothing there), and a refused one never runs.
//   - The supervisor cannot make a notified call run. The kernel runs a notified call only
//     when the answer carries SECCOMP_USER_NOTIF_FLAG_CONTINUE, which this code never sends;
//     any other answer returns from the call without it running. The worst a wrong answer
//     could do is tell the server a refused call succeeded that never ran.
//   - A supervisor gone opens nothing. When the listener's last fd is closed (the relay
//     crashed, was killed, or the counter stopped), the kernel answers every call waiting
//     for it, and every later call the filter notifies, with ENOSYS: refused still, with
//     another errno. The listener exists only in the relay: the child creates it (close-on-
//     exec) right before execve, sends it over a socket only the relay reads, and closes it;
//     the keeper drops its copy of the relay's end when it is forked.
//   - The server cannot get at the listener. Held by it, the listener would let the server
//     answer its own refused calls with CONTINUE. It is never in the server's fd table (above),
//     and the relay's: pidfd_getfd and ptrace are refused by the filter itself; opening
//     /proc/RELAY/fd/N needs ptrace access to the relay, which Landlock refuses a confined
//     process towards any process outside its domain (EACCES), and past that the kernel does
//     not reopen an anonymous inode through /proc (ENXIO). Counting is used only where
//     Landlock is enforced (Plan::denials_counted), so that two guards stand on that path;
//     without it the program answers by errno.
//   - A server that installs a filter of its own with a listener gets EBUSY (the kernel allows
//     one listener per filter chain). A filter of its own that refuses is obeyed before ours
//     (the strictest verdict wins); one that allows changes nothing.
// What it costs: a refused call waits for the counter's answer (a wake-up and two ioctls,
// tens of microseconds) instead of returning at once; the child's start makes one sendmsg.
//
// What it cannot count: Landlock's denials (a path read, a TCP connect to a port not allowed),
// which are most of what a server meets. `run --explain`'s dry start traces those (dry_start.hpp);
// in a real session they show only as the server's own errors.
#pragma once

#include <linux/seccomp.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sys/fd.hpp"
#include "sys/result.hpp"

namespace warden::sandbox {

// What the server was refused so far: counts by call ("socket", "mount", "ptrace"), and the
// first few calls described ("socket(AF_INET, SOCK_DGRAM) by pid 4242").
struct Denials {
    static constexpr size_t kFirstKept = 8;
    int64_t total = 0;
    std::map<std::string, int64_t> by_call;
    std::vector<std::string> first;
};

// The errno the plan's program answers the refused call `d` with: EAFNOSUPPORT for a socket
// family other than UNIX/INET/INET6, EACCES for an INET/INET6 socket that is refused, EPERM
// for every other call the program refuses (and a call of another architecture).
int refusal_errno(const seccomp_data& d);
// "socket(AF_INET, SOCK_DGRAM)", "unshare(CLONE_NEWUSER)", "mount", "32-bit call 21".
std::string describe_call(const seccomp_data& d);

class DenialCounter {
  public:
    // Starts the counter's thread: it takes each listener sent on `receiver` (one per server
    // started) and answers what each notifies. `drop_listeners`: the negative control of a
    // supervisor gone (MCPWARDEN_FAULT=denials_supervisor_gone): each listener is closed as
    // soon as it arrives, unanswered.
    static Result<std::unique_ptr<DenialCounter>> start(Fd receiver, bool drop_listeners = false);
    ~DenialCounter();  // stops the thread and closes the listeners (the kernel answers ENOSYS)
    DenialCounter(const DenialCounter&) = delete;
    DenialCounter& operator=(const DenialCounter&) = delete;

    // Readable when there is news to record: at the first denial, then at most once a second
    // while denials go on (a server retrying a refused call in a loop is not a record each).
    int ready_fd() const { return ready_.get(); }
    // What was counted, and clears the news (reads ready_fd). `changed`: anything since the
    // last take().
    Denials take(bool* changed = nullptr);
    // Whether a listener arrived: denials are counted for this session.
    bool listening() const;

  private:
    DenialCounter() = default;
    void loop();
    void on_notification(int listener);
    void signal_news_locked(int64_t now_ms);

    Fd receiver_, stop_, ready_;
    bool drop_ = false;
    size_t notif_size_ = sizeof(seccomp_notif);
    std::vector<Fd> listeners_;  // the thread's alone
    mutable std::mutex mu_;
    Denials counted_;
    int64_t taken_total_ = 0;
    bool listening_ = false;
    bool news_pending_ = false;  // a denial since the last signal, not signalled yet
    int64_t last_signal_ms_ = -1;
    std::thread thread_;
};

}  // namespace warden::sandbox
