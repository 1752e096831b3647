#include "clients/toml_scan.hpp"

namespace warden::clients {

size_t toml_offset_of(std::string_view text, size_t line, size_t column) {
    size_t i = 0;
    for (size_t l = 1; l < line && i < text.size(); ++i)
        if (text[i] == '\n') ++l;
    for (size_t c = 1; c < column && i < text.size();) {
        ++i;
        while (i < text.size() && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80)
            ++i;
        ++c;
    }
    return i;
}

namespace {

// Skips whitespace, newlines and comments inside an array or inline table.
size_t skip_blank(std::string_view t, size_t i) {
    while (i < t.size()) {
        char c = t[i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            ++i;
        } else if (c == '#') {
            while (i < t.size() && t[i] != '\n')
                ++i;
        } else {
            break;
        }
    }
    return i;
}

// End of a multi-line string opened by three `q` at `i`; up to two extra quotes may
// precede the closing delimiter ("""a"""" is `a"`).
size_t multiline_end(std::string_view t, size_t i, char q) {
    size_t j = i + 3;
    while (j < t.size()) {
        if (q == '"' && t[j] == '\\') {
            j += 2;
            continue;
        }
        if (t.substr(j, 3) == std::string_view(q == '"' ? "\"\"\"" : "'''")) {
            j += 3;
            for (int extra = 0; extra < 2 && j < t.size() && t[j] == q; ++extra)
                ++j;
            return j;
        }
        ++j;
    }
    return t.size();
}

}  // namespace

size_t toml_value_end(std::string_view t, size_t i) {
    if (i >= t.size()) return i;
    char c = t[i];
    if (c == '"' || c == '\'') {
        if (t.substr(i, 3) == std::string(3, c)) return multiline_end(t, i, c);
        size_t j = i + 1;
        while (j < t.size() && t[j] != c) {
            if (c == '"' && t[j] == '\\') ++j;
            ++j;
        }
        return j < t.size() ? j + 1 : t.size();
    }
    if (c == '[' || c == '{') {
        char close = c == '[' ? ']' : '}';
        size_t j = i + 1;
        for (;;) {
            j = skip_blank(t, j);
            if (j >= t.size()) return t.size();
            if (t[j] == close) return j + 1;
            if (t[j] == ',' || t[j] == '=') {
                ++j;
                continue;
            }
            size_t next = toml_value_end(t, j);  // a key of an inline table scans like a bare value
            j = next > j ? next : j + 1;
        }
    }
    size_t j = i;
    while (j < t.size()) {
        char d = t[j];
        if (d == ',' || d == ']' || d == '}' || d == '\n' || d == '\r' || d == '#' || d == '=')
            break;
        // A date-time may hold one space between date and time ("1979-05-27 07:32:00").
        bool date_space = d == ' ' && j - i == 10 && t[i + 4] == '-' && t[i + 7] == '-' &&
                          j + 1 < t.size() && t[j + 1] >= '0' && t[j + 1] <= '9';
        if ((d == ' ' || d == '\t') && !date_space) break;
        ++j;
    }
    return j;
}

std::vector<Span> toml_array_items(std::string_view t, Span array) {
    std::vector<Span> items;
    size_t j = array.begin + 1;
    for (;;) {
        j = skip_blank(t, j);
        if (j >= t.size() || t[j] == ']') return items;
        if (t[j] == ',') {
            ++j;
            continue;
        }
        size_t end = toml_value_end(t, j);
        if (end <= j) return items;
        items.push_back({j, end});
        j = end;
    }
}

}  // namespace warden::clients
