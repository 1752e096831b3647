#include "sys/seccomp.hpp"

#include <linux/seccomp.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "sys/fd.hpp"

namespace warden {

Result<SeccompBuilder> SeccompBuilder::create() {
    SeccompBuilder b;
    b.ctx_ = ::seccomp_init(SCMP_ACT_ALLOW);
    if (!b.ctx_) return Error::msg("seccomp_init: out of memory");
    // A 32-bit (or x32) call would bypass every rule written against the native numbers:
    // such calls fail with EPERM as a whole rather than kill the server.
    if (int rc = ::seccomp_attr_set(b.ctx_, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ERRNO(EPERM)); rc < 0)
        return Error::sys("seccomp_attr_set", "SCMP_FLTATR_ACT_BADARCH", -rc);
    return b;
}

SeccompBuilder::SeccompBuilder(SeccompBuilder&& o) noexcept
    : ctx_(std::exchange(o.ctx_, nullptr)) {}

SeccompBuilder& SeccompBuilder::operator=(SeccompBuilder&& o) noexcept {
    if (this != &o) {
        if (ctx_) ::seccomp_release(ctx_);
        ctx_ = std::exchange(o.ctx_, nullptr);
    }
    return *this;
}

SeccompBuilder::~SeccompBuilder() {
    if (ctx_) ::seccomp_release(ctx_);
}

Result<bool> SeccompBuilder::deny(const std::string& syscall, int err,
                                  std::vector<SeccompArg> when) {
    int nr = ::seccomp_syscall_resolve_name(syscall.c_str());
    if (nr == __NR_SCMP_ERROR) return false;
    std::vector<scmp_arg_cmp> cmps;
    // Built field by field: libseccomp's SCMP_CMP macro is a C compound literal, which clang
    // refuses in C++ under -Wpedantic.
    for (const auto& a : when) {
        scmp_arg_cmp c{};
        c.arg = a.index;
        if (a.greater) {
            c.op = SCMP_CMP_GT;
            c.datum_a = a.value;
        } else {
            c.op = SCMP_CMP_MASKED_EQ;
            c.datum_a = a.mask;
            c.datum_b = a.value;
        }
        cmps.push_back(c);
    }
    int rc = ::seccomp_rule_add_array(ctx_, SCMP_ACT_ERRNO(static_cast<uint32_t>(err)), nr,
                                      static_cast<unsigned>(cmps.size()), cmps.data());
    if (rc < 0) return Error::sys("seccomp_rule_add", syscall, -rc);
    return true;
}

Result<SeccompProgram> SeccompBuilder::export_bpf() const {
    // libseccomp 2.5 exports to an fd only: a memfd, read back whole.
    int mfd = ::memfd_create("mcpwarden-seccomp", MFD_CLOEXEC);
    if (mfd < 0) return Error::sys("memfd_create", "seccomp program", errno);
    Fd fd(mfd);
    if (int rc = ::seccomp_export_bpf(ctx_, fd.get()); rc < 0)
        return Error::sys("seccomp_export_bpf", "", -rc);
    off_t size = ::lseek(fd.get(), 0, SEEK_END);
    if (size < 0 || size % static_cast<off_t>(sizeof(sock_filter)) != 0)
        return Error::msg("seccomp_export_bpf: program of " + std::to_string(size) +
                          " bytes is not a whole number of instructions");
    std::vector<sock_filter> insns(static_cast<size_t>(size) / sizeof(sock_filter));
    if (::pread(fd.get(), insns.data(), static_cast<size_t>(size), 0) != size)
        return Error::sys("pread", "seccomp program", errno);
    return SeccompProgram(std::move(insns));
}

int install_seccomp(const sock_fprog& prog) noexcept {
    if (::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0UL, 0UL) == 0) return 0;
    return errno;
}

SeccompProgram notifying_refusals(const SeccompProgram& prog, std::initializer_list<int> keep) {
    const sock_fprog f = prog.fprog();
    std::vector<sock_filter> insns(f.filter, f.filter + f.len);
    for (sock_filter& i : insns) {
        if (i.code != (BPF_RET | BPF_K) || (i.k & SECCOMP_RET_ACTION_FULL) != SECCOMP_RET_ERRNO)
            continue;
        const int err = static_cast<int>(i.k & SECCOMP_RET_DATA);
        if (std::find(keep.begin(), keep.end(), err) == keep.end()) i.k = SECCOMP_RET_USER_NOTIF;
    }
    return SeccompProgram(std::move(insns));
}

bool seccomp_user_notif_available() {
    uint32_t action = SECCOMP_RET_USER_NOTIF;
    return ::syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0U, &action) == 0;
}

size_t seccomp_notif_size() {
    seccomp_notif_sizes sizes{};
    if (::syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0U, &sizes) != 0)
        return sizeof(seccomp_notif);
    return std::max<size_t>(sizes.seccomp_notif, sizeof(seccomp_notif));
}

std::string seccomp_syscall_name(int nr) {
    char* name = ::seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
    if (!name) return "syscall " + std::to_string(nr);
    std::string out(name);
    std::free(name);
    return out;
}

int install_seccomp_listener(const sock_fprog& prog, int to) noexcept {
    const long fd =
        ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
    if (fd < 0) return errno;
    // One byte and the descriptor; a failure leaves the listener to close here (below).
    char byte = 'L';
    iovec iov{&byte, 1};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    std::memset(control, 0, sizeof control);
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    const int listener = static_cast<int>(fd);
    std::memcpy(CMSG_DATA(c), &listener, sizeof listener);
    while (::sendmsg(to, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno == EINTR) {
    }
    ::close(listener);
    return 0;
}

}  // namespace warden
