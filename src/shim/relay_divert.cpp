// The diverted output: what the server writes to stdout that is not JSON-RPC goes to our
// stderr as display text (relay.hpp, "Stdout guard"), within what that stderr takes.
#include <algorithm>

#include "shim/relay_sink.hpp"
#include "sys/text.hpp"

namespace warden::shim {

void Relay::stop_server_output() {
    // --stdout-guard=fail: nothing more of the server's stdout is forwarded.
    guard_failed_ = true;
    server_out_->eof = true;
    if (server_out_->registered) (void)ep_.remove(server_out_->fd);
    server_out_->registered = false;
}

// How many bytes diverted output may write now (relay.hpp, "Stdout guard"), and `by`, the
// cap that binds (Cap::none: none). Every byte written counts: the prefix, the escapes, the
// cut mark. The marks and notices that say a cap is reached may go past it; the bucket's
// ceiling and the total are kDivertReserve short of their caps, which keeps what is written
// within them, those included.
size_t Relay::divert_room(Cap& by) {
    const auto now = std::chrono::steady_clock::now();
    const double ceiling = static_cast<double>(opts_.divert_burst > kDivertReserve
                                                   ? opts_.divert_burst - kDivertReserve
                                                   : opts_.divert_burst);
    if (divert_filled_ == std::chrono::steady_clock::time_point{}) {
        divert_tokens_ = ceiling;
    } else {
        const double dt = std::chrono::duration<double>(now - divert_filled_).count();
        divert_tokens_ =
            std::min(ceiling, divert_tokens_ + dt * static_cast<double>(opts_.divert_rate));
    }
    divert_filled_ = now;
    size_t room = SIZE_MAX;
    by = Cap::none;
    auto cap = [&](size_t limit, Cap c) {
        if (limit >= room) return;
        room = limit;
        by = c;
    };
    const size_t queued = to_log_->queued();
    cap(queued >= opts_.stderr_cap ? 0 : opts_.stderr_cap - queued, Cap::stderr_full);
    if (opts_.divert_total) {
        const uint64_t total = opts_.divert_total > kDivertReserve
                                   ? opts_.divert_total - kDivertReserve
                                   : opts_.divert_total;
        cap(divert_written_ >= total ? 0 : static_cast<size_t>(total - divert_written_),
            Cap::total);
    }
    if (opts_.divert_rate)
        cap(divert_tokens_ < 1 ? 0 : static_cast<size_t>(divert_tokens_), Cap::rate);
    return room;
}

uint64_t& Relay::kept_back_by(Cap cap) {
    switch (cap) {
        case Cap::rate:
            return stats_.over_rate;
        case Cap::total:
            return stats_.over_total;
        default:
            return stats_.stderr_full;
    }
}

// A piece of a diverted line goes out as display text: the prefix (first piece), the piece
// escaped as `ps` escapes a command line (sys/text.hpp: a server's stdout must not drive the
// client's terminal), and a newline (last piece). A piece that does not fit in the room the
// caps leave is cut: what fits before " [cut]\n", nothing at all if not even one character
// does and nothing of the line is shown yet. Counted in the server's bytes: shown, or kept
// back by the cap that cut the line (its later pieces too).
void Relay::divert(const rpc::Frame& f) {
    static constexpr std::string_view kPrefix = "[mcpwarden] diverted non-JSON stdout line: ";
    static constexpr std::string_view kCut = " [cut]\n";
    const std::string_view text = f.last ? f.content() : f.bytes;
    if (f.first) {
        ++stats_.diverted;
        sink_->on_diverted(f.bytes);
        divert_cut_by_ = Cap::none;
        divert_showing_ = false;
    }
    stats_.diverted_bytes += f.bytes.size();
    if (divert_cut_by_ != Cap::none) {  // cut earlier: the rest is kept back by the same cap
        kept_back_by(divert_cut_by_) += f.bytes.size();
        return;
    }
    Cap by = Cap::none;
    const size_t room = divert_room(by);
    const std::string_view head = f.first ? kPrefix : std::string_view();
    const std::string_view end = f.last ? "\n" : "";
    scratch_.clear();
    if (room >= head.size() + end.size()) {
        scratch_ = head;
        if (append_escaped(scratch_, text, room - head.size() - end.size()) == text.size()) {
            scratch_ += end;
            stats_.diverted_shown += f.bytes.size();
            divert_showing_ = !f.last;
            divert_charge_and_write();
            return;
        }
    }
    scratch_.clear();
    size_t shown = 0;
    if (room > head.size() + kCut.size()) {
        scratch_ = head;
        shown = append_escaped(scratch_, text, room - head.size() - kCut.size());
    }
    if (shown > 0 || divert_showing_)
        scratch_ += kCut;
    else
        scratch_.clear();
    ++stats_.diverted_dropped;
    stats_.diverted_shown += shown;
    kept_back_by(by) += f.bytes.size() - shown;
    divert_cut_by_ = by;
    const bool total = by == Cap::total;
    bool& said = total ? said_total_ : said_rate_;
    if (by != Cap::stderr_full && !said) {
        said = true;
        scratch_ += "[mcpwarden] diverted stdout is capped at " +
                    std::to_string((total ? opts_.divert_total : opts_.divert_rate) >> 10) +
                    (total ? " KiB per session" : " KiB per second") +
                    ": what is over the cap is counted in session.end, not shown\n";
    }
    divert_charge_and_write();
}

void Relay::divert_charge_and_write() {
    if (scratch_.empty()) return;
    divert_tokens_ -= static_cast<double>(scratch_.size());
    divert_written_ += scratch_.size();
    (void)to_log_->put(scratch_);
}

}  // namespace warden::shim
