// A small tmpfs of a test's own, for a disk that fills or turns read-only under a journal
// (root, or a user namespace that may mount).
#pragma once

#include <string>

namespace warden::testing {

// A tmpfs of `size` mounted on `dir`, unmounted (lazily, so a busy mount never blocks the
// test's cleanup) on destruction.
class TmpfsMount {
  public:
    TmpfsMount(const std::string& dir, const std::string& size);
    ~TmpfsMount();
    TmpfsMount(const TmpfsMount&) = delete;
    TmpfsMount& operator=(const TmpfsMount&) = delete;
    bool mounted() const { return mounted_; }
    const std::string& error() const { return error_; }
    bool remount_read_only();

  private:
    std::string dir_;
    bool mounted_ = false;
    std::string error_;
};

// Fills the filesystem of `filler` (a file it creates) to its last block, 4 MiB at most.
bool fill_up(const std::string& filler);

}  // namespace warden::testing
