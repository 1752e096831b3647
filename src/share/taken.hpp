// How many of a client's lines its broker has taken, on a page the broker and the client's
// `run --share` both map (a memfd the broker passes with its answer to the hello).
//
// The broker counts a line taken before it passes the line on; a `run --share` whose broker
// dies reads the count then, to tell the lines a server may have had (answered with an
// error) from those no broker read (sent on to the next one: client.cpp, Link). A line of
// the count on the socket ({"share":1,"taken":N}) said the same, but woke the `run --share`
// for every line it relayed, only for it to note the number and sleep again: on a machine
// with fewer cores than the processes of a round trip, that wake-up took the turn of the
// processes the answer waited for. A store to the page wakes nobody, and stays readable
// when the broker is gone, SIGKILLed between two instructions included: the count is stored
// before the line is written on, so a line it counts is at worst one no server had,
// answered with an error, never one sent twice.
#pragma once

#include <atomic>
#include <cstdint>

#include "sys/fd.hpp"
#include "sys/result.hpp"

namespace warden::share {

class TakenCount {
  public:
    // The broker's: a new page, counting from 0.
    static Result<TakenCount> create();
    // The client's: the page of the memfd the broker passed.
    static Result<TakenCount> map(Fd fd);

    TakenCount() = default;
    TakenCount(TakenCount&& o) noexcept;
    TakenCount& operator=(TakenCount&& o) noexcept;
    TakenCount(const TakenCount&) = delete;
    TakenCount& operator=(const TakenCount&) = delete;
    ~TakenCount();

    explicit operator bool() const { return count_ != nullptr; }
    int fd() const { return fd_.get(); }
    void store(uint64_t n) { count_->store(n, std::memory_order_release); }
    uint64_t load() const { return count_->load(std::memory_order_acquire); }

  private:
    Fd fd_;
    std::atomic<uint64_t>* count_ = nullptr;
};

}  // namespace warden::share
