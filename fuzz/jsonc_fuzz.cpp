// JSONC reader: any text parses or gives a "LINE:COLUMN: ..." error; every span it reports
// lies inside the text and starts with the byte its kind starts with.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>

#include "clients/jsonc.hpp"

namespace warden::clients {
namespace {

void check(bool ok, const char* what) {
    if (!ok) {
        std::fprintf(stderr, "jsonc_fuzz: %s\n", what);
        std::abort();
    }
}

void walk(const JsonValue& v, std::string_view text, int depth) {
    check(depth < 100000, "runaway depth");
    check(v.span.begin < v.span.end && v.span.end <= text.size(), "value span outside the text");
    char first = text[v.span.begin];
    switch (v.kind) {
        case JsonValue::Kind::String:
            check(first == '"', "string span does not start with a quote");
            check(text[v.span.end - 1] == '"', "string span does not end with a quote");
            break;
        case JsonValue::Kind::Array:
            check(first == '[' && text[v.span.end - 1] == ']', "array span not bracketed");
            break;
        case JsonValue::Kind::Object:
            check(first == '{' && text[v.span.end - 1] == '}', "object span not braced");
            break;
        default:
            break;
    }
    for (const auto& item : v.items)
        walk(item, text, depth + 1);
    for (const auto& m : v.members) {
        check(m.key_span.begin < m.key_span.end && m.key_span.end <= v.span.end,
              "key span outside");
        check(text[m.key_span.begin] == '"', "key span does not start with a quote");
        walk(m.value, text, depth + 1);
    }
}

}  // namespace
}  // namespace warden::clients

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace warden::clients;
    auto buf = std::make_unique<char[]>(size + 1);
    std::memcpy(buf.get(), data, size);
    std::string_view text(buf.get(), size);
    auto r = parse_jsonc(text);
    if (r) {
        walk(*r, text, 0);
        // A decoded string quoted again parses back to the same string.
        for (const auto& m : r->members) {
            std::string q = quote_string(m.key);
            auto back = parse_jsonc(q);
            check(back && back->is_string() && back->str == m.key,
                  "quote_string does not round-trip");
        }
    } else {
        check(!r.error().message.empty(), "parse error without a message");
    }
    auto pos = position_of(text, size / 2);
    check(pos.line >= 1 && pos.column >= 1, "position_of below 1");
    return 0;
}
