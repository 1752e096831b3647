// A call's two records are written as canonical text by their builders (events.cpp, "A call's
// two records, written as text"): each text is exactly canonical() of the whole data, member
// for member, in every shape a request and an answer take; and a text that cannot be what its
// data says is refused, never committed.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "journal/canonical_json.hpp"
#include "journal/journal.hpp"
#include "journal/prepared.hpp"

namespace warden::journal {
namespace {

// The request's whole data, member by member, as the record must hold it.
Json whole_request(const Request& r) {
    Json d = Json::object();
    d["id"] = r.id;
    d["method"] = bytes_value(r.method);
    d["tool"] = bytes_value(r.tool);
    d["bytes"] = r.bytes;
    d["record_args"] = r.record == RecordArgs::None      ? "none"
                       : r.record == RecordArgs::Preview ? "preview"
                                                         : "full";
    if (!r.arguments_json.empty()) {
        d["argument_digest"] = argument_digest(r.arguments_json);
        d["argument_bytes"] = static_cast<int64_t>(r.arguments_json.size());
        if (r.record != RecordArgs::None)
            d["arguments"] = bytes_value(redacted_preview(r.arguments_json, r.record));
    }
    if (!r.input_responses_json.empty()) {
        d["input_responses_digest"] = argument_digest(r.input_responses_json);
        d["input_responses_bytes"] = static_cast<int64_t>(r.input_responses_json.size());
        if (r.record != RecordArgs::None)
            d["input_responses"] = bytes_value(redacted_preview(r.input_responses_json, r.record));
    }
    if (!r.retry_of_id.is_null()) d["retry_of_id"] = r.retry_of_id;
    if (r.stream) d["stream"] = true;
    if (r.traceparent) d["traceparent"] = *r.traceparent;
    if (r.oversize) {
        d["oversize"] = true;
        d["id_in_prefix"] = r.id_in_prefix;
    }
    return d;
}

TEST(JournalRecordText, RequestTextIsTheCanonicalFormOfItsWholeData) {
    const std::string args = R"({"path":"/tmp/x","token":"sk-abcdefghijklmnop","n":[1,2]})";
    const std::string answers = R"({"confirm":{"action":"accept","password":"hunter2"}})";
    std::vector<Request> shapes;
    for (RecordArgs mode : {RecordArgs::None, RecordArgs::Preview, RecordArgs::Full}) {
        Request r{"s-1", rpc_id_number(7), "tools/call", "read", args, mode, 123};
        shapes.push_back(r);
        r.input_responses_json = answers;
        r.retry_of_id = rpc_id_string("6");
        shapes.push_back(r);
    }
    Request bare{"s-1", rpc_id_string("a\"b"), "ping", "", "", RecordArgs::Preview, 40};
    shapes.push_back(bare);
    bare.stream = true;
    bare.method = "subscriptions/listen";
    bare.traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    shapes.push_back(bare);
    Request oversize{"s-1", rpc_id_null(), "tools/call", "w\xFFrite", "", RecordArgs::Preview, 9};
    oversize.oversize = true;
    shapes.push_back(oversize);
    oversize.id_in_prefix = true;
    oversize.id = rpc_id_from_json_text("1.5").value();
    shapes.push_back(oversize);
    for (const Request& r : shapes) {
        Event e = activity_request(r);
        EXPECT_EQ(e.data_text, *canonical(whole_request(r))) << e.data_text;
        if (r.record != RecordArgs::Full) {  // full: the user's opt-out of redaction
            EXPECT_EQ(e.data_text.find("hunter2"), std::string::npos);
            EXPECT_EQ(e.data_text.find("sk-abcdefghijklmnop"), std::string::npos);
        }
        // What is read back before the commit is there: the projection's columns, the id
        // (its canonical text), a text column empty for bytes that are not UTF-8.
        ASSERT_TRUE(e.call);
        EXPECT_EQ(e.call->id, *canonical(r.id));
        EXPECT_EQ(e.call->method, valid_utf8(r.method) ? r.method : "");
        EXPECT_EQ(e.call->tool, valid_utf8(r.tool) ? r.tool : "");
        EXPECT_TRUE(e.data.is_null());
    }
}

TEST(JournalRecordText, ResponseTextIsTheCanonicalFormOfItsWholeData) {
    for (std::optional<int64_t> code : {std::optional<int64_t>{}, std::optional<int64_t>{-32601}})
        for (int64_t request_seq : {int64_t{42}, int64_t{-3}, int64_t{0}}) {
            Response r{"s-1", request_seq, rpc_id_number(9), Outcome::jsonrpc_error, 77,
                       1234,  code};
            Event e = activity_response(r);
            Json whole{{"request_seq", r.request_seq},
                       {"id", r.id},
                       {"outcome", outcome_name(r.outcome)},
                       {"bytes", r.bytes},
                       {"duration_ns", r.duration_ns}};
            if (code) whole["error_code"] = *code;
            EXPECT_EQ(e.data_text, *canonical(whole)) << e.data_text;
            ASSERT_TRUE(e.call);
            EXPECT_EQ(e.call->id, *canonical(r.id));
            EXPECT_EQ(e.call->outcome, "jsonrpc_error");
            EXPECT_EQ(e.call->request_seq, request_seq);
            EXPECT_EQ(e.call->duration_ns, 1234);
            EXPECT_EQ(e.call->bytes, 77);
        }
}

// An id canonical() refuses (a float where an id is typed) leaves no text, and the record
// fails on it as a Json's would: nothing is written without its digest or preview.
TEST(JournalRecordText, AnIdThatCannotBeCanonicalFailsTheRecord) {
    Request r{"s-1", Json(1.5), "tools/call", "t", R"({"a":1})", RecordArgs::Preview, 10};
    Event e = activity_request(r);
    EXPECT_TRUE(e.data_text.empty());
    EXPECT_FALSE(e.call);
    auto p = prepare_record(e, "origin");
    ASSERT_FALSE(p);
    EXPECT_NE(p.error().message.find("floating-point"), std::string::npos) << p.error().message;
    r.id = rpc_id_number(1);
    r.retry_of_id = Json(2.5);
    e = activity_request(r);
    EXPECT_TRUE(e.data_text.empty());
    EXPECT_FALSE(prepare_record(e, "origin"));
}

// A text is never written again from its partial data: one whose ticket is not where the
// writer puts the request's seq is refused when it is prepared.
TEST(JournalRecordText, ATextWhoseTicketIsNotLastIsRefused) {
    Event e = activity_response({"s-1", -4, rpc_id_number(1), Outcome::ok, 1, 1, {}});
    ASSERT_TRUE(prepare_record(e, "origin"));
    e.data_text = R"({"request_seq":-4,"zz":1})";
    auto p = prepare_record(e, "origin");
    ASSERT_FALSE(p);
    EXPECT_NE(p.error().message.find("does not end with its request_seq"), std::string::npos);
}

}  // namespace
}  // namespace warden::journal
