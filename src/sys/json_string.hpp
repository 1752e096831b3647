// A string as a JSON string literal: the one escaper the journal's canonical form, the relay's
// own JSON-RPC answers and the client-config writer (JSON and TOML) share.
//
// Quote and backslash are escaped, and so is every control byte (below 0x20): \b \f \n \r \t
// by their short forms, the others as \u00xx with lowercase hex. Every other byte is copied as
// it is: JSON text may hold UTF-8 raw, and the journal's canonical form (journal/
// canonical_json.hpp), whose bytes are hashed, depends on exactly this output — change it and
// every journal written before stops verifying.
#pragma once

#include <string>
#include <string_view>

namespace warden {

enum class JsonEscape {
    Json,  // the above
    Toml,  // also DEL (0x7f) as \u007f: a TOML basic string may not hold it raw
};

// Appends `s` as a JSON string literal, quotes included, to `out`.
void append_json_string(std::string& out, std::string_view s, JsonEscape mode = JsonEscape::Json);

}  // namespace warden
