// The count of a client's lines its broker took, on a shared page; see taken.hpp.
#include "share/taken.hpp"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

namespace warden::share {
namespace {

static_assert(std::atomic<uint64_t>::is_always_lock_free,
              "the count is shared between processes: it must be a plain word");

Result<std::atomic<uint64_t>*> map_count(int fd) {
    void* at = ::mmap(nullptr, sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (at == MAP_FAILED) return Error::msg(fmt::format("mmap: {}", std::strerror(errno)));
    return static_cast<std::atomic<uint64_t>*>(at);
}

}  // namespace

Result<TakenCount> TakenCount::create() {
    Fd fd(::memfd_create("mcpwarden-share-taken", MFD_CLOEXEC));
    if (!fd) return Error::msg(fmt::format("memfd_create: {}", std::strerror(errno)));
    if (::ftruncate(fd.get(), sizeof(uint64_t)) != 0)
        return Error::msg(fmt::format("ftruncate: {}", std::strerror(errno)));
    auto count = map_count(fd.get());
    if (!count) return count.error();
    TakenCount t;
    t.fd_ = std::move(fd);
    t.count_ = *count;
    return t;
}

Result<TakenCount> TakenCount::map(Fd fd) {
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
        st.st_size < static_cast<off_t>(sizeof(uint64_t)))
        return Error::msg("the broker's count of lines taken is not a page of a count");
    auto count = map_count(fd.get());
    if (!count) return count.error();
    TakenCount t;
    t.count_ = *count;  // the mapping is all the client keeps
    return t;
}

TakenCount::TakenCount(TakenCount&& o) noexcept
    : fd_(std::move(o.fd_)), count_(std::exchange(o.count_, nullptr)) {}

TakenCount& TakenCount::operator=(TakenCount&& o) noexcept {
    if (this != &o) {
        if (count_) ::munmap(count_, sizeof(uint64_t));
        fd_ = std::move(o.fd_);
        count_ = std::exchange(o.count_, nullptr);
    }
    return *this;
}

TakenCount::~TakenCount() {
    if (count_) ::munmap(count_, sizeof(uint64_t));
}

}  // namespace warden::share
