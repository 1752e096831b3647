// escape_bytes: what every command prints of a string another process controls.
#include "sys/text.hpp"

#include <cstdint>
#include <string>

#include <gtest/gtest.h>

namespace warden {
namespace {

// Strict UTF-8 (no overlong form, no surrogate, nothing above U+10FFFF, nothing cut short).
bool valid_utf8(const std::string& s) {
    for (size_t i = 0; i < s.size();) {
        auto b = static_cast<unsigned char>(s[i]);
        size_t n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
        if (n == 0 || i + n > s.size()) return false;
        uint32_t cp = n == 1 ? b : b & (0x7f >> n);
        for (size_t k = 1; k < n; ++k) {
            auto c = static_cast<unsigned char>(s[i + k]);
            if ((c & 0xc0) != 0x80) return false;
            cp = (cp << 6) | (c & 0x3f);
        }
        const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
        i += n;
    }
    return true;
}

// Valid UTF-8 without a control character: what a terminal shows as it is.
bool safe_for_terminal(const std::string& s) {
    if (!valid_utf8(s)) return false;
    for (unsigned char c : s)
        if (c < 0x20 || c == 0x7f) return false;
    // No C1 control (U+0080-009F is C2 80..C2 9F in UTF-8), no BIDI or invisible format
    // character left in its UTF-8 form.
    for (const char* bad : {"\xc2\x80", "\xc2\x9b", "\xe2\x80\xae", "\xe2\x80\xab", "\xe2\x81\xa6",
                            "\xe2\x81\xa9", "\xe2\x80\x8b", "\xd8\x9c", "\xef\xbb\xbf"})
        if (s.find(bad) != std::string::npos) return false;
    return true;
}

TEST(EscapeBytes, PrintableUtf8IsKeptAsItIs) {
    EXPECT_EQ(escape_bytes("npx -y @scope/server --dir ~/Données 日本"),
              "npx -y @scope/server --dir ~/Données 日本");
    EXPECT_EQ(escape_bytes(""), "");
}

// One row per hostile string: what is printed, and that nothing of it drives a terminal.
TEST(EscapeBytes, EscCrLfBidiAndInvalidUtf8AreWrittenVisibly) {
    struct Case {
        std::string in, out;
    };
    const Case cases[] = {
        {"id\x1b[2J\x1b]0;pwned\x07", "id\\x1b[2J\\x1b]0;pwned\\x07"},  // ESC, clear, title
        {"ok\rFAKE ROW", "ok\\x0dFAKE ROW"},                            // CR overwrites
        {"a\nlive  4711  fake", "a\\x0alive  4711  fake"},              // LF forges a row
        {"tab\there\x7f", "tab\\x09here\\x7f"},                         // HT, DEL
        {"\xc2\x9b"
         "31m",
         "\\xc2\\x9b31m"},                                     // C1 CSI
        {"evil\xe2\x80\xaegpj.exe", "evil\\u{202e}gpj.exe"},   // RLO override
        {"\xe2\x81\xa6x\xe2\x81\xa9", "\\u{2066}x\\u{2069}"},  // LRI … PDI
        {"a\xe2\x80\x8b"
         "b\xef\xbb\xbf",
         "a\\u{200b}b\\u{feff}"},             // zero width, BOM
        {"\xd8\x9c", "\\u{061c}"},            // arabic letter mark
        {"bad\xff\xfe", "bad\\xff\\xfe"},     // not UTF-8
        {"\xc0\xaf", "\\xc0\\xaf"},           // overlong '/'
        {"\xed\xa0\x80", "\\xed\\xa0\\x80"},  // surrogate
        {"cut\xe6\x97", "cut\\xe6\\x97"},     // truncated sequence
    };
    for (const Case& c : cases) {
        std::string got = escape_bytes(c.in);
        EXPECT_EQ(got, c.out) << "input " << ::testing::PrintToString(c.in);
        EXPECT_TRUE(safe_for_terminal(got)) << got;
        // The negative control: the raw input would have reached the terminal as it is.
        EXPECT_FALSE(safe_for_terminal(c.in)) << ::testing::PrintToString(c.in);
    }
}

TEST(EscapeBytes, AppendAddsToWhatIsThere) {
    std::string out = "SESSION ";
    append_escaped(out, "x\x1b");
    EXPECT_EQ(out, "SESSION x\\x1b");
}

// With a limit (the diverted-output caps): what fits whole, never half an escape or half a
// UTF-8 sequence; the count of input bytes escaped says where it stopped.
TEST(EscapeBytes, ALimitStopsBeforeWhatDoesNotFitWhole) {
    const std::string in =
        "ab\x1b"
        "caf\xc3\xa9\xe2\x80\xae";
    struct Step {
        size_t limit, taken;
        std::string out;
    };
    for (const Step& c :
         {Step{0, 0, ""}, Step{1, 1, "a"}, Step{5, 2, "ab"}, Step{6, 3, "ab\\x1b"},
          Step{10, 6, "ab\\x1bcaf"}, Step{11, 8, "ab\\x1bcaf\xc3\xa9"},
          Step{18, 8, "ab\\x1bcaf\xc3\xa9"}, Step{19, 11, "ab\\x1bcaf\xc3\xa9\\u{202e}"}}) {
        std::string out = "> ";
        EXPECT_EQ(append_escaped(out, in, c.limit), c.taken) << "limit " << c.limit;
        EXPECT_EQ(out, "> " + c.out) << "limit " << c.limit;
        EXPECT_LE(out.size() - 2, c.limit);
    }
    std::string all;
    EXPECT_EQ(append_escaped(all, in, SIZE_MAX), in.size());
    EXPECT_EQ(all, escape_bytes(in));
}

}  // namespace
}  // namespace warden
