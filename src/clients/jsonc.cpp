#include "clients/jsonc.hpp"

#include <cstdint>

#include <fmt/format.h>

#include "sys/json_string.hpp"

namespace warden::clients {

const JsonMember* JsonValue::member(std::string_view key) const {
    const JsonMember* found = nullptr;
    for (const auto& m : members)
        if (m.key == key) found = &m;
    return found;
}

const JsonValue* JsonValue::find(std::string_view key) const {
    const JsonMember* m = member(key);
    return m ? &m->value : nullptr;
}

TextPosition position_of(std::string_view text, size_t offset) {
    TextPosition p;
    if (offset > text.size()) offset = text.size();
    for (size_t i = 0; i < offset; ++i) {
        auto c = static_cast<unsigned char>(text[i]);
        if (c == '\n') {
            ++p.line;
            p.column = 1;
        } else if ((c & 0xC0) != 0x80) {  // count characters: skip UTF-8 continuation bytes
            ++p.column;
        }
    }
    return p;
}

std::string quote_string(std::string_view s) {
    std::string out;
    append_json_string(out, s, JsonEscape::Toml);
    return out;
}

namespace {

constexpr int kMaxDepth = 256;

struct ParseFailure {
    size_t offset;
    std::string message;
};

void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

// Recursive descent over the text; failures are recorded once and unwind by `false`.
class Parser {
  public:
    explicit Parser(std::string_view text) : t_(text) {}

    bool parse_document(JsonValue& out) {
        // A UTF-8 byte order mark is skipped (and, like everything, kept in the text).
        if (t_.substr(0, 3) == "\xEF\xBB\xBF") i_ = 3;
        if (!skip_blank()) return false;
        if (i_ >= t_.size()) return fail("expected a value");
        if (!parse_value(out, 0)) return false;
        if (!skip_blank()) return false;
        if (i_ < t_.size()) return fail("unexpected text after the top-level value");
        return true;
    }

    const ParseFailure& failure() const { return failure_; }

  private:
    bool fail(std::string message) { return fail_at(i_, std::move(message)); }
    bool fail_at(size_t offset, std::string message) {
        failure_ = {offset, std::move(message)};
        return false;
    }

    // Whitespace and comments.
    bool skip_blank() {
        while (i_ < t_.size()) {
            char c = t_[i_];
            if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
                ++i_;
            } else if (c == '/' && i_ + 1 < t_.size() && t_[i_ + 1] == '/') {
                while (i_ < t_.size() && t_[i_] != '\n')
                    ++i_;
            } else if (c == '/' && i_ + 1 < t_.size() && t_[i_ + 1] == '*') {
                size_t close = t_.find("*/", i_ + 2);
                if (close == std::string_view::npos) return fail("unterminated comment");
                i_ = close + 2;
            } else {
                break;
            }
        }
        return true;
    }

    bool parse_value(JsonValue& v, int depth) {
        if (depth > kMaxDepth) return fail("nesting too deep");
        if (i_ >= t_.size()) return fail("expected a value");
        v.span.begin = i_;
        char c = t_[i_];
        bool ok;
        if (c == '{') {
            ok = parse_object(v, depth);
        } else if (c == '[') {
            ok = parse_array(v, depth);
        } else if (c == '"') {
            v.kind = JsonValue::Kind::String;
            ok = parse_string(v.str);
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            v.kind = JsonValue::Kind::Number;
            ok = parse_number();
        } else if (literal("true")) {
            v.kind = JsonValue::Kind::Bool;
            v.boolean = true;
            ok = true;
        } else if (literal("false")) {
            v.kind = JsonValue::Kind::Bool;
            ok = true;
        } else if (literal("null")) {
            v.kind = JsonValue::Kind::Null;
            ok = true;
        } else {
            return fail("expected a value");
        }
        v.span.end = i_;
        return ok;
    }

    bool literal(std::string_view word) {
        if (t_.substr(i_, word.size()) != word) return false;
        size_t after = i_ + word.size();
        if (after < t_.size()) {
            char c = t_[after];
            if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '_')
                return false;
        }
        i_ = after;
        return true;
    }

    bool parse_object(JsonValue& v, int depth) {
        v.kind = JsonValue::Kind::Object;
        ++i_;  // '{'
        for (;;) {
            if (!skip_blank()) return false;
            if (i_ < t_.size() && t_[i_] == '}') {
                ++i_;
                return true;
            }
            if (i_ >= t_.size() || t_[i_] != '"') return fail("expected a string key or '}'");
            JsonMember m;
            m.key_span.begin = i_;
            if (!parse_string(m.key)) return false;
            m.key_span.end = i_;
            if (!skip_blank()) return false;
            if (i_ >= t_.size() || t_[i_] != ':') return fail("expected ':'");
            ++i_;
            if (!skip_blank()) return false;
            if (!parse_value(m.value, depth + 1)) return false;
            v.members.push_back(std::move(m));
            if (!skip_blank()) return false;
            if (i_ < t_.size() && t_[i_] == ',') {
                ++i_;
                continue;  // a trailing comma is fine: the loop then sees '}'
            }
            if (i_ < t_.size() && t_[i_] == '}') {
                ++i_;
                return true;
            }
            return fail("expected ',' or '}'");
        }
    }

    bool parse_array(JsonValue& v, int depth) {
        v.kind = JsonValue::Kind::Array;
        ++i_;  // '['
        for (;;) {
            if (!skip_blank()) return false;
            if (i_ < t_.size() && t_[i_] == ']') {
                ++i_;
                return true;
            }
            JsonValue item;
            if (i_ >= t_.size()) return fail("expected a value or ']'");
            if (!parse_value(item, depth + 1)) return false;
            v.items.push_back(std::move(item));
            if (!skip_blank()) return false;
            if (i_ < t_.size() && t_[i_] == ',') {
                ++i_;
                continue;
            }
            if (i_ < t_.size() && t_[i_] == ']') {
                ++i_;
                return true;
            }
            return fail("expected ',' or ']'");
        }
    }

    bool hex4(size_t at, uint32_t& out) {
        if (at + 4 > t_.size()) return false;
        out = 0;
        for (size_t k = 0; k < 4; ++k) {
            char c = t_[at + k];
            out <<= 4;
            if (c >= '0' && c <= '9')
                out |= static_cast<uint32_t>(c - '0');
            else if (c >= 'a' && c <= 'f')
                out |= static_cast<uint32_t>(c - 'a' + 10);
            else if (c >= 'A' && c <= 'F')
                out |= static_cast<uint32_t>(c - 'A' + 10);
            else
                return false;
        }
        return true;
    }

    bool parse_string(std::string& out) {
        size_t open = i_++;
        for (;;) {
            if (i_ >= t_.size()) return fail_at(open, "unterminated string");
            auto c = static_cast<unsigned char>(t_[i_]);
            if (c == '"') {
                ++i_;
                return true;
            }
            if (c == '\n') return fail_at(open, "unterminated string");
            if (c < 0x20) return fail("control character in string");
            if (c != '\\') {
                out += static_cast<char>(c);
                ++i_;
                continue;
            }
            if (i_ + 1 >= t_.size()) return fail_at(open, "unterminated string");
            char e = t_[i_ + 1];
            switch (e) {
                case '"':
                    out += '"';
                    break;
                case '\\':
                    out += '\\';
                    break;
                case '/':
                    out += '/';
                    break;
                case 'b':
                    out += '\b';
                    break;
                case 'f':
                    out += '\f';
                    break;
                case 'n':
                    out += '\n';
                    break;
                case 'r':
                    out += '\r';
                    break;
                case 't':
                    out += '\t';
                    break;
                case 'u': {
                    uint32_t cp;
                    if (!hex4(i_ + 2, cp)) return fail("invalid \\u escape in string");
                    i_ += 6;
                    if (cp >= 0xD800 && cp <= 0xDBFF) {
                        uint32_t lo;
                        if (t_.substr(i_, 2) == "\\u" && hex4(i_ + 2, lo) && lo >= 0xDC00 &&
                            lo <= 0xDFFF) {
                            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                            i_ += 6;
                        } else {
                            cp = 0xFFFD;  // a lone surrogate decodes to the replacement char
                        }
                    } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                        cp = 0xFFFD;
                    }
                    append_utf8(out, cp);
                    continue;
                }
                default:
                    return fail("invalid escape in string");
            }
            i_ += 2;
        }
    }

    bool digits() {
        size_t start = i_;
        while (i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9')
            ++i_;
        return i_ > start;
    }

    bool parse_number() {
        if (t_[i_] == '-') ++i_;
        if (i_ < t_.size() && t_[i_] == '0')
            ++i_;
        else if (!digits())
            return fail("invalid number");
        if (i_ < t_.size() && t_[i_] == '.') {
            ++i_;
            if (!digits()) return fail("invalid number");
        }
        if (i_ < t_.size() && (t_[i_] == 'e' || t_[i_] == 'E')) {
            ++i_;
            if (i_ < t_.size() && (t_[i_] == '+' || t_[i_] == '-')) ++i_;
            if (!digits()) return fail("invalid number");
        }
        return true;
    }

    std::string_view t_;
    size_t i_ = 0;
    ParseFailure failure_{0, {}};
};

}  // namespace

Result<JsonValue> parse_jsonc(std::string_view text) {
    Parser p(text);
    JsonValue root;
    if (!p.parse_document(root)) {
        auto pos = position_of(text, p.failure().offset);
        return Error::msg(fmt::format("{}:{}: {}", pos.line, pos.column, p.failure().message));
    }
    return root;
}

}  // namespace warden::clients
