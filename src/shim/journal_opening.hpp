// The keeper's journal opened ahead, off its wait loop (shim/keeper_journal.cpp).
#pragma once

#include <unistd.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "journal/journal.hpp"
#include "shim/journal_sink.hpp"
#include "shim/options.hpp"
#include "sys/background_thread.hpp"
#include "sys/pipe.hpp"
#include "sys/result.hpp"

namespace warden::shim {

// One attempt at opening the keeper's journal, on a thread of its own (keeper_journal.cpp
// says why). The attempt never waits for the lock, so it is bounded by the opening's
// own work; `done_fd` becomes readable when it is over, and `finish` joins and hands over
// its result. Never two at once; joined before the keeper forks and before a teardown.
class JournalOpening {
  public:
    // `inline_attempt` (fault keeper_journal_inline): made here, before returning, as the
    // wait loop once did; `delay`: the attempt begins that much later, as on a slow or hung
    // disk (faults keeper_journal_slow, keeper_journal_stuck).
    static Result<std::unique_ptr<JournalOpening>> start(const std::string& path, JournalSync sync,
                                                         std::chrono::milliseconds delay,
                                                         bool inline_attempt) {
        auto done = make_pipe();
        if (!done) return done.error();
        auto o = std::unique_ptr<JournalOpening>(new JournalOpening(std::move(*done)));
        if (inline_attempt)
            o->attempt(path, sync, delay);
        else
            o->thread_.emplace("mcpwarden-kopen", [self = o.get(), path, sync, delay] {
                self->attempt(path, sync, delay);
            });
        return o;
    }
    // For a process that ends with _exit next and needs no journal any more: an attempt
    // still under way is not joined but dies with the process (keeper_journal.cpp says why).
    static void leave_to_the_exit(std::unique_ptr<JournalOpening> o) { (void)o.release(); }
    ~JournalOpening() {
        if (thread_ && thread_->joinable()) thread_->join();
    }
    JournalOpening(const JournalOpening&) = delete;
    JournalOpening& operator=(const JournalOpening&) = delete;

    int done_fd() const { return done_.read.get(); }
    // The teardown begins: the attempt under way runs on what it leaves of the cores
    // (sys/background_thread.hpp); its journal is needed only once the tree is gone.
    void yield() {
        if (thread_) thread_->yield();
    }
    Result<std::unique_ptr<journal::Journal>> finish() {
        if (thread_ && thread_->joinable()) thread_->join();
        if (!journal_) return *error_;
        return std::move(journal_);
    }

  private:
    explicit JournalOpening(Pipe done) : done_(std::move(done)) {}
    void attempt(std::string path, JournalSync sync, std::chrono::milliseconds delay) {
        if (delay.count() > 0) std::this_thread::sleep_for(delay);
        if (auto j = open_journal(path, sync, std::chrono::milliseconds(0)))
            journal_ = std::move(*j);
        else
            error_ = j.error();
        (void)!::write(done_.write.get(), "x", 1);
    }
    Pipe done_;
    std::unique_ptr<journal::Journal> journal_;  // the attempt's outcome: one or the other
    std::optional<Error> error_;
    std::optional<BackgroundThread> thread_;
};

}  // namespace warden::shim
