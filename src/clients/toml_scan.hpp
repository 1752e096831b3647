// Byte spans of TOML values, for surgical edits of Codex configs.
//
// toml++ validates the document and tells where each key and value *begins* (line and
// column, columns counted in characters). These helpers turn such a position into a byte
// offset and find where the value ends, so an edit replaces exactly the bytes of one value
// and keeps every comment and blank line of the file. They assume text toml++ accepted.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "clients/jsonc.hpp"

namespace warden::clients {

// Byte offset of 1-based (line, column); column counts UTF-8 characters.
size_t toml_offset_of(std::string_view text, size_t line, size_t column);

// End (exclusive) of the TOML value starting at byte `begin`: a string of any of the four
// kinds, an array, an inline table, or a bare scalar (number, bool, date).
size_t toml_value_end(std::string_view text, size_t begin);

// Spans of the elements of the array whose '[' is at `array.begin`.
std::vector<Span> toml_array_items(std::string_view text, Span array);

}  // namespace warden::clients
