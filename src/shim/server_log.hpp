// The server's own log: its stderr kept, per server identity, bounded and rotated.
//
// A server explains itself on stderr: a Python traceback, "OAuth keys file not found". Most
// clients drop or hide that stream, so when the server dies the explanation is gone. The relay
// still passes every byte of it to the client as before (relay.hpp); this keeps a copy.
//
// Where: <the journal's directory>/logs/<name>-<hash>/stderr.log, rotated to stderr.log.1 …
// stderr.log.<files-1> (the default journal's directory is the state directory, so the logs
// sit beside it; a session with its own --journal keeps its logs beside that one). The hash is
// of the command line and the working directory: every session and every restart of one
// server writes the same file, so `mcpwarden logs NAME -f` follows across restarts and
// hibernation. Directories are 0700, files 0600.
//
// Each line: `TIME SESSION PID TEXT`, the time in UTC to the microsecond (when the relay read
// it), the session id, the server's pid, then the line as display text (sys/text.hpp), its
// credentials replaced by the journal's redaction (journal/redact.hpp) before it reaches the
// disk. A PEM private key spans lines: from its BEGIN line to its END line nothing is kept but
// one "***". Lines mcpwarden adds itself (a server started, died, restarted) have the same
// shape and start with "[mcpwarden]".
//
// The bound: the files never hold more than `files` × `file_size` bytes; a line longer than
// kMaxLogLine is cut. Rotation takes the directory's lock (flock on .lock), so that two sessions
// of one server rotate once between them.
//
// Never in the relay's way: the relay hands each read to on_stderr(), which copies it into a
// queue of at most `queue` bytes and returns (no disk, no redaction, no allocation beyond the
// copy). A writer thread of its own does the rest. When the writer falls behind (a slow disk,
// a flood), what does not fit is dropped and counted, and the log says how much was lost where
// it was lost: the server and the relay never wait for the disk. `logs = false` keeps no file;
// the queue and the writer still run, for the last lines a crash message names (tail()).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "shim/relay.hpp"
#include "sys/fd.hpp"

namespace warden::shim {

struct LogSettings {
    bool on = true;                      // `logs = false`: no file
    size_t file_size = size_t{1} << 20;  // one file's bound (`log-size`)
    int files = 4;                       // the live file and its rotated ones (`log-files`)
    size_t queue = size_t{1} << 20;      // bytes waiting for the writer; beyond: dropped
    bool redact = true;                  // false only for MCPWARDEN_FAULT=log_unredacted
    bool block = false;                  // MCPWARDEN_FAULT=log_blocking: the relay waits
};

inline constexpr std::string_view kLogFile = "stderr.log";
inline constexpr size_t kMaxLogLine = size_t{16} << 10;  // longer lines are cut

// <dir of journal_db>/logs
std::string logs_root(const std::string& journal_db);
// "<name>-<16 hex>": the display name, made safe for a file name, and a hash of the command
// line and the working directory.
std::string log_key(std::string_view name, const std::vector<std::string>& argv,
                    std::string_view cwd);

// A log file rotated in place: `live`.<files-2> → `live`.<files-1>, …, `live` → `live`.1, the
// oldest dropped, so that the log never spans more than `files` files. Only if `held` (the
// descriptor the caller writes to) is still the file named `live`: a writer sharing the file may
// have rotated it already, and then nothing moves. The caller holds whatever lock its writers
// share, and opens `live` anew afterwards. Returns whether it rotated.
bool rotate_log_file(const std::string& live, int files, int held);

// One line of a log file.
struct LogLine {
    int64_t ts_ns = 0;  // wall clock
    std::string session;
    int64_t pid = 0;
    std::string text;
};
std::string format_log_line(const LogLine& l);  // with its newline
std::optional<LogLine> parse_log_line(std::string_view line);
// "2026-12-06T17:33:51.123456Z"
std::string log_time(int64_t ts_ns);

class ServerLog final : public StderrTap {
  public:
    // `dir` is the identity's directory ("" or settings.on false: no file).
    ServerLog(std::string dir, std::string session, LogSettings settings);
    ~ServerLog() override;
    ServerLog(const ServerLog&) = delete;
    ServerLog& operator=(const ServerLog&) = delete;

    // The relay's thread: a read of the server's stderr. Copies and returns.
    void on_stderr(std::string_view bytes) override;
    // A new server (the first, a restart, a wake): its lines carry `pid`, tail() starts over.
    void server_started(pid_t pid);
    // A line of mcpwarden's own, in order with the server's ("[mcpwarden] " is prepended).
    void note(std::string_view text);
    // The last `n` lines (redacted) of the current server's stderr, its unfinished last line
    // included, once what was queued before the call is written (waits up to `bound`).
    std::vector<std::string> tail(size_t n, std::chrono::milliseconds bound);
    // Writes what is queued, then ends the writer (idempotent). Before the process exits.
    void close();

    struct Stats {
        uint64_t lines = 0, written_bytes = 0, dropped_bytes = 0, rotations = 0;
        std::string error;  // why the file could not be written, if it could not
    };
    Stats stats() const;
    const std::string& dir() const { return dir_; }

  private:
    struct Item {
        enum class Kind : uint8_t { bytes, started, note, flush } kind = Kind::bytes;
        int64_t ts_ns = 0;
        int64_t pid = 0;
        std::string text;
        uint64_t ticket = 0;  // flush: the tail() that waits for it
    };
    void push(Item item);
    void run();
    void take(Item& item);
    void line_done(int64_t ts_ns, std::string_view line);
    void emit(int64_t ts_ns, std::string_view text);
    void write_out();
    bool open_live_file();
    void rotate();

    const std::string dir_, session_;
    const LogSettings settings_;

    mutable std::mutex mu_;
    std::condition_variable wake_writer_, written_;
    std::vector<Item> queue_;
    size_t queued_bytes_ = 0;
    uint64_t dropped_ = 0, dropped_unsaid_ = 0;
    uint64_t flush_asked_ = 0, flush_done_ = 0;
    bool stop_ = false;
    std::deque<std::string> tail_;  // under mu_: the current server's last lines
    std::string partial_;           // the writer's: the line being read
    bool cutting_ = false;          // the rest of a line over kMaxLogLine is being dropped
    bool in_pem_ = false;           // between a private key's BEGIN and END lines
    int64_t pid_ = 0, partial_ts_ = 0;
    Stats stats_;  // under mu_
    Fd file_, lock_;
    uint64_t file_bytes_ = 0;
    std::string out_;  // formatted lines not written yet
    std::thread writer_;
};

}  // namespace warden::shim
