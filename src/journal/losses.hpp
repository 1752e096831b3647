// What a writer could not record, counted, and kept where counting needs no disk space.
//
// The promise is exact: every record a writer meant to make is either on record or counted in
// a journal.degraded record (journal.cpp, "A journal that cannot be written"). The count is
// itself a record, though, written the next time the journal accepts a transaction; when the
// disk stays full until the writer exits, that time never comes for it, and a count held in
// memory dies with the process. So a writer that counts a loss also keeps the count in a
// slot of the lock file reserved when the journal was opened: the region after the turn page
// (append_lock.hpp) holds kSlots slots of kSlotSize bytes, written as zeros
// while there was room, so overwriting one needs no block the filesystem does not have.
//
// A writer claims a free slot at its first loss with an OFD lock on the slot's bytes (taken
// without blocking: the first slot nobody holds), rewrites it with pwrite() whenever the
// count changes, and empties it once journal.degraded is committed. The lock dies with the
// open file, so with its process: whoever opens the journal next finds a slot with a count
// and no holder, takes its lock, commits the count as journal.degraded (marked
// "recovered": "loss_slot") and empties it, all under the append lock, so two writers never
// record one slot twice.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "journal/journal.hpp"
#include "sys/fd.hpp"

namespace warden::journal {

// Events that could not be recorded, by kind, with the ids of the requests concerned: what the
// next journal.degraded record reports. Exact counts; the id list is bounded.
struct Losses {
    static constexpr size_t kIdsKept = 1000;
    int64_t events = 0;
    std::map<std::string, int64_t> kinds;
    Json request_ids = Json::array();
    int64_t request_ids_omitted = 0;
    // The first and the last event counted: the ids of the requests they concern (null when
    // they concern none) and when they were due.
    Json first_id, last_id;
    int64_t first_ts = 0, last_ts = 0;
    std::string session;  // of the first loss: journal.degraded is shown with that session
    std::string error;    // the first failure
    // Recovered from the slot of a writer that is gone (LossSlot::left_behind): its pid, which
    // the record names instead of the recovering writer's, and "recovered": "loss_slot".
    int64_t dead_writer_pid = 0;

    bool empty() const { return events == 0; }
    void add(const Event& e, const std::string& why);
    void merge(Losses&& o);
    // The journal.degraded record of these losses.
    Event record() const;
    // These and `more` (not yet recorded either) as a slot's text, bounded by the slot's
    // size: no request id list, the first and last only.
    std::string slot_text(const Losses& more) const;
    // A slot's text back as losses (request ids: none); nullopt when it is none.
    static std::optional<Losses> from_slot_text(std::string_view text);
};

// How many records a writer counted as lost since it opened (Journal::losses), by kind, and
// how many of them are not on record in a journal.degraded yet.
struct LossCount {
    int64_t events = 0;
    std::map<std::string, int64_t> kinds;
    int64_t owed = 0;
};

class LossSlot {
  public:
    static constexpr int64_t kRegionAt = 4096;  // after the turn page
    static constexpr int64_t kSlotSize = 1024;
    static constexpr int kSlots = 64;

    // Writes zeros where the lock file `fd` does not have the region yet (under the append
    // lock: no slot is in use until the region is whole). False: no room for it.
    static bool reserve(int fd);
    // The first slot of `fd`'s region nobody holds, held by this open file from now on.
    static std::optional<LossSlot> claim(int fd);
    // Slots with a count whose holder is gone, each held now, with its text.
    struct Left;
    static std::vector<Left> left_behind(int fd);

    LossSlot(LossSlot&& o) noexcept : fd_(o.fd_), index_(o.index_) { o.fd_ = -1; }
    LossSlot& operator=(LossSlot&&) = delete;
    LossSlot(const LossSlot&) = delete;
    ~LossSlot();

    // The slot's text becomes `text` (cut to the slot's size); "" empties it.
    bool store(std::string_view text);
    int index() const { return index_; }

  private:
    LossSlot(int fd, int index) : fd_(fd), index_(index) {}
    int fd_;
    int index_;
};

struct LossSlot::Left {
    LossSlot slot;
    Losses losses;
};

// The counts of a writer that has no Journal at all (it could not be opened: the disk was full
// when the session began), kept in a slot of the journal's lock file all the same, for the
// next writer to record. Needs the lock file to exist, with its slots.
class LossLedger {
  public:
    // For the journal at `db` (Paths::for_db); nullopt when its lock file cannot be opened or
    // has no free slot.
    static std::optional<LossLedger> open(const std::string& db);
    void count(const Event& e, const std::string& why);
    LossCount counted() const;

  private:
    LossLedger(Fd fd, LossSlot slot) : fd_(std::move(fd)), slot_(std::move(slot)) {}
    Fd fd_;  // declared before slot_: its lock is released before the file closes
    LossSlot slot_;
    Losses losses_;
};

// The counts kept in the loss slots of the lock file `lock_path` and not on record yet (of a
// writer that still runs, or of one gone that nobody recovered yet), by the session of their
// first loss ("" for none): read only.
std::map<std::string, int64_t> pending_losses(const std::string& lock_path);
int64_t pending_losses_total(const std::string& lock_path);

}  // namespace warden::journal
