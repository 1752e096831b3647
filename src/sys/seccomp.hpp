// seccomp-bpf through libseccomp: a filter built before the fork and exported as a classic
// BPF program, so that the child only has to hand the kernel a pointer (PR_SET_SECCOMP is
// async-signal-safe; libseccomp's own seccomp_load allocates). Mechanics only: which calls a
// server may not make is src/sandbox's policy.
//
// Every rule here answers with an errno, never by killing: a confined server sees an ordinary
// failed call (EPERM, or ENOSYS for clone3 so that libc falls back to clone, whose flags a
// filter can read).
#pragma once

#include <linux/filter.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "sys/result.hpp"

namespace warden {

// An exported filter, ready to install.
class SeccompProgram {
  public:
    SeccompProgram() = default;
    explicit SeccompProgram(std::vector<sock_filter> insns) : insns_(std::move(insns)) {}
    bool empty() const { return insns_.empty(); }
    size_t size() const { return insns_.size(); }
    // The program as PR_SET_SECCOMP takes it; valid as long as this object is.
    sock_fprog fprog() const {
        return sock_fprog{static_cast<unsigned short>(insns_.size()),
                          const_cast<sock_filter*>(insns_.data())};
    }

  private:
    std::vector<sock_filter> insns_;
};

// One comparison on a syscall argument: (arg & mask) == value, or arg > value with `greater`.
struct SeccompArg {
    unsigned index = 0;
    uint64_t value = 0;
    uint64_t mask = ~uint64_t{0};
    bool greater = false;
};

// A filter that allows everything except what is denied.
class SeccompBuilder {
  public:
    static Result<SeccompBuilder> create();
    SeccompBuilder(SeccompBuilder&&) noexcept;
    SeccompBuilder& operator=(SeccompBuilder&&) noexcept;
    ~SeccompBuilder();

    // The call fails with `err` (when every comparison holds). Error names the call; a call
    // this architecture does not have is skipped (returns false).
    Result<bool> deny(const std::string& syscall, int err, std::vector<SeccompArg> when = {});
    Result<SeccompProgram> export_bpf() const;

  private:
    SeccompBuilder() = default;
    void* ctx_ = nullptr;  // scmp_filter_ctx
};

// In the child, after PR_SET_NO_NEW_PRIVS: async-signal-safe. 0 or the errno.
int install_seccomp(const sock_fprog& prog) noexcept;

// User notification (SECCOMP_RET_USER_NOTIF): a filter's verdict handed to a supervisor that
// holds the filter's listener fd and answers each call; src/sandbox/denials.hpp says why and
// when the sandbox uses it.
//
// `prog` with every refusal by an errno other than those in `keep` (a `return ERRNO(e)`)
// made a `return USER_NOTIF`: the same decisions on the same instructions, only the answer to
// a refused call is left to the listener. An allowed call runs as before.
SeccompProgram notifying_refusals(const SeccompProgram& prog, std::initializer_list<int> keep);
// Whether this kernel offers SECCOMP_RET_USER_NOTIF (Linux 5.0).
bool seccomp_user_notif_available();
// The size of a struct seccomp_notif as this kernel writes it (at least the header's).
size_t seccomp_notif_size();
// The name of the native call `nr` ("mount"), or "syscall NR".
std::string seccomp_syscall_name(int nr);
// In the child, after PR_SET_NO_NEW_PRIVS: async-signal-safe. Installs `prog` with a new
// listener, sends the listener over the unix socket `to` (SCM_RIGHTS) and closes it here, so
// that nothing the child execs can hold it. 0 or the errno (of the install; a listener that
// cannot be sent is closed, and the filter holds as it is: see denials.hpp).
int install_seccomp_listener(const sock_fprog& prog, int to) noexcept;

}  // namespace warden
