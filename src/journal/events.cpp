// Typed builders for the journal's events, argument redaction, and writer identity.
// Field lists per kind: docs/JOURNAL.md.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <simdjson.h>

#include "journal/canonical_json.hpp"
#include "journal/journal.hpp"
#include "journal/redact.hpp"
#include "sys/fd.hpp"
#include "sys/json_string.hpp"

namespace warden::journal {

// ---- Writer identity ------------------------------------------------------------------------

const std::string& current_boot_id() {
    static const std::string id = [] {
        auto t = read_file("/proc/sys/kernel/random/boot_id");
        std::string s = t ? *t : std::string();
        while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
            s.pop_back();
        return s;
    }();
    return id;
}

std::optional<uint64_t> process_starttime(pid_t pid) {
    if (pid <= 0) return std::nullopt;
    auto p = read_process(pid, kStat);
    if (!p || p->zombie()) return std::nullopt;
    return p->id.starttime;
}

WriterIdentity WriterIdentity::self() {
    WriterIdentity w;
    w.process.pid = ::getpid();
    w.process.starttime = process_starttime(w.process.pid).value_or(0);
    w.boot_id = current_boot_id();
    return w;
}

bool writer_alive(const WriterIdentity& w) {
    if (!w.boot_id.empty() && w.boot_id != current_boot_id()) return false;  // rebooted since
    auto st = process_starttime(w.process.pid);
    return st && *st == w.process.starttime;
}

// ---- Argument recording ---------------------------------------------------------------------

namespace {

// The preview is the arguments masked — the value of every secret-named key (redact.hpp: the
// key normalised first) replaced by "***", credentials by shape replaced in every other
// string — then serialized compactly and cut to its first `limit` bytes. The arguments are
// read by simdjson, the reader the relay and the journal already use for every line (a DOM
// parse of 1 KiB is a few thousand instructions; nlohmann's, some 80 thousand, was most of
// what a journaled call cost the relay). The text is written as nlohmann's dump() wrote it
// for every preview on record: an object's keys sorted bytewise, a repeated key's last value
// kept, strings by the one escaper (sys/json_string.hpp), numbers as they were read. A
// request's arguments may be far longer than `limit`, so the masked text is written piece by
// piece and the writing stops as soon as more than `limit` bytes are out: the bytes kept are
// the same as when all of it is written and cut.

// What of a string `out` has room for before `limit`.
size_t room_left(const std::string& out, size_t limit) {
    return limit >= out.size() ? limit - out.size() : 0;
}

// A string as a JSON literal, of which only the start can be kept: every byte of `s` is at
// least one byte of output, so the first `room` + 1 bytes (on a UTF-8 boundary: the parser
// only yields valid UTF-8, and redaction keeps it) write everything that can show, and more.
// (The first `room` + 5 bytes of `s` decide it.)
void dump_string(std::string_view s, std::string& out, size_t limit) {
    const size_t room = room_left(out, limit);
    if (s.size() > 4 && s.size() - 4 > room) {
        size_t n = room + 4;  // after backing off a UTF-8 sequence, still >= room + 1
        while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80)
            --n;
        s = s.substr(0, n);
    }
    append_json_string(out, s);
}

bool dump_masked(simdjson::dom::element e, std::string& out, size_t limit);

// An object's members in the order dump() wrote them: sorted by key, and of a key given more
// than once only its last value (as a parse into a map keeps it).
bool dump_masked_object(simdjson::dom::object o, std::string& out, size_t limit) {
    std::vector<std::pair<std::string_view, simdjson::dom::element>> members;
    for (auto [k, v] : o)
        members.emplace_back(k, v);
    std::stable_sort(members.begin(), members.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    out += '{';
    bool first = true;
    for (size_t i = 0; i < members.size(); ++i) {
        const auto& [k, v] = members[i];
        if (i + 1 < members.size() && members[i + 1].first == k) continue;  // not its last
        if (!first) out += ',';
        first = false;
        dump_string(k, out, limit);
        out += ':';
        if (out.size() > limit) return true;
        if (secret_name(k))
            dump_string(kRedacted, out, limit);
        else if (dump_masked(v, out, limit))
            return true;
        if (out.size() > limit) return true;
    }
    out += '}';
    return false;
}

// Appends `e` masked, as above, until `out` holds more than `limit` bytes; true then.
bool dump_masked(simdjson::dom::element e, std::string& out, size_t limit) {
    using T = simdjson::dom::element_type;
    switch (e.type()) {
        case T::OBJECT:
            return dump_masked_object(simdjson::dom::object(e), out, limit);
        case T::ARRAY: {
            out += '[';
            bool first = true;
            for (auto v : simdjson::dom::array(e)) {
                if (!first) out += ',';
                first = false;
                if (out.size() > limit || dump_masked(v, out, limit)) return true;
            }
            out += ']';
            break;
        }
        case T::STRING: {
            // Redacted only as far as dump_string looks: the rest of a long value never shows.
            const size_t room = room_left(out, limit);
            const size_t looked_at = room > SIZE_MAX - 5 ? SIZE_MAX : room + 5;
            dump_string(redact_text(e.get_string().value_unsafe(), looked_at), out, limit);
            break;
        }
        case T::DOUBLE:
            // dump()'s shortest round-trip form ("1.0", "1e+300"), which {fmt} writes otherwise.
            out += Json(e.get_double().value_unsafe()).dump();
            break;
        default:  // an integer, true, false, null: as the canonical form writes them
            canonical_of(out, e);
            break;
    }
    return out.size() > limit;
}

// Cuts to at most `limit` bytes without splitting a UTF-8 sequence.
std::string cut_utf8(std::string s, size_t limit) {
    if (s.size() <= limit) return s;
    size_t n = limit;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80)
        --n;
    s.resize(n);
    return s + "\xE2\x80\xA6";  // …
}

}  // namespace

std::string redacted_preview(std::string_view json_text, RecordArgs mode, size_t limit) {
    if (mode == RecordArgs::None || json_text.empty()) return {};
    if (mode == RecordArgs::Full) return std::string(json_text);
    thread_local simdjson::dom::parser parser;
    simdjson::dom::element args;
    if (parser.parse(json_text.data(), json_text.size()).get(args) != simdjson::SUCCESS)
        return fmt::format("<unparsed: {} bytes>", json_text.size());
    std::string text;
    text.reserve(std::min<size_t>(limit, 4096) + 16);
    dump_masked(args, text, limit);
    return cut_utf8(std::move(text), limit);
}

std::string argument_digest(std::string_view bytes) {
    return "sha256:" + to_hex(sha256(bytes));
}

// ---- Builders -------------------------------------------------------------------------------

namespace {
Json pid_json(const ProcessId& p) {
    return Json{{"pid", static_cast<int64_t>(p.pid)}, {"starttime", p.starttime}};
}
Json argv_json(const std::vector<std::string>& argv) {
    Json a = Json::array();
    for (const auto& s : argv)
        a.push_back(bytes_value(s));
    return a;
}
}  // namespace

const char* outcome_name(Outcome o) {
    switch (o) {
        case Outcome::ok:
            return "ok";
        case Outcome::jsonrpc_error:
            return "jsonrpc_error";
        case Outcome::tool_error:
            return "tool_error";
        case Outcome::input_required:
            return "input_required";
    }
    return "ok";
}

Event session_start(const SessionStart& s) {
    WriterIdentity w = s.writer.process.pid ? s.writer : WriterIdentity::self();
    Json d = s.extra.is_object() ? s.extra : Json::object();
    d["server_name"] = bytes_value(s.server_name);
    d["writer"] = Json{{"pid", static_cast<int64_t>(w.process.pid)},
                       {"starttime", w.process.starttime},
                       {"boot_id", w.boot_id}};
    d["client"] = pid_json(s.client);
    bool full = s.record_argv == RecordArgv::Full;
    d["client_argv"] = argv_json(full ? s.client_argv : client_argv_evidence(s.client_argv));
    d["keeper"] = pid_json(s.keeper);
    d["server"] = pid_json(s.server);
    d["server_argv"] = argv_json(full ? s.server_argv : redact_argv(s.server_argv));
    d["record_argv"] = full ? "full" : "redacted";
    d["cwd"] = bytes_value(redact_text(s.cwd));
    d["env_names"] = argv_json(s.env_names);
    d["layers"] = argv_json(s.layers);
    return Event{"session.start", s.session, 0, std::move(d)};
}

Event session_client_lost(std::string session, std::string cause, std::vector<Json> outstanding) {
    Json ids = Json::array();
    for (auto& id : outstanding)
        ids.push_back(std::move(id));
    return Event{"session.client_lost", std::move(session), 0,
                 Json{{"cause", std::move(cause)}, {"outstanding", std::move(ids)}}};
}

Event session_end(SessionEnd e) {
    Json d{{"reason", std::move(e.reason)}};
    // Moved, not copied: the report of a deep tree is a few hundred values, on the way from
    // the tree's end to `run`'s exit.
    d["teardown"] = e.teardown.is_object() ? std::move(e.teardown) : Json::object();
    if (e.exit_status) d["exit_status"] = *e.exit_status;
    if (e.term_signal) d["term_signal"] = *e.term_signal;
    return Event{"session.end", e.session, 0, std::move(d)};
}

// ---- A call's two records, written as text ------------------------------------------------
//
// A request and its answer are recorded once a call each, on the relay's path (the request
// before it is forwarded). Their data is written as canonical text directly (CanonicalObject,
// members in key order), not built as a Json and serialized after: a tree of a dozen nodes
// holding the argument preview, walked once to write it and freed by the writer thread, was a
// tenth of what a journaled call cost. What the journal reads back before the commit comes
// as plain values beside it (CallColumns); `data` is null.

namespace {

const char* record_args_name(RecordArgs mode) {
    return mode == RecordArgs::None ? "none" : mode == RecordArgs::Preview ? "preview" : "full";
}

// A text column as the projection holds it: the text, or "" for bytes that are not UTF-8
// (the record keeps those as {"b64":…}, which is no text).
std::string column_text(std::string_view bytes) {
    return valid_utf8(bytes) ? std::string(bytes) : std::string();
}

// A call's record whose text cannot be written (an id canonical() refuses: a float): its data
// as a Json, with neither text nor columns, so that it fails where any record's data would,
// naming the value, and nothing is written without its digest or preview.
Event unwritable(Event e, Json data) {
    e.data = std::move(data);
    e.data_text.clear();
    e.call.reset();
    return e;
}

}  // namespace

Event activity_request(const Request& r) {
    Event e{"activity.request", r.session, 0, Json()};
    CallColumns& c = e.call.emplace();
    c.method = column_text(r.method);
    c.tool = column_text(r.tool);
    const auto ids_refused = [&] {
        Json d{{"id", r.id}};
        if (!r.retry_of_id.is_null()) d["retry_of_id"] = r.retry_of_id;
        return unwritable(std::move(e), std::move(d));
    };
    if (!append_canonical(c.id, r.id)) return ids_refused();
    const bool args = !r.arguments_json.empty(), answers = !r.input_responses_json.empty();
    const bool previews = r.record != RecordArgs::None;
    // The client's answers to the server's questions are as much the client's data as the
    // arguments: the same digest, size and masked preview, under the same --record-args.
    std::string& t = e.data_text;
    t.reserve(args && previews ? 512 + std::min<size_t>(r.arguments_json.size(), 1024) : 256);
    CanonicalObject o(t);
    if (args) {
        o.number("argument_bytes", static_cast<int64_t>(r.arguments_json.size()));
        o.text("argument_digest", argument_digest(r.arguments_json));
        if (previews) o.text("arguments", redacted_preview(r.arguments_json, r.record));
    }
    o.number("bytes", r.bytes);
    o.canonical("id", c.id);
    if (r.oversize) o.boolean("id_in_prefix", r.id_in_prefix);
    if (answers) {
        if (previews) o.text("input_responses", redacted_preview(r.input_responses_json, r.record));
        o.number("input_responses_bytes", static_cast<int64_t>(r.input_responses_json.size()));
        o.text("input_responses_digest", argument_digest(r.input_responses_json));
    }
    o.text("method", r.method);
    if (r.oversize) o.boolean("oversize", true);
    o.text("record_args", record_args_name(r.record));
    if (!r.retry_of_id.is_null()) o.value("retry_of_id", r.retry_of_id);
    if (r.stream) o.boolean("stream", true);
    o.text("tool", r.tool);
    if (r.traceparent) o.text("traceparent", *r.traceparent);
    if (!o.close()) return ids_refused();
    return e;
}

Event session_protocol(const Protocol& p) {
    auto text_or_null = [](const std::optional<std::string>& t) {
        return t ? bytes_value(*t) : Json();
    };
    Json d{
        {"request_seq", p.request_seq},
        {"era", p.era},
        {"protocol_version", p.protocol_version.empty() ? Json() : bytes_value(p.protocol_version)},
        {"method", bytes_value(p.method)},
        {"client_name", text_or_null(p.client_name)},
        {"client_version", text_or_null(p.client_version)},
        {"client_capabilities_sha256", text_or_null(p.capabilities_sha256)}};
    if (p.served_from_catalog) d["served_from"] = "catalog";
    return Event{"session.protocol", p.session, 0, std::move(d)};
}

Event session_probed_by(std::string session, std::string probe_session, int64_t gap_ns) {
    return Event{"session.probed_by", std::move(session), 0,
                 Json{{"probe_session", std::move(probe_session)}, {"gap_ns", gap_ns}}};
}

Event activity_response(const Response& r) {
    Event e{"activity.response", r.session, 0, Json()};
    CallColumns& c = e.call.emplace();
    c.outcome = outcome_name(r.outcome);
    c.request_seq = r.request_seq;
    c.duration_ns = r.duration_ns;
    c.bytes = r.bytes;
    if (!append_canonical(c.id, r.id)) return unwritable(std::move(e), Json{{"id", r.id}});
    // request_seq last, as canonical() sorts it: where a ticket is put in its place
    // (prepared.hpp).
    CanonicalObject o(e.data_text);
    o.number("bytes", r.bytes).number("duration_ns", r.duration_ns);
    if (r.error_code) o.number("error_code", *r.error_code);
    o.canonical("id", c.id).text("outcome", c.outcome).number("request_seq", r.request_seq);
    o.close();
    return e;
}

Event activity_stream_end(std::string session, int64_t request_seq, Json id, std::string cause,
                          std::string closed_by) {
    return Event{"activity.stream_end", std::move(session), 0,
                 Json{{"request_seq", request_seq},
                      {"id", std::move(id)},
                      {"cause", std::move(cause)},
                      {"closed_by", std::move(closed_by)}}};
}

Event activity_abandoned(std::string session, int64_t request_seq, Json id, std::string cause) {
    return Event{
        "activity.abandoned", std::move(session), 0,
        Json{{"request_seq", request_seq}, {"id", std::move(id)}, {"cause", std::move(cause)}}};
}

Event process_snapshot(std::string session, const Process& p, std::string_view reason,
                       std::span<const ProcessId> children) {
    std::vector<std::string> argv;
    if (!p.cmdline.empty()) {
        size_t start = 0;
        while (start < p.cmdline.size()) {
            size_t end = p.cmdline.find('\0', start);
            if (end == std::string::npos) end = p.cmdline.size();
            argv.push_back(p.cmdline.substr(start, end - start));
            start = end + 1;
        }
    }
    Json fds = Json::array();
    Json sockets = Json::array();
    for (const auto& f : p.fds) {
        if (f.fd <= 2)
            fds.push_back(Json{{"fd", f.fd}, {"target", bytes_value(redact_text(f.target))}});
        if (f.kind == FdInfo::Kind::Socket)
            sockets.push_back(Json{{"fd", f.fd}, {"inode", f.inode}});
    }
    Json kids = Json::array();
    for (const auto& c : children)
        kids.push_back(pid_json(c));
    // The tree's command lines carry the same credentials as the server's: redacted alike,
    // and so are its paths (a working directory, an executable, a file on fd 0–2 may be named
    // after what they hold).
    argv = redact_argv(argv);
    Json d{{"reason", std::string(reason)},
           {"pid", static_cast<int64_t>(p.id.pid)},
           {"starttime", p.id.starttime},
           {"boot_id", current_boot_id()},
           {"ppid", static_cast<int64_t>(p.ppid)},
           {"pgid", static_cast<int64_t>(p.pgid)},
           {"sid", static_cast<int64_t>(p.sid)},
           {"state", std::string(1, p.state)},
           {"comm", bytes_value(p.comm)},
           {"uid", static_cast<int64_t>(
                       p.uid == static_cast<uid_t>(-1) ? -1 : static_cast<int64_t>(p.uid))},
           {"rss_kb", p.rss_kb},
           {"exe", bytes_value(redact_text(p.exe))},
           {"cwd", bytes_value(redact_text(p.cwd))},
           {"argv", argv_json(argv)},
           {"fds", std::move(fds)},
           {"sockets", std::move(sockets)},
           {"children", std::move(kids)}};
    return Event{"process.snapshot", std::move(session), 0, std::move(d)};
}

Event process_signal(std::string session, ProcessId target, int signal, std::string_view via,
                     int err) {
    Json d{{"pid", static_cast<int64_t>(target.pid)},
           {"starttime", target.starttime},
           {"signal", signal},
           {"via", std::string(via)},
           {"errno", err}};
    if (err) d["error"] = std::string(std::strerror(err));
    return Event{"process.signal", std::move(session), 0, std::move(d)};
}

Event process_exit(std::string session, ProcessId target, std::optional<int> exit_status,
                   std::optional<int> term_signal, std::string_view phase) {
    Json d{{"pid", static_cast<int64_t>(target.pid)},
           {"starttime", target.starttime},
           {"phase", std::string(phase)}};
    if (exit_status) d["exit_status"] = *exit_status;
    if (term_signal) d["term_signal"] = *term_signal;
    return Event{"process.exit", std::move(session), 0, std::move(d)};
}

}  // namespace warden::journal
