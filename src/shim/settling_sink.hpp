// SettlingSink: the sink in front of the session's own, so that each request is resolved
// once, whoever resolves it (the server's answer, the client's loss, or the session's end).
// Internal to src/shim/: the Session makes one in start_relay and settles through it.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "journal/journal.hpp"
#include "shim/journal_sink.hpp"
#include "shim/relay.hpp"

namespace warden::shim {

// Requests the session abandons itself. The relay reports outstanding requests only when the
// client is lost; a session can also end with the client still there (the keeper died and took
// the server with it, the server exited, the stdout guard failed). Each request still
// outstanding then is recorded `activity.abandoned` with the session's end reason as cause, so
// that no request stays in flight for ever (reconcile never touches an ended session). The
// client gets no answer for it: the relay has no way to answer the client itself except a
// denial before forwarding, and docs/RUN.md promises only that unanswered requests are on
// record. This sink stands in front of the real one so that a request is resolved once: an
// answer that still reaches the client after its request was abandoned here, or a client loss
// later, does not resolve it again.
class SettlingSink final : public ActivitySink {
  public:
    explicit SettlingSink(std::unique_ptr<ActivitySink> inner) : inner_(std::move(inner)) {}

    Result<int64_t> on_request(const rpc::Message& m, std::string_view line) override {
        return inner_->on_request(m, line);
    }
    Result<int64_t> on_oversize_request(const rpc::Message& m, std::string_view prefix) override {
        return inner_->on_oversize_request(m, prefix);
    }
    void on_response(const Answer& a, const Outstanding* req) override {
        if (req && settled_.count(key(*req))) return;
        inner_->on_response(a, req);
    }
    void on_client_lost(ClientLoss cause, std::span<const Outstanding> outstanding) override {
        std::vector<Outstanding> rest;
        for (const Outstanding& o : outstanding)
            if (!settled_.count(key(o))) rest.push_back(o);
        inner_->on_client_lost(cause, rest);
    }
    void on_notification(Direction d, const rpc::Message& m) override {
        inner_->on_notification(d, m);
    }
    void on_invalid(Direction d, std::string_view line, std::string_view why) override {
        inner_->on_invalid(d, line, why);
    }
    void on_oversize(Direction d, size_t bytes) override { inner_->on_oversize(d, bytes); }
    void on_diverted(std::string_view line) override { inner_->on_diverted(line); }

    // Records each outstanding request not settled yet (those whose answer is being written
    // to the client too, unless `unanswered_only`) as abandoned for `cause`, as evidence
    // (JournalSink::record_evidence): in the intent file when this returns.
    void abandon(std::span<const Outstanding> outstanding, bool unanswered_only,
                 JournalSink* journal, const std::string& session, std::string_view cause);

  private:
    // A subscriptions/listen stream is not a call left unanswered: it ends with the session,
    // closed by the server when the server's exit ended it.
    static journal::Event ended(const Outstanding& o, const std::string& session, journal::Json id,
                                std::string_view cause);

    // Ids are unique among outstanding requests; the record (journal seq or ticket) tells
    // apart a later request that reuses an id.
    static std::pair<int64_t, std::string> key(const Outstanding& o) { return {o.record, o.raw}; }

    std::unique_ptr<ActivitySink> inner_;
    std::set<std::pair<int64_t, std::string>> settled_;
};

}  // namespace warden::shim
