// Small test utilities: bounded polling, files the fixture writes, port probes, unique tags,
// temporary directories. Tests may poll; the product may not.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace warden::testing {

// Whether this test binary runs under a sanitizer (GCC says so by macro, clang by
// __has_feature): its runtime changes what memory and descriptors a process has, so the tests
// that measure those skip there.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

using namespace std::chrono_literals;
using Millis = std::chrono::milliseconds;

// Polls `pred` every `step` until it holds or `timeout` passes; returns its last value.
bool wait_until(const std::function<bool()>& pred, Millis timeout, Millis step = 5ms);

// Waits until `path` exists and is not empty (the fixture writes files atomically).
bool wait_for_file(const std::string& path, Millis timeout);

// First line of a file as a number, if the file exists and holds one.
std::optional<uint16_t> read_port_file(const std::string& path);
std::optional<pid_t> read_pid_file(const std::string& path);

// Whether a plain TCP bind (no SO_REUSEADDR) of 127.0.0.1:port succeeds right now. A socket
// still listening there, in any process, makes it fail with EADDRINUSE: the external oracle
// for "the tree released its port".
bool port_bindable(uint16_t port);

// A tag unique to this process and call, for kTagVar ("t<pid>-<n>-<random>").
std::string unique_tag();

// A fresh directory under $TMPDIR (or /tmp), removed recursively on destruction.
class TempDir {
  public:
    TempDir();
    ~TempDir();
    TempDir(TempDir&& o) noexcept;
    TempDir& operator=(TempDir&&) = delete;
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    const std::string& path() const { return path_; }
    // path() + "/" + name
    std::string file(const std::string& name) const { return path_ + "/" + name; }

  private:
    std::string path_;
};

}  // namespace warden::testing
