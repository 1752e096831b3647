// A streaming scan of one JSON-RPC object: what the journal wants of a message read in
// pieces, never held whole. No I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "rpc/message.hpp"

namespace warden::rpc {

// The first non-blank byte opens an object or an array.
bool starts_like_json(std::string_view s);

// Reads one JSON object in pieces, never holding it, for what the journal wants of a response:
// the top-level "id" (its text as sent), "method", "result" or "error", error.code,
// result.isError and result.resultType (an input_required answer is not an ok one, however long).
// The relay needs it where the classifier cannot help: an oversize line, which is never held whole
// (rpc/framer.hpp), and the code of an error response, which the classifier does not keep. It is
// not a validator: it follows strings and nesting only, compares keys as written (no unescaping)
// and gives up on anything that does not start as an object (a batch, noise). Strings are skipped
// with one search each, so a long text costs little; a captured value longer than kMaxValue is not
// kept (such an id matches nothing).
struct Scan {
    static constexpr size_t kMaxValue = 256;
    enum class Key : uint8_t {
        other,
        id,
        method,
        params,
        result,
        error,
        code,
        is_error,
        result_type,
        tool
    };

    // Results.
    IdType id_type = IdType::none;
    std::string id;  // the id's JSON text, as Id::raw
    // A request's "method" and params.name, string contents as written (no unescaping); empty
    // until their value is complete (a client request read in pieces: rpc/framer.hpp).
    std::string method, tool;
    std::optional<int64_t> error_code;
    bool has_method = false, has_result = false, has_error = false, tool_error = false;
    bool input_required = false;  // result.resultType == "input_required" (2026-07-28)
    bool done = false;            // the object closed

    void reset();

    bool response() const {
        return done && !has_method && id_type != IdType::none && (has_result || has_error);
    }
    Outcome outcome() const;
    Message message(std::string_view content) const;
    void feed(std::string_view b);

  private:
    size_t string_bytes(std::string_view b, size_t i);
    void string_text(std::string_view t);
    void keep(std::string_view t);
    void member_starts();
    void value_ends();

    bool dead_ = false, started_ = false, in_string_ = false, escape_ = false;
    bool after_string_ = false, value_overflow_ = false;
    int depth_ = 0, string_depth_ = 0, capture_depth_ = 0;
    char name_[12] = {};  // the first bytes of the last string at depth 1 or 2 (a key?)
    size_t name_len_ = 0;
    Key top_ = Key::other;      // the depth-1 member being read
    Key capture_ = Key::other;  // whose scalar value value_ collects (other: none)
    std::string value_;
};

}  // namespace warden::rpc
