// A JSON-with-comments reader that remembers where every value sits in the text.
//
// Client configs are edited surgically: we replace the bytes of one value and leave the
// rest of the file (comments, key order, whitespace, trailing commas) alone. For that the
// parser keeps, for every value and every object key, its byte span in the original text.
// It accepts plain JSON plus what VS Code and Zed allow (`//` and `/* */` comments,
// trailing commas); it never rewrites anything itself.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "sys/result.hpp"

namespace warden::clients {

// A half-open byte range [begin, end) of the original text.
struct Span {
    size_t begin = 0;
    size_t end = 0;
    size_t size() const { return end - begin; }
};

struct JsonMember;

struct JsonValue {
    enum class Kind { Null, Bool, Number, String, Array, Object };
    Kind kind = Kind::Null;
    Span span;                        // the value's own bytes: quotes and brackets included
    std::string str;                  // decoded text of a String
    bool boolean = false;             // value of a Bool
    std::vector<JsonValue> items;     // elements of an Array
    std::vector<JsonMember> members;  // members of an Object, in file order

    bool is_string() const { return kind == Kind::String; }
    bool is_object() const { return kind == Kind::Object; }
    bool is_array() const { return kind == Kind::Array; }
    // The member named `key` (the last one when a key repeats, as JSON parsers do), or null.
    const JsonMember* member(std::string_view key) const;
    const JsonValue* find(std::string_view key) const;
};

struct JsonMember {
    std::string key;  // decoded
    Span key_span;    // the key's bytes, quotes included
    JsonValue value;
};

// Parses JSON with comments and trailing commas. On failure the error message is
// "LINE:COLUMN: what was expected" (1-based; columns count characters, not bytes).
Result<JsonValue> parse_jsonc(std::string_view text);

// A double-quoted string literal for `s`, valid both in JSON and as a TOML basic string.
std::string quote_string(std::string_view s);

// 1-based line and column (in characters) of byte `offset` of `text`.
struct TextPosition {
    size_t line = 1;
    size_t column = 1;
};
TextPosition position_of(std::string_view text, size_t offset);

}  // namespace warden::clients
