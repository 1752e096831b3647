// The requests in flight and their answers: each forwarded request tracked, each answer
// matched to it and reported once its last byte has reached the client; the relay's own
// answers (a refusal, a request a server that is gone will never answer).
#include <algorithm>

#include "rpc/answer.hpp"
#include "shim/relay_sink.hpp"

namespace warden::shim {

// The refusal is the answer: one JSON-RPC error per request of `m` (a batch answers as one
// array). Slots from `answered` on were tracked for members of a batch recorded before the
// refused one: the refusal answers them when its last byte is written, as an error -32000,
// so their records are settled like any other call.
void Relay::deny(const rpc::Message& m, const Error& why, size_t answered) {
    ++stats_.denied;
    auto answer = [&](const rpc::Id& id) {
        rpc::append_error_answer(scratch_, id.raw, rpc::kRefusedCode,
                                 "mcpwarden: request refused: " + why.message);
    };
    scratch_.clear();
    if (m.kind == rpc::Kind::batch) {
        scratch_ += '[';
        bool first = true;
        for (auto& member : *m.members) {
            if (member.kind != rpc::Kind::request) continue;
            if (!first) scratch_ += ',';
            first = false;
            answer(member.id);
        }
        scratch_ += ']';
    } else {
        answer(m.id);
    }
    Answer refused;
    refused.outcome = rpc::Outcome::rpc_error;
    refused.error_code = rpc::kRefusedCode;
    refused.bytes = scratch_.size();
    scratch_ += '\n';
    const uint64_t end = to_client_->accepted + scratch_.size();
    for (size_t slot = answered; slot < n_outstanding_; ++slot)
        await_delivery(refused, slot, end);
    wrote_to_client(to_client_->put(scratch_));
}

void Relay::track(const rpc::Message& m, int64_t record) {
    // Slots are reused, never freed: their strings keep their capacity, so tracking a
    // request allocates nothing once the relay has warmed up.
    if (n_outstanding_ == slots_.size()) slots_.emplace_back();
    Outstanding& o = slots_[n_outstanding_++];
    o.type = m.id.type;
    o.raw.assign(m.id.raw);
    o.method.assign(m.method);
    o.tool.assign(m.tool);
    o.sent = std::chrono::steady_clock::now();
    o.record = record;
    o.answer = 0;
}

// The outstanding request a response with this id answers: one not answered yet (a second
// answer to the same id while the first is being delivered matches nothing).
size_t Relay::find_request(const rpc::Id& id) const {
    for (size_t i = 0; i < n_outstanding_; ++i)
        if (slots_[i].answer == 0 && slots_[i].type == id.type && slots_[i].raw == id.raw) return i;
    return SIZE_MAX;
}

void Relay::answer_read(const rpc::Message& m, std::string_view line) {
    ++stats_.responses;
    size_t slot = find_request(m.id);
    if (slot == SIZE_MAX) ++stats_.unmatched_responses;
    Answer a;
    a.outcome = m.outcome;
    a.bytes = line.size();
    if (m.outcome == rpc::Outcome::rpc_error) {
        // Error answers are rare and small: scanning one again for its code costs nothing on
        // the path that matters. No oversize line is in progress on the server stream here
        // (its pieces come one after the other), so scan_ is free.
        scan_->reset();
        scan_->feed(line);
        a.error_code = scan_->error_code;
    }
    await_delivery(a, slot, frame_end_);
}

void Relay::oversize_answer_read(const Scan& scan, size_t bytes) {
    if (!scan.response()) return;
    ++stats_.responses;
    size_t slot = find_request(rpc::Id{scan.id_type, scan.id});
    if (slot == SIZE_MAX) ++stats_.unmatched_responses;
    Answer a;
    a.outcome = scan.outcome();
    a.error_code = scan.error_code;
    a.bytes = bytes;
    await_delivery(a, slot, frame_end_);
}

// Called before the answer's bytes are put to the client sink: `end` is where its last byte
// will be in the sink's count (frame_end_ for a response being relayed).
void Relay::await_delivery(const Answer& a, size_t slot, uint64_t end) {
    if (to_client_->closed) return;  // the client is lost: nothing more is delivered
    uint64_t ticket = 0;
    if (slot != SIZE_MAX) slots_[slot].answer = ticket = ++last_ticket_;
    pending_.push_back(Pending{end, ticket, a});
}

void Relay::deliver_answers() {
    const uint64_t written = to_client_->written;
    while (pending_head_ < pending_.size() && pending_[pending_head_].end <= written) {
        const Pending& p = pending_[pending_head_++];
        size_t slot = SIZE_MAX;
        for (size_t i = 0; p.ticket && i < n_outstanding_; ++i)
            if (slots_[i].answer == p.ticket) slot = i;
        sink_->on_response(p.answer, slot == SIZE_MAX ? nullptr : &slots_[slot]);
        if (slot != SIZE_MAX) {
            // Slots are reused, never freed (track()): the last one takes this one's place.
            std::swap(slots_[slot], slots_[n_outstanding_ - 1]);
            --n_outstanding_;
        }
    }
    if (pending_head_ == pending_.size()) {
        pending_.clear();
        pending_head_ = 0;
    } else if (pending_head_ >= 64 && pending_head_ * 2 >= pending_.size()) {
        // A client that always lags never empties the FIFO: drop the delivered front in place.
        pending_.erase(pending_.begin(), pending_.begin() + static_cast<ptrdiff_t>(pending_head_));
        pending_head_ = 0;
    }
}

// After a write to the client: what it now wholly has is answered; a reader that is gone is the
// client's loss (reported by the next poll()).
void Relay::wrote_to_client(bool ok) {
    if (ok) {
        if (pending_head_ < pending_.size()) deliver_answers();
        return;
    }
    if (loss_ != ClientLoss::none) return;
    client_lost(ClientLoss::stdout_closed);
    loss_reported_ = false;
}

// As deny(): the errors go out as one write, and each request is answered when its last byte
// is; one line per request (members of a batch too: the batch was never forwarded whole).
void Relay::fail_held_requests(std::string_view why, bool spare_streams) {
    to_server_->q.clear();
    to_server_->head = 0;
    scratch_.clear();
    std::vector<size_t> slots;
    for (size_t slot = 0; slot < n_outstanding_; ++slot) {
        const Outstanding& o = slots_[slot];
        if (o.answer != 0) continue;
        if (spare_streams && o.method == "subscriptions/listen") continue;
        slots.push_back(slot);
        rpc::append_error_answer(scratch_, o.raw.empty() ? "null" : o.raw, rpc::kRefusedCode, why);
        scratch_ += '\n';
    }
    if (slots.empty()) return;
    Answer failed;
    failed.outcome = rpc::Outcome::rpc_error;
    failed.error_code = rpc::kRefusedCode;
    failed.bytes = scratch_.size() / slots.size();
    const uint64_t end = to_client_->accepted + scratch_.size();
    for (size_t slot : slots)
        await_delivery(failed, slot, end);
    wrote_to_client(to_client_->put(scratch_));
}

}  // namespace warden::shim
