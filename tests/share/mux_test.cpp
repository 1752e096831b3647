// The multiplexer of a shared tree (src/share/mux.hpp), line in, lines out: each client sees
// a server of its own. The negative controls build it with a guard off, as the broker does
// with the multiplexer's guards off (map_ids, check_responses).
#include "share/mux.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace warden::share {
namespace {

using nlohmann::json;

constexpr const char* kInit1 =
    R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"sampling":{}},"clientInfo":{"name":"a","version":"1"}}})";
constexpr const char* kInit2 =
    R"({"jsonrpc":"2.0","id":"x","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"b","version":"1"}}})";

std::vector<Delivery> to(const MuxOutput& out, ClientId c) {
    std::vector<Delivery> d;
    for (const Delivery& l : out.lines)
        if (l.client == c) d.push_back(l);
    return d;
}
bool noted(const MuxOutput& out, const std::string& kind) {
    for (const Note& n : out.notes)
        if (n.kind == kind) return true;
    return false;
}
json j(const std::string& s) {
    return json::parse(s);
}
// Why the tree refuses a client whose first line is `line` ("": it takes it).
std::string refusal(const Multiplexer& mux, const std::string& line) {
    rpc::Classifier c;
    std::string padded = line + std::string(64, ' ');
    return mux.refusal(c.classify(std::string_view(padded.data(), line.size()), padded.size()));
}
constexpr const char* kInit0325 =
    R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{}}})";
constexpr const char* kStatelessList =
    R"({"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}})";

// Two clients initialized on one tree: the server saw one initialize and one initialized.
struct Initialized {
    Multiplexer mux;
    explicit Initialized(bool map = true, bool check = true, bool eras = true)
        : mux(map, check, eras) {
        MuxOutput o1, o2, o3;
        mux.from_client(1, kInit1, o1);
        mux.from_client(2, kInit2, o2);
        EXPECT_TRUE(to(o2, 0).empty()) << "the second initialize reached the server";
        const std::string id = j(to(o1, 0).at(0).line)["id"].dump();
        mux.from_server(
            R"({"jsonrpc":"2.0","id":)" + id +
                R"(,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}})",
            o3);
        EXPECT_EQ(to(o3, 1).size(), 1u);
        EXPECT_EQ(to(o3, 2).size(), 1u);
        EXPECT_EQ(j(to(o3, 1).at(0).line)["id"], 0);
        EXPECT_EQ(j(to(o3, 2).at(0).line)["id"], "x");
        MuxOutput n1, n2;
        mux.from_client(1, R"({"jsonrpc":"2.0","method":"notifications/initialized"})", n1);
        mux.from_client(2, R"({"jsonrpc":"2.0","method":"notifications/initialized"})", n2);
        EXPECT_EQ(to(n1, 0).size(), 1u);
        EXPECT_TRUE(to(n2, 0).empty()) << "notifications/initialized forwarded twice";
    }
};

TEST(ShareMux, HandshakeIsMadeOnceAndEachClientGetsItUnderItsOwnId) {
    Initialized t;
    EXPECT_EQ(t.mux.protocol_version(), "2025-06-18");
    EXPECT_EQ(refusal(t.mux, kInit2), "");
    EXPECT_NE(refusal(t.mux, kInit0325), "") << "another version must get its own tree";
    MuxOutput late;
    t.mux.from_client(
        3,
        R"({"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{}}})",
        late);
    ASSERT_EQ(to(late, 3).size(), 1u);
    EXPECT_TRUE(to(late, 0).empty());
    EXPECT_EQ(j(to(late, 3)[0].line)["result"]["serverInfo"]["name"], "s");
}

// The same id from two clients at once: each answer reaches its own client only, byte for
// byte as the server wrote it but for the id. Negative control: without the mapping the
// server sees one id twice, and one client gets the other's answer.
TEST(ShareMux, SameRequestIdFromTwoClientsAtOnceReachesEachItsOwnAnswer) {
    for (bool map : {true, false}) {
        SCOPED_TRACE(map ? "ids mapped" : "negative control: ids unmapped");
        Initialized t(map);
        MuxOutput a, b, answers;
        t.mux.from_client(
            1,
            R"({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"text":"A"}}})",
            a);
        t.mux.from_client(
            2,
            R"({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"text":"B"}}})",
            b);
        const json ida = j(to(a, 0).at(0).line)["id"], idb = j(to(b, 0).at(0).line)["id"];
        EXPECT_EQ(ida != idb, map);
        EXPECT_EQ(noted(b, "share.id_collision"), !map);
        // The server answers B first, then A.
        t.mux.from_server(R"({"jsonrpc":"2.0","id":)" + idb.dump() +
                              R"(,"result":{"content":[{"type":"text","text":"B"}]}})",
                          answers);
        t.mux.from_server(R"({"jsonrpc":"2.0","id":)" + ida.dump() +
                              R"(,"result":{"content":[{"type":"text","text":"A"}]}})",
                          answers);
        auto for1 = to(answers, 1), for2 = to(answers, 2);
        if (map) {
            ASSERT_EQ(for1.size(), 1u);
            ASSERT_EQ(for2.size(), 1u);
            EXPECT_EQ(
                for1[0].line,
                R"({"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":"A"}]}})");
            EXPECT_EQ(
                for2[0].line,
                R"({"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":"B"}]}})");
        } else {
            // Client 1's request was overwritten: it never gets its answer, client 2 gets one
            // that may be either.
            EXPECT_TRUE(for1.empty());
        }
    }
}

TEST(ShareMux, ProgressReachesOnlyItsOwnerAndListChangedReachesAll) {
    Initialized t;
    MuxOutput a, b, s;
    t.mux.from_client(
        1,
        R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":1}}})",
        a);
    t.mux.from_client(
        2,
        R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":1}}})",
        b);
    const json ta = j(to(a, 0).at(0).line)["params"]["_meta"]["progressToken"];
    const json tb = j(to(b, 0).at(0).line)["params"]["_meta"]["progressToken"];
    EXPECT_NE(ta, tb);
    t.mux.from_server(
        R"({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":)" +
            tb.dump() + R"(,"progress":1}})",
        s);
    ASSERT_EQ(to(s, 2).size(), 1u);
    EXPECT_TRUE(to(s, 1).empty());
    EXPECT_EQ(j(to(s, 2)[0].line)["params"]["progressToken"], 1);
    MuxOutput lc;
    t.mux.from_server(R"({"jsonrpc":"2.0","method":"notifications/tools/list_changed"})", lc);
    EXPECT_EQ(to(lc, 1).size(), 1u);
    EXPECT_EQ(to(lc, 2).size(), 1u);
    // A cancellation names the client's id and reaches the server under ours.
    MuxOutput c;
    t.mux.from_client(
        2, R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}})", c);
    ASSERT_EQ(to(c, 0).size(), 1u);
    EXPECT_EQ(j(to(c, 0)[0].line)["params"]["requestId"], j(to(b, 0).at(0).line)["id"]);
}

TEST(ShareMux, SubscribedOnceUpdatesOnlyToSubscribersUnsubscribedWhenTheLastLeaves) {
    Initialized t;
    MuxOutput s1, s2, u, l1, l2;
    const std::string sub =
        R"({"jsonrpc":"2.0","id":9,"method":"resources/subscribe","params":{"uri":"f://a"}})";
    t.mux.from_client(1, sub, s1);
    t.mux.from_client(2, sub, s2);
    EXPECT_EQ(to(s1, 0).size(), 1u);
    EXPECT_TRUE(to(s2, 0).empty()) << "subscribed twice at the server";
    EXPECT_EQ(to(s2, 2).size(), 1u) << "the second subscriber got no answer";
    MuxOutput answered;
    t.mux.from_server(
        R"({"jsonrpc":"2.0","id":)" + j(to(s1, 0).at(0).line)["id"].dump() + R"(,"result":{}})",
        answered);
    EXPECT_EQ(to(answered, 1).size(), 1u);
    MuxOutput other;
    t.mux.from_client(3, kInit2, other);
    t.mux.from_server(
        R"({"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"f://a"}})",
        u);
    EXPECT_EQ(to(u, 1).size(), 1u);
    EXPECT_EQ(to(u, 2).size(), 1u);
    EXPECT_TRUE(to(u, 3).empty()) << "an update reached a client not subscribed";
    t.mux.leave(1, l1);
    EXPECT_TRUE(to(l1, 0).empty());
    t.mux.leave(2, l2);
    ASSERT_EQ(to(l2, 0).size(), 1u);
    EXPECT_EQ(j(to(l2, 0)[0].line)["method"], "resources/unsubscribe");
}

// A server request goes to the one client with a call in flight that declared the
// capability; a client's response to a request it was never sent is dropped (negative
// control: with the check off it reaches the server).
TEST(ShareMux, ServerRequestsGoToTheOneAbleClientAndStrayResponsesAreDropped) {
    for (bool check : {true, false}) {
        SCOPED_TRACE(check ? "checked" : "negative control: responses unchecked");
        Initialized t(true, check);
        MuxOutput none;
        t.mux.from_server(
            R"({"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{}})", none);
        ASSERT_EQ(to(none, 0).size(), 1u);
        EXPECT_TRUE(j(to(none, 0)[0].line).contains("error"));
        EXPECT_TRUE(noted(none, "share.server_request_refused"));
        MuxOutput a, b, routed, stray, good;
        t.mux.from_client(
            1, R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}})", a);
        t.mux.from_client(
            2, R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}})", b);
        t.mux.from_server(
            R"({"jsonrpc":"2.0","id":"s2","method":"sampling/createMessage","params":{}})", routed);
        EXPECT_EQ(to(routed, 1).size(), 1u) << "client 1 alone declared sampling";
        EXPECT_TRUE(to(routed, 2).empty());
        t.mux.from_client(2, R"({"jsonrpc":"2.0","id":"s2","result":{"model":"evil"}})", stray);
        EXPECT_EQ(to(stray, 0).empty(), check);
        EXPECT_EQ(noted(stray, "share.response_dropped"), check);
        t.mux.from_client(1, R"({"jsonrpc":"2.0","id":"s2","result":{"model":"m"}})", good);
        EXPECT_EQ(to(good, 0).size(), check ? 1u : 0u + to(good, 0).size());
    }
}

TEST(ShareMux, AnAnswerGivenTwiceIsDroppedAndALeavingClientsCallsAreCancelled) {
    Initialized t;
    MuxOutput a, first, second, left, late;
    t.mux.from_client(1, R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}})",
                      a);
    const std::string id = j(to(a, 0).at(0).line)["id"].dump();
    const std::string answer = R"({"jsonrpc":"2.0","id":)" + id + R"(,"result":{}})";
    t.mux.from_server(answer, first);
    t.mux.from_server(answer, second);
    EXPECT_EQ(to(first, 1).size(), 1u);
    EXPECT_TRUE(to(second, 1).empty());
    EXPECT_TRUE(noted(second, "share.answer_dropped"));

    MuxOutput b;
    t.mux.from_client(
        2, R"({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"slow"}})", b);
    const std::string bid = j(to(b, 0).at(0).line)["id"].dump();
    t.mux.leave(2, left);
    ASSERT_EQ(to(left, 0).size(), 1u);
    EXPECT_EQ(j(to(left, 0)[0].line)["method"], "notifications/cancelled");
    EXPECT_EQ(j(to(left, 0)[0].line)["params"]["requestId"].dump(), bid);
    EXPECT_TRUE(noted(left, "share.abandoned"));
    t.mux.from_server(R"({"jsonrpc":"2.0","id":)" + bid + R"(,"result":{}})", late);
    EXPECT_TRUE(late.lines.empty());
    EXPECT_FALSE(noted(late, "share.answer_dropped")) << "an abandoned call's answer is expected";
}

// The server gets the most verbose level asked; each client only messages at or above its own.
TEST(ShareMux, LogMessagesReachEachClientAtItsOwnLevel) {
    Initialized t;
    MuxOutput a, b, m;
    t.mux.from_client(
        1, R"({"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"error"}})", a);
    t.mux.from_client(
        2, R"({"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"debug"}})", b);
    EXPECT_EQ(to(a, 0).size(), 1u);
    EXPECT_EQ(to(b, 0).size(), 1u) << "debug is more verbose than error: the server must hear it";
    MuxOutput c;
    t.mux.from_client(
        1, R"({"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"info"}})", c);
    EXPECT_TRUE(to(c, 0).empty()) << "info is less verbose than debug: answered here";
    EXPECT_EQ(to(c, 1).size(), 1u);
    t.mux.from_server(
        R"({"jsonrpc":"2.0","method":"notifications/message","params":{"level":"debug","data":"d"}})",
        m);
    EXPECT_TRUE(to(m, 1).empty());
    EXPECT_EQ(to(m, 2).size(), 1u);
}

TEST(ShareMux, PingIsAnsweredHereAndStatelessRequestsAreMappedWithoutHandshake) {
    Multiplexer mux;
    MuxOutput p, s;
    mux.from_client(1, R"({"jsonrpc":"2.0","id":3,"method":"ping"})", p);
    ASSERT_EQ(to(p, 1).size(), 1u);
    EXPECT_TRUE(to(p, 0).empty());
    mux.from_client(1, kStatelessList, s);
    ASSERT_EQ(to(s, 0).size(), 1u);
    EXPECT_EQ(mux.protocol_version(), "") << "no handshake was made";
}

// A server's connection serves one era: the tree takes the era of the first request that names
// one. A client of the other era is not the tree's (the broker gives it its own), and a request
// of the other era from a client on the tree is answered here with an error, never forwarded to
// a server that would answer it as its own era's. A discovery the server does not know took
// no era. Negative control (share_eras_mixed): the request reaches the server.
TEST(ShareMux, ATreeServesTheEraItsServerTookAndNoOther) {
    for (bool keyed : {true, false}) {
        SCOPED_TRACE(keyed ? "eras keyed" : "negative control: share_eras_mixed");
        Initialized t(true, true, keyed);
        EXPECT_EQ(t.mux.era(), rpc::Era::legacy);
        EXPECT_EQ(refusal(t.mux, kStatelessList).empty(), !keyed);
        MuxOutput o;
        t.mux.from_client(1, kStatelessList, o);
        if (keyed) {
            EXPECT_TRUE(to(o, 0).empty()) << "a 2026-07-28 request reached a legacy connection";
            ASSERT_EQ(to(o, 1).size(), 1u);
            EXPECT_EQ(j(to(o, 1)[0].line)["id"], 3);
            EXPECT_TRUE(j(to(o, 1)[0].line).contains("error"));
            EXPECT_TRUE(noted(o, "share.era_refused"));
        } else {
            EXPECT_EQ(to(o, 0).size(), 1u);
        }
    }
    // A 2026-07-28 tree: a legacy initialize is not its own.
    Multiplexer modern;
    MuxOutput m;
    modern.from_client(1, kStatelessList, m);
    EXPECT_EQ(modern.era(), rpc::Era::stateless);
    EXPECT_NE(refusal(modern, kInit1).find("2026-07-28"), std::string::npos);
    // A legacy-only server does not know server/discover: the tree took no era, and the next
    // client's initialize is its.
    Multiplexer legacy_only;
    MuxOutput d, e;
    legacy_only.from_client(
        1,
        R"({"jsonrpc":"2.0","id":0,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}})",
        d);
    EXPECT_NE(refusal(legacy_only, kInit1), "") << "discover in flight: the era is taken";
    const std::string ours = j(to(d, 0).at(0).line)["id"].dump();
    legacy_only.from_server(R"({"jsonrpc":"2.0","id":)" + ours +
                                R"(,"error":{"code":-32601,"message":"Method not found"}})",
                            e);
    ASSERT_EQ(to(e, 1).size(), 1u);
    EXPECT_EQ(legacy_only.era(), rpc::Era::none);
    EXPECT_EQ(refusal(legacy_only, kInit1), "");
}

// A 2026-07-28 listen stream's notifications (its acknowledgement first) name the stream by the
// id of the request that opened it — ours, at the server: each goes to that one client, under
// the id it used, though both clients opened a stream with the same id.
TEST(ShareMux, AListenStreamsNotificationsReachOnlyTheClientThatOpenedIt) {
    Multiplexer mux;  // a 2026-07-28 tree: its streams' era
    const std::string listen =
        R"({"jsonrpc":"2.0","id":"s1","method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"filter":{}}})";
    MuxOutput a, b;
    mux.from_client(1, listen, a);
    mux.from_client(2, listen, b);
    const json ours_b = j(to(b, 0).at(0).line)["id"];
    EXPECT_NE(j(to(a, 0).at(0).line)["id"], ours_b);
    MuxOutput s;
    mux.from_server(
        R"({"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":)" +
            ours_b.dump() + "}}}",
        s);
    EXPECT_TRUE(to(s, 1).empty());
    ASSERT_EQ(to(s, 2).size(), 1u);
    EXPECT_EQ(j(to(s, 2)[0].line)["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
              "s1");
}

}  // namespace
}  // namespace warden::share
