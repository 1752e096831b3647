#include "journal/canonical_json.hpp"

#include <gtest/gtest.h>

namespace warden::journal {
namespace {

TEST(CanonicalJson, SortsKeysAndHasNoWhitespace) {
    Json j{{"zeta", 1}, {"alpha", Json{{"b", true}, {"a", nullptr}}}, {"mid", "x"}};
    auto c = canonical(j);
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_EQ(*c, R"({"alpha":{"a":null,"b":true},"mid":"x","zeta":1})");
}

}  // namespace
}  // namespace warden::journal

namespace warden::journal {
namespace {

TEST(CanonicalJson, TypedIdsKeepNumberAndStringApart) {
    EXPECT_EQ(*canonical(rpc_id_number(17)), R"({"n":17})");
    EXPECT_EQ(*canonical(rpc_id_string("17")), R"({"s":"17"})");
    EXPECT_EQ(*canonical(rpc_id_null()), "null");
    EXPECT_EQ(*canonical(*rpc_id_from_json_text("17")), R"({"n":17})");
    EXPECT_EQ(*canonical(*rpc_id_from_json_text("\"17\"")), R"({"s":"17"})");
    EXPECT_EQ(*canonical(*rpc_id_from_json_text("null")), "null");
    EXPECT_EQ(*canonical(*rpc_id_from_json_text("1.5")), R"({"t":"1.5"})");
    EXPECT_FALSE(rpc_id_from_json_text("[1]").ok());
    EXPECT_EQ(rpc_id_display(rpc_id_number(17)), "17");
    EXPECT_EQ(rpc_id_display(rpc_id_string("17")), "\"17\"");
}

TEST(CanonicalJson, InvalidUtf8ArgvIsStoredAsBase64) {
    Json argv = Json::array({"server", std::string("caf\xe9", 4), std::string("\xff\xfe")});
    EXPECT_EQ(*canonical(argv), R"(["server",{"b64":"Y2Fm6Q=="},{"b64":"//4="}])");
    EXPECT_EQ(*canonical(bytes_value("café")), "\"café\"");
}

TEST(CanonicalJson, Utf8Validation) {
    EXPECT_TRUE(valid_utf8("plain ascii"));
    EXPECT_TRUE(valid_utf8("\xe2\x82\xac"));       // €
    EXPECT_FALSE(valid_utf8("\xc0\xaf"));          // overlong '/'
    EXPECT_FALSE(valid_utf8("\xed\xa0\x80"));      // surrogate
    EXPECT_FALSE(valid_utf8("\xe2\x82"));          // truncated
    EXPECT_FALSE(valid_utf8("\xf4\x90\x80\x80"));  // above U+10FFFF
    // The same after and between runs of ASCII long enough to be read eight bytes at a time.
    const std::string run(13, 'a');
    EXPECT_TRUE(valid_utf8(run + "\xe2\x82\xac" + run));
    EXPECT_FALSE(valid_utf8(run + "\xc0\xaf" + run));
    EXPECT_FALSE(valid_utf8(run + "\xed\xa0\x80"));
    EXPECT_FALSE(valid_utf8(run + run + "\xe2\x82"));
    EXPECT_FALSE(valid_utf8(run + "\xff" + run));
}

TEST(CanonicalJson, FloatsAndBadKeysAreRefusedWithTheirPath) {
    auto f = canonical(Json{{"data", Json{{"ms", 1.5}}}});
    ASSERT_FALSE(f.ok());
    EXPECT_EQ(f.error().message,
              "data.ms: floating-point number; journal bodies hold integers only");
    auto k = canonical(Json{{"camelCase", 1}});
    ASSERT_FALSE(k.ok());
    EXPECT_EQ(k.error().message, "body: key `camelCase` is not ASCII snake_case");
}

TEST(CanonicalJson, EscapesMinimally) {
    EXPECT_EQ(*canonical(Json("a\"b\\c\n\x01/é")), "\"a\\\"b\\\\c\\n\\u0001/é\"");
    EXPECT_EQ(*canonical(Json{{"b", Json::array({1, -2, true})}, {"a", Json::object()}}),
              R"({"a":{},"b":[1,-2,true]})");
}

// A member that arrives as canonical text (the keeper's teardown report) goes in at its
// sorted place as it stands: the same bytes as the object with it parsed in, wherever it
// falls, replacing a member of that name; a text that is not canonical is refused, and so
// nothing is hashed that `audit verify` would not read back the same.
TEST(CanonicalJson, AMemberGivenAsCanonicalTextIsSplicedAtItsPlace) {
    const Json object{{"exit_status", 0}, {"reason", "client_lost"}, {"term_signal", 9}};
    const std::string report = R"({"counts":{"killed":0},"ok":true,"targets":[{"pid":7}]})";
    for (const char* key : {"a", "teardown", "zz", "reason"}) {
        Json whole = object;
        whole[key] = Json::parse(report);
        auto spliced = canonical_with(object, key, report);
        ASSERT_TRUE(spliced.ok()) << key << ": " << spliced.error().message;
        EXPECT_EQ(*spliced, *canonical(whole)) << key;
    }
    EXPECT_EQ(*canonical_with(Json::object(), "teardown", "{}"), R"({"teardown":{}})");
    EXPECT_EQ(*canonical_with(Json{{"a", 1}}, "b", "null"), R"({"a":1,"b":null})");
}

TEST(CanonicalJson, AMemberThatIsNotCanonicalTextIsRefusedAndSaysWhy) {
    const Json object{{"reason", "client_lost"}};
    auto refused = [&](std::string_view text) {
        auto r = canonical_with(object, "teardown", text);
        return r.ok() ? std::string("spliced: ") + *r : r.error().message;
    };
    EXPECT_EQ(refused(R"({"ok": true})"), "teardown: not canonical JSON (12 bytes)");
    EXPECT_EQ(refused(R"({"z":1,"a":2})"), "teardown: not canonical JSON (13 bytes)");
    EXPECT_EQ(refused(R"({"ms":1.5})"), "teardown: not canonical JSON (10 bytes)");
    EXPECT_EQ(refused(R"({"camelCase":1})"), "teardown: not canonical JSON (15 bytes)");
    EXPECT_EQ(refused(R"({"ok":true)"), "teardown: not JSON (10 bytes)");
    EXPECT_EQ(canonical_with(object, "Teardown", "{}").error().message,
              "canonical_with: key 'Teardown' is not snake_case");
    EXPECT_FALSE(canonical_with(Json::array(), "teardown", "{}").ok());
}

}  // namespace
}  // namespace warden::journal
