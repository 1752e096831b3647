// Landlock (Linux ≥ 5.13): unprivileged access control that a process applies to itself and
// everything it executes afterwards. This file is the mechanics only — the ABI probe, a
// ruleset fd with its rules, and the one async-signal-safe call the spawner makes in the
// child; which paths and ports a server gets is src/sandbox's policy.
//
// The ABI grows by version and a ruleset may only name rights the running kernel knows, so
// callers ask fs_rights(abi) for the rights to handle. Debian 12's uapi header stops at ABI 1,
// so the constants of later versions are spelled here (values from the kernel's uapi).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sys/fd.hpp"
#include "sys/result.hpp"

namespace warden::landlock {

// Filesystem rights.
inline constexpr uint64_t kExecute = 1ULL << 0;
inline constexpr uint64_t kWriteFile = 1ULL << 1;
inline constexpr uint64_t kReadFile = 1ULL << 2;
inline constexpr uint64_t kReadDir = 1ULL << 3;
inline constexpr uint64_t kRemoveDir = 1ULL << 4;
inline constexpr uint64_t kRemoveFile = 1ULL << 5;
inline constexpr uint64_t kMakeChar = 1ULL << 6;
inline constexpr uint64_t kMakeDir = 1ULL << 7;
inline constexpr uint64_t kMakeReg = 1ULL << 8;
inline constexpr uint64_t kMakeSock = 1ULL << 9;
inline constexpr uint64_t kMakeFifo = 1ULL << 10;
inline constexpr uint64_t kMakeBlock = 1ULL << 11;
inline constexpr uint64_t kMakeSym = 1ULL << 12;
inline constexpr uint64_t kRefer = 1ULL << 13;     // ABI 2
inline constexpr uint64_t kTruncate = 1ULL << 14;  // ABI 3
inline constexpr uint64_t kIoctlDev = 1ULL << 15;  // ABI 5
// The rights that apply to a file (not a directory): a rule on a file may name only these.
inline constexpr uint64_t kFileRights = kExecute | kWriteFile | kReadFile | kTruncate | kIoctlDev;

// Network rights (ABI 4): TCP only, by port; Landlock does not see addresses.
inline constexpr uint64_t kBindTcp = 1ULL << 0;
inline constexpr uint64_t kConnectTcp = 1ULL << 1;

// Scopes (ABI 6): IPC with processes outside the domain.
inline constexpr uint64_t kScopeAbstractUnixSocket = 1ULL << 0;
inline constexpr uint64_t kScopeSignal = 1ULL << 1;

// landlock_restrict_self flags (ABI 7): audit logging of denials.
inline constexpr uint32_t kLogSameExecOff = 1U << 0;
inline constexpr uint32_t kLogNewExecOn = 1U << 1;

// The highest ABI the kernel offers, or an Error saying why there is none:
// "landlock_create_ruleset: Landlock is supported but not enabled at boot (EOPNOTSUPP)".
Result<int> abi_version();
// Every filesystem right the given ABI knows.
uint64_t fs_rights(int abi);

class Ruleset {
  public:
    // Rights not named here stay unrestricted (that is how older ABIs stay compatible);
    // `net` needs ABI ≥ 4 and `scoped` ABI ≥ 6 (pass 0 below them).
    static Result<Ruleset> create(uint64_t fs, uint64_t net, uint64_t scoped);
    // What a caller may already know of a path (a directory walk's d_type): with Unknown,
    // allow_path asks the kernel (one fstat more per rule).
    enum class Kind { Unknown, Directory, File };
    // Allows `access` beneath `path` (the path itself when it is a file, whose rule keeps
    // only kFileRights). Error names the path; its code is ENOENT when the path is not there.
    // The rule holds the path open only while it is added; with `held`, its descriptor goes
    // there, for the caller to close many at once (close_held), instead of closing now.
    Status allow_path(const std::string& path, uint64_t access, Kind kind = Kind::Unknown,
                      std::vector<Fd>* held = nullptr);
    Status allow_port(uint16_t port, uint64_t access);
    int fd() const { return fd_.get(); }
    uint64_t fs() const { return fs_; }

  private:
    Fd fd_;
    uint64_t fs_ = 0, net_ = 0;
};

// Closes the descriptors that allow_path left in `held`, and empties it: one close_range(2)
// per run of consecutive numbers (the opens of one thread usually make one run), close(2)
// where the kernel has no close_range. Only numbers held in `held` are closed.
void close_held(std::vector<Fd>& held);

// In the child, after PR_SET_NO_NEW_PRIVS: async-signal-safe. 0 or the errno.
int restrict_self(int ruleset_fd, uint32_t flags) noexcept;

}  // namespace warden::landlock
