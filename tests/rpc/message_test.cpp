#include "rpc/message.hpp"

#include <string>

#include <gtest/gtest.h>

namespace warden::rpc {
namespace {

TEST(Message, RequestWithNumberId) {
    Classifier c;
    auto m = c.classify(R"({"jsonrpc":"2.0","id":17,"method":"tools/list"})");
    EXPECT_EQ(m.kind, Kind::request);
    EXPECT_EQ(m.id.type, IdType::number);
    EXPECT_EQ(m.id.raw, "17");
    EXPECT_EQ(m.method, "tools/list");
    EXPECT_EQ(m.tool, "");
}

TEST(Message, NumberAndStringIdsDiffer) {
    Classifier c;
    auto n = c.classify(R"({"jsonrpc":"2.0","id":17,"method":"ping"})");
    std::string num_raw(n.id.raw);
    auto s = c.classify(R"({"jsonrpc":"2.0","id" : "17" ,"method":"ping"})");
    EXPECT_EQ(s.id.type, IdType::string);
    EXPECT_EQ(s.id.raw, "\"17\"");
    EXPECT_NE(num_raw, std::string(s.id.raw));
    EXPECT_FALSE((Id{IdType::number, num_raw} == Id{s.id.type, s.id.raw}));
    auto z = c.classify(R"({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}})");
    EXPECT_EQ(z.kind, Kind::response);
    EXPECT_EQ(z.id.type, IdType::null);
    EXPECT_EQ(z.id.raw, "null");
}

TEST(Message, NotificationHasNoId) {
    Classifier c;
    auto m = c.classify(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
    EXPECT_EQ(m.kind, Kind::notification);
    EXPECT_EQ(m.id.type, IdType::none);
    EXPECT_EQ(m.method, "notifications/initialized");
}

TEST(Message, ToolNameWhateverTheMemberOrder) {
    Classifier c;
    auto a = c.classify(
        R"({"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"sleep","arguments":{"ms":5}}})");
    EXPECT_EQ(a.kind, Kind::request);
    EXPECT_EQ(a.tool, "sleep");
    EXPECT_EQ(a.arguments, R"({"ms":5})");
    auto b = c.classify(
        R"({"params":{"arguments":{"name":"inner"},"name":"echo\u0021"},"method":"tools/call","id":3,"jsonrpc":"2.0"})");
    EXPECT_EQ(b.tool, "echo!");
    auto p = c.classify(R"({"jsonrpc":"2.0","id":4,"method":"prompts/get","params":{"name":"x"}})");
    EXPECT_EQ(p.tool, "");  // only tools/call names a tool
}

TEST(Message, ResponseOutcomes) {
    Classifier c;
    auto ok = c.classify(R"({"jsonrpc":"2.0","id":1,"result":{"content":[]}})");
    EXPECT_EQ(ok.kind, Kind::response);
    EXPECT_EQ(ok.outcome, Outcome::ok);
    auto err = c.classify(R"({"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}})");
    EXPECT_EQ(err.outcome, Outcome::rpc_error);
    auto tool = c.classify(R"({"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":true}})");
    EXPECT_EQ(tool.outcome, Outcome::tool_error);
    auto notool = c.classify(R"({"jsonrpc":"2.0","id":1,"result":{"isError":false}})");
    EXPECT_EQ(notool.outcome, Outcome::ok);
}

// The era of a request: `_meta` naming a protocol version (or server/discover) is the
// stateless 2026-07-28 revision; initialize is legacy, with the version it asks for; a legacy
// session's other requests name none. A nested _meta (inside arguments) is not the request's.
TEST(Message, EraOfARequest) {
    Classifier c;
    auto s = c.classify(
        R"({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}})");
    EXPECT_EQ(s.era, Era::stateless);
    EXPECT_EQ(s.protocol_version, "2026-07-28");
    auto d = c.classify(
        R"({"jsonrpc":"2.0","id":"server-discover-probe-1","method":"server/discover"})");
    EXPECT_EQ(d.era, Era::stateless);
    EXPECT_EQ(d.protocol_version, "");
    auto i = c.classify(
        R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}})");
    EXPECT_EQ(i.era, Era::legacy);
    EXPECT_EQ(i.protocol_version, "2025-11-25");
    auto l = c.classify(
        R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x","arguments":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}})");
    EXPECT_EQ(l.era, Era::none);
    auto r = c.classify(
        R"({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x","inputResponses":{}}})");
    EXPECT_EQ(r.input_responses, "{}");
    EXPECT_EQ(l.input_responses, "");
}

TEST(Message, InputRequiredIsItsOwnOutcome) {
    Classifier c;
    auto m = c.classify(
        R"({"jsonrpc":"2.0","id":1,"result":{"isError":false,"resultType":"input_required","inputRequests":{}}})");
    EXPECT_EQ(m.outcome, Outcome::input_required);
    auto done = c.classify(R"({"jsonrpc":"2.0","id":1,"result":{"resultType":"complete"}})");
    EXPECT_EQ(done.outcome, Outcome::ok);
}

TEST(Message, InvalidLines) {
    Classifier c;
    for (std::string_view bad : {"not json", "", "   ", R"({"id":1,)", "17", R"("str")",
                                 R"({"id":1,"method":"x"} trailing)", R"({"id":[1],"method":"x"})",
                                 R"({"jsonrpc":"2.0"})", R"({"id":1})"}) {
        auto m = c.classify(bad);
        EXPECT_EQ(m.kind, Kind::invalid) << bad;
        EXPECT_FALSE(m.reason.empty()) << bad;
        EXPECT_FALSE(m.utf8_error) << bad;
    }
    // JSON that is not JSON-RPC is still JSON (the stdout guard lets it through).
    EXPECT_TRUE(c.classify(R"({"id":1})").json);
    EXPECT_TRUE(c.classify(R"({"jsonrpc":"2.0"})").json);
    EXPECT_FALSE(c.classify("Server started on port 3000").json);
    EXPECT_FALSE(c.classify(R"({"id":1,"method":"x"} trailing)").json);
    EXPECT_TRUE(c.classify(R"({"id":1,"method":"x"})").json);
}

TEST(Message, InvalidUtf8IsInvalidButFlagged) {
    Classifier c;
    std::string line =
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":{\"s\":\"\xff\xfe\"}}";
    auto m = c.classify(line);
    EXPECT_EQ(m.kind, Kind::invalid);
    EXPECT_TRUE(m.utf8_error);
}

TEST(Message, BatchListsMembers) {
    Classifier c;
    auto m = c.classify(
        R"([{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"n"},{"jsonrpc":"2.0","id":"x","result":{}},5])");
    ASSERT_EQ(m.kind, Kind::batch);
    ASSERT_NE(m.members, nullptr);
    ASSERT_EQ(m.members->size(), 4u);
    EXPECT_EQ((*m.members)[0].kind, Kind::request);
    EXPECT_EQ((*m.members)[1].kind, Kind::notification);
    EXPECT_EQ((*m.members)[2].kind, Kind::response);
    EXPECT_EQ((*m.members)[2].id.raw, "\"x\"");
    EXPECT_EQ((*m.members)[3].kind, Kind::invalid);
    EXPECT_EQ(c.classify("[]").kind, Kind::invalid);
}

TEST(Message, ClassifiesInPlaceWithPadding) {
    Classifier c;
    std::string buf = R"({"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo"}})";
    size_t len = buf.size();
    buf.append("\n{\"next\":1}\n");
    buf.append(64, ' ');
    auto m = c.classify(std::string_view(buf.data(), len), buf.size());
    EXPECT_EQ(m.kind, Kind::request);
    EXPECT_EQ(m.tool, "echo");
    // The raw id points into the caller's buffer: no copy was made.
    EXPECT_GE(m.id.raw.data(), buf.data());
    EXPECT_LT(m.id.raw.data(), buf.data() + len);
}

}  // namespace
// The stdout guard diverts what is not JSON (shim/relay.hpp): classification stops at the first
// member that rules JSON-RPC out, but `json` still says whether the whole text is JSON.
TEST(Message, JsonThatIsNotJsonRpcIsStillJson) {
    Classifier c;
    for (std::string_view json : {"[]", R"({"id":{"a":1},"result":1})", R"({"method":1})", "42",
                                  R"("text")", "null", R"({"x":[1,{"y":true}]})"}) {
        Message m = c.classify(json);
        EXPECT_EQ(m.kind, Kind::invalid) << json;
        EXPECT_TRUE(m.json) << json;
    }
    for (std::string_view noise : {"not json", R"({"method":1)", R"({"id":{"a":1}} x)",
                                   R"({"method":1,"params":[1,]})", ""}) {
        Message m = c.classify(noise);
        EXPECT_EQ(m.kind, Kind::invalid) << noise;
        EXPECT_FALSE(m.json) << noise;
    }
}

}  // namespace warden::rpc
