#include "sys/background_thread.hpp"

#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

namespace warden {

namespace {
constexpr int kLowestNice = 19;
}

void BackgroundThread::begins(const std::string& name, const std::optional<CpuSet>& cpus) {
    // Best effort: only where it runs is at stake. Before the name, by which it is found.
    if (cpus) (void)set_cpu_affinity(0, *cpus);
    ::pthread_setname_np(::pthread_self(), name.c_str());
    std::lock_guard lk(mu_);
    tid_ = ::gettid();
    lower_locked();
}

void BackgroundThread::ends() {
    std::lock_guard lk(mu_);
    tid_ = 0;
}

BackgroundThread::~BackgroundThread() {
    if (thread_.joinable()) thread_.join();
}

void BackgroundThread::yield() {
    std::lock_guard lk(mu_);
    yield_asked_ = true;
    lower_locked();
}

// Whichever of the thread's start and yield() comes second lowers it. Under mu_ the thread
// cannot end meanwhile, so `tid_` is still its id.
void BackgroundThread::lower_locked() {
    if (tid_ != 0 && yield_asked_)
        (void)::setpriority(PRIO_PROCESS, static_cast<id_t>(tid_), kLowestNice);
}

}  // namespace warden
