// A thread for work that must never compete with what the process does when it matters
// more: a journal's opening (SQLite's open, OpenSSL reading the signing key, a schema check:
// milliseconds of CPU) runs on one while the relay reads its client and the keeper waits for
// the server, and is usually over before anything else needs a core. When a session ends
// during it (a client that starts a server and goes at once, `claude mcp list`), the
// teardown needs both of this machine's cores for the signals, the server's exit and its
// helpers' deaths, and the opening has nothing to give the teardown: its records are written
// after the tree is gone. So whoever starts the teardown calls yield(): the thread's nice
// value goes to 19, the lowest weight the scheduler gives a normal thread (15 against 1,024),
// and it runs on what the teardown leaves.
//
// Why not SCHED_IDLE or stopping the thread: the opening may hold the journal's cross-process
// lock (the relay's commits session.start), and every other session of the user waits for
// it. At nice 19 it still gets a share of a busy core, so that wait stays bounded; and an
// unprivileged thread can raise its nice but never lower it again (RLIMIT_NICE is 0), which
// is why only a thread that ends with its work yields, never the journal's writer thread.
// A thread started by the yielded one inherits its nice: the openings start none.
//
// It may be given CPUs of its own, for the same reason: a journal's opening started right
// after a fork would otherwise share a CPU with the child, which starts on ours, until the
// kernel's balancing moves one of them (src/sys/cpu_affinity.hpp).
#pragma once

#include <sys/types.h>

#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "sys/cpu_affinity.hpp"

namespace warden {

class BackgroundThread {
  public:
    BackgroundThread() = default;
    // Runs `work` on a new thread named `name` (at most 15 characters: /proc's comm, `top -H`).
    // With `cpus`, the thread runs only there (set before `work` begins).
    template <class Work>
    BackgroundThread(std::string name, Work work, std::optional<CpuSet> cpus = std::nullopt)
        : thread_([this, name = std::move(name), work = std::move(work), cpus]() mutable {
              begins(name, cpus);
              work();
              ends();
          }) {}
    ~BackgroundThread();
    BackgroundThread(BackgroundThread&&) = delete;
    BackgroundThread& operator=(BackgroundThread&&) = delete;

    bool joinable() const { return thread_.joinable(); }
    void join() { thread_.join(); }
    // From now on the thread runs at nice 19, whether it has started yet or not.
    void yield();

  private:
    void begins(const std::string& name, const std::optional<CpuSet>& cpus);
    void ends();
    void lower_locked();
    // The thread's id while its work runs (0 before and after), and whether yield() was
    // called; under mu_, so that yield() never aims at an id the kernel may have given again.
    std::mutex mu_;
    pid_t tid_ = 0;
    bool yield_asked_ = false;
    std::thread thread_;
};

}  // namespace warden
