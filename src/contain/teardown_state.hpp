// Teardown::State: one teardown's plan, clock and report as its steps share them. Internal
// to src/contain/: the steps are spread over the files of one concept each, as teardown.cpp's
// essay lists them (teardown_plan.cpp, teardown_ahead.cpp, teardown_ports.cpp,
// teardown_signals.cpp, teardown_verify.cpp).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <ctime>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "contain/member_dir.hpp"
#include "contain/teardown.hpp"
#include "proc/sockets.hpp"
#include "sys/fd.hpp"

namespace warden {

struct Teardown::State {
    using Clock = std::chrono::steady_clock;
    enum class Phase { Plan, Eof, Term, Kill, Verify };

    // A process the plan may take: as read, with the /proc/PID directory it was read through
    // while the plan still needs it (`dir` invalid when read by path: a scan),
    // and whether it descends from us (`ours`: listed under us or under a member that
    // does), which no ancestor of ours can.
    struct Candidate : MemberDir {
        Role role = Role::Descendant;
        bool ours = false;
    };

    // The sockets of a member that a plan made ahead examined for good, by inode: each
    // listening one with its port (a listener stays one, on its address, until it is closed),
    // and each of another family than inet, with none (a socket's family never changes). Any
    // other socket may yet become a port (bound, then listen()) and is examined again by the
    // next plan. A settled socket no longer in the fd table was closed: forgotten, port and all.
    using SettledSockets = std::map<uint64_t, std::optional<PortCheck>>;

    // The plan holds at most this many members' directories open at once; past it, a member
    // is read by path, as a scan reads it (a pidfd per target is held already).
    static constexpr size_t kMaxOpenDirs = 128;

    static double thread_cpu_ms() {
        timespec ts{};
        ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
    }

    TeardownScope scope;
    TeardownOptions opts;
    Clock::time_point t0;
    double cpu0_ms = 0;  // thread CPU time at t0
    Clock::time_point term_started;
    Phase phase = Phase::Plan;
    int terms_delivered = 0;  // SIGTERMs the kernel accepted: until one is, nothing was asked
    std::vector<Target> targets;
    std::set<std::pair<pid_t, uint64_t>> skipped;  // seen and deliberately left alone
    std::optional<std::set<pid_t>> ancestors;      // read when first needed (protects())
    pid_t self = 0;
    uid_t uid = 0;
    bool uid_known = false;
    std::vector<PortCheck> ports;
    SocketTable inet;  // the tree's inet sockets (one network namespace assumed)
    bool inet_loaded = false;
    bool walked = false;  // a plan came from the children files, not a full /proc scan
    // A plan made ahead (prepare()): the targets it bound, their directories kept open, and
    // what it found of each one's sockets.
    bool ahead = false;
    bool too_large_ahead = false;  // past TeardownOptions::max_planned_ahead once
    std::map<pid_t, MemberDir> open_dirs;
    std::map<std::pair<pid_t, uint64_t>, SettledSockets> sockets_ahead;
    Fd cg_events;
    TeardownReport report;

    double now_ms() const {
        return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    }

    // --- plan ---------------------------------------------------------------------------
    void start_clock();
    void read_ancestors();
    bool protects(const Candidate& c);
    int plan_members(int round, bool full_scan = false);
    void plan_ahead();
    void keep_what_is_found(const std::vector<Candidate>& cands);
    void learn_uid(const std::vector<Candidate>& cands);
    void take_the_new(const std::vector<Candidate>& cands, int round, std::vector<size_t>& added,
                      bool list_ports = true);
    bool admissible(const Candidate& c);
    std::vector<Candidate> collect(bool full_scan);
    // collect(), in its steps: the candidates found so far, and how many directories they
    // hold open.
    struct Collection {
        std::vector<Candidate> out;
        std::set<pid_t> seen;
        size_t dirs = 0;
    };
    bool collect_from_cgroup(Collection& found);
    void collect_by_walk(Collection& found);
    void collect_by_scan(Collection& found, bool by_marker);
    bool take(Collection& found, pid_t pid, uint64_t starttime, Role role, pid_t parent = 0,
              bool ours = false);
    bool read_known(pid_t pid, Collection& found, Candidate& c);
    static void ours_by_parent(std::vector<Candidate>& out);
    Role role_of_root(const ProcessId& r) const;
    void walk_children(std::vector<Candidate>& out,
                       const std::function<bool(pid_t, pid_t, bool)>& add);
    // `list_ports`: the member's ports are listed now (a plan made ahead settles them itself).
    void bind_and_add(const Candidate& c, int round, std::vector<size_t>& added,
                      bool list_ports = true);
    bool bind_pidfd(Target& t, const Candidate& c);
    std::vector<PortCheck> ports_of(const Target& t, const Candidate& c,
                                    SettledSockets* settled = nullptr);
    bool ports_through_pidfd(const Target& t, const std::vector<std::pair<int, uint64_t>>& socks,
                             std::vector<PortCheck>& out, SettledSockets* settled);
    void ports_through_tables(const Target& t, const std::vector<std::pair<int, uint64_t>>& socks,
                              std::vector<PortCheck>& out, SettledSockets* settled);
    void remember_port(PortCheck pc);
    void compute_depths();
    void announce_snapshot(int round, const std::vector<size_t>& added);
    // --- deliver / observe ----------------------------------------------------------------
    void wait_in_eof_window();
    void send_term_leaves_first(const std::vector<size_t>& which);
    void wait_for_grace();
    bool wait_for_exits(Clock::time_point deadline, bool root_only);
    bool ended(Target& t);
    void mark_gone(Target& t);
    void reap_children();
    Status signal(Target& t, int sig);
    bool identity_holds(Target& t);
    void identity_changed(Target& t, uint64_t now_starttime);
    // --- escalate / sweep / verify --------------------------------------------------------
    void kill_what_remains();
    std::vector<size_t> members_among(const std::vector<size_t>& which);
    void kill_targets(const std::vector<size_t>& which);
    void sweep_until_nothing_new();
    void verify_from_outside();
    void build_report();
    std::vector<size_t> pending() const;
    bool cgroup_populated();
    bool init_holds_cgroup() const;
};

}  // namespace warden
