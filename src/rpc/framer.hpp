// src/rpc — JSON-RPC over stdio, without I/O.
//
// This folder owns the two things the relay needs to understand the byte streams it moves:
// line framing with a size limit (framer.hpp) and classification of one line as a JSON-RPC
// message (message.hpp). Nothing here reads or writes an fd and nothing re-serialises: the
// relay forwards the original bytes and uses what is here only to know what they were.
//
// Framing rules (MCP stdio: one JSON-RPC message per line, `\n`-terminated, no embedded
// newlines):
//  - A line is everything up to and including `\n`. `content()` drops the `\n` and one `\r`
//    before it (CRLF senders); `bytes` keep both, so relaying `bytes` is byte-exact.
//  - Oversize rule: a line whose content exceeds `max_message` is never buffered whole and
//    never truncated. As soon as the limit is passed the framer hands out what it holds as an
//    `oversize` frame (first = true), then every further chunk of that line as `oversize`
//    frames until the chunk that contains its `\n` (last = true). The relay forwards those
//    bytes unclassified and counts one oversize message. Memory stays bounded by
//    max_message + one read chunk, whatever the sender does.
//  - Memory: the buffer is its own mapping, grown by mremap(), which moves pages instead of
//    copying them. A line that grows the buffer is therefore never resident twice (a copy into
//    a fresh allocation would briefly hold the old and the new buffer), and the buffer never
//    grows past max_message + 1 + one read chunk: what a line can need before the oversize
//    rule hands it out.
//  - At end of input, finish() returns the unterminated last line (`partial`), if any; it is
//    classified and relayed like any other line, and reported as partial.
//
// Zero copy: the caller reads straight into prepare()'s span; frames are views into the
// framer's buffer, which always has SIMDJSON_PADDING readable bytes past its end, so the
// classifier parses in place (Frame::capacity says how many bytes are readable).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace warden::rpc {

// simdjson reads up to 64 bytes past the end of its input (SIMDJSON_PADDING).
inline constexpr size_t kParsePadding = 64;
inline constexpr size_t kDefaultMaxMessage = size_t{64} << 20;  // 64 MiB
inline constexpr size_t kDefaultReadChunk = size_t{64} << 10;   // 64 KiB

struct Frame {
    enum class Kind : uint8_t {
        line,      // a complete line, `\n` included
        partial,   // the unterminated last line, returned by finish()
        oversize,  // a piece of a line longer than max_message (see the rule above)
    };
    Kind kind = Kind::line;
    bool first = true;       // oversize: this piece starts the line
    bool last = true;        // oversize: this piece ends the line (holds its `\n`, or EOF)
    std::string_view bytes;  // exactly as received
    size_t capacity = 0;     // readable bytes from bytes.data() (>= content + kParsePadding)

    // The line without its `\n` and a `\r` before it.
    std::string_view content() const;
};

class Framer {
  public:
    explicit Framer(size_t max_message = kDefaultMaxMessage, size_t read_chunk = kDefaultReadChunk);

    // Writable space of at least read_chunk bytes at the end of the buffer. Invalidates the
    // views of earlier frames (it may move or grow the buffer).
    std::span<char> prepare();
    // Marks n bytes of prepare()'s span as received.
    void commit(size_t n);

    // The next frame, or nullopt when more input is needed.
    std::optional<Frame> next();
    // At end of input: the unterminated last line (or the last piece of an oversize line),
    // or nullopt when nothing is left.
    std::optional<Frame> finish();

    // Bytes received but not yet handed out as frames.
    size_t pending() const { return end_ - begin_; }
    // Current buffer size (for memory accounting and tests).
    size_t capacity() const { return cap_; }
    // The most the buffer ever grows to: max_message + 1 + one read chunk.
    size_t capacity_limit() const { return limit_; }
    size_t max_message() const { return max_message_; }
    bool in_oversize() const { return oversize_; }

    ~Framer();
    Framer(Framer&& o) noexcept;
    Framer& operator=(Framer&& o) noexcept;
    Framer(const Framer&) = delete;
    Framer& operator=(const Framer&) = delete;

  private:
    Frame make(Frame::Kind kind, size_t from, size_t to, bool first, bool last) const;
    void reallocate(size_t cap);

    size_t max_message_;
    size_t chunk_;
    size_t limit_;           // capacity_limit()
    char* buf_ = nullptr;    // the mapping (see "Memory" above)
    size_t mapped_ = 0;      // its length: cap_ + kParsePadding, rounded up to a page
    size_t cap_ = 0;         // usable bytes
    size_t begin_ = 0;       // first byte not yet handed out
    size_t scan_ = 0;        // newline search resumes here
    size_t end_ = 0;         // one past the last received byte
    bool oversize_ = false;  // inside an oversize line (first piece already handed out)
    // Giving a grown buffer back (prepare()): the most bytes held since the buffer last
    // emptied, and how many emptyings in a row held no more than 4 chunks.
    static constexpr size_t kShrinkAfter = 16;
    size_t peak_ = 0;
    size_t quiet_ = 0;
};

}  // namespace warden::rpc
