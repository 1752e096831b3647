// The precompiled seccomp programs (src/sandbox/seccomp_programs.inc) against what libseccomp
// builds now from the policy (sandbox::build_seccomp): both are run, by a classic-BPF
// interpreter, on every call number of every architecture a filter can be asked about and on
// the arguments its rules read, and must give the same verdict everywhere. Byte-equality
// would tie the check to one libseccomp version; the verdicts are what the kernel enforces.
//
// When the policy changes, this test fails and says how to regenerate the file:
//   WARDEN_REGENERATE_SECCOMP=1 build/test_sandbox --gtest_filter='SeccompProgram.*'
// writes libseccomp's programs into the source tree, and the next build takes them.
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "sandbox/sandbox.hpp"

namespace warden::testing {
namespace {

using sandbox::SeccompPolicy;

// What the kernel hands a filter (struct seccomp_data).
struct Call {
    int nr = 0;
    uint32_t arch = AUDIT_ARCH_X86_64;
    uint64_t ip = 0;
    uint64_t args[6] = {};
};

// Runs a classic BPF program on `c` as the kernel's seccomp does; nullopt for an instruction
// this interpreter does not know or a jump out of the program (the test then fails: the
// verdicts of such a program cannot be compared).
std::optional<uint32_t> run_bpf(const SeccompProgram& prog, const Call& c) {
    const sock_fprog f = prog.fprog();
    unsigned char data[64] = {};
    static_assert(sizeof(Call) == sizeof data);
    std::memcpy(data, &c, sizeof data);
    uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = {};
    for (size_t pc = 0; pc < f.len; ++pc) {
        const sock_filter& i = f.filter[pc];
        const uint32_t src = BPF_SRC(i.code) == BPF_X ? x : i.k;
        switch (BPF_CLASS(i.code)) {
            case BPF_LD:
                if (i.code == (BPF_LD | BPF_W | BPF_ABS) && i.k + 4 <= sizeof data)
                    std::memcpy(&a, data + i.k, 4);
                else if (i.code == (BPF_LD | BPF_IMM))
                    a = i.k;
                else if (i.code == (BPF_LD | BPF_MEM) && i.k < BPF_MEMWORDS)
                    a = mem[i.k];
                else
                    return std::nullopt;
                break;
            case BPF_LDX:
                if (i.code == (BPF_LDX | BPF_IMM))
                    x = i.k;
                else if (i.code == (BPF_LDX | BPF_MEM) && i.k < BPF_MEMWORDS)
                    x = mem[i.k];
                else
                    return std::nullopt;
                break;
            case BPF_ST:
                if (i.k >= BPF_MEMWORDS) return std::nullopt;
                mem[i.k] = a;
                break;
            case BPF_STX:
                if (i.k >= BPF_MEMWORDS) return std::nullopt;
                mem[i.k] = x;
                break;
            case BPF_ALU:
                switch (BPF_OP(i.code)) {
                    case BPF_AND:
                        a &= src;
                        break;
                    case BPF_OR:
                        a |= src;
                        break;
                    case BPF_ADD:
                        a += src;
                        break;
                    case BPF_SUB:
                        a -= src;
                        break;
                    case BPF_RSH:
                        a = src < 32 ? a >> src : 0;
                        break;
                    case BPF_LSH:
                        a = src < 32 ? a << src : 0;
                        break;
                    default:
                        return std::nullopt;
                }
                break;
            case BPF_JMP: {
                if (BPF_OP(i.code) == BPF_JA) {
                    pc += i.k;
                    break;
                }
                bool taken = false;
                switch (BPF_OP(i.code)) {
                    case BPF_JEQ:
                        taken = a == src;
                        break;
                    case BPF_JGT:
                        taken = a > src;
                        break;
                    case BPF_JGE:
                        taken = a >= src;
                        break;
                    case BPF_JSET:
                        taken = (a & src) != 0;
                        break;
                    default:
                        return std::nullopt;
                }
                pc += taken ? i.jt : i.jf;
                break;
            }
            case BPF_RET:
                return BPF_RVAL(i.code) == BPF_A ? a : i.k;
            case BPF_MISC:
                if (BPF_MISCOP(i.code) == BPF_TAX)
                    x = a;
                else
                    a = x;
                break;
            default:
                return std::nullopt;
        }
    }
    return std::nullopt;  // fell off the end: the kernel's checker refuses such a program
}

// The calls whose arguments the policy reads (x86-64 numbers).
bool reads_arguments(uint32_t arch, int nr) {
    return arch == AUDIT_ARCH_X86_64 &&
           (nr == SYS_clone || nr == SYS_unshare || nr == SYS_socket || nr == SYS_clone3);
}

// The argument vectors worth asking about: none and all ones for every call; for a call whose
// arguments the policy reads, each single bit of each argument (in both 32-bit halves, which a
// filter compares separately), alone and with clone's everyday flags; and for socket(2) the
// families around those named (and one with its high half set) crossed with every type 0-15
// (plain, SOCK_NONBLOCK, SOCK_CLOEXEC) and the protocols around TCP's, then every family 0-63.
std::vector<Call> argument_cases(uint32_t arch, int nr) {
    std::vector<Call> out;
    Call base;
    base.arch = arch;
    base.nr = nr;
    out.push_back(base);
    Call ones = base;
    for (auto& a : ones.args)
        a = ~uint64_t{0};
    out.push_back(ones);
    if (!reads_arguments(arch, nr)) return out;
    for (int arg = 0; arg < 6; ++arg)
        for (int bit = 0; bit < 64; ++bit) {
            Call c = base;
            c.args[arg] = uint64_t{1} << bit;
            out.push_back(c);
            c.args[arg] |= 0x00011f00;  // with clone's everyday flags (VM, FS, FILES, SIGHAND…)
            out.push_back(c);
        }
    if (nr != SYS_socket) return out;
    for (uint64_t fam : {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{10}, uint64_t{16},
                         uint64_t{17}, uint64_t{44}, uint64_t{63}, (uint64_t{1} << 32) | 2})
        for (uint64_t type = 0; type < 16; ++type)
            for (uint64_t flags : {uint64_t{0}, uint64_t{SOCK_NONBLOCK}, uint64_t{SOCK_CLOEXEC}})
                for (uint64_t proto : {0, 1, 6, 7, 17, 132, 255, 262, 263}) {
                    Call c = base;
                    c.args[0] = fam;
                    c.args[1] = type | flags;
                    c.args[2] = proto;
                    out.push_back(c);
                }
    for (uint64_t fam = 0; fam < 64; ++fam) {
        Call c = base;
        c.args[0] = fam;
        c.args[1] = SOCK_STREAM;
        out.push_back(c);
    }
    return out;
}

// The first call on which the two programs differ, said in words; "" when none does.
std::string first_difference(const SeccompProgram& want, const SeccompProgram& got) {
    const uint32_t arches[] = {AUDIT_ARCH_X86_64, AUDIT_ARCH_I386, AUDIT_ARCH_AARCH64, 0};
    for (uint32_t arch : arches)
        for (int base : {0, 0x40000000}) {  // the native numbers, then x32's
            for (int n = -1; n < 600; ++n) {
                const int nr = n < 0 ? -1 : base + n;
                for (const Call& c : argument_cases(arch, nr)) {
                    auto w = run_bpf(want, c), g = run_bpf(got, c);
                    if (!w || !g || *w != *g)
                        return fmt::format(
                            "arch {:#x} nr {:#x} args {:#x} {:#x} {:#x}: libseccomp {}, "
                            "precompiled {}",
                            arch, nr, c.args[0], c.args[1], c.args[2],
                            w ? fmt::format("{:#x}", *w) : "unreadable",
                            g ? fmt::format("{:#x}", *g) : "unreadable");
                }
            }
        }
    return "";
}

struct Variant {
    const char* name;  // the array's name in seccomp_programs.inc
    SeccompPolicy policy;
};
const Variant kVariants[] = {{"kSeccompCalls", {false, true}},
                             {"kSeccompCallsTcpOnly", {true, true}},
                             {"kSeccompCallsNoInet", {true, false}}};

std::string as_source(const std::vector<std::pair<std::string, SeccompProgram>>& progs) {
    std::string out =
        "// Generated from sandbox::build_seccomp() (libseccomp) for x86-64 by\n"
        "//   WARDEN_REGENERATE_SECCOMP=1 build/test_sandbox --gtest_filter='SeccompProgram.*'\n"
        "// Do not edit: tests/sandbox/seccomp_program_test.cpp checks these against the "
        "policy.\n"
        "// clang-format off\n";
    for (const auto& [name, prog] : progs) {
        const sock_fprog f = prog.fprog();
        out += fmt::format("constexpr sock_filter {}[] = {{\n", name);
        for (size_t i = 0; i < f.len; ++i)
            out += fmt::format("    {{{:#06x}, {}, {}, {:#010x}}},\n", f.filter[i].code,
                               f.filter[i].jt, f.filter[i].jf, f.filter[i].k);
        out += "};\n";
    }
    return out + "// clang-format on\n";
}

TEST(SeccompProgram, PrecompiledGivesLibseccompsVerdictOnEveryCall) {
#if !defined(__x86_64__) || defined(__ILP32__)
    GTEST_SKIP() << "the precompiled programs are x86-64's";
#endif
    std::vector<std::pair<std::string, SeccompProgram>> built;
    for (const auto& v : kVariants) {
        auto prog = sandbox::build_seccomp(v.policy);
        ASSERT_TRUE(prog.ok()) << prog.error().message;
        built.emplace_back(v.name, std::move(*prog));
    }
    if (std::getenv("WARDEN_REGENERATE_SECCOMP")) {
        const std::string path =
            std::string(WARDEN_SOURCE_DIR) + "/src/sandbox/seccomp_programs.inc";
        std::ofstream(path) << as_source(built);
        GTEST_SKIP() << "wrote " << path << ": rebuild and run again";
    }
    for (size_t i = 0; i < built.size(); ++i) {
        auto pre = sandbox::precompiled_seccomp(kVariants[i].policy);
        ASSERT_TRUE(pre.has_value());
        EXPECT_EQ(first_difference(built[i].second, *pre), "")
            << kVariants[i].name << " differs from the policy; regenerate with "
            << "WARDEN_REGENERATE_SECCOMP=1 build/test_sandbox --gtest_filter='SeccompProgram.*'";
    }
}

// The negative control: the comparison sees a program that lets one refused call through
// (ptrace's ERRNO turned into ALLOW) and one that refuses a call it should allow.
TEST(SeccompProgram, ComparisonCatchesAOneCallDifference) {
    auto built = sandbox::build_seccomp({true, true});
    ASSERT_TRUE(built.ok()) << built.error().message;
    const sock_fprog f = built->fprog();
    std::vector<sock_filter> insns(f.filter, f.filter + f.len);
    Call ptrace_call;
    ptrace_call.nr = SYS_ptrace;
    auto verdict = run_bpf(*built, ptrace_call);
    ASSERT_TRUE(verdict.has_value());
    ASSERT_EQ(*verdict, SECCOMP_RET_ERRNO | EPERM) << "ptrace is refused with EPERM";
    EXPECT_EQ(first_difference(*built, *built), "");

    // The ptrace comparison's jump, redirected to where getpid (allowed) ends up.
    std::vector<sock_filter> lets_ptrace = insns;
    bool changed = false;
    for (auto& i : lets_ptrace)
        if (i.code == (BPF_JMP | BPF_JEQ | BPF_K) && i.k == SYS_ptrace) {
            i.k = 0x7ffffff;  // no call has this number: ptrace now falls through to ALLOW
            changed = true;
        }
    ASSERT_TRUE(changed) << "libseccomp's program compares the call number with ptrace's";
    EXPECT_NE(first_difference(*built, SeccompProgram(lets_ptrace)), "");

    std::vector<sock_filter> refuses_more = insns;
    for (auto& i : refuses_more)
        if (i.code == (BPF_RET | BPF_K) && i.k == SECCOMP_RET_ALLOW)
            i.k = SECCOMP_RET_ERRNO | EPERM;
    EXPECT_NE(first_difference(*built, SeccompProgram(refuses_more)), "");
}

}  // namespace
}  // namespace warden::testing
