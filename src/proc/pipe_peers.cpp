// Matching pipe inodes across fd tables.
#include "proc/pipe_peers.hpp"

#include <fcntl.h>

#include <algorithm>

namespace warden {

namespace {
void set_ends(PipeEnd& end, int flags) {
    int mode = flags & O_ACCMODE;
    end.read = flags >= 0 && (mode == O_RDONLY || mode == O_RDWR);
    end.write = flags >= 0 && (mode == O_WRONLY || mode == O_RDWR);
}
}  // namespace

PipePeers::PipePeers(const ProcessTable& table) {
    for (const Process& p : table.all()) {
        for (const FdInfo& f : p.fds) {
            if (f.kind != FdInfo::Kind::Pipe || f.inode == 0) continue;
            PipeEnd end{&p, f.fd, false, false};
            set_ends(end, f.flags);
            by_inode_[f.inode].push_back(end);
        }
    }
}

void PipePeers::refresh(uint64_t inode) {
    auto it = by_inode_.find(inode);
    if (it == by_inode_.end()) return;
    for (PipeEnd& end : it->second) {
        int flags = -1;
        for (const FdInfo& f : end.process->fds)
            if (f.fd == end.fd && f.kind == FdInfo::Kind::Pipe && f.inode == inode) flags = f.flags;
        set_ends(end, flags);
    }
}

const std::vector<PipeEnd>& PipePeers::holders(uint64_t inode) const {
    static const std::vector<PipeEnd> kNone;
    auto it = by_inode_.find(inode);
    return it == by_inode_.end() ? kNone : it->second;
}

std::vector<const Process*> PipePeers::holders_with(uint64_t inode, pid_t except,
                                                    bool want_write) const {
    std::vector<const Process*> out;
    for (const PipeEnd& e : holders(inode)) {
        if (!(want_write ? e.write : e.read)) continue;
        if (e.process->id.pid == except || e.process->zombie()) continue;
        if (std::find(out.begin(), out.end(), e.process) == out.end()) out.push_back(e.process);
    }
    return out;
}

std::vector<const Process*> PipePeers::writers(uint64_t inode, pid_t except) const {
    return holders_with(inode, except, true);
}

namespace {
const FdInfo* pipe_fd(const Process& p, int fd) {
    for (const FdInfo& f : p.fds)
        if (f.fd == fd) return f.kind == FdInfo::Kind::Pipe ? &f : nullptr;
    return nullptr;
}
}  // namespace

std::vector<const Process*> PipePeers::writers_of_stdin(const Process& p) const {
    const FdInfo* in = pipe_fd(p, 0);
    if (!in) return {};
    return holders_with(in->inode, p.id.pid, true);
}

std::vector<const Process*> PipePeers::readers_of_stdout(const Process& p) const {
    const FdInfo* out = pipe_fd(p, 1);
    if (!out) return {};
    return holders_with(out->inode, p.id.pid, false);
}

}  // namespace warden
