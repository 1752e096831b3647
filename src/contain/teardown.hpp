// Teardown: end a process tree, politely first, bounded always, never the wrong process.
//
// Teardown::run() is plan → EOF window → SIGTERM (leaves first, then SIGCONT) → grace →
// freeze + SIGKILL → re-plan until nothing new → verify → report. The essay on why each step
// exists opens teardown.cpp. Callers:
//   - the keeper (shim):  Teardown(containment.scope(&child), opts).run()
//   - the relay, when the keeper died and the tree reparented to it: a scope with the
//     server as its root, subreaper = true (every process whose ppid is us is a member) and
//     sole_parent = true (the keeper, our only other child, is reaped already)
//   - reap: a scope built from the selected ProcessIds (+ cgroup / marker it found),
//     subreaper = false.
// The caller closes the server's stdin before run() when it wants an EOF window.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "contain/layers.hpp"
#include "mcpwarden/types.hpp"
#include "proc/process.hpp"
#include "sys/cgroup.hpp"
#include "sys/pidfd.hpp"
#include "sys/sensitive_text.hpp"

namespace warden {

class Child;

// What to tear down, and with which tools. Containment::scope() fills it for a session.
struct TeardownScope {
    std::vector<ProcessId> roots{};  // the server (pidns: the namespace init first, then it)
    const Cgroup* cgroup = nullptr;  // members = cgroup.procs; cgroup.kill/freeze for SIGKILL
    bool subreaper = false;          // we are the tree's subreaper: ppid == us are members,
                                     // and we reap (waitpid) what dies
    bool sole_parent = false;        // every child of ours belongs to the tree: waitpid(-1)
                                     // may reap anything and ECHILD proves none is left
    std::string session_marker{};    // also sweep processes with MCPWARDEN_SESSION=<this>
    std::optional<uid_t> uid{};      // only processes of this uid (default: the root's uid)
    bool use_pidfd = true;
    Faults faults{};
    LayerReport layers{};    // copied into the report
    Child* child = nullptr;  // receives the server's wait status if we reap it
    pid_t ns_init = 0;       // pidns: SIGKILL of this pid ends the whole namespace
};

enum class Role { Root, Descendant, Inherited, CgroupMember, Marker, NamespaceInit };
enum class Outcome {
    Pending,          // still alive (a survivor when the report says so)
    ExitedInEof,      // ended inside the EOF window, before any signal
    ExitedAfterTerm,  // ended inside the grace window after SIGTERM
    Killed,           // ended after SIGKILL (or cgroup.kill / the namespace's end)
    AlreadyGone,      // ended between the snapshot and the first signal
    IdentityChanged,  // its PID now names another process: never signalled
};
const char* to_string(Role r);
const char* to_string(Outcome o);
// The `phase` of a journal `process.exit` row for this outcome: "eof_window",
// "grace_window", "after_kill", "before_signal" (gone before anything was sent) or
// "identity_changed" (the PID names another process now: nothing of ours exited, and
// nothing was sent to it).
const char* exit_phase(Outcome o);

// One process of the tree, as planned and as it ended.
struct Target {
    ProcessId id{};
    pid_t ppid = 0;
    uid_t uid = 0;
    SensitiveText command{};  // display form of argv (a record gets it redacted)
    Role role = Role::Descendant;
    int depth = 0;      // distance from the top of its branch; deepest signalled first
    int round = 0;      // plan round that found it (0 = the first snapshot)
    Pidfd pidfd{};      // bound to id, or invalid (no pidfd layer / pidfd_open failed)
    ProcessId bound{};  // the identity the pidfd was bound to (id, unless a test rewrote it)
    Outcome how = Outcome::Pending;
    double ended_ms = -1;        // ms since run() started, when it was seen gone
    std::vector<int> signals{};  // what was sent, in order
    bool cgroup_killed = false;  // the SIGKILL being recorded comes from cgroup.kill
};

struct PortCheck {
    std::string proto{};    // "tcp" / "udp" / "tcp6" / "udp6"
    std::string address{};  // as bound by the tree, e.g. "127.0.0.1"
    uint16_t port = 0;
    bool bindable = false;
    double released_ms = -1;  // ms since run() started when bind() first succeeded
};

struct PhaseTimes {
    double plan_ms = 0, eof_ms = 0, term_ms = 0, grace_ms = 0, kill_ms = 0, verify_ms = 0;
    double total_ms = 0;
    // CPU time of the plan (this thread's), a figure that holds under load where plan_ms,
    // the wall time to the first SIGTERM, takes in every wait for a core.
    double plan_cpu_ms = 0;
};

// The counts (TeardownCounts) are mcpwarden/types.hpp's, the API's as they are.
struct TeardownReport : TeardownCounts {
    std::vector<Target> targets{};       // every process seen, in plan order (pidfds closed)
    std::vector<ProcessId> survivors{};  // must be empty
    int rounds = 0;
    PhaseTimes phases{};
    LayerReport layers{};
    std::vector<PortCheck> ports{};
    bool cgroup_empty = false;         // cgroup.events populated 0 (when there was a cgroup)
    bool reaped_all = false;           // waitpid(-1) gave ECHILD (sole_parent only)
    std::optional<int> root_status{};  // server's wait status if we reaped it
    // e.g. "cgroup.kill failed: ..., fell back to pidfds"; a note may name a command.
    std::vector<SensitiveText> notes{};

    bool ok() const { return survivors.empty(); }
    // Error naming each survivor ("2 processes survived teardown: 4711 (sleep 60), ...").
    // For the terminal: its commands are unredacted.
    Status verdict() const;
    // The report as JSON, integers only, so times are integer microseconds ("ended_us",
    // "phases_us", "released_us"; -1: not seen). Each command and note is written as `text`
    // gives it: a record's is journal::teardown_report_json, which redacts them; the engine
    // itself has no redactor and serializes no text of the tree as it stands.
    using TextOut = std::string (*)(const SensitiveText&);
    std::string to_json_string(TextOut text) const;
    std::string render_text() const;  // for humans: unredacted
};

// The journal's hooks, called in order: snapshot (before any signal) → signal → exit.
class TeardownObserver {
  public:
    virtual ~TeardownObserver() = default;
    virtual void on_snapshot(int round, const std::vector<const Target*>& targets) = 0;
    // Right before each signal the engine sends (its result follows in on_signal): a
    // record that must survive the signaller is written here (the keeper's, shim/keeper.cpp).
    virtual void on_signalling(const Target& /*t*/, int /*sig*/) {}
    virtual void on_signal(const Target& t, int sig, const Status& result) = 0;
    virtual void on_exit(const Target& t, Outcome how) = 0;
};

struct TeardownOptions {
    std::chrono::milliseconds eof_window{0};    // 0: no EOF window
    std::chrono::milliseconds grace{2000};      // SIGTERM → SIGKILL
    std::chrono::milliseconds kill_wait{3000};  // bound on waiting after SIGKILL
    int max_rounds = 16;                        // re-plan bound
    bool verify_ports = true;
    // prepare() keeps nothing for a tree of more members than this (a pidfd and an open
    // directory each, held while the session is idle).
    size_t max_planned_ahead = 256;
    TeardownObserver* observer = nullptr;
    // Test seam: called with the first snapshot after pidfds are bound and before any
    // signal; a test rewrites a target's identity to inject PID reuse.
    std::function<void(std::vector<Target>&)> after_plan{};
};

class Teardown {
  public:
    explicit Teardown(TeardownScope scope, TeardownOptions opts = {});
    ~Teardown();
    Teardown(const Teardown&) = delete;
    Teardown& operator=(const Teardown&) = delete;

    // Plans ahead, while the tree is idle and nothing is being torn down: binds each member
    // present now to a pidfd by identity and lists the ports it holds, and keeps them, with
    // each member's /proc directory open. run() then reads each known member once more
    // instead of planning it from nothing, and plans afresh only what is new since; the
    // snapshot is still taken, and announced, by run(). Called again, it brings the plan up
    // to date. Never signals, never calls the observer. See "A plan made ahead" in
    // teardown_ahead.cpp.
    void prepare();

    // Runs the whole sequence once. Never throws; survivors are in the report.
    TeardownReport run();
    // The same, with the options chosen when the teardown is asked for (the observer of a
    // keeper's records, its windows), for a Teardown prepared ahead.
    TeardownReport run(TeardownOptions opts);

  private:
    struct State;
    State* s_;
};

}  // namespace warden
