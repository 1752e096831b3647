#include "journal/losses.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "fault/faults.hpp"
#include "journal/canonical_json.hpp"
#include "journal/store.hpp"
#include "sys/fd.hpp"

namespace warden::journal {

namespace {

// The id an event concerns (activity.* records carry one), or null.
Json event_id(const Event& e) {
    if (e.call) {  // its canonical text, which reads back as the typed id it was written from
        auto id = Json::parse(e.call->id, nullptr, false);
        return id.is_discarded() ? Json(nullptr) : id;
    }
    if (!e.kind.starts_with("activity.") || !e.data.is_object()) return nullptr;
    auto id = e.data.find("id");
    return id == e.data.end() ? Json(nullptr) : *id;
}

// An id as a slot keeps it: whole when short, else its first bytes as a string.
Json bounded_id(const Json& id) {
    constexpr size_t kIdBytes = 96;
    auto text = id.dump();
    if (text.size() <= kIdBytes) return id;
    return Json{{"truncated", text.substr(0, kIdBytes)}};
}

std::string kind_key(std::string name) {
    std::replace(name.begin(), name.end(), '.', '_');
    return name;
}

}  // namespace

void Losses::add(const Event& e, const std::string& why) {
    const int64_t ts = e.ts_ns ? e.ts_ns : now_ns();
    Json id = event_id(e);
    if (events == 0) {
        first_id = id;
        first_ts = ts;
    }
    last_id = id;
    last_ts = ts;
    ++events;
    ++kinds[e.kind];
    if (session.empty()) session = e.session;
    if (error.empty()) error = why;
    if (id.is_null()) return;
    if (request_ids.size() < kIdsKept)
        request_ids.push_back(std::move(id));
    else
        ++request_ids_omitted;
}

void Losses::merge(Losses&& o) {
    if (o.empty()) return;
    if (empty()) {
        first_id = std::move(o.first_id);
        first_ts = o.first_ts;
    }
    last_id = std::move(o.last_id);
    last_ts = o.last_ts;
    events += o.events;
    for (auto& [k, n] : o.kinds)
        kinds[k] += n;
    for (auto& id : o.request_ids) {
        if (request_ids.size() < kIdsKept)
            request_ids.push_back(std::move(id));
        else
            ++request_ids_omitted;
    }
    request_ids_omitted += o.request_ids_omitted;
    if (session.empty()) session = std::move(o.session);
    if (error.empty()) error = std::move(o.error);
}

Event Losses::record() const {
    Json by_kind = Json::object();
    for (auto& [k, n] : kinds)
        by_kind[kind_key(k)] = n;
    Json data{{"lost_events", events},
              {"lost_kinds", by_kind},
              {"request_ids", request_ids},
              {"first", Json{{"id", first_id}, {"ts", first_ts}}},
              {"last", Json{{"id", last_id}, {"ts", last_ts}}},
              {"error", error},
              {"writer_pid", dead_writer_pid ? dead_writer_pid : static_cast<int64_t>(::getpid())}};
    if (dead_writer_pid) data["recovered"] = "loss_slot";
    if (request_ids_omitted) data["request_ids_omitted"] = request_ids_omitted;
    return Event{"journal.degraded", session, 0, std::move(data)};
}

std::string Losses::slot_text(const Losses& more) const {
    const Losses& first = empty() ? more : *this;
    const Losses& last = more.empty() ? *this : more;
    Json by_kind = Json::object();
    for (const Losses* l : {this, &more})
        for (auto& [k, n] : l->kinds)
            by_kind[kind_key(k)] = by_kind.value(kind_key(k), int64_t{0}) + n;
    auto process = WriterIdentity::self();
    Json j{{"lost_events", events + more.events},
           {"lost_kinds", by_kind},
           {"first", Json{{"id", bounded_id(first.first_id)}, {"ts", first.first_ts}}},
           {"last", Json{{"id", bounded_id(last.last_id)}, {"ts", last.last_ts}}},
           {"session", first.session},
           {"error", first.error.substr(0, 200)},
           {"writer_pid", static_cast<int64_t>(process.process.pid)},
           {"writer_starttime", process.process.starttime}};
    std::string text = j.dump();
    if (text.size() >= static_cast<size_t>(LossSlot::kSlotSize)) {
        j["error"] = "";
        text = j.dump();
    }
    return text;
}

std::optional<Losses> Losses::from_slot_text(std::string_view text) {
    auto j = Json::parse(text, nullptr, false);
    if (!j.is_object()) return std::nullopt;
    auto n = j.find("lost_events");
    if (n == j.end() || !n->is_number_integer() || n->get<int64_t>() <= 0) return std::nullopt;
    Losses l;
    l.events = n->get<int64_t>();
    if (auto k = j.find("lost_kinds"); k != j.end() && k->is_object())
        for (auto& [name, count] : k->items())
            if (count.is_number_integer()) {
                // Kept with underscores: record() writes them as they are.
                l.kinds[name] = count.get<int64_t>();
            }
    auto at = [&](const char* which, Json& id, int64_t& ts) {
        auto it = j.find(which);
        if (it == j.end() || !it->is_object()) return;
        id = it->value("id", Json(nullptr));
        ts = it->value("ts", int64_t{0});
    };
    at("first", l.first_id, l.first_ts);
    at("last", l.last_id, l.last_ts);
    l.session = j.value("session", std::string());
    l.error = j.value("error", std::string());
    l.dead_writer_pid = std::max<int64_t>(j.value("writer_pid", int64_t{0}), 1);
    return l;
}

// ---- The slots ----------------------------------------------------------------------------

namespace {

constexpr int64_t kRegionEnd = LossSlot::kRegionAt + LossSlot::kSlots * LossSlot::kSlotSize;

// An OFD lock (per open file, released when its last descriptor closes: with the process)
// on slot `index`, taken without waiting; F_UNLCK releases it.
bool slot_lock(int fd, int index, short type) {
    struct flock l {};
    l.l_type = type;
    l.l_whence = SEEK_SET;
    l.l_start = LossSlot::kRegionAt + index * LossSlot::kSlotSize;
    l.l_len = LossSlot::kSlotSize;
    return ::fcntl(fd, F_OFD_SETLK, &l) == 0;
}

}  // namespace

bool LossSlot::reserve(int fd) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) return false;
    if (st.st_size >= kRegionEnd) return true;
    // Zeros written, not a hole (ftruncate) nor fallocate's unwritten extents: overwriting
    // written blocks is the one write a full filesystem still takes.
    const int64_t from = std::max<int64_t>(st.st_size, kRegionAt);
    std::string zeros(static_cast<size_t>(kRegionEnd - from), '\0');
    ssize_t n = ::pwrite(fd, zeros.data(), zeros.size(), from);
    if (n != static_cast<ssize_t>(zeros.size())) {
        // Half a region is none: no slot is claimed beyond the file's end.
        if (::ftruncate(fd, std::min<int64_t>(st.st_size, kRegionAt)) != 0) return false;
        return false;
    }
    return ::fdatasync(fd) == 0;
}

std::optional<LossSlot> LossSlot::claim(int fd) {
    struct stat st {};
    if (::fstat(fd, &st) != 0 || st.st_size < kRegionEnd) return std::nullopt;
    for (int i = 0; i < kSlots; ++i) {
        if (!slot_lock(fd, i, F_WRLCK)) continue;
        // Free, but perhaps with a count nobody recovered yet: not ours to overwrite.
        char first = 0;
        if (::pread(fd, &first, 1, kRegionAt + i * kSlotSize) == 1 && first == '\0')
            return LossSlot(fd, i);
        (void)slot_lock(fd, i, F_UNLCK);
    }
    return std::nullopt;
}

std::vector<LossSlot::Left> LossSlot::left_behind(int fd) {
    std::vector<Left> out;
    std::string region(static_cast<size_t>(kRegionEnd - kRegionAt), '\0');
    ssize_t n = ::pread(fd, region.data(), region.size(), kRegionAt);
    if (n != static_cast<ssize_t>(region.size())) return out;
    for (int i = 0; i < kSlots; ++i) {
        const char* at = region.data() + i * kSlotSize;
        if (*at == '\0' || !slot_lock(fd, i, F_WRLCK)) continue;  // empty, or its writer lives
        LossSlot slot(fd, i);
        // Read again under the lock: its writer may have emptied it meanwhile.
        std::string text(static_cast<size_t>(kSlotSize), '\0');
        if (::pread(fd, text.data(), text.size(), kRegionAt + i * kSlotSize) != kSlotSize) continue;
        text.resize(std::strlen(text.c_str()));
        if (text.empty()) continue;
        auto losses = Losses::from_slot_text(text);
        if (!losses) {
            // Garbled: it can count nothing; emptied so that it does not stay in the way.
            (void)slot.store("");
            continue;
        }
        out.push_back(Left{std::move(slot), std::move(*losses)});
    }
    return out;
}

std::map<std::string, int64_t> pending_losses(const std::string& lock_path) {
    std::map<std::string, int64_t> out;
    Fd fd(::open(lock_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
    if (!fd.valid()) return out;
    std::string region(static_cast<size_t>(kRegionEnd - LossSlot::kRegionAt), '\0');
    if (::pread(fd.get(), region.data(), region.size(), LossSlot::kRegionAt) !=
        static_cast<ssize_t>(region.size()))
        return out;
    for (int i = 0; i < LossSlot::kSlots; ++i) {
        const char* at = region.data() + i * LossSlot::kSlotSize;
        if (auto l = Losses::from_slot_text(
                std::string_view(at, ::strnlen(at, static_cast<size_t>(LossSlot::kSlotSize)))))
            out[l->session] += l->events;
    }
    return out;
}

int64_t pending_losses_total(const std::string& lock_path) {
    int64_t n = 0;
    for (const auto& [session, events] : pending_losses(lock_path))
        n += events;
    return n;
}

std::optional<LossLedger> LossLedger::open(const std::string& db) {
    if (Faults::from_env().loss_slot_off) return std::nullopt;  // counts in memory only
    const Paths paths = Paths::for_db(db);
    Fd fd(::open(paths.lock.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
    if (!fd.valid()) return std::nullopt;
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0 ||
        !check_sidecar("journal lock", paths.lock, st, /*private_only=*/true))
        return std::nullopt;
    auto slot = LossSlot::claim(fd.get());
    if (!slot) return std::nullopt;
    return LossLedger(std::move(fd), std::move(*slot));
}

void LossLedger::count(const Event& e, const std::string& why) {
    losses_.add(e, why);
    (void)slot_.store(losses_.slot_text(Losses{}));
}

LossCount LossLedger::counted() const {
    LossCount c;
    c.events = c.owed = losses_.events;
    c.kinds = losses_.kinds;
    return c;
}

LossSlot::~LossSlot() {
    if (fd_ >= 0) (void)slot_lock(fd_, index_, F_UNLCK);
}

bool LossSlot::store(std::string_view text) {
    std::string padded(static_cast<size_t>(kSlotSize), '\0');
    std::memcpy(padded.data(), text.data(), std::min(text.size(), padded.size() - 1));
    return ::pwrite(fd_, padded.data(), padded.size(), kRegionAt + index_ * kSlotSize) == kSlotSize;
}

}  // namespace warden::journal
