// The relay's ends (shim/relay.hpp): a Sink, an fd with the queue of what it could not take
// yet, and a Stream, an fd with its framer and the sink its bytes go to; and the tags that
// tell their fds apart in the relay's epoll. Internal to src/shim/.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <string>
#include <string_view>

#include "rpc/framer.hpp"
#include "shim/relay.hpp"
#include "sys/fd.hpp"

namespace warden::shim {

// epoll data: the high half says whose fd it is.
inline constexpr uint64_t kInternal = 0, kWatched = 1;
inline uint64_t tag(uint64_t kind, uint32_t token) {
    return (kind << 32) | token;
}

enum : uint32_t { kClientIn = 1, kServerOut, kServerErr, kServerIn, kClientOut, kLog };

// Non-blocking only where it is ours alone to change: pipes and sockets. A terminal or a
// file shared with the client keeps its mode (setting O_NONBLOCK on a shared open file
// description would change it for the client too).
inline void make_nonblocking_if_private(int fd) {
    struct stat st;
    if (::fstat(fd, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)))
        (void)set_nonblocking(fd, true);
}

// A destination: an fd and a queue for what it could not take yet.
//
// Lent bytes: a run of forwarded lines is a view into its stream's framer buffer. What the fd
// does not take at once is not copied when it is at least the high-water mark: the sink keeps
// the view (`lent`) and the stream reads nothing until the sink has written it (wants_input),
// so the framer's buffer stays put. (A smaller rest is copied: the queue then holds less than
// twice the high-water mark, and the stream reads on up to it, as before.) A
// long line is then resident once, in the framer, however slowly its reader reads; a copy into
// the queue would hold it twice (rpc/framer.hpp bounds the framer by --max-message). Bytes put
// while a loan is out (the rest of the same read, a refusal the relay writes itself) queue
// behind it in `after`. The order on the fd is q, then lent, then after.
struct Relay::Sink {
    int fd = -1;
    Fd owned;
    uint32_t token = 0;
    bool pollable = true;
    bool registered = false;
    bool want_out = false;
    bool closed = false;  // EPIPE / EPOLLERR, or closed by us: further bytes are dropped
    bool close_when_drained = false;  // close_server_input() waits for the queue to empty
    bool held = false;    // hibernation: queue everything, write nothing (detach_server)
    bool reclaim = true;  // false: q keeps its written front until it empties (a test fault)
    std::string q;
    size_t head = 0;
    std::string_view lent;  // see above
    std::string after;
    size_t peak = 0, quiet_drains = 0;  // when to give a grown queue back (flush)
    // Monotonic byte counts: handed to put(), and taken by write(). A byte at offset o (in
    // accepted order) has reached the reader's pipe once written > o.
    uint64_t accepted = 0, written = 0;

    size_t queued() const { return q.size() - head + lent.size() + after.size(); }
    bool lending() const { return !lent.empty(); }

    // Writes what it can now; false when the reader is gone.
    bool write_some(const char* p, size_t n, size_t& done) {
        done = 0;
        while (done < n) {
            ssize_t r = ::write(fd, p + done, n - done);
            if (r > 0) {
                done += static_cast<size_t>(r);
                written += static_cast<uint64_t>(r);
                continue;
            }
            if (r < 0 && errno == EINTR) continue;
            if (r < 0 && errno == EAGAIN) return true;
            return false;  // EPIPE and friends
        }
        return true;
    }

    // Forwards bytes in order: straight to the fd when nothing is queued (no copy), the
    // remainder into the queue, or lent (see above) when it is at least `lend_from` bytes:
    // a small remainder is cheaper copied, and lets the stream read on up to the high-water
    // mark. False when the reader is gone.
    bool put(std::string_view bytes, size_t lend_from = SIZE_MAX) {
        accepted += bytes.size();
        if (closed) return true;
        if (lending()) {
            after.append(bytes);
            return true;
        }
        if (held) {
            q.append(bytes);
            return true;
        }
        if (queued() == 0) {
            size_t w = 0;
            if (!write_some(bytes.data(), bytes.size(), w)) return fail();
            bytes.remove_prefix(w);
            if (bytes.empty()) return true;
            q.clear();
            head = 0;
        }
        if (bytes.size() >= lend_from) {
            lent = bytes;
            return true;
        }
        // q's front, up to head, is written: dead bytes. flush() drops them when q empties,
        // but a reader that keeps up almost, never quite (a client reading a flood of short
        // lines as they come), never lets it empty: appended behind a front never reclaimed,
        // q grew by every byte it ever queued. So the front goes before q would have to grow:
        // a move of what is queued (less than twice the high-water mark), once per
        // capacity's worth of bytes written.
        if (reclaim && head > 0 && q.size() + bytes.size() > q.capacity()) {
            q.erase(0, head);
            head = 0;
        }
        q.append(bytes);
        peak = std::max(peak, q.size());
        return true;
    }

    bool flush() {
        if (closed || held || queued() == 0) return true;
        size_t w = 0;
        bool ok = write_some(q.data() + head, q.size() - head, w);
        head += w;
        if (ok && head == q.size() && lending()) {
            ok = write_some(lent.data(), lent.size(), w);
            lent.remove_prefix(w);
            if (ok && !lending()) {
                // The loan is back: what queued behind it is next.
                q.swap(after);
                after.clear();
                head = 0;
                peak = std::max(peak, q.size());
                ok = write_some(q.data(), q.size(), w);
                head = w;
            }
        }
        if (head == q.size()) {
            // A large burst has gone out: give the memory back, but only once 16 drains in a
            // row needed less than a quarter of it. A server that reads large requests slowly
            // queues each one; shrinking after every drain would cost a fresh allocation
            // (and its page faults) and a copy per message.
            if (q.capacity() > (size_t{1} << 20)) {
                quiet_drains = peak * 4 < q.capacity() ? quiet_drains + 1 : 0;
                if (quiet_drains >= 16) {
                    quiet_drains = 0;
                    q = std::string();
                }
            }
            if (!lending()) peak = 0;
            q.clear();
            head = 0;
        }
        return ok ? true : fail();
    }

    void drop() {
        q.clear();
        head = 0;
        lent = {};
        after.clear();
    }

    bool fail() {
        closed = true;
        drop();
        q.shrink_to_fit();
        after.shrink_to_fit();
        return false;
    }
};

// A source: an fd, its framer, and the sink its bytes go to.
struct Relay::Stream {
    int fd = -1;
    Fd owned;
    uint32_t token = 0;
    Direction dir = Direction::client_to_server;
    bool framed = true;  // stderr is not framed
    bool pollable = true;
    bool registered = false;
    bool eof = false;  // EOF read, or we stopped reading for good
    Sink* out = nullptr;
    rpc::Framer framer;
    size_t oversize_bytes = 0;

    Stream(size_t max_message, size_t chunk, bool is_framed)
        : framed(is_framed), framer(max_message, is_framed ? chunk : 64) {}
};

}  // namespace warden::shim
