// Records prepared outside the append lock (prepared.hpp).
#include "journal/prepared.hpp"

#include <simdjson.h>

#include <fmt/format.h>

#include "journal/canonical_json.hpp"
#include "journal/intents.hpp"
#include "sys/json_string.hpp"

namespace warden::journal {

void close_envelope(Prepared& p, std::string_view kind, std::string_view origin,
                    std::string_view session) {
    p.before_seq += ",\"kind\":";
    append_canonical_string(p.before_seq, kind);
    p.before_seq += ",\"origin\":";
    append_canonical_string(p.before_seq, origin);
    p.before_seq += ",\"seq\":";
    p.after_seq.reserve(session.size() + 48);
    p.after_seq += ",\"session\":";
    append_canonical_string(p.after_seq, session);
    p.after_seq += ",\"ts\":";
    p.after_seq += std::to_string(p.ts);
    p.after_seq += ",\"v\":1}";
}

void append_intent_line(std::string& text, const Prepared& p) {
    text += p.before_seq;
    text += '0';
    text += p.after_seq;
    text += '\n';
}

std::optional<int64_t> named_request(const Event& e) {
    if (e.call)
        return e.kind == "activity.response" ? std::optional(e.call->request_seq) : std::nullopt;
    auto rs = e.data.is_object() ? e.data.find("request_seq") : e.data.end();
    if (rs == e.data.end() || !rs->is_number_integer()) return std::nullopt;
    return rs->get<int64_t>();
}

void set_named_request(Event& e, int64_t seq) {
    if (e.call)
        e.call->request_seq = seq;
    else
        e.data["request_seq"] = seq;
}

Result<Prepared> prepare_record(const Event& e, std::string_view origin) {
    Prepared p;
    p.event = e;
    if (auto st = prepare_record_into(p, origin); !st) return st.error();
    return p;
}

namespace {

// The data's canonical text when no builder wrote it. With a `member` (Journal::append's
// CanonicalMember): spliced as its text stands when that is canonical, and then in the body
// only, not in p.event.data, which only project() reads again (no projection reads such a
// member: session.end's teardown); else parsed into p.event.data and serialized with the rest.
Result<std::string> serialized_data(Prepared& p, const CanonicalMember* member) {
    Event& e = p.event;
    if (!member) return e.data.is_null() ? std::string("{}") : canonical(e.data);
    if (e.data.is_null()) e.data = Json::object();
    auto data = canonical_with(e.data, member->key, member->text);
    if (data) return data;
    // Not canonical: parsed and serialized with the rest, when it is JSON at all.
    auto parsed = Json::parse(member->text, nullptr, false);
    if (parsed.is_discarded()) return data.error();
    e.data[std::string(member->key)] = std::move(parsed);
    return canonical(e.data);
}

}  // namespace

Status prepare_record_into(Prepared& p, std::string_view origin, const CanonicalMember* member) {
    const Event& e = p.event;
    if (e.kind.empty()) return Error::msg("journal: event without a kind");
    if (!e.data.is_object() && !e.data.is_null())
        return Error::msg(fmt::format("journal: {} event data is not a JSON object", e.kind));
    // Written by its builder (Event::data_text), or serialized here.
    Result<std::string> serialized = std::string();
    if (!e.data_text.empty() && member)
        return Error::msg(fmt::format("journal: {} event: a member given to a text", e.kind));
    if (e.data_text.empty()) serialized = serialized_data(p, member);
    if (!serialized)
        return Error::msg(fmt::format("journal: {} event: {}", e.kind, serialized.error().message));
    const std::string_view data = e.data_text.empty() ? *serialized : e.data_text;
    p.ts = e.ts_ns ? e.ts_ns : now_ns();
    p.before_seq.reserve(data.size() + 128);
    p.before_seq += "{\"data\":";
    if (auto rs = named_request(e); rs && *rs < 0) {
        // Canonical keys are sorted: request_seq is the data's last key in every record that
        // names a request by a ticket. Found at the very end of the top-level object only.
        std::string number = std::to_string(*rs);
        std::string tail = "\"request_seq\":" + number + "}";
        if (data.size() > tail.size() && data.ends_with(tail) &&
            (data[data.size() - tail.size() - 1] == ',' ||
             data[data.size() - tail.size() - 1] == '{')) {
            p.ticket_at = p.before_seq.size() + data.size() - 1 - number.size();
            p.ticket_len = number.size();
        }
        // A text cannot be written again from `data`: its ticket must be found in it.
        if (p.ticket_len == 0 && !e.data_text.empty())
            return Error::msg(fmt::format(
                "journal: {} event: its text does not end with its request_seq", e.kind));
    }
    p.before_seq += data;
    close_envelope(p, e.kind, origin, e.session);
    return {};
}

// A teardown record's intent line back into the record it was prepared as, for `origin`,
// without building its data as a Json: the relay commits the keeper's records with its
// session.end, and parsing each line into a Json only for prepare() to serialize it again
// was most of the relay's time between the keeper's report and `run`'s exit (a teardown
// record has no projection: its data is never read). The line is parsed (simdjson: it
// is JSON) and then held to the envelope append_intent_line writes, exactly: seven keys
// in canonical order, the data a canonical object, seq 0 and no origin, of `session`. So
// what is committed is the line's own data, under this writer's origin, byte for byte what
// prepare() would have made of it.
Result<Prepared> prepared_from_intent_line(std::string_view line, std::string_view session,
                                           std::string_view origin) {
    auto refuse = [&](std::string_view why) -> Error {
        return Error::msg(fmt::format("an intent line ({} bytes) {}", line.size(), why));
    };
    thread_local simdjson::dom::parser parser;
    simdjson::dom::object top;
    if (parser.parse(line.data(), line.size()).get(top) != simdjson::SUCCESS)
        return refuse("that is not a JSON object");
    std::string_view kind, in_session, in_origin;
    int64_t ts = 0, seq = -1, v = 0;
    simdjson::dom::element data;
    if (top.size() != 7 || top["kind"].get(kind) || top["session"].get(in_session) ||
        top["origin"].get(in_origin) || top["ts"].get(ts) || top["seq"].get(seq) ||
        top["v"].get(v) || top["data"].get(data) || !data.is_object())
        return refuse("that is not a record");
    if (!is_teardown_record(kind))
        return refuse(fmt::format("of kind {}, not a teardown record", kind));
    if (in_session != session) return refuse("of another session");
    if (ts <= 0 || seq != 0 || !in_origin.empty() || v != 1)
        return refuse("that is not as an intent line is written");
    Prepared p;
    p.event = Event{std::string(kind), std::string(session), ts, Json()};
    p.ts = ts;
    Prepared written;  // the envelope as it must stand in the line
    written.ts = ts;
    close_envelope(written, kind, "", session);
    written.before_seq += '0';
    written.before_seq += written.after_seq;
    constexpr std::string_view kHead = "{\"data\":";
    if (!line.starts_with(kHead) || !line.ends_with(written.before_seq))
        return refuse("that is not as an intent line is written");
    const std::string_view data_text =
        line.substr(kHead.size(), line.size() - kHead.size() - written.before_seq.size());
    std::string again;
    again.reserve(data_text.size());
    if (!canonical_of(again, data) || again != data_text)
        return refuse("whose data is not canonical");
    p.before_seq.reserve(line.size() + origin.size());
    p.before_seq += kHead;
    p.before_seq += data_text;
    close_envelope(p, kind, origin, session);
    return p;
}

}  // namespace warden::journal
