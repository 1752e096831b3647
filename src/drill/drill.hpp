// src/drill — `mcpwarden drill` and `mcpwarden demo`: the crash drill of the incident
// practice, automated.
//
// This folder owns the scripted crash drills: start a server the way an MCP client does,
// reach a chosen point of the conversation, kill the client abruptly, and measure from
// outside what the server tree did about it. It also owns `bench teardown`
// (teardown_bench.hpp), the demo (demo.hpp) and the identity helpers both use (tagged.hpp).
//
// One trial:
//
//   start_client        fork a small client process; it starts the server — through
//                       `mcpwarden run --journal J -- CMD` (shim) or CMD itself with no
//                       process group of its own, as the TypeScript SDK does (direct) — and
//                       speaks JSON-RPC to it over pipes
//   reach_crash_point   before-init: nothing sent; idle: initialize + tools/list answered;
//                       in-flight: a call outstanding (tools/list unless --tool names one);
//                       mid-response: the first bytes of the call's answer read, the rest not
//   snapshot_tree       every live process carrying the trial's MCPWARDEN_SESSION marker,
//                       each bound to a pidfd, with its RSS and the ports it listens on
//   kill_client         SIGKILL: the server sees EOF on stdin, the shim also sees its parent go
//   watch_release       pidfd exits and port re-binds, timed from the kill, until the tree is
//                       gone (and `run` exited), or the window closes (direct: eof + term
//                       grace, the time mcpwarden itself would give the tree)
//   read_the_record     shim: the journal — the session, the in-flight call abandoned, the
//                       teardown's snapshot → signal → exit order and its report
//   clean_up            whatever still carries the marker is SIGKILLed by identity, so
//                       nothing is left when the drill returns, whatever the result
//
// A drill never sends a tool call the user did not name: by default only `tools/list`.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "journal/verify.hpp"
#include "mcpwarden/types.hpp"
#include "proc/process.hpp"
#include "sys/result.hpp"

namespace warden::drill {

std::string_view to_string(CrashAt c);
Result<CrashAt> parse_crash_at(std::string_view text);  // "before-init" | "idle" | …

enum class Mode : uint8_t { shim, direct };
std::string_view to_string(Mode m);

// What a drill is asked (types.hpp: the public options; handle_interrupts and color are the
// api's), and what only the demo and the tests set.
struct DrillOptions : warden::DrillOptions {
    bool shim = true;    // run the shim trials (the demo always does); journal required then
    bool verify = true;  // `audit verify` the journal after the trials
    std::chrono::milliseconds settle{500};  // before-init: wait before the kill
    std::string cwd;                        // the server's; empty: ours
    std::string label;                      // display name; default: argv[0]
};

// One process of the server tree, as seen just before the kill.
struct TreeProcess {
    ProcessId id;
    pid_t ppid = 0;
    std::string command;
    double rss_mb = 0;
    bool server = false;   // the process the client (or `run`) started
    double ended_ms = -1;  // ms after the kill when it was seen gone; -1: not seen
};

struct PortState {
    std::string addr;
    uint16_t port = 0;
    double free_ms = -1;  // ms after the kill when it could be bound again; -1: not seen
};

// What the journal says about a shim trial.
struct JournalFindings {
    bool session_found = false;
    bool client_lost = false;
    std::string cause;  // session.client_lost cause
    // The relay recorded the server's answer to the call: it was written to the client's
    // pipe, even if the client died before reading it (so it is answered, not abandoned).
    bool response_recorded = false;
    std::optional<bool> abandoned;  // the outstanding call: nullopt when none was
    std::string end_reason;         // session.end reason
    int snapshots = 0, signals = 0, exits = 0;
    bool order_ok = false;             // snapshot → signal → exit, abandoned before any signal
    std::string order_detail;          // why not, when not
    std::vector<std::string> excerpt;  // the rows that tell the story, formatted
};

struct TrialResult {
    Mode mode = Mode::shim;
    CrashAt crash_at = CrashAt::InFlight;
    int index = 0;
    std::string error;  // the trial could not run; nothing else is meaningful then

    std::string tag;        // MCPWARDEN_SESSION of the tree (shim: the run's session id)
    std::string call;       // "tools/call sleep", "tools/list", "" (before-init, idle)
    std::string call_id;    // JSON-RPC id of the call, as text
    bool answered = false;  // the client had the whole answer before it died
    std::vector<std::string> notes;

    std::vector<TreeProcess> tree;  // at the kill
    std::vector<PortState> ports;   // listening at the kill
    double tree_mb = 0;

    // The server's fate: "exited on EOF", "needed SIGTERM", "needed SIGKILL",
    // "still running", "gone before the kill".
    std::string server_fate;
    int helpers = 0;  // tree processes other than the server
    int helpers_eof = 0, helpers_term = 0, helpers_kill = 0;  // shim: teardown report

    std::vector<TreeProcess> left;  // still alive when the watch ended
    double left_mb = 0;
    bool port_held = false;  // a port still held when the watch ended
    double gone_ms = -1;     // the last tree process ended; -1: not all did
    double ports_free_ms = -1;
    double released_ms = -1;  // processes gone and ports free; -1: not within the watch
    double watched_ms = 0;
    double run_exit_ms = -1;  // shim: `mcpwarden run` exited
    int run_exit_code = -1;
    int cleaned_up = 0;        // SIGKILLed by identity by the drill afterwards
    bool clean_after = false;  // a final scan found nothing carrying the tag

    std::optional<JournalFindings> journal;  // shim

    // Nothing of the tree outlived the watch, and (shim) the record is complete.
    bool contained() const;
};

struct DrillResult {
    std::string label;
    std::vector<std::string> command;
    CrashAt crash_at = CrashAt::InFlight;
    std::string call;  // what was called at the crash point
    std::string journal_path;
    std::vector<TrialResult> trials;
    bool verified = false;  // audit verify ran
    bool verify_ok = false;
    int verify_exit = 0;
    int64_t verify_records = 0;
    std::string verify_summary;  // first line of the verify report

    // Every shim trial contained its tree, the journal verifies, nothing is left anywhere.
    bool ok() const;
    const TrialResult* first(Mode m) const;
};

// Runs the trials (direct before shim for each index when compare_direct). Fails only when
// the drill cannot run at all (no command, no journal path); a trial that fails carries its
// error and the drill goes on.
Result<DrillResult> run_drill(const DrillOptions& opts);

// SIGINT, SIGTERM and SIGHUP make the running trial stop at its next step and still clean
// up; the remaining trials are skipped (run_drill returns what ran, interrupted() is true).
// Installed by the CLI, without SA_RESTART so that blocking waits return.
void handle_interrupts();
bool interrupted();

// Output. `color`: ANSI colours (the caller decides: a TTY and no NO_COLOR).
std::string render_text(const DrillResult& r, bool color);
std::string render_markdown(const DrillResult& r);
nlohmann::json to_json(const DrillResult& r);
nlohmann::json to_json(const TrialResult& t);
// Parses what to_json(TrialResult) wrote (the demo re-renders saved results).
TrialResult trial_from_json(const nlohmann::json& j);

// Human forms shared by the drill and the demo: "12 ms", "2.1 s", "never".
std::string format_ms(double ms);
std::string format_mb(double mb);
// `s` in SGR colour `code` ("31" red, "32" green, "1" bold) when `color`, else as it is.
std::string paint(bool color, const char* code, const std::string& s);

// The journal a run wrote, verified from its first record, into the report's verify_* fields
// (a DrillReport, a DemoReport): whether it ran, its verdict and exit code, the records it
// read, the first line of its report.
template <class Report>
void verify_journal(const std::string& path, Report& r) {
    journal::VerifyOptions vo;
    vo.path = path;
    auto v = journal::verify(vo);
    r.verified = true;
    r.verify_ok = v.ok;
    r.verify_exit = v.exit_code;
    r.verify_records = v.records;
    std::string text = journal::format_report(v);
    r.verify_summary = text.substr(0, text.find('\n'));
}

}  // namespace warden::drill
