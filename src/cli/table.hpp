// Plain-text tables for the CLI, sized to the terminal.
//
// Columns are declared once (header, alignment, whether the column may be cut); rows are
// cells of text. render() fits the table into a width: every column gets its widest cell,
// and when the line would be too long the one *flexible* column (usually the last, a
// command line) is cut with "…". A width of 0 means no limit: output piped to another
// program is never truncated.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace warden::cli {

struct Column {
    enum class Align { Left, Right };
    std::string header;
    Align align = Align::Left;
    bool flexible = false;  // the column cut to fit; at most one per table
};

class Table {
  public:
    explicit Table(std::vector<Column> columns) : columns_(std::move(columns)) {}
    void add_row(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
    size_t rows() const { return rows_.size(); }
    // One line per row plus the header, each ending in '\n', no trailing blanks.
    std::string render(size_t width = 0) const;

  private:
    std::vector<Column> columns_;
    std::vector<std::vector<std::string>> rows_;
};

// Display width of UTF-8 text: one per code point (no wide-glyph tables; the CLI escapes
// control bytes before they get here).
size_t display_width(std::string_view s);
// The longest prefix of `s` that fits in `width` columns, with "…" when cut.
std::string fit(std::string_view s, size_t width);

// How wide output on `fd` may be: the terminal's width (TIOCGWINSZ) when fd is a terminal,
// else $COLUMNS when set, else 80 for a terminal that will not say and 0 (no limit) for a
// pipe or file.
size_t output_width(int fd);

// Whether stdout is a terminal that wants colour (NO_COLOR unset or empty, per
// no-color.org).
inline bool use_color() {
    const char* no = std::getenv("NO_COLOR");
    return ::isatty(1) && !(no && *no);
}

}  // namespace warden::cli
