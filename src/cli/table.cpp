#include "table.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>

namespace warden::cli {

size_t display_width(std::string_view s) {
    size_t n = 0;
    for (char c : s)
        n += (static_cast<unsigned char>(c) & 0xc0) != 0x80;
    return n;
}

std::string fit(std::string_view s, size_t width) {
    if (display_width(s) <= width) return std::string(s);
    if (width == 0) return {};
    // Keep width-1 code points, then the ellipsis.
    size_t keep = width - 1, cols = 0, i = 0;
    for (; i < s.size(); ++i) {
        bool starts = (static_cast<unsigned char>(s[i]) & 0xc0) != 0x80;
        if (starts && cols++ == keep) break;
    }
    return std::string(s.substr(0, i)) + "\u2026";
}

std::string Table::render(size_t width) const {
    const size_t n = columns_.size();
    std::vector<size_t> w(n, 0);
    for (size_t c = 0; c < n; ++c)
        w[c] = display_width(columns_[c].header);
    for (const auto& row : rows_)
        for (size_t c = 0; c < n && c < row.size(); ++c)
            w[c] = std::max(w[c], display_width(row[c]));

    // Shrink the flexible column to what is left of the line, but never below its header.
    if (width > 0) {
        size_t total = n ? n - 1 : 0;  // one space between columns
        for (size_t c = 0; c < n; ++c)
            total += w[c];
        for (size_t c = 0; c < n && total > width; ++c) {
            if (!columns_[c].flexible) continue;
            size_t floor = display_width(columns_[c].header);
            size_t cut = std::min(total - width, w[c] - std::min(w[c], floor));
            w[c] -= cut;
            total -= cut;
        }
    }

    std::string out;
    auto emit = [&](auto cell_at) {
        std::string line;
        for (size_t c = 0; c < n; ++c) {
            std::string cell = fit(cell_at(c), w[c]);
            size_t pad = w[c] - display_width(cell);
            if (c) line.push_back(' ');
            if (columns_[c].align == Column::Align::Right) line.append(pad, ' ');
            line += cell;
            if (columns_[c].align == Column::Align::Left) line.append(pad, ' ');
        }
        while (!line.empty() && line.back() == ' ')
            line.pop_back();
        out += line;
        out.push_back('\n');
    };
    emit([&](size_t c) -> std::string_view { return columns_[c].header; });
    for (const auto& row : rows_)
        emit([&](size_t c) -> std::string_view {
            return c < row.size() ? std::string_view(row[c]) : std::string_view();
        });
    return out;
}

size_t output_width(int fd) {
    bool tty = ::isatty(fd);
    if (tty) {
        winsize ws{};
        if (::ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
    }
    if (const char* cols = std::getenv("COLUMNS")) {
        size_t v = 0;
        std::string_view s = cols;
        auto r = std::from_chars(s.data(), s.data() + s.size(), v);
        if (r.ec == std::errc() && v > 0) return v;
    }
    return tty ? 80 : 0;
}

}  // namespace warden::cli
