#include "rpc/framer.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>

namespace warden::rpc {

std::string_view Frame::content() const {
    std::string_view c = bytes;
    if (!c.empty() && c.back() == '\n') c.remove_suffix(1);
    if (!c.empty() && c.back() == '\r') c.remove_suffix(1);
    return c;
}

Framer::Framer(size_t max_message, size_t read_chunk)
    : max_message_(std::max<size_t>(max_message, 1)),
      chunk_(std::max<size_t>(read_chunk, 64)),
      limit_(max_message_ > SIZE_MAX / 2 ? SIZE_MAX / 2 : max_message_ + 1 + chunk_) {
    reallocate(chunk_);
}

Framer::~Framer() {
    if (buf_) ::munmap(buf_, mapped_);
}

Framer::Framer(Framer&& o) noexcept
    : max_message_(o.max_message_),
      chunk_(o.chunk_),
      limit_(o.limit_),
      buf_(std::exchange(o.buf_, nullptr)),
      mapped_(std::exchange(o.mapped_, 0)),
      cap_(std::exchange(o.cap_, 0)),
      begin_(std::exchange(o.begin_, 0)),
      scan_(std::exchange(o.scan_, 0)),
      end_(std::exchange(o.end_, 0)),
      oversize_(std::exchange(o.oversize_, false)),
      peak_(o.peak_),
      quiet_(o.quiet_) {}

Framer& Framer::operator=(Framer&& o) noexcept {
    if (this != &o) {
        this->~Framer();
        new (this) Framer(std::move(o));
    }
    return *this;
}

// The live bytes move to the front, then the mapping is resized in place or moved by the
// kernel (mremap): pages are never copied, so growing for a long line never holds it twice.
// Allocation failure throws std::bad_alloc, as operator new would.
void Framer::reallocate(size_t cap) {
    static const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    size_t live = end_ - begin_;
    if (live && begin_) std::memmove(buf_, buf_ + begin_, live);
    scan_ -= begin_;
    begin_ = 0;
    end_ = live;
    const size_t want = (cap + kParsePadding + page - 1) / page * page;
    void* p =
        buf_ ? ::mremap(buf_, mapped_, want, MREMAP_MAYMOVE)
             : ::mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    buf_ = static_cast<char*>(p);
    mapped_ = want;
    cap_ = cap;
    // Only the padding must be readable for the parser; what it holds does not matter (a
    // fresh page is zero, a shrunk buffer's tail held earlier input).
}

std::span<char> Framer::prepare() {
    size_t live = end_ - begin_;
    if (live == 0) begin_ = scan_ = end_ = 0;
    if (live == 0 && cap_ > 4 * chunk_) {
        // Large messages have gone through: give the memory back once kShrinkAfter buffer
        // emptyings in a row needed no more than 4 chunks. Not at the first one: a peer that
        // sends large messages one at a time empties the buffer after each, and shrinking
        // then would cost a chain of reallocations (and fresh pages) per message.
        quiet_ = peak_ <= 4 * chunk_ ? quiet_ + 1 : 0;
        peak_ = 0;
        if (quiet_ >= kShrinkAfter) {
            quiet_ = 0;
            reallocate(chunk_);
        }
    } else if (cap_ - end_ >= chunk_) {
        // Room enough at the end.
    } else if (begin_ > 0 && cap_ - live >= chunk_) {
        std::memmove(buf_, buf_ + begin_, live);
        scan_ -= begin_;
        end_ = live;
        begin_ = 0;
    } else {
        // Grow: a line in progress needs room. Bounded because next() hands out an oversize
        // line as soon as it passes max_message, so live <= max_message + 1 and the buffer
        // never needs more than limit_.
        reallocate(std::min(std::max(cap_ * 2, live + chunk_), std::max(limit_, live + chunk_)));
    }
    return {buf_ + end_, cap_ - end_};
}

void Framer::commit(size_t n) {
    end_ += std::min(n, cap_ - end_);
    peak_ = std::max(peak_, end_ - begin_);
}

Frame Framer::make(Frame::Kind kind, size_t from, size_t to, bool first, bool last) const {
    Frame f;
    f.kind = kind;
    f.first = first;
    f.last = last;
    f.bytes = std::string_view(buf_ + from, to - from);
    f.capacity = cap_ + kParsePadding - from;
    return f;
}

std::optional<Frame> Framer::next() {
    if (begin_ == end_) return std::nullopt;
    const char* base = buf_;
    const void* nl = std::memchr(base + scan_, '\n', end_ - scan_);
    if (nl) {
        size_t stop = static_cast<size_t>(static_cast<const char*>(nl) - base) + 1;
        size_t from = begin_;
        begin_ = scan_ = stop;
        if (oversize_) {
            oversize_ = false;
            return make(Frame::Kind::oversize, from, stop, false, true);
        }
        Frame f = make(Frame::Kind::line, from, stop, true, true);
        if (f.content().size() > max_message_) f.kind = Frame::Kind::oversize;
        return f;
    }
    scan_ = end_;
    // No newline yet. Hand out what we hold once the line is known to be oversize (a CR
    // that may precede the `\n` still counts toward the content, so allow one byte).
    if (oversize_ || end_ - begin_ > max_message_ + 1) {
        bool first = !oversize_;
        oversize_ = true;
        size_t from = begin_;
        begin_ = scan_ = end_;
        return make(Frame::Kind::oversize, from, end_, first, false);
    }
    return std::nullopt;
}

std::optional<Frame> Framer::finish() {
    if (auto f = next()) return f;
    if (begin_ == end_) {
        if (oversize_) {
            // The oversize line ended without `\n`: close it with an empty last piece.
            oversize_ = false;
            return make(Frame::Kind::oversize, begin_, begin_, false, true);
        }
        return std::nullopt;
    }
    size_t from = begin_;
    begin_ = scan_ = end_;
    if (oversize_) {
        oversize_ = false;
        return make(Frame::Kind::oversize, from, end_, false, true);
    }
    Frame f = make(Frame::Kind::partial, from, end_, true, true);
    if (f.content().size() > max_message_) f.kind = Frame::Kind::oversize;
    return f;
}

}  // namespace warden::rpc
