// Argument previews: bounded, secrets masked, never the raw text of something unparsable.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <string_view>
#include <type_traits>
#include <vector>

#include "journal/journal.hpp"
#include "journal/redact.hpp"

namespace warden::journal {
namespace {

TEST(Redact, SecretLookingKeysAreMaskedCaseInsensitively) {
    std::string args =
        R"({"path":"/tmp/x","API_KEY":"sk-123","nested":{"Authorization":"Bearer abc","Password":"p"},"cookies":["a"]})";
    EXPECT_EQ(
        redacted_preview(args, RecordArgs::Preview),
        R"({"API_KEY":"***","cookies":"***","nested":{"Authorization":"***","Password":"***"},"path":"/tmp/x"})");
}

TEST(Redact, PreviewIsBoundedOnAUtf8Boundary) {
    std::string args = R"({"text":")" + std::string(300, 'x') + "\"}";
    std::string p = redacted_preview(args, RecordArgs::Preview);
    EXPECT_EQ(p.size(), 256u + 3u);  // 256 bytes and "…"
    EXPECT_EQ(p.substr(256), "\xE2\x80\xA6");
    std::string euro = R"({"t":")";
    for (int i = 0; i < 200; ++i)
        euro += "\xe2\x82\xac";
    euro += "\"}";
    std::string q = redacted_preview(euro, RecordArgs::Preview);
    EXPECT_TRUE(valid_utf8(q));
    EXPECT_LE(q.size(), 259u);
}

// What the preview was before it stopped writing at the bound: everything masked and
// serialized, then cut. The bounded preview must keep exactly these bytes.
std::string whole_then_cut(std::string_view text, size_t limit) {
    nlohmann::json j = nlohmann::json::parse(text);
    std::function<void(nlohmann::json&)> mask = [&](nlohmann::json& v) {
        if (v.is_object()) {
            for (auto& [k, e] : v.items())
                if (secret_name(k))
                    e = std::string(kRedacted);
                else
                    mask(e);
        } else if (v.is_array()) {
            for (auto& e : v)
                mask(e);
        } else if (v.is_string()) {
            v = redact_text(v.get<std::string>());
        }
    };
    mask(j);
    std::string out = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (out.size() <= limit) return out;
    size_t n = limit;
    while (n > 0 && (static_cast<unsigned char>(out[n]) & 0xC0) == 0x80)
        --n;
    out.resize(n);
    return out + "\xE2\x80\xA6";
}

TEST(Redact, BoundedPreviewKeepsTheBytesOfTheWholeTextCut) {
    const std::string longer(40, 'y');
    const std::vector<std::string> inputs{
        R"({"text":")" + std::string(300, 'a') + R"("})",
        R"({"z":1,"password":{"deep":[1,2,3]},"a":[true,null,-7,1.5e300,18446744073709551615],"m":{"token":"t","k":"v\n\t\u0001\"\\"}})",
        R"({"note":"see https://bob:pw@h/x then ghp_0123456789abcdefghijABCDEFGHIJ and Bearer abc.def"})",
        // Secrets across every cut of one long string (each is redacted as far as the preview
        // shows it, never cut first and redacted after).
        R"({"s":"x sk-abcdefghijklmnop PASSWORD=\"two words\" --token hunter2 https://u:p@h )"
        R"(-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY----- Bearer abcdefghijkl y"})",
        R"({"t":"€€€€€😀😀😀 mixed ü text ü","u":["€","😀",")" + longer + R"("]})",
        R"([{"a":"x"},{"api_key":"sk-live-0123456789abcdef"},[[["deep"]]],"s"])",
        R"("just a string with AKIAIOSFODNN7EXAMPLE inside")",
        R"({"k\u00e9y":"v","PGPASSWORD=hunter2":"x","env":"PGPASSWORD=hunter2 rest"})",
        "42",
        "{}",
        // Keys out of order and one given twice: sorted, its last value kept, as a parse into
        // a map keeps them; numbers as dump() writes them.
        R"({"b":1,"a":{"y":2,"x":3},"b":{"token":"t"},"c":1.0,"d":1e2,"e":-0.25,"f":-12})",
    };
    for (const auto& in : inputs) {
        const size_t whole = whole_then_cut(in, SIZE_MAX).size();
        ASSERT_EQ(redacted_preview(in, RecordArgs::Preview, SIZE_MAX),
                  whole_then_cut(in, SIZE_MAX));
        for (size_t limit = 0; limit <= whole + 3; ++limit)
            ASSERT_EQ(redacted_preview(in, RecordArgs::Preview, limit), whole_then_cut(in, limit))
                << "limit " << limit << " of " << in;
    }
}

TEST(Redact, ModesNoneFullAndUnparsable) {
    EXPECT_EQ(redacted_preview(R"({"token":"t"})", RecordArgs::None), "");
    EXPECT_EQ(redacted_preview(R"({"token":"t"})", RecordArgs::Full), R"({"token":"t"})");
    EXPECT_EQ(redacted_preview("token=abc", RecordArgs::Preview), "<unparsed: 9 bytes>");
}

TEST(Redact, RequestEventKeepsDigestAndPreviewOnly) {
    Request r{"s",
              rpc_id_number(1),
              "tools/call",
              "login",
              R"({"user":"u","password":"hunter2"})",
              RecordArgs::Preview,
              50};
    Event e = activity_request(r);
    const std::string& body = e.data_text;
    EXPECT_EQ(body.find("hunter2"), std::string::npos);
    EXPECT_NE(body.find(R"("arguments":"{\"password\":\"***\",\"user\":\"u\"}")"),
              std::string::npos)
        << body;
    EXPECT_NE(body.find("\"argument_digest\":\"sha256:"), std::string::npos);
}

// A server command line with credentials: the URL's user-info and the flag's value go, the rest
// stays.
TEST(RedactArgv, CredentialsInAServerCommandLine) {
    std::vector<std::string> argv = {"python3",   "s.py",      "postgresql://admin:hunter2@db/prod",
                                     "--api-key", "sk-live-X", "--port",
                                     "5432"};
    EXPECT_EQ(redact_argv(argv),
              (std::vector<std::string>{"python3", "s.py", "postgresql://***@db/prod", "--api-key",
                                        "***", "--port", "5432"}));
}

TEST(RedactArgv, SecretFlagsInBothForms) {
    std::vector<std::string> argv = {"srv",
                                     "--password",
                                     "p1",
                                     "--token=t2",
                                     "--secret",
                                     "s3",
                                     "--auth-header=Basic x",
                                     "--authorization",
                                     "a4",
                                     "--client-secret=c5",
                                     "-password",
                                     "p6",
                                     "--verbose",
                                     "--name=db"};
    auto out = redact_argv(argv);
    std::string joined;
    for (const auto& a : out)
        joined += a + " ";
    for (std::string_view secret : {"p1", "t2", "s3", "Basic x", "a4", "c5", "p6"})
        EXPECT_EQ(joined.find(secret), std::string::npos) << secret << " kept: " << joined;
    EXPECT_NE(joined.find("--verbose --name=db"), std::string::npos) << joined;
    EXPECT_NE(joined.find("--token=*** "), std::string::npos) << joined;
}

TEST(RedactArgv, SecretNamedVariablesBearerAndTokenShapes) {
    EXPECT_EQ(redact_text("PGPASSWORD=hunter2"), "PGPASSWORD=***");
    EXPECT_EQ(redact_text("GITHUB_TOKEN=abc"), "GITHUB_TOKEN=***");
    EXPECT_EQ(redact_text("LOG_LEVEL=debug"), "LOG_LEVEL=debug");
    EXPECT_EQ(redact_text("env API_KEY=x DB_PASS=y psql"), "env API_KEY=*** DB_PASS=*** psql");
    EXPECT_EQ(redact_text("https://h/x?user=u&password=p&q=1"),
              "https://h/x?user=u&password=***&q=1");
    EXPECT_EQ(redact_text("Authorization: Bearer eyJabc.def"), "Authorization: Bearer ***");
    EXPECT_EQ(redact_text("a basic test of bearer tokens"), "a basic test of bearer tokens");
    EXPECT_EQ(redact_text("sk-proj-abcdefghij12345"), "***");
    EXPECT_EQ(redact_text("ghp_0123456789abcdefghijABCDEFGHIJ"), "***");
    EXPECT_EQ(redact_text("key AKIAIOSFODNN7EXAMPLE end"), "key *** end");
    EXPECT_EQ(redact_text("xoxb-1234-5678-abcdefgh"), "***");
    EXPECT_EQ(redact_text("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig_-x"), "***");
    EXPECT_EQ(redact_text("-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl\n-----END OPENSSH PRIVATE "
                          "KEY-----\n"),
              "***\n");
    // Shapes need their length and a word boundary: ordinary words stay.
    EXPECT_EQ(redact_text("task-list risk-free ask-me"), "task-list risk-free ask-me");
    EXPECT_EQ(redact_text("https://example.com/a@b"), "https://example.com/a@b");
}

// A command line in its display form (a teardown target's, argv joined by spaces) and the
// script of a `sh -c`: every credential shape goes, wherever it sits in the text.
TEST(RedactText, EveryCredentialShapeInACommandLine) {
    EXPECT_EQ(redact_text("sh -c PGPASSWORD=hunter6 \"$0\"; true srv "
                          "postgresql://admin:hunter3@db/prod --api-key sk-live-SNAP --token tok9 "
                          "--password 'pw 7' --api-key=ak8 --port 5432"),
              "sh -c PGPASSWORD=*** \"$0\"; true srv postgresql://***@db/prod --api-key *** "
              "--token *** --password '***' --api-key=*** --port 5432");
    EXPECT_EQ(redact_text("srv --auth-token=\"a b\" --secret  s3 --client-secret\tc5"),
              "srv --auth-token=\"***\" --secret  *** --client-secret\t***");
    EXPECT_EQ(redact_text("PGPASSWORD='two words' psql"), "PGPASSWORD='***' psql");
    EXPECT_EQ(
        redact_text("AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE "
                    "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY aws s3 ls"),
        "AWS_ACCESS_KEY_ID=*** AWS_SECRET_ACCESS_KEY=*** aws s3 ls");
    EXPECT_EQ(redact_text("aws --aws-secret-access-key wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
              "aws --aws-secret-access-key ***");
    EXPECT_EQ(redact_text("node gh.js ghp_0123456789abcdefghijABCDEFGHIJ sk-live-SNAPSHOT1"),
              "node gh.js *** ***");
    // A flag that names no secret, a flag without a value, a word that only ends in a flag's
    // name: kept.
    EXPECT_EQ(redact_text("srv --port 5432 --verbose --token --name db x-token y"),
              "srv --port 5432 --verbose --token --name db x-token y");
}

// Headers (curl -H, a config line): the value of a secret-named header goes, an
// Authorization's scheme stays; short values too, since the header's name says what it is.
TEST(RedactText, SecretNamedHeadersAndLines) {
    EXPECT_EQ(redact_text("Authorization: Bearer xyz"), "Authorization: Bearer ***");
    EXPECT_EQ(redact_text("curl -H 'Authorization: Basic dXNlcjpwYXNz' https://h"),
              "curl -H 'Authorization: Basic ***' https://h");
    EXPECT_EQ(redact_text("curl -H \"X-Api-Key: k3y\" https://h"),
              "curl -H \"X-Api-Key: ***\" https://h");
    EXPECT_EQ(redact_text("password: hunter2\nuser: bob"), "password: ***\nuser: bob");
    EXPECT_EQ(redact_text("at 10: 30 the host: db, note: x"), "at 10: 30 the host: db, note: x");
}

// The scan copies the inside of a word whole (a byte after a token character that is none of
// '-', ':', '=' starts no pattern): every pattern that can begin inside a long word, or right
// after one, is still found there.
TEST(RedactText, SecretsInsideAndAfterLongWordsAreFound) {
    const std::string word(1000, 'a');
    EXPECT_EQ(redact_text(word + "PASSWORD=hunter2 x"), word + "PASSWORD=*** x");
    EXPECT_EQ(redact_text(word + "_token: hunter2"), word + "_token: ***");
    EXPECT_EQ(redact_text(word + "://u:hunter2@h"), word + "://***@h");
    EXPECT_EQ(redact_text(word +
                          "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE "
                          "KEY----- " +
                          word),
              word + "*** " + word);
    EXPECT_EQ(redact_text(word + " --api-key hunter2 " + word), word + " --api-key *** " + word);
    EXPECT_EQ(redact_text(word + ".sk-abcdefghijkl " + word), word + ".*** " + word);
    EXPECT_EQ(redact_text(word + " Bearer abcdefghijkl"), word + " Bearer ***");
    EXPECT_EQ(redact_text(word), word);
}

// Stopped once `enough` bytes are out, the scan has written the start of the whole text's
// redaction: at every bound, across every kind of secret.
TEST(RedactText, StoppedEarlyItIsTheStartOfTheWhole) {
    const std::string text =
        "a sk-abcdefghijklmnop PASSWORD=\"two words\" --token hunter2 https://u:p@h x_token: v "
        "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY----- Bearer abcdefghijkl z";
    const std::string whole = redact_text(text);
    for (size_t enough = 0; enough <= whole.size() + 1; ++enough) {
        const std::string start = redact_text(text, enough);
        ASSERT_GE(start.size(), std::min(enough, whole.size())) << enough;
        ASSERT_EQ(whole.substr(0, start.size()), start) << enough;
    }
}

// The one way a SensitiveText goes into JSON is redacted; it converts to nothing else.
TEST(SensitiveText, OnlyRedactedIntoJson) {
    static_assert(!std::is_convertible_v<SensitiveText, std::string>);
    static_assert(!std::is_convertible_v<SensitiveText, std::string_view>);
    static_assert(!fmt::is_formattable<SensitiveText>::value);
    SensitiveText t("run -- srv postgresql://admin:hunter3@db --api-key sk-live-SNAP");
    Json j{{"command", t}};
    EXPECT_EQ(j.dump(), R"({"command":"run -- srv postgresql://***@db --api-key ***"})");
    EXPECT_EQ(redacted(t), "run -- srv postgresql://***@db --api-key ***");
    EXPECT_NE(t.unredacted().find("hunter3"), std::string::npos);
}

// A prompt is not evidence: the client's executable and flags stay, free text goes.
TEST(RedactArgv, ClientArgvKeepsExecutableAndFlagsNotThePrompt) {
    std::vector<std::string> argv = {"claude",       "-p",  "summarise my medical records please",
                                     "--model=opus", "mcp", "/home/u/project"};
    EXPECT_EQ(client_argv_evidence(argv),
              (std::vector<std::string>{"claude", "-p", "<35 bytes>", "--model=<4 bytes>", "mcp",
                                        "/home/u/project"}));
    std::vector<std::string> wrapped = {"mcpwarden", "run", "--", "srv", "--api-key", "sk-live-X"};
    EXPECT_EQ(client_argv_evidence(wrapped),
              (std::vector<std::string>{"mcpwarden", "run", "--", "srv", "--api-key", "***"}));
    std::vector<std::string> many(40, "x");
    auto out = client_argv_evidence(many, 16);
    ASSERT_EQ(out.size(), 18u);
    EXPECT_EQ(out.back(), "<23 more arguments>");
}

// Keys are compared folded: case, Unicode compatibility letters, zero-width characters and
// separators do not hide a secret; whole words only for the short ones.
TEST(Redact, NormalisedKeysAndValueShapesAreMasked) {
    for (std::string key :
         {"pass", "pwd", "pin", "otp", "tok", "access", "cred", "creds", "Pass\u200Bword",
          "\uFF21\uFF30\uFF29_\uFF2B\uFF25\uFF39", "apiKey", "X-Auth", "accessToken", "db_password",
          "\U0001D429\U0001D41A\U0001D42C\U0001D42C"}) {
        std::string args = nlohmann::json{{key, "v4lue"}, {"path", "/tmp"}}.dump();
        std::string p = redacted_preview(args, RecordArgs::Preview);
        EXPECT_EQ(p.find("v4lue"), std::string::npos) << key << " not masked: " << p;
        EXPECT_NE(p.find("/tmp"), std::string::npos) << p;
    }
    for (std::string key : {"spinner", "author", "footprint", "stock", "monkey", "path"}) {
        std::string args = nlohmann::json{{key, "v4lue"}}.dump();
        EXPECT_NE(redacted_preview(args, RecordArgs::Preview).find("v4lue"), std::string::npos)
            << key << " masked";
    }
    std::string args = nlohmann::json{{"note", "use ghp_0123456789abcdefghijABCDEFGHIJ now"},
                                      {"url", "https://bob:pw@h/x"}}
                           .dump();
    std::string p = redacted_preview(args, RecordArgs::Preview);
    EXPECT_EQ(p.find("ghp_"), std::string::npos) << p;
    EXPECT_EQ(p.find("bob:pw"), std::string::npos) << p;
    EXPECT_NE(p.find("https://***@h/x"), std::string::npos) << p;
}

}  // namespace
}  // namespace warden::journal
