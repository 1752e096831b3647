// Pattern (RE2, `reap --match`) and escape_bytes: the two things every command applies to
// text another process controls. Input: a pattern, a NUL byte, then the text to search.
// Properties: compiling never crashes (a bad pattern is an error naming it); a search runs
// over any bytes; a pattern that is a plain word (letters and digits only) matches exactly
// when the text contains it; the escaped text holds no control byte and no BIDI or
// zero-width character, and a printable ASCII text is left as it is.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "sys/pattern.hpp"
#include "sys/text.hpp"

namespace {

[[noreturn]] void fail(const char* what) {
    std::fprintf(stderr, "pattern_fuzz: %s\n", what);
    std::abort();
}

bool plain_word(std::string_view s) {
    if (s.empty()) return false;
    for (char c : s)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
            return false;
    return true;
}

void check_escaped(std::string_view in) {
    std::string out = warden::escape_bytes(in);
    for (unsigned char c : out)
        if (c < 0x20 || c == 0x7f) fail("a control byte survived escaping");
    for (const char* bad : {"\xc2\x9b", "\xe2\x80\xae", "\xe2\x81\xa6", "\xe2\x80\x8b"})
        if (out.find(bad) != std::string::npos) fail("a C1, BIDI or zero-width character survived");
    if (out.size() > in.size() * 8) fail("escaped text more than 8x the input");
    bool ascii = true;
    for (unsigned char c : in)
        ascii &= c >= 0x20 && c < 0x7f;
    if (ascii && out != in) fail("printable ASCII changed by escaping");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    auto buf = std::make_unique<char[]>(size + 1);  // exact size: ASan sees any overread
    std::memcpy(buf.get(), data, size);
    std::string_view in(buf.get(), size);
    size_t nul = in.find('\0');
    std::string_view pattern = in.substr(0, nul);
    std::string_view text = nul == std::string_view::npos ? std::string_view() : in.substr(nul + 1);

    auto p = warden::Pattern::compile(pattern);
    if (p) {
        bool found = p->search(text);
        if (plain_word(pattern) && found != (text.find(pattern) != std::string_view::npos))
            fail("a plain word matched differently from a substring search");
    } else if (p.error().message.find("not a regular expression") == std::string::npos) {
        fail("a refused pattern's message does not say why");
    }
    check_escaped(text);
    check_escaped(pattern);
    return 0;
}
