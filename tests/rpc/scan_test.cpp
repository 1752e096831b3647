#include "rpc/scan.hpp"

#include <string>
#include <string_view>

#include <gtest/gtest.h>

namespace warden::rpc {
namespace {

// Feeds `line` in pieces of `step` bytes, as the relay feeds an oversize line.
Message scan_in_pieces(Scan& s, std::string_view line, size_t step) {
    s.reset();
    for (size_t i = 0; i < line.size(); i += step)
        s.feed(line.substr(i, step));
    return s.message(line);
}

TEST(Scan, AnErrorAnswerReadInPiecesGivesItsIdAndCode) {
    const std::string line =
        R"({"jsonrpc":"2.0","id":"a\"b","error":{"code":-32601,"message":"no such method"}})";
    for (size_t step : {size_t{1}, size_t{3}, line.size()}) {
        Scan s;
        Message m = scan_in_pieces(s, line, step);
        EXPECT_TRUE(s.response()) << step;
        EXPECT_EQ(m.kind, Kind::response);
        EXPECT_EQ(s.id_type, IdType::string);
        EXPECT_EQ(s.id, R"("a\"b")");
        EXPECT_EQ(s.error_code, -32601);
        EXPECT_EQ(m.outcome, Outcome::rpc_error);
    }
}

TEST(Scan, AToolErrorAndAnInputRequiredResultAreNotOk) {
    Scan s;
    Message m =
        scan_in_pieces(s, R"({"id":7,"result":{"content":[{"text":"}{]["}],"isError":true}})", 5);
    EXPECT_EQ(s.id_type, IdType::number);
    EXPECT_EQ(m.outcome, Outcome::tool_error);
    m = scan_in_pieces(s, R"({"id":8,"result":{"resultType":"input_required"}})", 4);
    EXPECT_EQ(s.id, "8");
    EXPECT_EQ(m.outcome, Outcome::input_required);
}

TEST(Scan, ARequestGivesItsMethodAndToolAndABatchIsNoObject) {
    Scan s;
    Message m = scan_in_pieces(
        s, R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}})", 2);
    EXPECT_EQ(m.kind, Kind::request);
    EXPECT_EQ(m.method, "tools/call");
    EXPECT_EQ(m.tool, "echo");
    m = scan_in_pieces(s, R"([{"id":1,"result":{}}])", 3);
    EXPECT_EQ(m.kind, Kind::invalid);
    EXPECT_TRUE(m.json);
    EXPECT_FALSE(starts_like_json("  noise"));
}

}  // namespace
}  // namespace warden::rpc
