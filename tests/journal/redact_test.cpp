// Argument previews: bounded, secrets masked, never the raw text of something unparsable.
#include <gtest/gtest.h>

#include "journal/journal.hpp"

namespace warden::journal {
namespace {

TEST(Redact, SecretLookingKeysAreMaskedCaseInsensitively) {
    std::string args =
        R"({"path":"/tmp/x","API_KEY":"sk-123","nested":{"Authorization":"Bearer abc","Password":"p"},"cookies":["a"]})";
    EXPECT_EQ(
        redacted_preview(args, RecordArgs::preview),
        R"({"API_KEY":"***","cookies":"***","nested":{"Authorization":"***","Password":"***"},"path":"/tmp/x"})");
}

TEST(Redact, PreviewIsBoundedOnAUtf8Boundary) {
    std::string args = R"({"text":")" + std::string(300, 'x') + "\"}";
    std::string p = redacted_preview(args, RecordArgs::preview);
    EXPECT_EQ(p.size(), 256u + 3u);  // 256 bytes and "…"
    EXPECT_EQ(p.substr(256), "\xE2\x80\xA6");
    std::string euro = R"({"t":")";
    for (int i = 0; i < 200; ++i)
        euro += "\xe2\x82\xac";
    euro += "\"}";
    std::string q = redacted_preview(euro, RecordArgs::preview);
    EXPECT_TRUE(valid_utf8(q));
    EXPECT_LE(q.size(), 259u);
}

TEST(Redact, ModesNoneFullAndUnparsable) {
    EXPECT_EQ(redacted_preview(R"({"token":"t"})", RecordArgs::none), "");
    EXPECT_EQ(redacted_preview(R"({"token":"t"})", RecordArgs::full), R"({"token":"t"})");
    EXPECT_EQ(redacted_preview("token=abc", RecordArgs::preview), "<unparsed: 9 bytes>");
    EXPECT_EQ(*parse_record_args("preview"), RecordArgs::preview);
    EXPECT_FALSE(parse_record_args("all").ok());
}

TEST(Redact, RequestEventKeepsDigestAndPreviewOnly) {
    Request r{"s",
              rpc_id_number(1),
              "tools/call",
              "login",
              R"({"user":"u","password":"hunter2"})",
              RecordArgs::preview,
              50};
    Event e = activity_request(r);
    std::string body = *canonical(e.data);
    EXPECT_EQ(body.find("hunter2"), std::string::npos);
    EXPECT_NE(body.find(R"("arguments":"{\"password\":\"***\",\"user\":\"u\"}")"),
              std::string::npos)
        << body;
    EXPECT_NE(body.find("\"argument_digest\":\"sha256:"), std::string::npos);
}

}  // namespace
}  // namespace warden::journal
