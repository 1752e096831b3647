#include "drill/teardown_chart.hpp"

#include <algorithm>
#include <cmath>
#include <string_view>

#include <fmt/format.h>

namespace warden::drill {
namespace {

constexpr double kBar = 16, kGap = 30, kTop = 70, kHeight = 260, kLeft = 80, kLegend = 200;

void add_unique(std::vector<std::string>& v, const std::string& s) {
    if (std::find(v.begin(), v.end(), s) == v.end()) v.push_back(s);
}

// A value as its label shows it: two decimals under 10 ms, whole ms above.
std::string value_label(double ms) {
    return ms < 10 ? fmt::format("{:.2f}", ms) : fmt::format("{:.0f}", ms);
}

std::string tick_label(double ms) {
    return ms < 1 ? fmt::format("{:g} ms", ms) : fmt::format("{:.0f} ms", ms);
}

// The axis: whole decades from below the smallest value (at least a third of a decade of
// bar for it) to at or above the largest.
struct LogAxis {
    int lo_exp = -1, hi_exp = 3;

    explicit LogAxis(const std::vector<ReleaseBar>& bars) {
        double lo = 0, hi = 0;
        for (const ReleaseBar& b : bars) {
            if (b.median_ms <= 0) continue;
            lo = lo == 0 ? b.median_ms : std::min(lo, b.median_ms);
            hi = std::max(hi, b.median_ms);
        }
        if (hi == 0) return;  // nothing released: the default 0.1–1000 ms
        lo_exp = static_cast<int>(std::floor(std::log10(lo) - 0.3));
        hi_exp = std::max(lo_exp + 1, static_cast<int>(std::ceil(std::log10(hi))));
    }

    // Pixels above the baseline for `ms`.
    double height(double ms) const {
        const double f = (std::log10(ms) - lo_exp) / (hi_exp - lo_exp);
        return kHeight * std::clamp(f, 0.0, 1.0);
    }
};

std::string axis_svg(const LogAxis& axis, double plot_right) {
    const double base = kTop + kHeight;
    std::string s;
    for (int e = axis.lo_exp; e <= axis.hi_exp; ++e) {
        const double ms = std::pow(10.0, e);
        const double y = base - axis.height(ms);
        s += fmt::format(
            "<line x1=\"{}\" x2=\"{:.0f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>"
            "<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n",
            kLeft, plot_right, y, y, kLeft - 6, y + 4, tick_label(ms));
    }
    s += fmt::format(
        "<line x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#555\"/>"
        "<line x1=\"{0}\" x2=\"{3:.0f}\" y1=\"{2}\" y2=\"{2}\" stroke=\"#555\"/>\n",
        kLeft, kTop, base, plot_right);
    s += fmt::format(
        "<text transform=\"rotate(-90 16 {0:.0f})\" x=\"16\" y=\"{0:.0f}\" "
        "text-anchor=\"middle\">port free again after (ms, log scale)</text>\n",
        kTop + kHeight / 2);
    return s;
}

// One cell: its bar with the value above it, or, never released, "never" in red and no bar.
std::string bar_svg(const ReleaseBar& b, const LogAxis& axis, double x, const char* color) {
    const double base = kTop + kHeight;
    const double cx = x + (kBar - 2) / 2;
    if (b.median_ms < 0)
        return fmt::format(
            "<text transform=\"rotate(-90 {0:.1f} {1:.1f})\" x=\"{0:.1f}\" y=\"{1:.1f}\" "
            "font-size=\"10\" fill=\"{2}\"><title>{3} {4}: never released</title>never</text>\n",
            cx + 4, base - 4, kReleaseChartNever, b.strategy, b.shape);
    const double h = std::max(1.0, axis.height(b.median_ms));
    return fmt::format(
        "<rect class=\"bar\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.0f}\" height=\"{:.1f}\" "
        "fill=\"{}\"><title>{} {}: {} ms</title></rect>"
        "<text transform=\"rotate(-90 {:.1f} {:.1f})\" x=\"{:.1f}\" y=\"{:.1f}\" "
        "font-size=\"10\">{}</text>\n",
        x, base - h, kBar - 2, h, color, b.strategy, b.shape, value_label(b.median_ms), cx + 4,
        base - h - 3, cx + 4, base - h - 3, value_label(b.median_ms));
}

}  // namespace

std::string release_chart_svg(const std::vector<ReleaseBar>& bars) {
    std::vector<std::string> shapes, strategies;
    for (const ReleaseBar& b : bars) {
        add_unique(shapes, b.shape);
        add_unique(strategies, b.strategy);
    }
    constexpr size_t ncolors = std::size(kReleaseChartColors);
    const LogAxis axis(bars);
    const double group = kBar * static_cast<double>(strategies.size()) + kGap;
    const double plot_right = kLeft + group * static_cast<double>(shapes.size());
    const double width = plot_right + kLegend;
    std::string s = fmt::format(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" "
        "font-family=\"sans-serif\" font-size=\"11\">\n"
        "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
        width, kTop + kHeight + 40);
    s += fmt::format(
        "<text x=\"{}\" y=\"20\" font-size=\"14\">Port release after teardown: median per "
        "strategy and shape</text>\n<text x=\"{}\" y=\"36\">log scale, ms; \"never\": the "
        "port was still held 1 s after the strategy returned</text>\n",
        kLeft, kLeft);
    s += axis_svg(axis, plot_right);
    for (size_t g = 0; g < shapes.size(); ++g) {
        const double gx = kLeft + group * static_cast<double>(g) + kGap / 2;
        s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n",
                         gx + kBar * static_cast<double>(strategies.size()) / 2,
                         kTop + kHeight + 16, shapes[g]);
        for (size_t k = 0; k < strategies.size(); ++k)
            for (const ReleaseBar& b : bars)
                if (b.shape == shapes[g] && b.strategy == strategies[k]) {
                    s += bar_svg(b, axis, gx + kBar * static_cast<double>(k),
                                 kReleaseChartColors[k % ncolors]);
                    break;
                }
    }
    for (size_t k = 0; k < strategies.size(); ++k) {
        const double y = kTop + 14 * static_cast<double>(k);
        s += fmt::format(
            "<rect x=\"{:.0f}\" y=\"{:.0f}\" width=\"10\" height=\"10\" fill=\"{}\"/>"
            "<text x=\"{:.0f}\" y=\"{:.0f}\">{}</text>\n",
            width - kLegend + 10, y, kReleaseChartColors[k % ncolors], width - kLegend + 25, y + 9,
            strategies[k]);
    }
    return s + "</svg>\n";
}

}  // namespace warden::drill
