#include "journal/teardown_record.hpp"

#include "proc/process.hpp"

namespace warden::journal {

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
            p.cmdline = t->command;
        }
        std::vector<ProcessId> kids;
        for (const Target* c : targets)
            if (c->ppid == t->id.pid) kids.push_back(c->id);
        events.push_back(process_snapshot(session_, p, reason, kids));
    }
    if (!events.empty()) record(events);
}

void TeardownRecorder::on_signal(const Target& t, int sig, const Status& result) {
    Event e = process_signal(session_, t.id, sig, t.pidfd.valid() ? "pidfd" : "kill",
                             result.ok() ? 0 : result.error().code);
    record(std::span(&e, 1));
}

void TeardownRecorder::on_exit(const Target& t, warden::Outcome how) {
    exited_.insert({t.id.pid, t.id.starttime});
    post(process_exit(session_, t.id, std::nullopt, std::nullopt, exit_phase(how)));
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
    if (journal_)
        journal_->post(std::move(e));
    else
        unrecorded_.push_back(std::move(e));
}

// Appended before the signal they precede, unless the journal failed once already: then
// counted only, so that a held lock or a full disk costs one short wait, not one per signal.
// Without a journal, kept for whoever counts them later.
void TeardownRecorder::record(std::span<const Event> events) {
    if (!journal_) {
        unrecorded_.insert(unrecorded_.end(), events.begin(), events.end());
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
