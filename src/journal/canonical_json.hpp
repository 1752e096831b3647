// Canonical JSON for journal bodies: the exact bytes that are hashed and stored.
//
// Profile (RFC 8785 in spirit, narrower in practice):
//   - objects with keys sorted bytewise; keys are ASCII snake_case ([a-z0-9_], starting with
//     a letter); no whitespace anywhere;
//   - integers only (times are nanoseconds); a floating-point number is an error, never
//     rounded silently;
//   - strings are valid UTF-8, escaped minimally (", \, control characters as \uXXXX except
//     \b \f \n \r \t); a string that is *not* valid UTF-8 (argv bytes, file names) is stored
//     as {"b64":"<base64 of the raw bytes>"} so nothing is lost and nothing is mangled;
//   - JSON-RPC ids are typed: {"n":17} for the number 17, {"s":"17"} for the string "17",
//     null for a null id, so 17 and "17" never collide.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "sys/json_string.hpp"
#include "sys/result.hpp"

namespace simdjson::dom {
class element;
}

namespace warden::journal {

using Json = nlohmann::json;

// Serializes `value` canonically. Errors name the JSON path of the offending value
// ("data.args.x: floating-point number; journal bodies hold integers only").
Result<std::string> canonical(const Json& value);
// The same text appended to `out` (partly, on an error).
Status append_canonical(std::string& out, const Json& value);

// Appends the canonical text of a value parsed by simdjson (whose strings are valid UTF-8).
// False when the parsed text was not canonical and `out` cannot be what it read: a
// floating-point number (appended as {fmt} writes it), a key that is not snake_case, an
// object's keys not in strictly ascending order. So a body or an id read back reads the
// same, and a text is canonical exactly when this returns true and appends that text
// (fuzz/canonical_json_fuzz.cpp holds it to canonical()).
bool canonical_of(std::string& out, simdjson::dom::element e);

// The canonical text of `object` with its member `key` set to the value whose canonical text
// is `text` (replacing a member of that name), spliced in at its sorted place as it stands: a
// value that arrives as canonical text (the keeper's teardown report in a session.end) is
// neither parsed into a Json nor serialized again. An error when `object` is not an object,
// `key` is not snake_case, or `text` is not canonical JSON (canonical_of decides, on its own
// parse of `text`); then nothing is spliced, and the caller decides what to do with the text.
Result<std::string> canonical_with(const Json& object, std::string_view key, std::string_view text);

// A string as canonical() writes it, appended: its literal when it is valid UTF-8, else
// {"b64":…} of its bytes.
void append_canonical_string(std::string& out, std::string_view s);

// An object's canonical text written member by member, without building a Json: for a
// builder on every call's path (activity.request, activity.response) that knows its members
// and gives them in ascending key order, as canonical() sorts them. Keeping that order, and
// the keys snake_case, is the builder's part (a test holds each such text to canonical());
// each value is written as canonical() writes it. A value canonical() refuses (a float in
// an id) fails the object: ok() is false, and the text is not to be used.
class CanonicalObject {
  public:
    explicit CanonicalObject(std::string& out) : out_(out) { out_ += '{'; }
    CanonicalObject& text(std::string_view key, std::string_view bytes);
    CanonicalObject& number(std::string_view key, int64_t n);
    CanonicalObject& boolean(std::string_view key, bool b);
    CanonicalObject& value(std::string_view key, const Json& v);
    // A value given as its canonical text (append_canonical's), written as it stands.
    CanonicalObject& canonical(std::string_view key, std::string_view text);
    // The closing brace; true when every value could be written.
    bool close() {
        out_ += '}';
        return ok_;
    }

  private:
    void key(std::string_view k);
    std::string& out_;
    bool first_ = true;
    bool ok_ = true;
};

// True when `s` is well-formed UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF).
bool valid_utf8(std::string_view s);

// A JSON value for arbitrary bytes: the string itself when it is valid UTF-8, else
// {"b64": base64(bytes)}. canonical() applies the same rule to every string it meets, so
// this is only needed to make the choice visible at the call site.
Json bytes_value(std::string_view bytes);

// Typed JSON-RPC ids.
Json rpc_id_number(int64_t n);           // {"n":17}
Json rpc_id_string(std::string_view s);  // {"s":"17"}
Json rpc_id_null();                      // null
// From the raw JSON text of an `id` member as it appeared on the wire: `17` → {"n":17},
// `"17"` → {"s":"17"}, `null` → null; a non-integer number (allowed by JSON, discouraged by
// JSON-RPC) keeps its text: {"t":"1.5"}. Error if the text is not a JSON scalar.
Result<Json> rpc_id_from_json_text(std::string_view text);
// The compact text of a typed id, as used in the activity projection and the CLI:
// `17`, `"17"`, `null`.
std::string rpc_id_display(const Json& typed_id);

std::string base64_encode(std::string_view bytes);
// A string's canonical literal is sys/json_string.hpp's append_json_string (JsonEscape::Json).

}  // namespace warden::journal
