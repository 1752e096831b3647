// Cumulative metrics, so that a batch sent again is the same data as the first time.
//
// A metric point of delta temporality says "this many more since the last point": a batch
// sent twice (after a crash between the receiver's acknowledgement and the position's write,
// or an acknowledgement lost on the way back) counts twice, and no receiver can tell. A
// cumulative point says "this many since `start`, as of `time`": the same point twice is the
// same fact twice, and a backend keeps one (a series is keyed by its attributes and start,
// a point by its time). So the exporter keeps running totals, and every number in a point is
// a function of the journal up to the batch's last record:
//
// - the totals are written into the position file with the position, in the same atomic
//   write, so the totals a batch starts from are those of the position it is read after,
//   whatever the process did before (a retry, a restart, a resend after SIGKILL);
// - a series' start is the time of the first record of the batch it first appeared in, and a
//   point's time the latest record time seen so far (never earlier than a previous point's,
//   even when the clock was stepped back between records): both are taken from the journal,
//   never from the exporter's clock.
//
// A smaller batch (after a 413) gives points at other times with totals that agree, never a
// count twice. Only the series a batch touched get a point.
#pragma once

#include <array>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "export/signals.hpp"
#include "sys/result.hpp"

namespace warden::exporter {

// Histogram bucket bounds in seconds: those the MCP semantic conventions advise for
// mcp.*.operation.duration, used for every duration here.
inline constexpr std::array<double, 14> kDurationBounds{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1,
                                                        2,    5,    10,   30,  60,  120, 300};

class MetricTotals {
  public:
    // The totals kept in a position file ("" or "{}": none yet).
    static Result<MetricTotals> parse(std::string_view text);
    std::string dump() const;

    // Adds the batch's observations (translate()'s points, their `values`) and returns the
    // cumulative points of the series they touched. `first_ts` and `last_ts` are the times
    // of the batch's first and last records.
    std::vector<MetricItem> add(const std::vector<MetricItem>& batch, int64_t first_ts,
                                int64_t last_ts);

  private:
    // metric name → the attributes as canonical JSON → the running point
    std::map<std::string, std::map<std::string, MetricPoint>> series_;
    int64_t time_ = 0;  // the latest record time seen
};

}  // namespace warden::exporter
