// The one JSON string escaper: byte for byte what nlohmann::json writes for valid UTF-8 (the
// journal's canonical form hashes these bytes), DEL escaped only for TOML, and every output
// parses back to its input.
#include "sys/json_string.hpp"

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace warden {
namespace {

std::string literal(std::string_view s, JsonEscape mode = JsonEscape::Json) {
    std::string out = "prefix:";
    append_json_string(out, s, mode);
    return out.substr(7);
}

TEST(JsonString, EscapesQuoteBackslashAndControlsAndCopiesTheRest) {
    std::string all;
    for (int c = 1; c < 128; ++c)
        all += static_cast<char>(c);
    all += "\xC3\xA9 \xF0\x9F\x98\x80";  // é and an emoji pass through raw
    all += std::string(1, '\0');
    // Exactly nlohmann's own serialization (what canonical_json wrote before it shared this).
    EXPECT_EQ(literal(all), nlohmann::json(all).dump());
    EXPECT_EQ(nlohmann::json::parse(literal(all)).get<std::string>(), all);
    EXPECT_EQ(literal("a\"b\\c\x01\x1f\b\f\n\r\t\x7f"),
              "\"a\\\"b\\\\c\\u0001\\u001f\\b\\f\\n\\r\\t\x7f\"");
    EXPECT_EQ(literal(""), "\"\"");
    EXPECT_EQ(literal("plain"), "\"plain\"");
}

TEST(JsonString, TomlAlsoEscapesDel) {
    EXPECT_EQ(literal("a\x7f", JsonEscape::Toml), "\"a\\u007f\"");
    EXPECT_EQ(literal("a\x7f", JsonEscape::Json), "\"a\x7f\"");
    EXPECT_EQ(nlohmann::json::parse(literal("x\x7fy\n", JsonEscape::Toml)).get<std::string>(),
              "x\x7fy\n");
}

// The scan goes eight bytes at a time: every byte value, at every place in a word and in the
// tail, in both modes, escaped as the byte-at-a-time rule says.
TEST(JsonString, EachByteAtEachOffsetAsTheRuleSays) {
    auto by_rule = [](std::string_view s, JsonEscape mode) {
        std::string out = "\"";
        for (unsigned char c : s) {
            if (c == '"' || c == '\\') {
                out += '\\';
                out += static_cast<char>(c);
            } else if (c < 0x20 || (c == 0x7f && mode == JsonEscape::Toml)) {
                const char* shortform = c == '\b'   ? "\\b"
                                        : c == '\f' ? "\\f"
                                        : c == '\n' ? "\\n"
                                        : c == '\r' ? "\\r"
                                        : c == '\t' ? "\\t"
                                                    : nullptr;
                if (shortform) {
                    out += shortform;
                } else {
                    static constexpr char kHex[] = "0123456789abcdef";
                    out += "\\u00";
                    out += kHex[c >> 4];
                    out += kHex[c & 0xf];
                }
            } else {
                out += static_cast<char>(c);
            }
        }
        return out + "\"";
    };
    for (JsonEscape mode : {JsonEscape::Json, JsonEscape::Toml})
        for (int c = 0; c < 256; ++c)
            for (size_t len : {1u, 7u, 8u, 9u, 16u, 19u})
                for (size_t at = 0; at < len; ++at) {
                    std::string s(len, 'a');
                    s[at] = static_cast<char>(c);
                    ASSERT_EQ(literal(s, mode), by_rule(s, mode))
                        << "byte " << c << " at " << at << " of " << len;
                }
}

}  // namespace
}  // namespace warden
