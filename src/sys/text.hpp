// Untrusted bytes as display text: the one escaping function every command prints through.
//
// Anything another process controls — argv, comm, environment names, MCPWARDEN_SESSION
// markers, paths, socket names — may hold bytes that drive a terminal (ESC sequences, CR
// that overwrites the line, LF that forges a row), reorder what is shown (Unicode BIDI
// overrides and isolates: U+202E then "gpj.exe" reads as "exe.jpg"), hide (zero-width characters)
// or are not UTF-8 at all. escape_bytes keeps valid, printable UTF-8 as it is and writes
// the rest so that a reader sees it and cannot be fooled by it:
//
//   C0 controls, DEL, C1 controls, invalid UTF-8 bytes   \xNN (one per byte)
//   BIDI controls (U+061C, U+200E-200F, U+202A-202E, U+2066-2069), zero-width and other
//   invisible format characters (U+200B-200D, U+2060-2064, U+FEFF)   \u{XXXX}
//
// The output is valid UTF-8 with no control character in it, and is never longer than
// eight times the input.
#pragma once

#include <string>
#include <string_view>

namespace warden {

std::string escape_bytes(std::string_view bytes);
// Appends the escaped form of `bytes` to `out` (what escape_bytes returns).
void append_escaped(std::string& out, std::string_view bytes);
// The same, appending at most `limit` bytes: it stops before the first character whose
// escaped form would not fit whole (no escape and no UTF-8 sequence is ever cut). Returns how
// many bytes of `bytes` it escaped.
size_t append_escaped(std::string& out, std::string_view bytes, size_t limit);

}  // namespace warden
