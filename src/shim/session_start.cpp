// The Session's start-up (spawn_keeper_and_server): the sandbox's plan, the keeper forked
// before any thread, the plan's path rules while the keeper sets up the containment, the
// journal's opening beside the server's start, and the relay with what it watches.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "contain/layers.hpp"
#include "sandbox/dry_start.hpp"
#include "shim/keeper.hpp"
#include "shim/session.hpp"
#include "shim/settling_sink.hpp"
#include "sys/cpu_affinity.hpp"
#include "sys/exec_path.hpp"
#include "sys/fd_passing.hpp"
#include "sys/pipe.hpp"
#include "sys/prctl.hpp"

extern char** environ;

namespace warden::shim {

namespace {

std::string random_session_id() {
    unsigned char b[8];
    if (::getrandom(b, sizeof b, 0) != static_cast<ssize_t>(sizeof b)) {
        auto t = std::chrono::steady_clock::now().time_since_epoch().count();
        std::memcpy(b, &t, sizeof b);
    }
    std::string s;
    for (unsigned char c : b)
        s += fmt::format("{:02x}", c);
    return s;
}

// The run of a shared tree (src/share/broker.cpp) takes the session id its broker chose and
// recorded for the tree's clients. Removed from the environment at once: the server's own
// children must not take it (a nested `mcpwarden run` would reuse it).
std::optional<std::string> shared_tree_session_id() {
    const char* given = std::getenv("MCPWARDEN_SHARE_TREE");
    std::optional<std::string> id;
    if (given && std::strlen(given) == 16 &&
        std::string_view(given).find_first_not_of("0123456789abcdef") == std::string_view::npos)
        id = given;
    ::unsetenv("MCPWARDEN_SHARE_TREE");
    return id;
}

// A client may start us with 0, 1 or 2 closed; a pipe made later would land there and be
// mistaken for stdio. Point missing ones at /dev/null.
void ensure_stdio_open() {
    for (int fd = 0; fd < 3; ++fd)
        if (::fcntl(fd, F_GETFD) < 0) {
            int n = ::open("/dev/null", O_RDWR);
            if (n >= 0 && n != fd) {
                ::dup2(n, fd);
                ::close(n);
            }
        }
}

// The signals that end a session (read through the relay's signalfd), blocked before the
// first fork so none can take the default action (see spawn_keeper_and_server).
void block_session_signals() {
    sigset_t set;
    sigemptyset(&set);
    for (int sig : {SIGTERM, SIGINT, SIGHUP})
        sigaddset(&set, sig);
    ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

std::string basename_of(const std::string& p) {
    auto slash = p.rfind('/');
    return slash == std::string::npos ? p : p.substr(slash + 1);
}

// --explain under a profile: the server started once in a plan of its own before the real
// start, asked initialize and tools/list, torn down, and each denial it met said with the flag
// that allows it (src/sandbox/dry_start.hpp). A plan that cannot be made is left to the real
// start to report.
std::string dry_start_text(const RunOptions& opts, sandbox::Launch l) {
    l.session_id += "-dry";
    auto plan = sandbox::prepare(opts, l);
    if (!plan) return "";
    auto d = sandbox::dry_start(*plan, opts.command, l.executable, std::chrono::seconds(30));
    sandbox::remove_private_tmp(plan->private_tmp());
    return "mcpwarden: " +
           (d ? sandbox::render_dry_start(*d) : "dry start: " + d.error().message + "\n");
}

}  // namespace

Status Session::spawn_keeper_and_server() {
    ensure_stdio_open();
    // What follows changes signal state process-wide; a host that called run_session() (the
    // library) gets it back when the session is destroyed.
    host_signals_.emplace(std::initializer_list<int>{SIGPIPE, SIGXFSZ});
    // Before the keeper is forked and before the first journal write: a write past
    // RLIMIT_FSIZE must fail as EFBIG (the journal-failure policy), not kill us by SIGXFSZ
    // and leave the tree to PDEATHSIG. The spawner resets dispositions in the server.
    ::signal(SIGXFSZ, SIG_IGN);
    // Likewise SIGPIPE, before the first write to the keeper's control pipe: a keeper killed
    // early leaves that pipe without a reader, and the write must fail as EPIPE (the relay
    // then tears the tree down itself), not kill the relay and leave the tree to no one.
    ::signal(SIGPIPE, SIG_IGN);
    // SIGTERM/SIGINT/SIGHUP end the session through the relay's signalfd (start_relay), but
    // one can come before that exists: the server is already up (and the client may already
    // see it) while we wait for the keeper's "spawned". Left at their default, one would kill
    // us there and then, leaving the keeper to tear the tree down alone and unrecorded.
    // Blocked from now on, it stays pending and the signalfd reads it first thing.
    // The keeper inherits the mask (it ignores these anyway); the spawner resets the server's.
    block_session_signals();
    const std::optional<std::string> shared_tree = shared_tree_session_id();
    shared_tree_ = shared_tree.has_value();
    session_id_ = shared_tree.value_or(random_session_id());
    if (opts_.command.empty()) return Error::msg("run: no command given (mcpwarden run -- CMD)");
    if (starts_servers_again() && opts_.isolate == Isolate::Pidns) {
        spawn_exit_code_ = 2;
        return Error::msg(fmt::format(
            "{} cannot be combined with --isolate=pidns: the PID namespace ends with its first "
            "server, and a woken server would need a new one",
            opts_.idle_stop ? "--idle-stop"
            : opts_.lazy    ? "--lazy"
                            : "--restart on-failure"));
    }
    trace_phase("run_start");
    if (auto s = prepare_sandbox(); !s) return s;
    if (auto s = fork_keeper(); !s) return s;
    trace_phase("keeper_forked");
    if (auto s = complete_sandbox(); !s) return s;
    start_denial_counter();
    trace_phase("sandbox_complete");
    open_journal_early();
    if (auto s = spawned_early_ ? Status{} : await_spawn(); !s) {
        sandbox::remove_private_tmp(sandbox_.private_tmp());  // no server will use it
        return s;
    }
    find_limits();
    trace_phase("spawned_received");
    if (auto s = start_journal(); !s) return s;
    if (auto s = start_relay(); !s) return s;
    start_health();
    trace_phase("relay_started");
    if (opts_.explain) explain_relay();
    return {};
}

// ---- Start-up ---------------------------------------------------------------------------

void Session::watch_client() {
    // The client: our parent. A pidfd on it tells us when it exits, whatever thread of it
    // started us (PDEATHSIG would follow that thread, not the client). Parent 1 means we are
    // already orphaned or were started by init: no watch then, stdin EOF still works.
    client_.pid = ::getppid();
    if (client_.pid > 1) {
        if (auto id = read_identity(client_.pid)) client_ = *id;
        if (auto p = Pidfd::open(client_.pid)) parent_pidfd_ = std::move(*p);
        if (::getppid() != client_.pid) parent_pidfd_.reset();  // it died in between
        parent_note_ = parent_pidfd_.valid()
                           ? fmt::format("on   pidfd on the client (pid {})", client_.pid)
                           : "off  pidfd_open on the parent failed";
    } else {
        parent_note_ = "off  parent is pid 1 (already orphaned or started by init)";
    }
    // We are a subreaper too: if the keeper dies, its tree comes to us.
    auto sr = set_child_subreaper(true);
    relay_subreaper_note_ =
        sr ? "on   read back from PR_GET_CHILD_SUBREAPER" : "off  " + sr.error().message;
}

KeeperConfig Session::keeper_config() const {
    KeeperConfig kc;
    kc.session_id = session_id_;
    kc.command = opts_.command;
    kc.contain.use_cgroup = opts_.isolate != Isolate::None;
    kc.contain.use_pidns = opts_.isolate == Isolate::Pidns;
    kc.require_cgroup = opts_.isolate == Isolate::Cgroup;
    kc.require_pidns = opts_.isolate == Isolate::Pidns;
    kc.eof_grace = opts_.eof_grace;
    kc.term_grace = opts_.term_grace;
    kc.explain = opts_.explain;
    kc.journal_on = !opts_.no_journal;
    kc.journal_path = opts_.journal;
    kc.journal_sync = opts_.journal_sync;
    kc.server_name = opts_.name.empty() ? basename_of(opts_.command[0]) : opts_.name;
    kc.sandbox = &sandbox_;
    kc.hibernation = starts_servers_again();
    kc.contain.limits = {opts_.memory_max, opts_.tasks_max, opts_.cpu_max,
                         opts_.limits_best_effort};
    kc.start_asleep = opts_.lazy;
    return kc;
}

Status Session::fork_keeper() {
    watch_client();
    auto in = make_pipe(), out = make_pipe(), err = make_pipe(), control = make_pipe(),
         report = make_pipe();
    for (auto* p : {&in, &out, &err, &control, &report})
        if (!*p) return p->error();
    SocketPair fd_socket;
    if (starts_servers_again()) {
        auto sp = make_socket_pair();
        if (!sp) return sp.error();
        fd_socket = std::move(*sp);
    }

    KeeperConfig kc = keeper_config();

    // The keeper leaves the client's process group; we stay in it. Clients and process
    // managers stop a child tree with kill(-pgid, SIGKILL): a keeper in that group died with
    // us, nobody was left to tear down, and whatever had left the server's group (a setsid
    // helper holding a port) lived on under PID 1. In a group of its own it sees its
    // lifeline close and tears down. We stay, so that a terminal's ^C still reaches the relay.
    // Both sides call setpgid, so neither acts before the group is in place.
    const bool own_group = !kc.contain.faults.keeper_pgrp;
    // With path rules still to add after the fork, we and the keeper both have work at once:
    // the keeper is moved off our CPU as soon as it exists (src/sys/cpu_affinity.hpp), and
    // takes its whole set back on "sandbox-ready". Without, we sleep right after the fork and
    // the keeper has our CPU to itself (but for the journal's opening: open_journal_early).
    if (!sandbox_.complete())
        if (auto cpus = cpu_affinity(0); cpus && cpus->count() > 1) kc.cpus = *cpus;
    pid_t pid = ::fork();
    if (pid < 0) return Error::sys("fork", "keeper", errno);
    if (pid == 0) {
        // The keeper. Single-threaded: no thread exists yet in the relay.
        if (own_group) ::setpgid(0, 0);
        Fd client(parent_pidfd_.valid() ? ::fcntl(parent_pidfd_.get(), F_DUPFD_CLOEXEC, 3) : -1);
        parent_pidfd_.reset();
        in->write.reset();
        out->read.reset();
        err->read.reset();
        control->write.reset();
        report->read.reset();
        KeeperFds kf;
        kf.server_in = std::move(in->read);
        kf.server_out = std::move(out->write);
        kf.server_err = std::move(err->write);
        kf.control = std::move(control->read);
        kf.report = std::move(report->write);
        kf.client = std::move(client);
        kf.fd_socket = std::move(fd_socket.b);
        fd_socket.a.reset();
        denial_receiver_.reset();  // the relay's alone (sandbox/denials.hpp)
        // Not fd 2 itself: spawn_server puts the server's stderr pipe there to hand it over,
        // and puts this back after. Kept as fd 2, the keeper would hold the server's stderr
        // open for its whole life, and the relay would wait for an EOF that cannot come
        // until the keeper exits: every session's end would take the full drain bound.
        kf.log = Fd(kc.contain.faults.keeper_stderr ? 2 : ::fcntl(2, F_DUPFD_CLOEXEC, 3));
        ::_exit(keeper_main(kc, std::move(kf)));
    }
    keeper_pid_ = pid;
    if (kc.cpus) keeper_moved_off_ = move_child_off_our_cpu(pid, *kc.cpus);
    if (own_group) ::setpgid(pid, pid);
    if (auto p = Pidfd::open(pid)) keeper_pidfd_ = std::move(*p);
    server_in_ = std::move(in->write);
    server_out_ = std::move(out->read);
    server_err_ = std::move(err->read);
    control_ = std::move(control->write);
    report_ = std::move(report->read);
    fd_socket_ = std::move(fd_socket.a);
    (void)set_nonblocking(report_.get());
    reports_ = std::make_unique<LineReader>(report_.get());
    return {};
}

// The plan is made here, in the relay, so that --explain, session.start and
// --require-sandbox all describe the same rules the keeper's child applies (it inherits the
// plan, with its ruleset fd, across the fork). A plan that is only partly enforceable on
// this kernel is said on stderr, never downgraded in silence; with --require-sandbox it is
// refused (exit 125).
//
// Only the first half of the plan is made before the fork (src/sandbox/sandbox.hpp); its
// path rules, most of its cost, are added by complete_sandbox() while the keeper sets up the
// containment on the other core, and the keeper starts the server only once told they are in.
Status Session::prepare_sandbox() {
    if (opts_.sandbox == Sandbox::Off) return {};
    sandbox::Launch l;
    l.argv = opts_.command;
    auto exe = find_executable(opts_.command[0]);
    if (!exe) return {};  // the keeper's spawn reports it (127/126) as without a sandbox
    l.executable = *exe;
    char cwd[4096];
    if (::getcwd(cwd, sizeof cwd)) l.cwd = cwd;
    if (const char* h = std::getenv("HOME")) l.home = h;
    if (const char* t = std::getenv("TMPDIR")) l.tmp_parent = t;
    l.session_id = session_id_;
    const Faults faults = Faults::from_env();
    l.no_landlock = faults.landlock;
    l.no_runner_store = faults.runner_store;
    l.no_launcher = faults.sandbox_launcher;
    l.no_inner_commands = faults.sandbox_inner_commands;
    l.no_launcher_home = faults.sandbox_launcher_home_untold;
    if (opts_.explain) log(dry_start_text(opts_, l));
    l.count_denials = !faults.denials_uncounted;
    auto plan = sandbox::prepare_ahead(opts_, l);
    const std::string profile(sandbox::to_string(opts_.sandbox));
    if (!plan) {
        spawn_exit_code_ = 125;
        return Error::msg("--sandbox " + profile + ": " + plan.error().message);
    }
    sandbox_ = std::move(*plan);
    denial_receiver_ = sandbox_.take_denial_receiver();
    if (sandbox_.level() == "full") return {};
    std::string missing;
    for (const auto& n : sandbox_.not_enforced())
        missing += "\n  not enforced: " + n;
    if (opts_.require_sandbox) {
        spawn_exit_code_ = 125;
        return Error::msg("--require-sandbox: the " + profile +
                          " profile cannot be fully enforced here; not starting" + missing);
    }
    log("mcpwarden: --sandbox " + profile + " is only partly enforced on this kernel:" + missing +
        "\n");
    return {};
}

// The plan's path rules, added to the ruleset the keeper inherited (the same kernel object),
// then "sandbox-ready": the keeper does not start the server before that line. A plan that
// cannot be completed ends the session before any server: our end of the control pipe
// closes, the keeper, still waiting for the line, exits without starting one, and we reap it.
Status Session::complete_sandbox() {
    if (sandbox_.complete()) return {};
    if (Faults::from_env().sandbox_ready_early) {
        // The guard's negative control: the server is started before the rules are in.
        (void)write_all(control_.get(), "sandbox-ready\n", "keeper control pipe");
        if (auto s = await_spawn(); !s) return s;
        spawned_early_ = true;
    }
    if (auto st = sandbox_.add_path_rules(); !st) {
        spawn_exit_code_ = 125;
        control_.reset();
        int status = 0;
        ::waitpid(keeper_pid_, &status, 0);
        keeper_dead_ = true;
        return Error::msg("--sandbox " + std::string(sandbox::to_string(opts_.sandbox)) + ": " +
                          st.error().message);
    }
    if (!spawned_early_) (void)write_all(control_.get(), "sandbox-ready\n", "keeper control pipe");
    return {};
}

Status Session::await_spawn() {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (;;) {
        reports_->fill();
        if (auto line = reports_->next_line()) {
            auto m = parse_keeper_message(*line);
            if (m.kind == KeeperMessage::Kind::spawned || m.kind == KeeperMessage::Kind::asleep) {
                server_ = m.server;  // none yet when asleep (--lazy)
                cgroup_dir_ = m.cgroup_dir;
                layers_json_ = m.json;
                return {};
            }
            int st = 0;
            ::waitpid(keeper_pid_, &st, 0);
            keeper_dead_ = true;
            if (m.kind == KeeperMessage::Kind::spawn_failed) {
                spawn_exit_code_ = m.exit_code;
                if (m.exit_code == 126 || m.exit_code == 127)
                    return Error{
                        fmt::format("cannot run '{}': {}", opts_.command[0], std::strerror(m.err)),
                        m.err};
                return Error::msg(m.message);
            }
            return Error::msg("keeper: unexpected message: " + *line);
        }
        if (reports_->eof()) {
            int st = 0;
            ::waitpid(keeper_pid_, &st, 0);
            keeper_dead_ = true;
            return Error::msg("the keeper died before starting the server");
        }
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) return Error::msg("the keeper did not start the server in 30 s");
        pollfd p{report_.get(), POLLIN, 0};
        ::poll(&p, 1, static_cast<int>(left.count()));
    }
}

// The journal's start-up (journal_sink.cpp, "The journal's start-up") begins as soon as the
// keeper is forked and the sandbox complete: its milliseconds then overlap the keeper's start
// of the server, and it is most often over before a client that leaves at once (`claude mcp
// list`) has left. Not so with --lazy, whose session.start says which catalog it serves, read
// from the journal before the relay starts (start_journal), nor with the guard off
// (journal_start_inline). The relay forks nothing after the keeper, so no child is made while
// the thread may hold a lock of OpenSSL's or SQLite's: the keeper, forked just before, uses
// both.
//
// Where the thread runs matters as much as when. The keeper starts on our CPU, and gets it
// when we sleep (we wait for its "spawned"); a thread of ours that starts at that moment is
// placed there too, and the keeper waited for it, a scheduler slice or more: the server's
// start came 2-4 ms later than without the early opening, more than it saved the teardown
// (docs/BENCHMARKS.md, "teardown through the shim"). So the thread runs where the keeper is
// not: on any CPU but ours, or, when the keeper was moved off ours for the sandbox's path
// rules (fork_keeper), on ours alone. One CPU: nothing to choose.
void Session::open_journal_early() {
    opening_ = journal_opening();
}

std::unique_ptr<JournalSink> Session::journal_opening() const {
    if (opts_.no_journal || opts_.lazy || Faults::from_env().journal_start_inline) return nullptr;
    auto sink =
        JournalSink::opening(opts_.journal, opts_.journal_sync, session_id_,
                             opts_.on_journal_failure, opts_.record_args, 2, opening_cpus());
    if (shared_tree_) sink->leave_calls_to_clients();
    return sink;
}

std::optional<CpuSet> Session::opening_cpus() const {
    if (Faults::from_env().journal_opening_beside_keeper) return std::nullopt;
    if (keeper_moved_off_) return CpuSet::just(*keeper_moved_off_);
    auto ours = cpu_affinity(0);
    if (!ours) return std::nullopt;
    return ours->without(::sched_getcpu());
}

Status Session::start_journal() {
    std::vector<std::string> layers;
    auto lj = nlohmann::json::parse(layers_json_, nullptr, false);
    if (lj.is_object())
        for (auto& [name, v] : lj.items())
            if (v.is_object() && v.value("on", false)) layers.push_back(name);

    if (opts_.no_journal) {
        sink_ = std::make_unique<CountingSink>();
        return {};
    }
    journal::SessionStart s;
    s.session = session_id_;
    s.server_name = opts_.name.empty() ? basename_of(opts_.command[0]) : opts_.name;
    s.writer = journal::WriterIdentity::self();
    s.client = client_;
    if (client_.pid > 1)
        if (auto p = read_process(client_.pid, kCmdline); p && p->id == client_)
            s.client_argv = p->argv();
    if (auto k = read_identity(keeper_pid_)) s.keeper = *k;
    s.server = server_;
    s.server_argv = opts_.command;
    s.record_argv = opts_.record_argv;
    char cwd[4096];
    if (::getcwd(cwd, sizeof cwd)) s.cwd = cwd;
    for (char** e = environ; e && *e; ++e) {
        std::string_view kv(*e);
        s.env_names.emplace_back(kv.substr(0, kv.find('=')));
    }
    s.layers = layers;
    s.extra = journal::Json{
        {"eof_grace_ms", static_cast<int64_t>(opts_.eof_grace.count())},
        {"term_grace_ms", static_cast<int64_t>(opts_.term_grace.count())},
        {"stdout_guard", std::string(to_string(opts_.stdout_guard))},
        {"record_args", opts_.record_args == RecordArgs::None   ? "none"
                        : opts_.record_args == RecordArgs::Full ? "full"
                                                                : "preview"},
        {"journal_sync", opts_.journal_sync == JournalSync::Always ? "always" : "periodic"}};
    // Which settings files shaped these options, or why they were ignored (docs/SETTINGS.md).
    if (!opts_.settings_files.empty() || !opts_.settings_error.empty()) {
        journal::Json settings{{"files", opts_.settings_files}};
        if (!opts_.settings_error.empty()) settings["error"] = opts_.settings_error;
        s.extra["settings"] = std::move(settings);
    }
    s.extra["sandbox"] = sandbox_record(sandbox_);
    if (opts_.idle_stop) s.extra["idle_stop_ms"] = static_cast<int64_t>(opts_.idle_stop->count());
    if (opts_.restart != Restart::No)
        s.extra["restart"] =
            journal::Json{{"burst", opts_.restart_burst},
                          {"interval_ms", static_cast<int64_t>(opts_.restart_interval.count())}};
    s.extra.update(supervision_record());
    // The keeper opens its journal ahead of any teardown, but only after ours is open and
    // session.start is written: an opening holds the journal's lock (journal.cpp,
    // Impl::init), and ours, on the way to session.start, goes first. We say
    // "journal-started" when that is over.
    const int started_fd = keeper_dead_ ? -1 : control_.get();
    if (!opening_) opening_ = journal_opening();
    if (opening_) {
        opening_->begin(std::move(s), started_fd);
        journal_ = opening_.get();
        sink_ = std::move(opening_);
        return {};
    }
    if (Faults::from_env().journal_slow_open) std::this_thread::sleep_for(std::chrono::seconds(1));
    auto j = open_journal(opts_.journal, opts_.journal_sync);
    std::string err = j ? "" : j.error().message;
    auto sink = std::make_unique<JournalSink>(j ? std::move(*j) : nullptr, err, session_id_,
                                              opts_.on_journal_failure, opts_.record_args, 2);
    if (shared_tree_) sink->leave_calls_to_clients();
    journal_ = sink.get();
    sink_ = std::move(sink);
    if (!journal_->journal()) {
        journal_->warn_once(err);
    } else {
        if (opts_.lazy) s.extra["lazy"] = find_usable_catalog();
        journal_->append(journal::session_start(s));
        journal_->link_probe(s);
    }
    trace_phase("journal_started");
    if (started_fd >= 0) (void)write_all(started_fd, "journal-started\n", "keeper control pipe");
    return {};
}

Status Session::start_relay() {
    auto sfd = SignalFd::create({SIGTERM, SIGINT, SIGHUP, SIGCHLD});
    if (!sfd) return sfd.error();
    signals_.emplace(std::move(*sfd));

    RelayOptions ro;
    ro.max_message = opts_.max_message;
    ro.guard = opts_.stdout_guard;
    if (Faults::from_env().divert_uncapped) {
        // The diverted-output cap's negative control.
        ro.divert_total = 0;
        ro.divert_rate = 0;
    }
    if (Faults::from_env().relay_copy) {
        // The memory bound's negative control (docs/RELIABILITY.md): parse every line whole
        // and copy what a reader has not taken.
        ro.parse_limit = SIZE_MAX;
        ro.lend = false;
    }
    if (Faults::from_env().relay_queue_unreclaimed) ro.reclaim = false;  // a flood's control
    RelayFds fds;
    fds.server_in = std::move(server_in_);
    fds.server_out = std::move(server_out_);
    fds.server_err = std::move(server_err_);
    auto settling = std::make_unique<SettlingSink>(std::move(sink_));  // see SettlingSink
    settling_ = settling.get();
    sink_ = std::move(settling);
    auto r = Relay::create(ro, std::move(fds), *sink_);
    if (!r) return r.error();
    relay_ = std::make_unique<Relay>(std::move(*r));
    if (starts_servers_again()) {
        hib_ = std::make_unique<Hibernation>(*relay_, !Faults::from_env().wake_replay,
                                             Faults::from_env().sleep_needs_handshake);
        relay_->set_gate(hib_.get());
    }
    if (opts_.lazy) {
        // No server yet: what the client sends is held for the first one.
        relay_->detach_server();
        hib_->set_state(Hibernation::State::asleep);
        if (catalog_) hib_->serve_from(std::move(*catalog_));
        catalog_.reset();
        if (journal_)
            hib_->on_served([j = journal_](const rpc::Message& m, std::string_view line) {
                j->on_served(m, line);
            });
    }
    start_server_log();
    if (auto s = relay_->watch(signals_->fd(), kSignals); !s) return s;
    if (parent_pidfd_.valid())
        if (auto s = relay_->watch(parent_pidfd_.get(), kParent); !s) return s;
    if (auto s = relay_->watch(report_.get(), kReport); !s) return s;
    if (keeper_pidfd_.valid())
        if (auto s = relay_->watch(keeper_pidfd_.get(), kKeeper); !s) return s;
    if (denials_)
        if (auto s = relay_->watch(denials_->ready_fd(), kDenials); !s) return s;
    return {};
}

void Session::explain_relay() {
    log(fmt::format(
        "mcpwarden: relay (pid {}):\n"
        "relay-subreaper {}\n"
        "client-watch    {}\n"
        "keeper          pid {}, server pid {}\n"
        "eof-grace       {} ms, term-grace {} ms, stdout-guard {}, max-message {} bytes\n"
        "journal         {}\n",
        ::getpid(), relay_subreaper_note_, parent_note_, keeper_pid_, server_.pid,
        opts_.eof_grace.count(), opts_.term_grace.count(), to_string(opts_.stdout_guard),
        opts_.max_message,
        opts_.no_journal ? "off (--no-journal)"
        : journal_ && journal_->journal()
            ? "on  " + journal_->journal()->paths().db
            : "off (could not be opened; requests are " +
                  std::string(opts_.on_journal_failure == OnJournalFailure::Deny ? "refused)"
                                                                                 : "forwarded)")));
    log(sandbox_.render_text());
    explain_supervision();
}

}  // namespace warden::shim
