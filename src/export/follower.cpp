#include "export/follower.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "export/http.hpp"
#include "export/metric_totals.hpp"
#include "export/otlp.hpp"
#include "export/signals.hpp"
#include "export/syslog.hpp"
#include "fault/faults.hpp"
#include "journal/export_position.hpp"
#include "journal/journal.hpp"
#include "journal/query.hpp"
#include "sys/fd.hpp"

namespace warden::exporter {

namespace {

constexpr size_t kBatchBytes = 4 << 20;
constexpr int64_t kMaxRetryAfterMs = 10 * 60 * 1000;
// Without --follow the exporter is a command that ends: a failure that persists through this
// many attempts (or one that waiting cannot mend, a certificate refused) ends it, exit 1.
constexpr int kOnceAttempts = 5;

// Sleeps up to `ms`, waking early when asked to stop.
void nap(int64_t ms, const std::atomic<bool>& stop) {
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (!stop.load() && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
            until - std::chrono::steady_clock::now(), std::chrono::milliseconds(50)));
}

struct Attempt {
    bool ok = false;
    bool retryable = true;
    bool too_large = false;
    int64_t retry_after_ms = -1;
    std::string error;
};

// Where records go: OTLP (up to three requests per batch) or syslog (one stream).
class Sender {
  public:
    Sender(const Settings& s, journal::RecordReader& reader, MetricTotals totals)
        : s_(s), reader_(reader), faults_(Faults::from_env()), totals_(std::move(totals)) {
        if (s.syslog) syslog_.emplace(*s.syslog);
        char host[256] = {0};
        if (::gethostname(host, sizeof host - 1) == 0) hostname_ = host;
    }

    Attempt send(std::vector<ExportRecord>& batch) {
        if (faults_.export_ids_random) scramble_ids(batch);
        return syslog_ ? send_syslog(batch) : send_otlp(batch);
    }

    // The batch last sent was acknowledged: its totals are those of the new position.
    const MetricTotals& acknowledged() {
        totals_ = sent_totals_;
        return totals_;
    }

  private:
    Attempt send_syslog(const std::vector<ExportRecord>& batch) {
        std::string frames;
        for (const auto& r : batch)
            frames += syslog_frame(r, hostname_, s_.include_content);
        Attempt a;
        auto st = syslog_->send(frames);
        if (st)
            a.ok = true;
        else
            a.error = st.error().message;
        a.retryable = !syslog_->certificate_refused();
        return a;
    }

    Attempt send_otlp(const std::vector<ExportRecord>& batch) {
        RecordLookup lookup;
        lookup.by_seq = [&](int64_t seq) -> std::optional<ExportRecord> {
            auto r = reader_.at(seq);
            if (!r || !*r) return std::nullopt;
            return ExportRecord{std::move((*r)->record), std::move((*r)->leaf_hex)};
        };
        lookup.session_start = [&](const std::string& session) -> std::optional<ExportRecord> {
            auto r = reader_.session_start(session);
            if (!r || !*r) return std::nullopt;
            return ExportRecord{std::move((*r)->record), std::move((*r)->leaf_hex)};
        };
        Signals sig = translate(batch, lookup, s_.translate);
        // Cumulative points from the totals of the position: the same on every attempt.
        sent_totals_ = totals_;
        sig.metrics =
            sent_totals_.add(sig.metrics, batch.front().record.ts, batch.back().record.ts);
        struct {
            const OtlpSignal& target;
            std::string body;
        } requests[] = {
            {s_.traces,
             s_.traces.enabled ? encode_traces(sig, s_.resource, s_.traces.encoding) : ""},
            {s_.logs, s_.logs.enabled ? encode_logs(sig, s_.resource, s_.logs.encoding) : ""},
            {s_.metrics,
             s_.metrics.enabled ? encode_metrics(sig, s_.resource, s_.metrics.encoding) : ""}};
        Attempt a;
        for (const auto& rq : requests) {
            if (rq.body.empty()) continue;
            const char* type = rq.target.encoding == Encoding::protobuf ? "application/x-protobuf"
                                                                        : "application/json";
            SendResult r = http_.post(rq.target.http, type, rq.body);
            if (!r.ok) {
                a.error = r.error;
                a.retry_after_ms = r.retry_after_ms;
                a.too_large = r.too_large;
                a.retryable = r.retryable;
                return a;
            }
        }
        a.ok = true;
        return a;
    }

    // The negative control for stable ids: each send draws new ones, as an exporter that
    // made its ids up would.
    void scramble_ids(std::vector<ExportRecord>& batch) {
        static std::mt19937_64 rng{std::random_device{}()};
        for (auto& r : batch)
            r.leaf_hex = fmt::format("{:016x}{:016x}{:016x}{:016x}", rng(), rng(), rng(), rng());
    }

    const Settings& s_;
    journal::RecordReader& reader_;
    Faults faults_;
    HttpClient http_;
    std::optional<SyslogConnection> syslog_;
    std::string hostname_;
    MetricTotals totals_;       // as of the position
    MetricTotals sent_totals_;  // as of the batch in flight
};

// The lock that makes one exporter per destination: `export/NAME.lock`, held while it runs.
Result<Fd> lock_destination(const std::string& journal_path, const std::string& name) {
    std::string dir = journal::export_dir(journal_path);
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return Error::sys("mkdir", dir, errno);
    std::string path = fmt::format("{}/{}.lock", dir, name);
    auto fd = open_file(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (!fd) return fd.error();
    if (::flock(fd->get(), LOCK_EX | LOCK_NB) != 0)
        return Error::msg(
            fmt::format("export {}: another exporter runs for this destination (it "
                        "holds {})",
                        name, path));
    return fd;
}

}  // namespace

int64_t backoff_ms(int attempt, double jitter01, int64_t max_ms) {
    int64_t base = 1000LL << std::min(attempt, 22);  // 1 s … past the longest maximum (1 h)
    base = std::min<int64_t>(base, max_ms);
    return base / 2 + static_cast<int64_t>(static_cast<double>(base / 2) * jitter01);
}

Result<ExportProgress> follow(const Settings& s, const std::atomic<bool>& stop) {
    auto lock = lock_destination(s.journal, s.name);
    if (!lock) return lock.error();
    auto pos = journal::read_export_position(s.journal, s.name);
    if (!pos) return pos.error();
    pos->target = s.target;
    auto reader = journal::RecordReader::open(s.journal);
    if (!reader) return reader.error();
    const Faults faults = Faults::from_env();
    auto totals = MetricTotals::parse(faults.export_metric_totals_lost ? "" : pos->metrics);
    if (!totals) return totals.error();
    Sender sender(s, *reader, std::move(*totals));
    std::mt19937_64 rng{std::random_device{}()};
    std::uniform_real_distribution<double> jitter(0.0, 1.0);
    ExportProgress progress;
    progress.position = pos->seq;
    size_t batch_size = s.batch;
    std::vector<journal::RecordReader::Row> rows;
    while (!stop.load()) {
        rows.clear();
        const bool unbounded = faults.export_batch_unbounded;
        if (auto st = reader->read_after(pos->seq, unbounded ? SIZE_MAX : batch_size,
                                         unbounded ? SIZE_MAX : kBatchBytes, rows);
            !st)
            return st.error();
        if (rows.empty()) {
            if (!s.follow) break;
            nap(s.poll_ms, stop);
            continue;
        }
        // Records pruned before they were delivered (only with export-gap = "allow"): said,
        // and skipped, since they no longer exist to be sent.
        if (rows.front().record.seq > pos->seq + 1 && pos->seq > 0)
            std::fprintf(stderr,
                         "mcpwarden export %s: records %lld to %lld were pruned before they were "
                         "exported\n",
                         s.name.c_str(), static_cast<long long>(pos->seq + 1),
                         static_cast<long long>(rows.front().record.seq - 1));
        std::vector<ExportRecord> batch;
        batch.reserve(rows.size());
        for (auto& r : rows)
            batch.push_back({std::move(r.record), std::move(r.leaf_hex)});
        int attempt = 0;
        Attempt a;
        while (!stop.load()) {
            a = sender.send(batch);
            if (a.ok) break;
            pos->last_error = a.error;
            pos->last_error_ns = journal::now_ns();
            pos->pid = ::getpid();
            (void)journal::write_export_position(s.journal, *pos);
            std::fprintf(stderr, "mcpwarden export %s: %s\n", s.name.c_str(), a.error.c_str());
            if (a.too_large && batch.size() > 1) {
                batch.resize(batch.size() / 2);
                batch_size = batch.size();
                continue;
            }
            if (!s.follow && (!a.retryable || attempt + 1 >= kOnceAttempts))
                return Error::msg(
                    fmt::format("export {}: {} (position {} kept)", s.name, a.error, pos->seq));
            int64_t wait = a.retry_after_ms >= 0 ? std::min(a.retry_after_ms, kMaxRetryAfterMs)
                                                 : backoff_ms(attempt, jitter(rng), s.retry_max_ms);
            ++attempt;
            nap(wait, stop);
        }
        if (!a.ok) break;  // stopped while retrying: the position stays where it was
        if (faults.export_ack_window) nap(30000, stop);
        const auto& last = batch.back().record;
        pos->seq = last.seq;
        pos->hash = batch.back().leaf_hex;
        pos->acked_ns = journal::now_ns();
        pos->acked_ts = last.ts;
        pos->last_error.clear();
        pos->last_error_ns = 0;
        pos->pid = ::getpid();
        if (s.metrics.enabled) pos->metrics = sender.acknowledged().dump();
        if (auto st = journal::write_export_position(s.journal, *pos); !st) return st.error();
        progress.sent += static_cast<int64_t>(batch.size());
        progress.position = pos->seq;
    }
    return progress;
}

Result<std::vector<ExporterStatus>> exporters(const std::string& journal_path) {
    auto positions = journal::read_export_positions(journal_path);
    if (!positions) return positions.error();
    std::vector<ExporterStatus> out;
    if (positions->empty()) return out;
    auto reader = journal::RecordReader::open(journal_path);
    if (!reader) return reader.error();
    auto head = reader->head();
    if (!head) return head.error();
    for (const auto& p : *positions) {
        ExporterStatus st;
        st.destination = p.destination;
        st.target = p.target;
        st.position = p.seq;
        st.head = *head;
        st.lag_records = std::max<int64_t>(0, *head - p.seq);
        if (st.lag_records > 0) {
            // The age of the oldest record not yet delivered.
            auto next = reader->at(p.seq + 1);
            if (next && *next)
                st.lag_ns = std::max<int64_t>(0, journal::now_ns() - (*next)->record.ts);
        }
        st.acked_ns = p.acked_ns;
        st.last_error = p.last_error;
        st.last_error_ns = p.last_error_ns;
        out.push_back(std::move(st));
    }
    return out;
}

}  // namespace warden::exporter
