#include "common/tmpfs.hpp"

#include <sys/mount.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace warden::testing {

TmpfsMount::TmpfsMount(const std::string& dir, const std::string& size) : dir_(dir) {
    std::string opts = "size=" + size + ",mode=0700";
    if (::mount("tmpfs", dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, opts.c_str()) == 0)
        mounted_ = true;
    else
        error_ = std::strerror(errno);
}

TmpfsMount::~TmpfsMount() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
}

bool TmpfsMount::remount_read_only() {
    return ::mount(nullptr, dir_.c_str(), nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
                   nullptr) == 0;
}

bool fill_up(const std::string& filler) {
    std::FILE* f = std::fopen(filler.c_str(), "w");
    if (!f) return false;
    std::string block(4096, 'x');
    for (int i = 0; i < 1024 && std::fwrite(block.data(), 1, block.size(), f) == block.size(); ++i)
        std::fflush(f);
    std::fclose(f);
    return true;
}

}  // namespace warden::testing
