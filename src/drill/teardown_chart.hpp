// The chart of `mcpwarden bench teardown --svg`: the median port release per strategy,
// grouped by shape.
//
// The values span five decades (a group kill frees a port in 0.05 ms, a strategy that
// waits out a 500 ms grace in 500), so the axis is logarithmic, one labelled tick per
// decade in ms: on a linear axis every bar under a few ms would be one pixel. Each bar
// carries its value printed above it. A cell whose port was never released (its orphans
// still hold it) has no value to draw: it gets no bar, only "never" written in red where
// its bar would stand, so that it cannot stand taller than, or hide, the bars beside it.
#pragma once

#include <string>
#include <vector>

namespace warden::drill {

struct ReleaseBar {
    std::string shape, strategy;
    double median_ms = -1;  // < 0: the port was never released
};

// Fills and strategies keep the order of their first appearance in `bars`; each strategy
// has the colour of its place in that order (kReleaseChartColors, repeated).
std::string release_chart_svg(const std::vector<ReleaseBar>& bars);

inline constexpr const char* kReleaseChartColors[] = {"#9e9e9e", "#795548", "#ff9800", "#2196f3",
                                                      "#2e7d32", "#43a047", "#66bb6a"};
inline constexpr const char* kReleaseChartNever = "#e53935";

}  // namespace warden::drill
