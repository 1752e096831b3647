#include "export/metric_totals.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace warden::exporter {

namespace {

void observe(MetricPoint& p, bool histogram, double v) {
    if (histogram) {
        if (p.buckets.empty()) p.buckets.assign(kDurationBounds.size() + 1, 0);
        auto bucket = std::lower_bound(kDurationBounds.begin(), kDurationBounds.end(), v);
        ++p.buckets[static_cast<size_t>(bucket - kDurationBounds.begin())];
        p.min = p.count == 0 ? v : std::min(p.min, v);
        p.max = p.count == 0 ? v : std::max(p.max, v);
    }
    ++p.count;
    p.sum += v;
}

}  // namespace

Result<MetricTotals> MetricTotals::parse(std::string_view text) {
    MetricTotals t;
    if (text.empty()) return t;
    Json j = Json::parse(text, nullptr, false);
    if (!j.is_object()) return Error::msg("export position: metrics: not a JSON object");
    try {
        t.time_ = j.value("time", int64_t{0});
        const Json all = j.value("series", Json::object());
        for (const auto& [name, series] : all.items())
            for (const Json& s : series) {
                MetricPoint p;
                for (const Json& kv : s.at("attributes"))
                    p.attributes.emplace_back(kv.at(0).get<std::string>(), kv.at(1));
                p.start = s.at("start").get<int64_t>();
                p.time = s.at("time").get<int64_t>();
                p.count = s.at("count").get<uint64_t>();
                p.sum = s.at("sum").get<double>();
                p.min = s.value("min", 0.0);
                p.max = s.value("max", 0.0);
                p.buckets = s.value("buckets", std::vector<uint64_t>{});
                t.series_[name][Json(p.attributes).dump()] = std::move(p);
            }
    } catch (const Json::exception& e) {
        return Error::msg(fmt::format("export position: metrics: {}", e.what()));
    }
    return t;
}

std::string MetricTotals::dump() const {
    Json series = Json::object();
    for (const auto& [name, points] : series_)
        for (const auto& [key, p] : points) {
            // The attributes as [[key, value], …], in their order: they name the series.
            Json s{{"attributes", Json(p.attributes)},
                   {"start", p.start},
                   {"time", p.time},
                   {"count", p.count},
                   {"sum", p.sum}};
            if (!p.buckets.empty())
                s.update({{"min", p.min}, {"max", p.max}, {"buckets", p.buckets}});
            series[name].push_back(std::move(s));
        }
    return Json{{"time", time_}, {"series", series}}.dump();
}

std::vector<MetricItem> MetricTotals::add(const std::vector<MetricItem>& batch, int64_t first_ts,
                                          int64_t last_ts) {
    time_ = std::max({time_, first_ts, last_ts});
    std::vector<MetricItem> out;
    for (const MetricItem& m : batch) {
        MetricItem cumulative{m.name, m.unit, m.description, m.histogram, {}};
        for (const MetricPoint& observed : m.points) {
            MetricPoint& p = series_[m.name][Json(observed.attributes).dump()];
            if (p.count == 0 && p.start == 0) {
                p.attributes = observed.attributes;
                p.start = first_ts;
            }
            for (double v : observed.values)
                observe(p, m.histogram, v);
            p.time = time_;
            cumulative.points.push_back(p);
        }
        out.push_back(std::move(cumulative));
    }
    return out;
}

}  // namespace warden::exporter
