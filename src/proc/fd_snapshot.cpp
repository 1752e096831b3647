// Every process's fd table in one read, through a BPF task_file iterator.
#include "proc/fd_snapshot.hpp"

#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "proc/kernel_btf.hpp"
#include "sys/fd.hpp"

namespace warden {
namespace {

constexpr uint32_t kFmodeRead = 0x1, kFmodeWrite = 0x2;  // include/linux/fs.h

long sys_bpf(int cmd, bpf_attr& attr) {
    return ::syscall(SYS_bpf, cmd, &attr, sizeof attr);
}

// --- a tiny assembler (the encodings of include/linux/filter.h) ---
bpf_insn insn(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm) {
    bpf_insn i{};
    i.code = code;
    i.dst_reg = dst & 0xf;
    i.src_reg = src & 0xf;
    i.off = off;
    i.imm = imm;
    return i;
}
uint8_t size_code(uint32_t bytes) {
    switch (bytes) {
        case 1:
            return BPF_B;
        case 2:
            return BPF_H;
        case 4:
            return BPF_W;
        default:
            return BPF_DW;
    }
}
bpf_insn load(uint32_t bytes, uint8_t dst, uint8_t src, uint32_t off) {
    return insn(BPF_LDX | BPF_MEM | size_code(bytes), dst, src, static_cast<int16_t>(off), 0);
}
bpf_insn store(uint32_t bytes, uint8_t base, int16_t off, uint8_t src) {
    return insn(BPF_STX | BPF_MEM | size_code(bytes), base, src, off, 0);
}
bpf_insn store_zero(int16_t off) {
    return insn(BPF_ST | BPF_MEM | BPF_DW, BPF_REG_10, 0, off, 0);
}
bpf_insn mov_reg(uint8_t dst, uint8_t src) {
    return insn(BPF_ALU64 | BPF_MOV | BPF_X, dst, src, 0, 0);
}
bpf_insn mov_imm(uint8_t dst, int32_t imm) {
    return insn(BPF_ALU64 | BPF_MOV | BPF_K, dst, 0, 0, imm);
}
bpf_insn add_imm(uint8_t dst, int32_t imm) {
    return insn(BPF_ALU64 | BPF_ADD | BPF_K, dst, 0, 0, imm);
}
bpf_insn jump_if_zero(uint8_t reg, int16_t skip) {
    return insn(BPF_JMP | BPF_JEQ | BPF_K, reg, 0, skip, 0);
}
bpf_insn call(int32_t helper) {
    return insn(BPF_JMP | BPF_CALL, 0, 0, 0, helper);
}
bpf_insn exit_insn() {
    return insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
}

struct Layout {
    uint32_t attach_id = 0;                 // bpf_iter_task_file
    KernelBtf::Field meta, task, fd, file;  // struct bpf_iter__task_file
    KernelBtf::Field seq;                   // struct bpf_iter_meta
    KernelBtf::Field tgid, pid, start_boottime, real_cred, cred_uid;
    KernelBtf::Field f_mode, f_inode;
    KernelBtf::Field i_ino, i_mode, i_sb;
    KernelBtf::Field s_magic;
};

Result<Layout> read_layout(const KernelBtf& btf) {
    Layout l;
    auto id = btf.function("bpf_iter_task_file");
    if (!id) return id.error();
    l.attach_id = *id;
    struct Want {
        const char* type;
        const char* field;
        KernelBtf::Field* into;
    };
    const Want want[] = {
        {"bpf_iter__task_file", "meta", &l.meta},
        {"bpf_iter__task_file", "task", &l.task},
        {"bpf_iter__task_file", "fd", &l.fd},
        {"bpf_iter__task_file", "file", &l.file},
        {"bpf_iter_meta", "seq", &l.seq},
        {"task_struct", "tgid", &l.tgid},
        {"task_struct", "pid", &l.pid},
        {"task_struct", "start_boottime", &l.start_boottime},
        {"task_struct", "real_cred", &l.real_cred},
        {"cred", "uid", &l.cred_uid},
        {"file", "f_mode", &l.f_mode},
        {"file", "f_inode", &l.f_inode},
        {"inode", "i_ino", &l.i_ino},
        {"inode", "i_mode", &l.i_mode},
        {"inode", "i_sb", &l.i_sb},
        {"super_block", "s_magic", &l.s_magic},
    };
    for (const Want& w : want) {
        auto f = btf.field(w.type, w.field);
        if (!f) return f.error();
        *w.into = *f;
    }
    for (const KernelBtf::Field* p :
         {&l.meta, &l.task, &l.file, &l.seq, &l.f_inode, &l.i_sb, &l.real_cred})
        if (p->size != 8) return Error::msg("kernel BTF: a pointer field is not 8 bytes");
    return l;
}

// The program: one 48-byte Record per (task, file), written with bpf_seq_write. The record
// lives on the stack at r10-48 (its fields at the offsets of struct Record).
std::vector<bpf_insn> assemble(const Layout& l) {
    constexpr int16_t kRec = -48;
    auto at = [](size_t field) { return static_cast<int16_t>(kRec + static_cast<int>(field)); };
    const int16_t o_tgid = at(offsetof(FdSnapshot::Record, tgid));
    const int16_t o_pid = at(offsetof(FdSnapshot::Record, pid));
    const int16_t o_fd = at(offsetof(FdSnapshot::Record, fd));
    const int16_t o_mode = at(offsetof(FdSnapshot::Record, f_mode));
    const int16_t o_start = at(offsetof(FdSnapshot::Record, start_boottime));
    const int16_t o_inode = at(offsetof(FdSnapshot::Record, inode));
    const int16_t o_magic = at(offsetof(FdSnapshot::Record, s_magic));
    const int16_t o_imode = at(offsetof(FdSnapshot::Record, i_mode));
    const int16_t o_uid = at(offsetof(FdSnapshot::Record, uid));

    std::vector<bpf_insn> p;
    // field of the struct at `from` -> r2 -> the record at `to` (`bytes` wide there)
    auto copy = [&p](const KernelBtf::Field& f, uint8_t from, int16_t to, uint32_t bytes) {
        p.push_back(load(f.size, BPF_REG_2, from, f.offset));
        p.push_back(store(bytes, BPF_REG_10, to, BPF_REG_2));
    };
    p.push_back(load(8, BPF_REG_6, BPF_REG_1, l.meta.offset));  // r6 = ctx->meta
    p.push_back(load(8, BPF_REG_7, BPF_REG_1, l.task.offset));  // r7 = ctx->task
    p.push_back(load(8, BPF_REG_8, BPF_REG_1, l.file.offset));  // r8 = ctx->file
    p.push_back(load(l.fd.size, BPF_REG_9, BPF_REG_1, l.fd.offset));
    size_t task_null = p.size();
    p.push_back({});  // if r7 == 0 goto out (the end-of-walk call has no task)
    size_t file_null = p.size();
    p.push_back({});  // if r8 == 0 goto out
    copy(l.tgid, BPF_REG_7, o_tgid, 4);
    copy(l.pid, BPF_REG_7, o_pid, 4);
    p.push_back(store(4, BPF_REG_10, o_fd, BPF_REG_9));
    copy(l.f_mode, BPF_REG_8, o_mode, 4);
    copy(l.start_boottime, BPF_REG_7, o_start, 8);
    p.push_back(store_zero(o_inode));
    p.push_back(store_zero(o_magic));
    p.push_back(store_zero(o_imode));                                // i_mode and uid
    p.push_back(load(8, BPF_REG_5, BPF_REG_7, l.real_cred.offset));  // r5 = task->real_cred
    p.push_back(jump_if_zero(BPF_REG_5, 2));
    copy(l.cred_uid, BPF_REG_5, o_uid, 4);
    p.push_back(load(8, BPF_REG_3, BPF_REG_8, l.f_inode.offset));  // r3 = file->f_inode
    size_t inode_null = p.size();
    p.push_back({});  // if r3 == 0 goto write
    copy(l.i_ino, BPF_REG_3, o_inode, 8);
    copy(l.i_mode, BPF_REG_3, o_imode, 4);
    p.push_back(load(8, BPF_REG_4, BPF_REG_3, l.i_sb.offset));  // r4 = inode->i_sb
    size_t sb_null = p.size();
    p.push_back({});  // if r4 == 0 goto write
    copy(l.s_magic, BPF_REG_4, o_magic, 8);
    size_t write = p.size();
    p.push_back(load(8, BPF_REG_1, BPF_REG_6, l.seq.offset));  // r1 = meta->seq
    p.push_back(mov_reg(BPF_REG_2, BPF_REG_10));
    p.push_back(add_imm(BPF_REG_2, kRec));
    p.push_back(mov_imm(BPF_REG_3, sizeof(FdSnapshot::Record)));
    p.push_back(call(BPF_FUNC_seq_write));
    size_t out = p.size();
    p.push_back(mov_imm(BPF_REG_0, 0));
    p.push_back(exit_insn());
    auto jump = [&](size_t from, uint8_t reg, size_t to) {
        p[from] = jump_if_zero(reg, static_cast<int16_t>(to - from - 1));
    };
    jump(task_null, BPF_REG_7, out);
    jump(file_null, BPF_REG_8, out);
    jump(inode_null, BPF_REG_3, write);
    jump(sb_null, BPF_REG_4, write);
    return p;
}

Error bpf_error(std::string_view step, int err, std::string_view log = {}) {
    std::string msg = fmt::format("BPF fd iterator: {}: {}", step, std::strerror(err));
    if (!log.empty()) {
        // The verifier's last lines say what it refused.
        std::string_view tail = log.substr(0, log.find_last_not_of("\n\0") + 1);
        size_t cut = tail.size() > 400 ? tail.size() - 400 : 0;
        msg += fmt::format(" (verifier: ...{})", tail.substr(cut));
    }
    return Error{std::move(msg), err};
}

Result<Fd> load_program(const std::vector<bpf_insn>& prog, uint32_t attach_id) {
    static const char kLicense[] = "GPL";  // bpf_seq_write is GPL-only
    bpf_attr a{};
    a.prog_type = BPF_PROG_TYPE_TRACING;
    a.expected_attach_type = BPF_TRACE_ITER;
    a.insns = reinterpret_cast<uint64_t>(prog.data());
    a.insn_cnt = static_cast<uint32_t>(prog.size());
    a.license = reinterpret_cast<uint64_t>(kLicense);
    a.attach_btf_id = attach_id;
    std::memcpy(a.prog_name, "warden_fds", sizeof "warden_fds");
    long fd = sys_bpf(BPF_PROG_LOAD, a);
    if (fd >= 0) return Fd(static_cast<int>(fd));
    int err = errno;
    if (err != EINVAL && err != EACCES) return bpf_error("cannot load the program", err);
    // Again with the verifier's log, to say why.
    std::string log(16384, '\0');
    a.log_level = 1;
    a.log_buf = reinterpret_cast<uint64_t>(log.data());
    a.log_size = static_cast<uint32_t>(log.size());
    fd = sys_bpf(BPF_PROG_LOAD, a);
    if (fd >= 0) return Fd(static_cast<int>(fd));
    return bpf_error("the verifier refused the program", err, log.c_str());
}

// cred->uid is the kernel's uid, which /proc shows mapped into the reader's user namespace:
// the same number only under the identity map of the initial namespace.
bool initial_user_namespace() {
    auto map = read_file("/proc/self/uid_map");
    if (!map) return false;
    std::string_view m = *map;
    size_t a = m.find_first_not_of(" \t");
    if (a == std::string_view::npos) return false;
    m.remove_prefix(a);
    // "         0          0 4294967295\n": one line, whitespace between the three numbers.
    unsigned long v[3] = {1, 1, 0};
    int got = std::sscanf(std::string(m).c_str(), "%lu %lu %lu", &v[0], &v[1], &v[2]);
    return got == 3 && v[0] == 0 && v[1] == 0 && v[2] == 4294967295ul &&
           m.find('\n') == m.size() - 1;
}

// "pipe:[INODE]" as /proc shows it; ten thousand of these a scan, so without fmt.
std::string link_text(std::string_view kind, uint64_t inode) {
    char buf[40];
    char* end = std::to_chars(buf, buf + sizeof buf - 1, inode).ptr;
    *end++ = ']';
    std::string out;
    out.reserve(kind.size() + static_cast<size_t>(end - buf));
    out.append(kind).append(buf, end);
    return out;
}

// MCPWARDEN_FAULT=...,bpf_iter,...: take() fails after may_work() said it could work, as a
// verifier refusal would (the scan's fallback for that case is tested with it).
bool fault_injected() {
    const char* v = std::getenv("MCPWARDEN_FAULT");
    if (!v) return false;
    std::string_view spec = v;
    while (!spec.empty()) {
        size_t comma = spec.find(',');
        if (spec.substr(0, comma) == "bpf_iter") return true;
        if (comma == std::string_view::npos) break;
        spec.remove_prefix(comma + 1);
    }
    return false;
}

bool disabled() {
    const char* v = std::getenv("MCPWARDEN_NO_BPF");
    return v && *v && std::string_view(v) != "0";
}

}  // namespace

bool FdSnapshot::may_work() {
    // The failures that can be told without trying: a scan that plans on the snapshot and
    // then has none reads every process twice. PROC_PID_INIT_INO (include/linux/proc_ns.h)
    // is the inode of the initial pid namespace.
    constexpr ino_t kInitialPidNamespace = 0xEFFFFFFCu;
    struct stat ns {};
    return !disabled() && ::geteuid() == 0 && ::access("/sys/kernel/btf/vmlinux", R_OK) == 0 &&
           ::stat("/proc/self/ns/pid", &ns) == 0 && ns.st_ino == kInitialPidNamespace;
}

bool FdSnapshot::uids_as_proc_shows() {
    static const bool initial = initial_user_namespace();
    return initial;
}

Result<FdSnapshot> FdSnapshot::take() {
    if (disabled()) return Error::msg("BPF fd iterator: turned off by MCPWARDEN_NO_BPF");
    if (fault_injected()) return Error::msg("BPF fd iterator: injected fault (MCPWARDEN_FAULT)");
    if (::geteuid() != 0) return Error::msg("BPF fd iterator: needs root (CAP_BPF, CAP_PERFMON)");
    auto btf = KernelBtf::open();
    if (!btf) return btf.error();
    auto layout = read_layout(*btf);
    if (!layout) return layout.error();
    auto prog = load_program(assemble(*layout), layout->attach_id);
    if (!prog) return prog.error();

    bpf_attr a{};
    a.link_create.prog_fd = static_cast<uint32_t>(prog->get());
    a.link_create.attach_type = BPF_TRACE_ITER;
    long link = sys_bpf(BPF_LINK_CREATE, a);
    if (link < 0) return bpf_error("cannot attach the iterator", errno);
    Fd link_fd(static_cast<int>(link));
    bpf_attr c{};
    c.iter_create.link_fd = static_cast<uint32_t>(link_fd.get());
    long iter = sys_bpf(BPF_ITER_CREATE, c);
    if (iter < 0) return bpf_error("cannot create the iterator", errno);
    Fd iter_fd(static_cast<int>(iter));

    std::vector<Record> records;
    records.reserve(16384);
    std::string bytes;  // a read may end inside a record
    char buf[1 << 16];
    for (;;) {
        ssize_t n = ::read(iter_fd.get(), buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return bpf_error("cannot read the iterator", errno);
        if (n == 0) break;
        bytes.append(buf, static_cast<size_t>(n));
        size_t whole = bytes.size() / sizeof(Record);
        size_t old = records.size();
        records.resize(old + whole);
        std::memcpy(records.data() + old, bytes.data(), whole * sizeof(Record));
        bytes.erase(0, whole * sizeof(Record));
    }
    if (!bytes.empty()) return Error::msg("BPF fd iterator: the last record was cut short");
    FdSnapshot s = from_records(std::move(records));
    // The iterator reports pids as the initial pid namespace numbers them. Our own table
    // (it holds the iterator's fd) under our own pid says this namespace is that one.
    if (!s.by_tgid_.count(static_cast<uint32_t>(::getpid())))
        return Error::msg("BPF fd iterator: not in the initial pid namespace");
    return s;
}

FdSnapshot FdSnapshot::from_records(std::vector<Record> records) {
    FdSnapshot s;
    // Only the thread-group leader's table, as /proc/PID/fd shows; a thread that unshared
    // its table (CLONE_FILES not set) is reported under the same tgid and left out.
    std::erase_if(records, [](const Record& r) { return r.tgid != r.pid; });
    // The iterator walks tasks in pid order and each table in fd order: sorted already, as
    // a rule. Checked, not assumed.
    auto by_process_then_fd = [](const Record& a, const Record& b) {
        return a.tgid != b.tgid ? a.tgid < b.tgid : a.fd < b.fd;
    };
    if (!std::is_sorted(records.begin(), records.end(), by_process_then_fd))
        std::sort(records.begin(), records.end(), by_process_then_fd);
    s.records_ = std::move(records);
    for (size_t i = 0; i < s.records_.size();) {
        size_t j = i;
        while (j < s.records_.size() && s.records_[j].tgid == s.records_[i].tgid)
            ++j;
        s.by_tgid_.emplace(s.records_[i].tgid, Span{i, j});
        i = j;
    }
    return s;
}

FdInfo FdSnapshot::to_fd_info(const Record& r) {
    FdInfo f;
    f.fd = static_cast<int>(r.fd);
    f.flags = -1;
    const uint32_t type = r.i_mode & S_IFMT;
    if (r.s_magic == PIPEFS_MAGIC && type == S_IFIFO) {
        f.kind = FdInfo::Kind::Pipe;
        f.inode = r.inode;
        f.target = link_text("pipe:[", r.inode);
        bool rd = (r.f_mode & kFmodeRead) != 0, wr = (r.f_mode & kFmodeWrite) != 0;
        f.flags = rd && wr ? O_RDWR : wr ? O_WRONLY : rd ? O_RDONLY : -1;
    } else if (r.s_magic == SOCKFS_MAGIC && type == S_IFSOCK) {
        f.kind = FdInfo::Kind::Socket;
        f.inode = r.inode;
        f.target = link_text("socket:[", r.inode);
    } else if (r.s_magic == NSFS_MAGIC) {
        f.kind = FdInfo::Kind::Other;  // "net:[INODE]" and the like in /proc
    } else if (r.s_magic == ANON_INODE_FS_MAGIC) {
        f.kind = FdInfo::Kind::AnonInode;
    } else if (type == S_IFREG || type == S_IFDIR || type == S_IFCHR || type == S_IFBLK ||
               type == S_IFIFO || type == S_IFLNK) {
        f.kind = FdInfo::Kind::File;  // its path: read_more(kStdioTargets) for fds 0-2
    } else {
        f.kind = FdInfo::Kind::Other;
    }
    return f;
}

bool FdSnapshot::fill(Process& p) const {
    auto it = by_tgid_.find(static_cast<uint32_t>(p.id.pid));
    if (it == by_tgid_.end()) return false;
    const Span s = it->second;
    // /proc/PID/stat's starttime is start_boottime in clock ticks (nsec_to_clock_t).
    static const uint64_t ns_per_tick = [] {
        long t = ::sysconf(_SC_CLK_TCK);
        return 1'000'000'000ull / static_cast<uint64_t>(t > 0 ? t : 100);
    }();
    if (records_[s.begin].start_boottime / ns_per_tick != p.id.starttime) return false;
    p.fds.clear();
    p.fds.reserve(s.end - s.begin);
    for (size_t i = s.begin; i < s.end; ++i)
        p.fds.push_back(to_fd_info(records_[i]));
    if (uids_as_proc_shows()) p.uid = records_[s.begin].uid;
    return true;
}

}  // namespace warden
