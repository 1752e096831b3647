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

}  // namespace warden
