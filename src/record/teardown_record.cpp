#include "record/teardown_record.hpp"

#include <algorithm>
#include <csignal>

#include "journal/redact.hpp"
#include "proc/process.hpp"

namespace warden::journal {

std::string teardown_report_json(const TeardownReport& report) {
    return report.to_json_string(&redacted);
}

TeardownRecorder::TeardownRecorder(Journal& journal, std::string session, Reasons reasons,
                                   std::set<std::pair<pid_t, uint64_t>> snapshotted)
    : journal_(&journal),
      session_(std::move(session)),
      reasons_(std::move(reasons)),
      snapshotted_(std::move(snapshotted)) {}

TeardownRecorder::TeardownRecorder(std::unique_ptr<Journal> journal, std::string session,
                                   Reasons reasons)
    : owned_(std::move(journal)),
      journal_(owned_.get()),
      session_(std::move(session)),
      reasons_(std::move(reasons)) {}

TeardownRecorder::TeardownRecorder(std::nullptr_t, std::string session, Reasons reasons)
    : journal_(nullptr), session_(std::move(session)), reasons_(std::move(reasons)) {}

TeardownRecorder::TeardownRecorder(IntentFile intents, std::string session, Reasons reasons)
    : journal_(nullptr),
      session_(std::move(session)),
      reasons_(std::move(reasons)),
      intents_(std::move(intents)) {}

// Each target as /proc shows it now, if it is still the same process; else what the engine
// knew of it when it planned (a process that is gone has nothing more to show).
void TeardownRecorder::on_snapshot(int round, const std::vector<const Target*>& targets) {
    const std::string& reason = first_round_ + round == 0 ? reasons_.first : reasons_.rescan;
    std::vector<Event> events;
    for (const Target* t : targets) {
        if (!snapshotted_.insert({t->id.pid, t->id.starttime}).second) continue;
        Process p;
        auto read = read_process(t->id.pid, kBasic | kExe | kCwd | kFds);
        if (read && read->id == t->id) {
            p = std::move(*read);
        } else {
            p.id = t->id;
            p.ppid = t->ppid;
            p.uid = t->uid;
            p.cmdline = t->command.unredacted();  // process_snapshot redacts it
        }
        std::vector<ProcessId> kids;
        for (const Target* c : targets)
            if (c->ppid == t->id.pid) kids.push_back(c->id);
        events.push_back(process_snapshot(session_, p, reason, kids));
    }
    if (!events.empty()) record(events);
}

namespace {
// How the signal being recorded is sent.
const char* via(const Target& t, int sig) {
    if (sig == SIGKILL && t.cgroup_killed) return "cgroup.kill";
    return t.pidfd.valid() ? "pidfd" : "kill";
}
}  // namespace

// The intents mode only: the signal about to be sent, as its record will read if the kernel
// accepts it; the record itself (on_signal) carries the same ts and the real result.

void TeardownRecorder::on_signalling(const Target& t, int sig) {
    if (!intents_) return;
    auto [it, fresh] = signalling_.try_emplace({t.id.pid, t.id.starttime, sig});
    if (!fresh) return;  // its intent is written (a cgroup.kill that failed, then pidfds)
    Event e = process_signal(session_, t.id, sig, via(t, sig), 0);
    stamp(std::span(&e, 1));
    it->second.ts = e.ts_ns;
    if (intents_failed_) return;  // the rest in memory only (write_intents)
    if (auto line = line_of(e)) {
        write_lines(*line + '\n');
        it->second.data = std::move(e.data);
        it->second.line = std::move(*line);
    }
}

void TeardownRecorder::on_signal(const Target& t, int sig, const Status& result) {
    Event e =
        process_signal(session_, t.id, sig, via(t, sig), result.ok() ? 0 : result.error().code);
    if (auto it = signalling_.find({t.id.pid, t.id.starttime, sig}); it != signalling_.end()) {
        e.ts_ns = it->second.ts;
        // Its intent is in the file already: only its line is owed, which is the intent's
        // unless the kernel refused the signal (or it went another way than announced).
        if (!intents_failed_) {
            if (!it->second.line.empty() && e.data == it->second.data)
                lines_.push_back(std::move(it->second.line));
            else if (auto line = line_of(e))
                lines_.push_back(std::move(*line));
        }
        unrecorded_.push_back(std::move(e));
        return;
    }
    record(std::span(&e, 1));
}

void TeardownRecorder::on_exit(const Target& t, warden::Outcome how) {
    exited_.insert({t.id.pid, t.id.starttime});
    post(process_exit(session_, t.id, std::nullopt, std::nullopt, exit_phase(how)));
}

// Distinct and rising: the ts is what recovery matches a line and its record by.
void TeardownRecorder::stamp(std::span<Event> events) {
    for (Event& e : events) {
        last_ts_ = std::max(now_ns(), last_ts_ + 1);
        e.ts_ns = last_ts_;
    }
}

// One write(); once one fails, the rest stay in memory only (as without intents): a full disk
// is not retried before every signal.
void TeardownRecorder::write_intents(std::span<const Event> events) {
    if (intents_failed_) return;
    std::string text;
    for (const Event& e : events) {
        auto line = line_of(e);
        if (!line) return;
        text += *line;
        text += '\n';
        lines_.push_back(std::move(*line));
    }
    write_lines(text);
}

std::optional<std::string> TeardownRecorder::line_of(const Event& e) {
    auto line = intent_lines(std::span(&e, 1));
    if (!line) {
        intents_failed_ = line.error();
        return std::nullopt;
    }
    line->pop_back();  // its newline
    return std::move(*line);
}

void TeardownRecorder::write_lines(std::string_view text) {
    if (intents_failed_) return;
    if (auto st = intents_->write_lines(text); !st) intents_failed_ = st.error();
}

void TeardownRecorder::record_exits_no_pass_saw() {
    for (const auto& [pid, starttime] : snapshotted_) {
        const ProcessId id{pid, starttime};
        if (exited_.contains({pid, starttime}) || is_alive(id)) continue;
        exited_.insert({pid, starttime});
        post(process_exit(session_, id, std::nullopt, std::nullopt,
                          exit_phase(warden::Outcome::AlreadyGone)));
    }
}

// Posted when there is a journal; else kept for whoever counts them later.
void TeardownRecorder::post(Event e) {
    if (journal_) {
        journal_->post(std::move(e));
        return;
    }
    if (intents_) {
        stamp(std::span(&e, 1));
        write_intents(std::span(&e, 1));
    }
    unrecorded_.push_back(std::move(e));
}

// Appended before the signal they precede, unless the journal failed once already: then
// counted only, so that a held lock or a full disk costs one short wait, not one per signal.
// Without a journal, kept for whoever counts them later.
void TeardownRecorder::record(std::span<const Event> events) {
    if (!journal_) {
        size_t first = unrecorded_.size();
        unrecorded_.insert(unrecorded_.end(), events.begin(), events.end());
        if (intents_) {
            std::span<Event> mine(unrecorded_.begin() + static_cast<ptrdiff_t>(first),
                                  unrecorded_.end());
            stamp(mine);
            write_intents(mine);
        }
        return;
    }
    if (failed_) {
        journal_->count_lost(events, *failed_);
        return;
    }
    if (auto r = journal_->append_all(events); !r) {
        failed_ = r.error();
        journal_->count_lost(events, r.error());
    }
}

}  // namespace warden::journal
