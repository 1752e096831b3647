// Classification of one JSON-RPC line: what it is, its id, method and tool.
//
// The classifier reads a line in place (simdjson On-Demand, no copy: the framer keeps its
// buffer padded) and never re-serialises; the relay forwards the original bytes. It is a
// classifier, not a validator: values it does not need (params, result bodies) are skipped
// by structure, so a malformed number deep inside params is not noticed. Invalid UTF-8
// anywhere in the line makes it `invalid` (simdjson validates the whole input), with
// `utf8_error` set so the stdout guard can still tell "JSON with bad bytes" from noise.
//
// Ids are typed: `17` and `"17"` are different ids. `Id::raw` is the id's JSON text as sent
// (quotes and escapes included), which is both the identity and what a reply must echo.
//
// The era of a request (its protocol revision family): `stateless` when its params._meta names a
// protocol version (`io.modelcontextprotocol/protocolVersion`, which every request of the
// 2026-07-28 revision carries) or it is `server/discover`; `legacy` for `initialize`, whose
// params.protocolVersion is the version asked for; `none` for everything else (a legacy
// session's later requests carry no version of their own). One session may hold both: a client
// that probes with `server/discover` and falls back to `initialize` when the server does not
// know it.
//
// Batches (a top-level array; JSON-RPC 2.0, MCP 2025-03-26, dropped again in 2025-06-18) are
// classified as `batch` with one Message per member in `members`.
//
// Views in a Message point into the classified line (Id::raw) or into the classifier's
// string buffer (method, tool, reason): valid until the next classify() on the same
// Classifier and while the line's bytes are untouched. Copy what you keep.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace warden::rpc {

enum class Kind : uint8_t { request, notification, response, invalid, batch };
enum class Era : uint8_t { none, legacy, stateless };
enum class IdType : uint8_t { none, null, number, string };
enum class Outcome : uint8_t {
    none,        // not a response
    ok,          // result without isError
    rpc_error,   // JSON-RPC `error` member
    tool_error,  // result.isError == true (a tool that ran and failed)
    // result.resultType == "input_required" (2026-07-28): the server needs the client's input
    // first; the client retries the same request with params.inputResponses.
    input_required,
};

struct Id {
    IdType type = IdType::none;
    std::string_view raw;  // JSON text of the id: `17`, `"17"`, `null`

    friend bool operator==(const Id& a, const Id& b) { return a.type == b.type && a.raw == b.raw; }
};

struct Message {
    Kind kind = Kind::invalid;
    Id id;
    std::string_view method;     // requests and notifications
    std::string_view tool;       // params.name of a `tools/call` request
    std::string_view arguments;  // raw JSON text of params.arguments (tools/call, prompts/get)
    Outcome outcome = Outcome::none;
    Era era = Era::none;                // requests (see the header)
    std::string_view protocol_version;  // the version it names, if any
    // raw JSON text of params.inputResponses (a retry after input_required); empty: absent
    std::string_view input_responses;
    std::string_view reason;  // why a line is invalid
    bool json = false;        // the text parsed as JSON (kind may still be invalid)
    bool utf8_error = false;  // invalid UTF-8 somewhere in the line (then json == false)
    std::vector<Message>* members = nullptr;  // kind == batch
};

std::string_view to_string(Kind k);
std::string_view to_string(IdType t);
std::string_view to_string(Outcome o);
std::string_view to_string(Era e);

class Classifier {
  public:
    Classifier();
    ~Classifier();
    Classifier(Classifier&&) noexcept;
    Classifier& operator=(Classifier&&) noexcept;
    Classifier(const Classifier&) = delete;
    Classifier& operator=(const Classifier&) = delete;

    // Classifies `line` (content without the newline). `capacity` is how many bytes are
    // readable from line.data(); it must be at least line.size() + 64 (kParsePadding). When
    // it is not, the line is copied into an internal padded buffer first.
    Message classify(std::string_view line, size_t capacity);
    // Convenience for tests and cold paths: always copies into a padded buffer.
    Message classify(std::string_view line);

  private:
    Message classify_parsed(std::string_view line, size_t capacity);
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace warden::rpc
