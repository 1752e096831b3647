// Matching pipe inodes across fd tables.
#include "proc/pipe_peers.hpp"

#include <fcntl.h>

#include <algorithm>

namespace warden {

PipePeers::PipePeers(const ProcessTable& table) {
    for (const Process& p : table.all()) {
        for (const FdInfo& f : p.fds) {
            if (f.kind != FdInfo::Kind::Pipe || f.inode == 0) continue;
            PipeEnd end{&p, f.fd, false, false};
            if (f.flags >= 0) {
                int mode = f.flags & O_ACCMODE;
                end.read = mode == O_RDONLY || mode == O_RDWR;
                end.write = mode == O_WRONLY || mode == O_RDWR;
            }
            by_inode_[f.inode].push_back(end);
        }
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
