// The chart of `bench teardown --svg` as a reader sees it: rendered to PNG by rsvg-convert
// (librsvg, scripts/deps.sh), its bars' heights in pixels order like the medians they
// stand for, from 0.05 ms to 500 ms; a port never released draws no bar at all; the SVG
// labels each decade in ms and prints each bar's value. On the linear 0–1,000 ms axis this
// replaced, every bar under 5 ms was one pixel high: the order check fails there (its
// negative control, run by hand against that renderer).
#include <sys/wait.h>
#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/testing.hpp"
#include "drill/teardown_chart.hpp"

namespace warden::testing {
namespace {

// An 8-bit RGB or RGBA, non-interlaced PNG (what rsvg-convert writes), decoded to RGBA:
// IDAT inflated and each scanline's filter undone.
struct Image {
    uint32_t width = 0, height = 0;
    std::vector<uint8_t> rgba;  // width * height * 4
    const uint8_t* at(uint32_t x, uint32_t y) const { return &rgba[(y * width + x) * 4]; }
};

uint32_t be32(const std::string& s, size_t at) {
    return (uint32_t(uint8_t(s[at])) << 24) | (uint32_t(uint8_t(s[at + 1])) << 16) |
           (uint32_t(uint8_t(s[at + 2])) << 8) | uint32_t(uint8_t(s[at + 3]));
}

int paeth(int a, int b, int c) {
    const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
    return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

std::optional<Image> decode_png(const std::string& file, std::string& why) {
    std::ifstream in(file, std::ios::binary);
    std::string png((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (png.size() < 33 || png.compare(1, 3, "PNG") != 0) return why = "not a PNG", std::nullopt;
    Image img;
    size_t bpp = 0;
    std::string idat;
    for (size_t at = 8; at + 12 <= png.size();) {
        const uint32_t len = be32(png, at);
        const std::string type = png.substr(at + 4, 4);
        if (type == "IHDR") {
            img.width = be32(png, at + 8);
            img.height = be32(png, at + 12);
            const int depth = png[at + 16], color = png[at + 17], interlace = png[at + 20];
            bpp = color == 6 ? 4 : color == 2 ? 3 : 0;
            if (depth != 8 || bpp == 0 || interlace != 0)
                return why = "not 8-bit RGB(A), non-interlaced", std::nullopt;
        } else if (type == "IDAT") {
            idat += png.substr(at + 8, len);
        }
        at += 12 + len;
    }
    const size_t stride = size_t(img.width) * bpp;
    std::vector<uint8_t> raw((stride + 1) * img.height);
    uLongf raw_len = raw.size();
    if (uncompress(raw.data(), &raw_len, reinterpret_cast<const Bytef*>(idat.data()),
                   idat.size()) != Z_OK ||
        raw_len != raw.size())
        return why = "IDAT does not inflate to the image's size", std::nullopt;
    std::vector<uint8_t> pixels(stride * img.height);
    for (uint32_t y = 0; y < img.height; ++y) {
        const uint8_t filter = raw[y * (stride + 1)];
        const uint8_t* src = &raw[y * (stride + 1) + 1];
        uint8_t* row = &pixels[y * stride];
        const uint8_t* up = y ? &pixels[(y - 1) * stride] : nullptr;
        for (size_t i = 0; i < stride; ++i) {
            const int a = i >= bpp ? row[i - bpp] : 0, b = up ? up[i] : 0,
                      c = (up && i >= bpp) ? up[i - bpp] : 0;
            const int pred = filter == 1   ? a
                             : filter == 2 ? b
                             : filter == 3 ? (a + b) / 2
                             : filter == 4 ? paeth(a, b, c)
                                           : 0;
            row[i] = uint8_t(src[i] + pred);
        }
    }
    img.rgba.resize(size_t(img.width) * img.height * 4);
    for (size_t p = 0; p < size_t(img.width) * img.height; ++p) {
        for (size_t ch = 0; ch < 3; ++ch)
            img.rgba[p * 4 + ch] = pixels[p * bpp + ch];
        img.rgba[p * 4 + 3] = bpp == 4 ? pixels[p * bpp + 3] : 255;
    }
    return img;
}

// The tallest run of pixels of exactly `hex` (#rrggbb) in any one column: a bar's height
// (its edges may be blended, its middle is not; the legend's swatch is 10 pixels).
int tallest_run(const Image& img, const std::string& hex) {
    const int r = std::stoi(hex.substr(1, 2), nullptr, 16),
              g = std::stoi(hex.substr(3, 2), nullptr, 16),
              b = std::stoi(hex.substr(5, 2), nullptr, 16);
    int best = 0;
    for (uint32_t x = 0; x < img.width; ++x)
        for (uint32_t y = 0, run = 0; y < img.height; ++y) {
            const uint8_t* p = img.at(x, y);
            run = (p[0] == r && p[1] == g && p[2] == b && p[3] == 255) ? run + 1 : 0;
            best = std::max(best, int(run));
        }
    return best;
}

TEST(TeardownChart, BarsOnTheLogAxisOrderLikeTheMediansAndNeverDrawsNoBar) {
    if (std::system("command -v rsvg-convert >/dev/null 2>&1") != 0)
        GTEST_SKIP() << "rsvg-convert is not installed (librsvg2-bin, scripts/deps.sh)";
    // One shape, one strategy per colour: medians across five decades, unsorted, and a
    // strategy that never released the port.
    const std::vector<drill::ReleaseBar> bars = {
        {"setsid", "two-stage", 1.84},       {"setsid", "killpg", 0.05},
        {"setsid", "ppid-sweep", 11.0},      {"setsid", "warden-cgroup", 0.37},
        {"setsid", "sigterm-top", -1},       {"setsid", "warden-pidns", 501.0},
        {"setsid", "warden-subreaper", 0.40}};
    const std::string svg = drill::release_chart_svg(bars);
    for (const char* tick : {"0.01 ms", "0.1 ms", "1 ms", "10 ms", "100 ms", "1000 ms"})
        EXPECT_NE(svg.find(std::string(">") + tick + "<"), std::string::npos) << tick << "\n"
                                                                              << svg;
    EXPECT_NE(svg.find("log scale"), std::string::npos);
    for (const char* value : {">1.84<", ">0.05<", ">11<", ">0.37<", ">501<", ">0.40<", ">never<"})
        EXPECT_NE(svg.find(value), std::string::npos) << value << " not printed";

    TempDir dir;
    std::ofstream(dir.file("chart.svg")) << svg;
    const std::string cmd = "rsvg-convert -o '" + dir.file("chart.png") + "' '" +
                            dir.file("chart.svg") + "' 2>'" + dir.file("rsvg.err") + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << "rsvg-convert failed";
    std::string why;
    auto img = decode_png(dir.file("chart.png"), why);
    ASSERT_TRUE(img) << why;

    // Strategy k has colour k of the chart's palette, in order of first appearance.
    std::map<double, int> height_by_median;
    int never_height = -1;
    for (size_t k = 0; k < bars.size(); ++k) {
        const int h = tallest_run(*img, drill::kReleaseChartColors[k]);
        if (bars[k].median_ms < 0) {
            never_height = h;
            continue;
        }
        height_by_median[bars[k].median_ms] = h;
    }
    int previous = 0;
    for (const auto& [median, h] : height_by_median) {
        EXPECT_GT(h, previous) << "the bar of " << median << " ms is " << h
                               << " px, not taller than the one below it";
        EXPECT_GT(h, 10) << median << " ms";  // taller than a legend swatch: a bar, seen
        previous = h;
    }
    // sigterm-top never released: nothing of its colour but its legend swatch.
    EXPECT_LE(never_height, 10) << "a never-released cell was drawn as a bar";
    // Its "never" is text: no red bar either (the linear chart drew one, full height).
    EXPECT_LT(tallest_run(*img, drill::kReleaseChartNever), 20) << "a red bar for never";
    // The tallest value is 501 ms of an axis up to 1000 ms: about 0.9 of the plot's height,
    // not a full-height bar.
    EXPECT_LT(height_by_median[501.0], 260) << "501 ms drawn at the top of the axis";
}

}  // namespace
}  // namespace warden::testing
