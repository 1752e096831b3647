#include "sys/text.hpp"

#include <algorithm>
#include <cstdint>
#include <iterator>

#include <fmt/format.h>

namespace warden {

namespace {

// Decodes one UTF-8 sequence at s[i]; returns its length, or 0 when invalid (overlong,
// surrogate, beyond U+10FFFF, truncated).
size_t utf8_sequence(std::string_view s, size_t i, uint32_t& cp) {
    auto b = static_cast<unsigned char>(s[i]);
    size_t n;
    if (b < 0x80) {
        cp = b;
        return 1;
    } else if ((b & 0xe0) == 0xc0) {
        n = 2, cp = b & 0x1f;
    } else if ((b & 0xf0) == 0xe0) {
        n = 3, cp = b & 0x0f;
    } else if ((b & 0xf8) == 0xf0) {
        n = 4, cp = b & 0x07;
    } else {
        return 0;
    }
    if (i + n > s.size()) return 0;
    for (size_t k = 1; k < n; ++k) {
        auto c = static_cast<unsigned char>(s[i + k]);
        if ((c & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (c & 0x3f);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return n;
}

// Controls that would drive the terminal: C0, DEL, C1.
bool control(uint32_t cp) {
    return cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0);
}

// Characters that change how the text around them is shown without being seen themselves:
// the BIDI embeddings, overrides, isolates and marks, and the zero-width ones.
bool invisible_format(uint32_t cp) {
    return cp == 0x061c || (cp >= 0x200b && cp <= 0x200f) || (cp >= 0x202a && cp <= 0x202e) ||
           (cp >= 0x2060 && cp <= 0x2069) || cp == 0xfeff;
}

}  // namespace

size_t append_escaped(std::string& out, std::string_view s, size_t limit) {
    const size_t start = out.size();
    auto room = [&] { return limit - (out.size() - start); };
    size_t i = 0;
    while (i < s.size()) {
        // A run of printable ASCII, the usual command line, goes out as it is in one append:
        // `ps` escapes every process's command line, and byte by byte that was a sixth of it.
        size_t run = i;
        while (run < s.size() && static_cast<unsigned char>(s[run]) >= 0x20 &&
               static_cast<unsigned char>(s[run]) < 0x7f)
            ++run;
        if (run > i) {
            const size_t n = std::min(run - i, room());
            out.append(s.substr(i, n));
            i += n;
            if (i < run) break;
            continue;
        }
        uint32_t cp = 0;
        size_t n = utf8_sequence(s, i, cp);
        if (n == 0 || control(cp)) {
            if (room() < 4) break;
            fmt::format_to(std::back_inserter(out), "\\x{:02x}", static_cast<unsigned char>(s[i]));
            ++i;
        } else if (invisible_format(cp)) {
            if (room() < 8) break;
            fmt::format_to(std::back_inserter(out), "\\u{{{:04x}}}", cp);
            i += n;
        } else {
            if (room() < n) break;
            out.append(s.substr(i, n));
            i += n;
        }
    }
    return i;
}

void append_escaped(std::string& out, std::string_view s) {
    (void)append_escaped(out, s, SIZE_MAX);
}

std::string escape_bytes(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size());
    append_escaped(out, bytes);
    return out;
}

}  // namespace warden
