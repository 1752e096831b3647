#include "sys/landlock.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>

namespace warden::landlock {

namespace {

// The uapi structures at ABI 6 (the kernel accepts a smaller size from older callers and
// this larger one from us; fields it does not know must be zero, and are).
struct RulesetAttr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
    uint64_t scoped;
};

struct __attribute__((packed)) PathBeneathAttr {
    uint64_t allowed_access;
    int32_t parent_fd;
};

struct NetPortAttr {
    uint64_t allowed_access;
    uint64_t port;
};

constexpr int kRulePathBeneath = 1;
constexpr int kRuleNetPort = 2;
constexpr uint32_t kCreateRulesetVersion = 1U << 0;

#ifndef SYS_landlock_create_ruleset
constexpr long SYS_landlock_create_ruleset = 444;
constexpr long SYS_landlock_add_rule = 445;
constexpr long SYS_landlock_restrict_self = 446;
#endif

// The error of an open that found nothing there, said without strerror(3): a plan meets
// several paths that only some systems have (/lib32, ~/.cache/pip), and the first strerror
// and fmt::format of a process load the locale's messages and bind their symbols, ~0.1 ms of
// a start's critical path for a message that is dropped.
Error open_failed(const std::string& path, int err) {
    if (err == ENOENT) return Error{"open(" + path + "): No such file or directory", err};
    if (err == ENOTDIR) return Error{"open(" + path + "): Not a directory", err};
    return Error::sys("open", path, err);
}

}  // namespace

Result<int> abi_version() {
    long v = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, kCreateRulesetVersion);
    if (v >= 0) return static_cast<int>(v);
    const int e = errno;
    if (e == EOPNOTSUPP)
        return Error{
            "landlock_create_ruleset: Landlock is built in but not enabled at boot "
            "(EOPNOTSUPP; add landlock to the lsm= boot parameter)",
            e};
    if (e == ENOSYS)
        return Error{
            "landlock_create_ruleset: this kernel has no Landlock (ENOSYS; Linux ≥ 5.13 "
            "with CONFIG_SECURITY_LANDLOCK)",
            e};
    return Error::sys("landlock_create_ruleset", "ABI version", e);
}

uint64_t fs_rights(int abi) {
    if (abi <= 0) return 0;
    uint64_t r = (kMakeSym << 1) - 1;  // ABI 1: execute … make_sym
    if (abi >= 2) r |= kRefer;
    if (abi >= 3) r |= kTruncate;
    if (abi >= 5) r |= kIoctlDev;
    return r;
}

Result<Ruleset> Ruleset::create(uint64_t fs, uint64_t net, uint64_t scoped) {
    RulesetAttr attr{fs, net, scoped};
    // The smallest size that holds what is asked: an older kernel rejects a larger struct
    // with non-zero tail only, but some reject unknown sizes outright (E2BIG).
    size_t size = scoped ? sizeof attr
                  : net  ? offsetof(RulesetAttr, scoped)
                         : offsetof(RulesetAttr, handled_access_net);
    long fd = ::syscall(SYS_landlock_create_ruleset, &attr, size, 0U);
    if (fd < 0) return Error::sys("landlock_create_ruleset", "", errno);
    Ruleset r;
    r.fd_ = Fd(static_cast<int>(fd));
    r.fs_ = fs;
    r.net_ = net;
    return r;
}

Status Ruleset::allow_path(const std::string& path, uint64_t access, Kind kind,
                           std::vector<Fd>* held) {
    Fd fd(::open(path.c_str(), O_PATH | O_CLOEXEC));
    if (!fd.valid()) return open_failed(path, errno);
    if (kind == Kind::Unknown) {
        struct stat st {};
        if (::fstat(fd.get(), &st) != 0) return Error::sys("fstat", path, errno);
        kind = S_ISDIR(st.st_mode) ? Kind::Directory : Kind::File;
    }
    PathBeneathAttr attr{access & fs_, fd.get()};
    if (kind == Kind::File) attr.allowed_access &= kFileRights;
    if (attr.allowed_access == 0) return {};
    if (::syscall(SYS_landlock_add_rule, fd_.get(), kRulePathBeneath, &attr, 0U) != 0)
        return Error::sys("landlock_add_rule", path, errno);
    if (held) held->push_back(std::move(fd));
    return {};
}

Status Ruleset::allow_port(uint16_t port, uint64_t access) {
    NetPortAttr attr{access & net_, port};
    if (attr.allowed_access == 0) return {};
    if (::syscall(SYS_landlock_add_rule, fd_.get(), kRuleNetPort, &attr, 0U) != 0)
        return Error::sys("landlock_add_rule", "TCP port " + std::to_string(port), errno);
    return {};
}

void close_held(std::vector<Fd>& held) {
    std::vector<int> numbers;
    numbers.reserve(held.size());
    for (auto& f : held)
        if (f.valid()) numbers.push_back(f.release());
    held.clear();
    std::sort(numbers.begin(), numbers.end());
    for (size_t i = 0, j = 0; i < numbers.size(); i = j) {
        for (j = i + 1; j < numbers.size() && numbers[j] == numbers[j - 1] + 1; ++j) {
        }
        auto lo = static_cast<unsigned>(numbers[i]), hi = static_cast<unsigned>(numbers[j - 1]);
        if (::syscall(SYS_close_range, lo, hi, 0U) != 0)
            for (size_t k = i; k < j; ++k)
                ::close(numbers[k]);
    }
}

int restrict_self(int ruleset_fd, uint32_t flags) noexcept {
    if (::syscall(SYS_landlock_restrict_self, ruleset_fd, flags) == 0) return 0;
    return errno;
}

}  // namespace warden::landlock
