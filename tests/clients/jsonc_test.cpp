#include "clients/jsonc.hpp"

#include <gtest/gtest.h>

namespace warden::clients {
namespace {

std::string_view at(std::string_view text, Span s) {
    return text.substr(s.begin, s.size());
}

std::string error_of(std::string_view text) {
    auto r = parse_jsonc(text);
    return r.ok() ? std::string("(parsed)") : r.error().message;
}

TEST(Jsonc, SpansCoverValuesAndKeysExactly) {
    std::string_view t = R"( { "a" : [1, -2.5e3, "x\"y"], /* c */ "b": {"c": null, "d": true} } )";
    auto r = parse_jsonc(t);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(at(t, r->span),
              R"({ "a" : [1, -2.5e3, "x\"y"], /* c */ "b": {"c": null, "d": true} })");
    ASSERT_EQ(r->members.size(), 2u);
    EXPECT_EQ(at(t, r->members[0].key_span), R"("a")");
    const JsonValue* a = r->find("a");
    ASSERT_TRUE(a && a->is_array());
    EXPECT_EQ(at(t, a->span), R"([1, -2.5e3, "x\"y"])");
    EXPECT_EQ(at(t, a->items[1].span), "-2.5e3");
    EXPECT_EQ(at(t, a->items[2].span), R"("x\"y")");
    EXPECT_EQ(a->items[2].str, "x\"y");
    const JsonValue* b = r->find("b");
    ASSERT_TRUE(b);
    EXPECT_EQ(at(t, b->find("d")->span), "true");
    EXPECT_TRUE(b->find("d")->boolean);
    EXPECT_EQ(b->find("c")->kind, JsonValue::Kind::Null);
}

TEST(Jsonc, AcceptsCommentsTrailingCommasAndBom) {
    std::string t =
        "\xEF\xBB\xBF// head\n{\n  // line\n  \"a\": [1, 2,], /* block\n */\n  \"b\": {\"c\": "
        "1,},\n}\n";
    auto r = parse_jsonc(t);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->find("a")->items.size(), 2u);
    EXPECT_TRUE(r->find("b")->find("c"));
}

TEST(Jsonc, RepeatedKeyFindsTheLastOne) {
    auto r = parse_jsonc(R"({"a": 1, "a": "two"})");
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->find("a")->str, "two");
}

TEST(Jsonc, DecodesEscapes) {
    auto r = parse_jsonc(R"(["\u00e9\ud83d\ude00\n\t\/\\", "\ud800x"])");
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->items[0].str, "\xC3\xA9\xF0\x9F\x98\x80\n\t/\\");
    EXPECT_EQ(r->items[1].str, "\xEF\xBF\xBDx");  // a lone surrogate: U+FFFD
}

TEST(Jsonc, ErrorsNameLineColumnAndWhatWasExpected) {
    EXPECT_EQ(error_of("{\n  \"a\": 1\n  \"b\": 2\n}"), "3:3: expected ',' or '}'");
    EXPECT_EQ(error_of("[1 2]"), "1:4: expected ',' or ']'");
    EXPECT_EQ(error_of("{\"a\" 1}"), "1:6: expected ':'");
    EXPECT_EQ(error_of("{1: 2}"), "1:2: expected a string key or '}'");
    EXPECT_EQ(error_of("{\"a\": }"), "1:7: expected a value");
    EXPECT_EQ(error_of(""), "1:1: expected a value");
    EXPECT_EQ(error_of("{\"a\": \"open}\n"), "1:7: unterminated string");
    EXPECT_EQ(error_of("{} /* open"), "1:4: unterminated comment");
    EXPECT_EQ(error_of("{} {}"), "1:4: unexpected text after the top-level value");
    EXPECT_EQ(error_of("[\"\\q\"]"), "1:3: invalid escape in string");
    EXPECT_EQ(error_of("[01]"), "1:3: expected ',' or ']'");
    EXPECT_EQ(error_of("[tru]"), "1:2: expected a value");
    EXPECT_EQ(error_of("{\"a\": [1,"), "1:10: expected a value or ']'");
    // Columns count characters, not bytes.
    EXPECT_EQ(error_of("{\"\xC3\xA9\xC3\xA9\": 1 2}"), "1:10: expected ',' or '}'");
}

TEST(Jsonc, DeepNestingIsAnErrorNotACrash) {
    std::string deep(100000, '[');
    EXPECT_EQ(error_of(deep), "1:258: nesting too deep");
}

TEST(Jsonc, QuoteStringRoundTrips) {
    std::string all;
    for (int c = 1; c < 128; ++c)
        all += static_cast<char>(c);
    all += "\xC3\xA9";
    std::string q = quote_string(all);
    auto r = parse_jsonc(q);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->str, all);
    EXPECT_EQ(quote_string("a\"b\\c\x7f"), "\"a\\\"b\\\\c\\u007f\"");
}

TEST(Jsonc, PositionOfCountsLinesAndCharacters) {
    std::string_view t = "ab\n\xC3\xA9x\ny";
    EXPECT_EQ(position_of(t, 0).line, 1u);
    EXPECT_EQ(position_of(t, 5).line, 2u);
    EXPECT_EQ(position_of(t, 5).column, 2u);  // after 'é' (two bytes)
    EXPECT_EQ(position_of(t, 7).line, 3u);
    EXPECT_EQ(position_of(t, 7).column, 1u);
}

}  // namespace
}  // namespace warden::clients
