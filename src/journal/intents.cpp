#include "journal/intents.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "fault/faults.hpp"
#include "journal/prepared.hpp"
#include "journal/store.hpp"
#include "sys/fd.hpp"

namespace warden::journal {

namespace {

constexpr size_t kIntentFileMax = 256u << 20;  // a session's requests, far beyond any seen
constexpr std::string_view kIntentSuffix = ".intent";

constexpr const char* kDirWhat = "journal intents directory";
constexpr const char* kFileWhat = "journal intent file";

// The file's text, once the file and its directory are trusted (Error code EPERM: refused).
// O_NONBLOCK: a FIFO planted in its place must not hang whoever recovers.
Result<std::string> read_intent_file(const Paths& paths, const std::string& file) {
    if (auto st = check_intents_dir(paths); !st) return Error{st.error().message, EPERM};
    Fd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
    if (!fd.valid()) {
        if (errno == ELOOP)
            return Error{
                fmt::format("{} {}: is a symbolic link; refusing to follow it", kFileWhat, file),
                EPERM};
        return Error::sys("open", file, errno);
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return Error::sys("fstat", file, errno);
    if (auto ok = check_intent_file(file, st); !ok) return Error{ok.error().message, EPERM};
    std::string text;
    char buf[65536];
    for (;;) {
        ssize_t n = ::read(fd.get(), buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return Error::sys("read", file, errno);
        if (n == 0) break;
        text.append(buf, static_cast<size_t>(n));
        if (text.size() > kIntentFileMax)
            return Error::msg(
                fmt::format("intent file {}: larger than {} bytes", file, kIntentFileMax));
    }
    return text;
}

}  // namespace

bool parse_intent_line(std::string_view line, Event& e) {
    auto j = Json::parse(line, nullptr, false);
    if (!j.is_object()) return false;
    auto kind = j.find("kind"), session = j.find("session"), ts = j.find("ts"),
         data = j.find("data");
    if (kind == j.end() || !kind->is_string() || session == j.end() || !session->is_string() ||
        ts == j.end() || !ts->is_number_integer() || data == j.end() || !data->is_object())
        return false;
    e.kind = kind->get<std::string>();
    e.session = session->get<std::string>();
    e.ts_ns = ts->get<int64_t>();
    e.data = std::move(*data);
    return e.ts_ns > 0 && !e.kind.empty();
}

Status check_intents_dir(const Paths& paths) {
    struct stat st {};
    if (::lstat(paths.intents.c_str(), &st) != 0) {
        if (errno == ENOENT) return {};
        return Error::sys("lstat", paths.intents, errno);
    }
    if (S_ISLNK(st.st_mode))
        return Error::msg(fmt::format("{} {}: is a symbolic link; refusing to follow it", kDirWhat,
                                      paths.intents));
    if (!S_ISDIR(st.st_mode))
        return Error::msg(fmt::format("{} {}: not a directory; refusing to use it; remove it",
                                      kDirWhat, paths.intents));
    return check_sidecar(kDirWhat, paths.intents, st, /*private_only=*/false);
}

Status check_intent_file(const std::string& file, const struct stat& st) {
    if (!S_ISREG(st.st_mode))
        return Error::msg(fmt::format("{} {}: not a regular file; refusing to use it; remove it",
                                      kFileWhat, file));
    return check_sidecar(kFileWhat, file, st, /*private_only=*/false);
}

namespace {

// Whose lines a recovery takes: all (their writers are gone), or only the keeper's teardown
// records of a file whose relay still runs and keeps it.
enum class Lines { all, keepers_only };

// A writer that died mid-teardown leaves the snapshots of processes whose end it never saw.
// A process on record without an exit reads as a survivor to whoever audits the journal, so
// each that is gone by now (its pid no longer names the process of that start time) gets
// one: "before_signal" when nothing was sent to it on record, else "unobserved" (it ended
// after a signal, unseen by the writer that sent it). One still alive is left to whoever
// tears it down (reap --session records its own snapshot and exit). Only for a dead writer's
// whole file: a live keeper's records are still coming.
void close_unseen_exits(std::vector<Event>& intents, std::vector<int64_t>& line_of) {
    auto key = [](const Event& e) {
        return std::make_pair(e.data.value("pid", int64_t{0}),
                              e.data.value("starttime", uint64_t{0}));
    };
    std::set<std::pair<int64_t, uint64_t>> snapped, signalled, ended;
    for (const Event& e : intents) {
        if (e.kind == "process.snapshot") snapped.insert(key(e));
        if (e.kind == "process.signal") signalled.insert(key(e));
        if (e.kind == "process.exit") ended.insert(key(e));
    }
    if (intents.empty()) return;
    const std::string session = intents.front().session;
    const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    for (const auto& [pid, starttime] : snapped) {
        if (ended.count({pid, starttime}) || pid <= 0) continue;
        if (process_starttime(static_cast<pid_t>(pid)) == std::optional<uint64_t>(starttime))
            continue;
        Event e = process_exit(session, ProcessId{static_cast<pid_t>(pid), starttime}, std::nullopt,
                               std::nullopt,
                               signalled.count({pid, starttime}) ? "unobserved" : "before_signal");
        e.ts_ns = now;
        intents.push_back(std::move(e));
        line_of.push_back(0);
    }
}

// The session an intent file is of: its name without the suffix.
std::string session_of_intent_file(const std::string& file) {
    std::string session(file.substr(file.rfind('/') + 1));
    if (session.ends_with(kIntentSuffix)) session.resize(session.size() - kIntentSuffix.size());
    return session;
}

// An intent file's lines, read: the records to recover, each with its relay line's number
// (0 for the keeper's), and a stand-in for each line that is not one.
struct IntentLines {
    std::vector<Event> intents;
    std::vector<int64_t> line_of;  // each relay's line's number: its writer's ticket is minus it
    std::vector<Event> bad;
};

IntentLines read_intent_lines(const std::string& text, const std::string& file,
                              const std::string& session, Lines which, IntentRecovery& out) {
    IntentLines r;
    size_t at = 0;
    int64_t relays_line = 0;  // the keeper's lines are no tickets (is_teardown_record)
    for (int64_t line_no = 1; at < text.size(); ++line_no) {
        size_t nl = text.find('\n', at);
        std::string_view line(text.data() + at, (nl == std::string::npos ? text.size() : nl) - at);
        at = nl == std::string::npos ? text.size() : nl + 1;
        Event e;
        const char* why = nl == std::string::npos       ? "torn (no end of line)"
                          : !parse_intent_line(line, e) ? "not a record"
                          : e.session != session        ? "of another session"
                                                        : nullptr;
        if (!why) {
            const bool keepers = is_teardown_record(e.kind);
            if (!keepers) ++relays_line;
            if (which == Lines::keepers_only && !keepers) continue;
            r.line_of.push_back(keepers ? 0 : relays_line);
            r.intents.push_back(std::move(e));
            continue;
        }
        ++relays_line;
        out.problems.push_back(
            fmt::format("intent file {}: line {} ({} bytes) is {}: not recovered", file, line_no,
                        line.size(), why));
        r.bad.push_back(Event{"activity.request", session, 0,
                              Json{{"intent_file", file}, {"intent_line", line_no}}});
    }
    return r;
}

// A session whose start never reached the log (its relay died first, or could not write
// it): its records are not left without one.
Result<bool> session_on_record(Db& db, const std::string& session) {
    auto started = db.prepare("SELECT 1 FROM sessions WHERE session = ?1");
    if (!started) return started.error();
    started->bind(1, session);
    int rc = started->step();
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return db.error("look up a session", rc);
    return rc == SQLITE_ROW;
}

// The records of the file not on record yet, in file order, each to be appended at `next`
// onward. A record may name a request by the ticket its writer had for it (a request_seq < 0:
// the request was not chained yet when the record was written, as the abandoned requests of
// a teardown). Ticket -k is the relay's k-th line of the file (Journal::append_intents; the
// keeper's lines between them are none of its tickets), so it names the seq that line has on
// record, or gets now: the records recovered are appended in file order right after the
// head, and nothing comes before them in that transaction.
Status collect_missing(Db& db, const IntentLines& lines, int64_t next, IntentRecovery& out,
                       std::vector<Event>& missing) {
    const bool on_record_again = Faults::from_env().recovery_appends_all;  // the guard off
    auto held =
        db.prepare("SELECT seq FROM records WHERE session = ?1 AND kind = ?2 AND ts = ?3 LIMIT 1");
    if (!held) return held.error();
    std::map<int64_t, int64_t> seq_of_line;
    for (size_t i = 0; i < lines.intents.size(); ++i) {
        const Event& e = lines.intents[i];
        held->bind(1, e.session).bind(2, e.kind).bind(3, e.ts_ns);
        int rc = held->step();
        if (rc == SQLITE_ROW && !on_record_again) {
            seq_of_line[lines.line_of[i]] = held->int64(0);
            held->reset();
            ++out.already;
            continue;
        }
        held->reset();
        if (rc != SQLITE_DONE && rc != SQLITE_ROW) return db.error("look up an intent", rc);
        Event m = e;
        if (auto rs = named_request(m); rs && *rs < 0)
            if (auto named = seq_of_line.find(-*rs); named != seq_of_line.end())
                set_named_request(m, named->second);
        seq_of_line[lines.line_of[i]] = next++;
        missing.push_back(std::move(m));
    }
    return {};
}

Result<IntentRecovery> recover_lines(Journal& journal, const std::string& file, Lines which) {
    IntentRecovery out;
    auto text = read_intent_file(journal.paths(), file);
    if (!text) {
        if (text.error().code == ENOENT) return out;
        if (text.error().code != EPERM) return text.error();
        // Not ours to recover, nor to remove: whoever planted it is reported, not obeyed.
        out.refused = true;
        out.problems.push_back(text.error().message + " (not recovered)");
        return out;
    }
    const std::string session = session_of_intent_file(file);
    IntentLines lines = read_intent_lines(*text, file, session, which, out);
    out.bad = static_cast<int64_t>(lines.bad.size());
    if (which == Lines::all) close_unseen_exits(lines.intents, lines.line_of);

    auto produce = [&](Db& db) -> Result<std::vector<Event>> {
        out.recovered = out.already = out.synthesized = 0;
        auto head = db.prepare("SELECT seq FROM head WHERE id = 1");
        if (!head) return head.error();
        int64_t next = head->step() == SQLITE_ROW ? head->int64(0) + 1 : 1;
        std::vector<Event> missing;
        if (which == Lines::all && !Faults::from_env().intents_left_unstarted) {
            auto started = session_on_record(db, session);
            if (!started) return started.error();
            if (!*started && !lines.intents.empty()) {
                missing.push_back(
                    synthesized_start(session, lines.intents.front().ts_ns - 1, "intent_file"));
                ++next;
                ++out.synthesized;
            }
        }
        if (auto st = collect_missing(db, lines, next, out, missing); !st) return st.error();
        out.recovered = static_cast<int64_t>(missing.size()) - out.synthesized;
        return missing;
    };
    if (!lines.intents.empty()) {
        if (auto r = journal.append_produced(produce, /*seqs_in_order=*/true); !r) return r.error();
    }
    if (!lines.bad.empty()) {
        journal.count_lost(lines.bad, Error::msg(out.problems.front()));
        if (auto r = journal.append_all({}); !r) return r.error();  // journal.degraded now
    }
    if (which == Lines::all && ::unlink(file.c_str()) != 0 && errno != ENOENT)
        return Error::sys("unlink", file, errno);
    return out;
}

}  // namespace

bool is_teardown_record(std::string_view kind) {
    return kind == "process.snapshot" || kind == "process.signal" || kind == "process.exit";
}

Result<IntentFile> IntentFile::open(const Paths& paths, const std::string& session) {
    auto fd = open_intent_file(paths, session);
    if (!fd) return fd.error();
    IntentFile f;
    f.fd_ = std::move(*fd);
    f.path_ = paths.intent_file(session);
    return f;
}

Status IntentFile::write(std::span<const Event> events) {
    auto text = intent_lines(events);
    if (!text) return text.error();
    return write_lines(*text);
}

Status IntentFile::write_lines(std::string_view text) {
    ssize_t n = ::write(fd_.get(), text.data(), text.size());
    if (n == static_cast<ssize_t>(text.size())) return {};
    int err = n < 0 ? errno : ENOSPC;
    if (n > 0) {
        off_t end = ::lseek(fd_.get(), 0, SEEK_END);
        if (end >= n) (void)!::ftruncate(fd_.get(), end - n);
    }
    return Error::sys("write", path_, err);
}

Result<IntentRecovery> recover_intents(Journal& journal, const std::string& file) {
    return recover_lines(journal, file, Lines::all);
}

Result<IntentRecovery> recover_keepers_intents(Journal& journal, std::string_view session) {
    std::string file = journal.paths().intent_file(session);
    if (file.empty()) return IntentRecovery{};
    return recover_lines(journal, file, Lines::keepers_only);
}

Result<int64_t> append_missing(Journal& journal, std::span<const Event> events) {
    int64_t appended = 0;
    auto produce = [&](Db& db) -> Result<std::vector<Event>> {
        auto held = db.prepare(
            "SELECT 1 FROM records WHERE session = ?1 AND kind = ?2 AND ts = ?3 LIMIT 1");
        if (!held) return held.error();
        std::vector<Event> missing;
        for (const Event& e : events) {
            held->bind(1, e.session).bind(2, e.kind).bind(3, e.ts_ns);
            int rc = held->step();
            held->reset();
            if (rc == SQLITE_ROW) continue;
            if (rc != SQLITE_DONE) return db.error("look up a record", rc);
            missing.push_back(e);
        }
        appended = static_cast<int64_t>(missing.size());
        return missing;
    };
    if (events.empty()) return appended;
    if (auto r = journal.append_produced(produce); !r) return r.error();
    return appended;
}

Result<IntentRecovery> recover_session_intents(Journal& journal, std::string_view session) {
    std::string file = journal.paths().intent_file(session);
    if (file.empty()) return IntentRecovery{};
    return recover_intents(journal, file);
}

Result<IntentRecovery> recover_dead_writers_session(Journal& journal, const std::string& session) {
    std::optional<bool> alive;
    auto ask = [&](Db& db) -> Result<std::vector<Event>> {
        alive = session_writer_alive(db, session);
        return std::vector<Event>{};
    };
    if (auto r = journal.append_produced(ask); !r) return r.error();
    if (alive != false) return IntentRecovery{};
    return recover_session_intents(journal, session);
}

std::optional<bool> session_writer_alive(Db& db, const std::string& session) {
    auto writer = db.prepare(
        "SELECT writer_pid, writer_starttime, writer_boot_id FROM sessions WHERE session = ?1");
    if (!writer) return std::nullopt;
    writer->bind(1, session);
    if (writer->step() != SQLITE_ROW) return std::nullopt;
    WriterIdentity w;
    w.process.pid = static_cast<pid_t>(writer->int64(0));
    w.process.starttime = static_cast<uint64_t>(writer->int64(1));
    w.boot_id = std::string(writer->text(2));
    return writer_alive(w);
}

bool intent_file_held(const std::string& file) {
    Fd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
    if (!fd.valid()) return false;
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) return false;  // released at close
    return errno == EWOULDBLOCK;
}

Event synthesized_start(const std::string& session, int64_t ts, std::string_view from) {
    return Event{"session.start", session, ts,
                 Json{{"synthesized", true},
                      {"from", std::string(from)},
                      {"server_name", ""},
                      {"writer", Json{{"pid", 0}, {"starttime", 0}, {"boot_id", ""}}}}};
}

std::vector<std::string> intent_sessions(const Paths& paths) {
    std::vector<std::string> out;
    DIR* d = ::opendir(paths.intents.c_str());
    if (!d) return out;
    while (dirent* e = ::readdir(d)) {
        std::string_view name(e->d_name);
        if (name.size() > kIntentSuffix.size() && name.ends_with(kIntentSuffix))
            out.emplace_back(name.substr(0, name.size() - kIntentSuffix.size()));
    }
    ::closedir(d);
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace warden::journal
