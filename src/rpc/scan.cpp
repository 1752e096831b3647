#include "rpc/scan.hpp"

#include <algorithm>
#include <charconv>
#include <system_error>

#include "fault/faults.hpp"

namespace warden::rpc {

bool starts_like_json(std::string_view s) {
    size_t i = s.find_first_not_of(" \t\r\n");
    return i != std::string_view::npos && (s[i] == '{' || s[i] == '[');
}

void Scan::reset() {
    id_type = IdType::none;
    id.clear();
    method.clear();
    tool.clear();
    error_code.reset();
    has_method = has_result = has_error = tool_error = input_required = done = false;
    dead_ = started_ = in_string_ = escape_ = after_string_ = value_overflow_ = false;
    depth_ = string_depth_ = capture_depth_ = 0;
    name_len_ = 0;
    top_ = capture_ = Key::other;
    value_.clear();
}

Outcome Scan::outcome() const {
    if (input_required && !Faults::from_env().oversize_outcome_unscanned)
        return Outcome::input_required;
    return has_error ? Outcome::rpc_error : tool_error ? Outcome::tool_error : Outcome::ok;
}

// What a whole line, scanned instead of parsed (relay.hpp, "Long lines"), is as far as a
// scan can tell. Views point into this Scan.
Message Scan::message(std::string_view content) const {
    Message m;
    m.json = starts_like_json(content);
    m.id = Id{id_type, id};
    if (done && has_method) {
        m.kind = id_type == IdType::none ? Kind::notification : Kind::request;
        m.method = method;
        m.tool = tool;
    } else if (done && (has_result || has_error)) {
        m.kind = Kind::response;
        m.outcome = outcome();
    } else {
        m.kind = Kind::invalid;
        m.reason = "a line longer than the parse limit that is not one JSON-RPC object";
    }
    return m;
}

void Scan::feed(std::string_view b) {
    size_t i = 0;
    while (i < b.size() && !dead_ && !done) {
        if (in_string_) {
            i = string_bytes(b, i);
            continue;
        }
        char c = b[i++];
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n') continue;
        if (!started_) {
            started_ = true;
            dead_ = c != '{';
            depth_ = 1;
            continue;
        }
        bool string_before = after_string_;
        after_string_ = false;
        switch (c) {
            case '"':
                in_string_ = true;
                string_depth_ = depth_;
                name_len_ = 0;
                if (capture_ != Key::other) keep("\"");
                break;
            case ':':
                if (string_before && string_depth_ == depth_ && depth_ <= 2) member_starts();
                break;
            case ',':
                value_ends();
                break;
            case '{':
            case '[':
                if (capture_ != Key::other && depth_ == capture_depth_) capture_ = Key::other;
                ++depth_;
                break;
            case '}':
            case ']':
                value_ends();
                done = --depth_ == 0;
                break;
            default:
                if (capture_ != Key::other) keep(std::string_view(&c, 1));
        }
    }
}

// Inside a string from b[i]: up to and including its closing quote, or the end of b.
size_t Scan::string_bytes(std::string_view b, size_t i) {
    if (escape_) {  // the byte after a backslash, maybe in the next piece
        escape_ = false;
        string_text(b.substr(i, 1));
        return i + 1;
    }
    size_t j = b.find_first_of("\"\\", i);
    size_t stop = j == std::string_view::npos ? b.size() : j;
    string_text(b.substr(i, stop - i));
    if (stop == b.size()) return stop;
    if (b[j] == '\\') {
        escape_ = true;
        string_text("\\");
        return j + 1;
    }
    in_string_ = false;
    after_string_ = true;
    if (capture_ != Key::other) keep("\"");
    return j + 1;
}

void Scan::string_text(std::string_view t) {
    if (capture_ != Key::other) keep(t);
    if (string_depth_ <= 2) {
        for (size_t k = 0; k < t.size() && name_len_ + k < sizeof name_; ++k)
            name_[name_len_ + k] = t[k];
        name_len_ += t.size();
    }
}

void Scan::keep(std::string_view t) {
    if (value_.size() + t.size() <= kMaxValue)
        value_.append(t);
    else
        value_overflow_ = true;
}

// A key and its colon at depth 1 or 2: which member this is, and whether to keep its value
// (deeper members never matter).
void Scan::member_starts() {
    std::string_view name(name_, std::min(name_len_, sizeof name_));
    if (name_len_ > sizeof name_) name = {};
    Key k = Key::other;
    if (depth_ == 1) {
        top_ = name == "id"       ? Key::id
               : name == "method" ? Key::method
               : name == "result" ? Key::result
               : name == "error"  ? Key::error
               : name == "params" ? Key::params
                                  : Key::other;
        has_method = has_method || top_ == Key::method;
        has_result = has_result || top_ == Key::result;
        has_error = has_error || top_ == Key::error;
        if (top_ == Key::id || top_ == Key::method) k = top_;
    } else if (depth_ == 2) {
        if (top_ == Key::error && name == "code") k = Key::code;
        if (top_ == Key::result && name == "isError") k = Key::is_error;
        if (top_ == Key::result && name == "resultType") k = Key::result_type;
        if (top_ == Key::params && name == "name") k = Key::tool;
    }
    capture_ = k;
    capture_depth_ = depth_;
    value_.clear();
    value_overflow_ = false;
}

// A `,` or a closing bracket at the current depth: a kept scalar value is complete.
void Scan::value_ends() {
    if (capture_ == Key::other || depth_ != capture_depth_) return;
    Key k = capture_;
    capture_ = Key::other;
    if (value_overflow_ || value_.empty()) return;
    if (k == Key::id) {
        id = value_;
        id_type = value_[0] == '"'                                             ? IdType::string
                  : value_ == "null"                                           ? IdType::null
                  : value_[0] == '-' || (value_[0] >= '0' && value_[0] <= '9') ? IdType::number
                                                                               : IdType::none;
    } else if (k == Key::code) {
        int64_t v = 0;
        auto [end, ec] = std::from_chars(value_.data(), value_.data() + value_.size(), v);
        if (ec == std::errc() && end == value_.data() + value_.size()) error_code = v;
    } else if (k == Key::is_error) {
        tool_error = value_ == "true";
    } else if (k == Key::result_type) {
        input_required = value_ == R"("input_required")";
    } else if ((k == Key::method || k == Key::tool) && value_.size() >= 2 &&
               value_.front() == '"' && value_.back() == '"') {
        (k == Key::method ? method : tool).assign(value_, 1, value_.size() - 2);
    }
}

}  // namespace warden::rpc
