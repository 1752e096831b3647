// A record prepared outside the append lock: its canonical body cut at the seq, which only
// the transaction that writes it can know (the head is read inside it, journal.cpp). The
// writer splices the seq (and a request's seq for a ticket) in and hashes the bytes as they
// stand; nothing is serialized twice.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "journal/journal.hpp"

namespace warden::journal {

// An event serialized outside the lock: everything of the body except seq.
struct Prepared {
    Event event;
    int64_t ts;
    int64_t ticket = 0;      // < 0: written to the intent file as this ticket (append_intent)
    std::string before_seq;  // {"data":…,"kind":…,"origin":…,"seq":
    std::string after_seq;   // ,"session":…,"ts":…,"v":1}
    // A record that names its request by a ticket ("request_seq":-N, the last key of its
    // data): where that number is in before_seq, so that the writer puts the request's seq
    // in its place without serialising the data again. Length 0: not found, prepare again.
    size_t ticket_at = 0, ticket_len = 0;
};

// The request a record names by its seq (an answer, an abandoned call, a stream's end), a
// ticket while it is < 0: from its call columns or its data; none for a record that names no
// request. set_named_request puts that request's seq, known now, where this reads it.
std::optional<int64_t> named_request(const Event& e);
void set_named_request(Event& e, int64_t seq);

// The record's body but its seq, for `origin` (Journal::Impl::prepare): of `e`, or of the
// event already in `p` (the caller's, moved there rather than copied). With a `member`
// (Journal::append's CanonicalMember): spliced as its text stands when that is canonical.
Result<Prepared> prepare_record(const Event& e, std::string_view origin);
Status prepare_record_into(Prepared& p, std::string_view origin,
                           const CanonicalMember* member = nullptr);

// The envelope around a record's data, once `p.before_seq` holds `{"data":DATA` and `p.ts` is
// set: the rest of before_seq up to the seq, and after_seq.
void close_envelope(Prepared& p, std::string_view kind, std::string_view origin,
                    std::string_view session);

// A prepared record as a line of an intent file: its body with seq 0.
void append_intent_line(std::string& text, const Prepared& p);

// A teardown record's intent line (the keeper's, of `session`) back into the record it was
// prepared as, for `origin`, without building its data as a Json; refused unless the line is
// exactly as append_intent_line writes it.
Result<Prepared> prepared_from_intent_line(std::string_view line, std::string_view session,
                                           std::string_view origin);

}  // namespace warden::journal
