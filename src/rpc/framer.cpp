#include "rpc/framer.hpp"

#include <algorithm>
#include <cstring>

namespace warden::rpc {

std::string_view Frame::content() const {
    std::string_view c = bytes;
    if (!c.empty() && c.back() == '\n') c.remove_suffix(1);
    if (!c.empty() && c.back() == '\r') c.remove_suffix(1);
    return c;
}

Framer::Framer(size_t max_message, size_t read_chunk)
    : max_message_(std::max<size_t>(max_message, 1)), chunk_(std::max<size_t>(read_chunk, 64)) {
    reallocate(chunk_);
}

void Framer::reallocate(size_t cap) {
    auto fresh = std::make_unique_for_overwrite<char[]>(cap + kParsePadding);
    size_t live = end_ - begin_;
    if (live) std::memcpy(fresh.get(), buf_.get() + begin_, live);
    // Only the padding must be readable for the parser; what it holds does not matter.
    std::memset(fresh.get() + cap, 0, kParsePadding);
    scan_ -= begin_;
    begin_ = 0;
    end_ = live;
    buf_ = std::move(fresh);
    cap_ = cap;
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
        std::memmove(buf_.get(), buf_.get() + begin_, live);
        scan_ -= begin_;
        end_ = live;
        begin_ = 0;
    } else {
        // Grow: a line in progress needs room. Bounded because next() hands out an oversize
        // line as soon as it passes max_message, so live <= max_message + chunk.
        reallocate(std::max(cap_ * 2, live + chunk_));
    }
    return {buf_.get() + end_, cap_ - end_};
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
    f.bytes = std::string_view(buf_.get() + from, to - from);
    f.capacity = cap_ + kParsePadding - from;
    return f;
}

std::optional<Frame> Framer::next() {
    if (begin_ == end_) return std::nullopt;
    const char* base = buf_.get();
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
