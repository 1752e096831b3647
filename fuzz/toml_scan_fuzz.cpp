// TOML value spans: for any document toml++ accepts, every value's start position maps to
// a byte offset inside the text, its end lies after it and inside the text, and an array's
// element spans lie inside the array, in order.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <toml++/toml.h>

#include "clients/toml_scan.hpp"

namespace warden::clients {
namespace {

void check(bool ok, const char* what) {
    if (!ok) {
        std::fprintf(stderr, "toml_scan_fuzz: %s\n", what);
        std::abort();
    }
}

void visit(std::string_view text, const toml::node& node, int depth) {
    if (depth > 64) return;
    const auto& pos = node.source().begin;
    if (pos.line == 0 || pos.column == 0) return;
    size_t begin = toml_offset_of(text, pos.line, pos.column);
    check(begin <= text.size(), "offset past the text");
    if (begin == text.size()) return;
    // Tables ([header] or dotted) have no value bytes of their own; inline tables do.
    bool inline_table = node.is_table() && text[begin] == '{';
    if (!node.is_table() || inline_table) {
        size_t end = toml_value_end(text, begin);
        check(end > begin && end <= text.size(), "value end outside the text");
        if (node.is_array() && text[begin] == '[') {
            size_t prev = begin;
            for (const Span& s : toml_array_items(text, {begin, end})) {
                check(s.begin >= prev && s.begin <= s.end && s.end <= end,
                      "array item outside the array");
                prev = s.end;
            }
        }
    }
    if (const auto* tbl = node.as_table())
        for (const auto& [k, v] : *tbl)
            visit(text, v, depth + 1);
    if (const auto* arr = node.as_array())
        for (const auto& v : *arr)
            visit(text, v, depth + 1);
}

}  // namespace
}  // namespace warden::clients

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string text(reinterpret_cast<const char*>(data), size);
    toml::table root;
    try {
        root = toml::parse(text);
    } catch (const toml::parse_error&) {
        return 0;
    }
    warden::clients::visit(text, root, 0);
    return 0;
}
