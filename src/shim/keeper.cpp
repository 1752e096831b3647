#include "shim/keeper.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "contain/spawner.hpp"
#include "contain/teardown.hpp"
#include "shim/journal_sink.hpp"
#include "sys/signalfd.hpp"

namespace warden::shim {

// ---- LineReader, messages ---------------------------------------------------------------

void LineReader::fill() {
    char buf[4096];
    for (int i = 0; i < 1024; ++i) {
        ssize_t n = ::read(fd_, buf, sizeof buf);
        if (n > 0) {
            buf_.append(buf, static_cast<size_t>(n));
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n == 0 || (n < 0 && errno != EAGAIN)) eof_ = true;
        return;
    }
}

std::optional<std::string> LineReader::next_line() {
    auto nl = buf_.find('\n');
    if (nl == std::string::npos) return std::nullopt;
    std::string line = buf_.substr(0, nl);
    buf_.erase(0, nl + 1);
    return line;
}

KeeperMessage parse_keeper_message(std::string_view line) {
    KeeperMessage m;
    auto word = [&]() {
        auto sp = line.find(' ');
        std::string_view w = line.substr(0, sp);
        line.remove_prefix(sp == std::string_view::npos ? line.size() : sp + 1);
        return std::string(w);
    };
    auto num = [&]() -> long long { return std::strtoll(word().c_str(), nullptr, 10); };
    std::string kind = word();
    if (kind == "spawned") {
        m.kind = KeeperMessage::Kind::spawned;
        m.server.pid = static_cast<pid_t>(num());
        m.server.starttime = static_cast<uint64_t>(num());
        m.cgroup_dir = word();
        if (m.cgroup_dir == "-") m.cgroup_dir.clear();
        m.json = std::string(line);
    } else if (kind == "spawn-failed") {
        m.kind = KeeperMessage::Kind::spawn_failed;
        m.err = static_cast<int>(num());
        m.exit_code = static_cast<int>(num());
        m.message = std::string(line);
    } else if (kind == "exited") {
        m.kind = KeeperMessage::Kind::exited;
        m.status = static_cast<int>(num());
    } else if (kind == "report") {
        m.kind = KeeperMessage::Kind::report;
        m.json = std::string(line);
    }
    return m;
}

// ---- The keeper -------------------------------------------------------------------------

namespace {

class Keeper {
  public:
    Keeper(const KeeperConfig& cfg, KeeperFds fds) : cfg_(cfg), fds_(std::move(fds)) {}

    int run() {
        ignore_terminal_signals();
        if (!set_up_containment()) return 1;
        if (!spawn_server()) return 1;
        bool relay_gone = wait_for_command_or_lifeline_end();
        auto report = tear_down_tree(relay_gone);
        send("report " + report.to_json_string());
        return report.ok() ? 0 : 1;
    }

  private:
    // ^C in a terminal reaches the whole foreground group, us included: the keeper is driven
    // by its lifeline, not by signals meant for the client. SIGPIPE: the relay may be gone.
    // SIGXFSZ: a journal write past RLIMIT_FSIZE must fail as EFBIG (the journal-failure
    // policy), never kill the keeper halfway through a teardown.
    static void ignore_terminal_signals() {
        for (int s : {SIGINT, SIGHUP, SIGTERM, SIGPIPE, SIGQUIT, SIGXFSZ})
            ::signal(s, SIG_IGN);
        ::prctl(PR_SET_NAME, "mcpwarden-keep", 0UL, 0UL, 0UL);
    }

    bool set_up_containment() {
        auto c = Containment::setup(cfg_.session_id, cfg_.contain);
        if (!c) return spawn_failed(c.error(), 125);
        containment_ = std::move(*c);
        const auto& layers = containment_->layers();
        if (cfg_.explain)
            log("mcpwarden: containment layers for session " + cfg_.session_id + ":\n" +
                layers.render_text());
        if (cfg_.require_cgroup && !layers.cgroup.on)
            return spawn_failed(
                Error::msg("--isolate=cgroup: no session cgroup: " + layers.cgroup.reason), 125);
        if (cfg_.require_pidns && !layers.pidns.on)
            return spawn_failed(
                Error::msg("--isolate=pidns: no PID namespace: " + layers.pidns.reason), 125);
        return true;
    }

    bool spawn_server() {
        // SIGCHLD through a signalfd: blocked from here on (the spawner resets the child's
        // mask and dispositions before exec).
        auto sfd = SignalFd::create({SIGCHLD});
        if (!sfd) return spawn_failed(sfd.error(), 125);
        sigchld_.emplace(std::move(*sfd));

        // The server's ends onto our 0-2; the spawner's Stdio::Inherit hands them over.
        ::dup2(fds_.server_in.get(), 0);
        ::dup2(fds_.server_out.get(), 1);
        ::dup2(fds_.server_err.get(), 2);
        fds_.server_in.reset();
        fds_.server_out.reset();
        fds_.server_err.reset();

        SpawnOptions o;
        o.argv = cfg_.command;
        o.in = o.out = o.err = Stdio::Inherit;
        auto child = spawn(*containment_, o);

        // Whatever happened, we keep no end of the server's pipes.
        int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
        ::dup2(null, 0);
        ::dup2(null, 1);
        ::close(null);
        ::dup2(fds_.log, 2);

        if (!child) return spawn_failed(child.error(), spawn_error_exit_code(child.error()));
        child_.emplace(std::move(*child));
        const Cgroup* cg = containment_->cgroup();
        std::string dir = "-";
        if (cg) {
            dir = cg->path();
            if (auto slash = dir.rfind('/'); slash != std::string::npos) dir.resize(slash);
        }
        send(fmt::format("spawned {} {} {} {}", child_->pid(), child_->id().starttime, dir,
                         containment_->layers().to_json_string()));
        return true;
    }

    // True when the relay is gone (lifeline EOF), false when it asked for the teardown.
    bool wait_for_command_or_lifeline_end() {
        (void)set_nonblocking(fds_.control.get());
        LineReader control(fds_.control.get());
        for (;;) {
            pollfd p[2] = {{fds_.control.get(), POLLIN, 0}, {sigchld_->fd(), POLLIN, 0}};
            if (::poll(p, 2, -1) < 0 && errno != EINTR) return true;
            if (p[1].revents) reap();
            if (p[0].revents) {
                control.fill();
                while (auto line = control.next_line())
                    if (*line == "teardown") return false;
                if (control.eof()) return true;
            }
        }
    }

    // Reaps what ended: the server through its Child (status reported once), every other
    // child (orphans the subreaper inherited) directly. WNOWAIT peeks first so the server's
    // status is never taken by a generic waitpid.
    void reap() {
        while (auto s = sigchld_->read()) {
            if (!s->has_value()) break;
        }
        for (int i = 0; i < 4096; ++i) {
            siginfo_t si{};
            if (::waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) < 0 || si.si_pid == 0) break;
            pid_t pid = si.si_pid;
            bool is_server = pid == child_->pid() || pid == child_->ns_init().pid;
            if (is_server) {
                if (auto st = child_->try_reap(); st && !status_sent_) {
                    status_sent_ = true;
                    send(fmt::format("exited {}", *st));
                }
                if (!child_->exit_status()) break;  // pidns init: not ours to reap yet
                continue;
            }
            ::waitpid(pid, nullptr, WNOHANG);
        }
    }

    TeardownReport tear_down_tree(bool relay_gone) {
        std::unique_ptr<TeardownObserver> observer;
        if (cfg_.journal_on) {
            std::optional<journal::SessionStart> start;
            if (relay_gone) start = session_start_of_keeper();
            auto o = make_teardown_journal(cfg_.session_id, cfg_.journal_path,
                                           start ? &*start : nullptr, cfg_.journal_sync);
            if (o)
                observer = std::move(*o);
            else if (relay_gone)  // else the relay has said it: one line a session
                log("mcpwarden: " + o.error().message + " (teardown not recorded)\n");
        }
        TeardownOptions t;
        // The relay already waited the EOF window when it asks; when it died, its end of the
        // server's stdin closed with it, so the window starts now.
        t.eof_window = relay_gone ? cfg_.eof_grace : std::chrono::milliseconds(0);
        t.grace = cfg_.term_grace;
        t.observer = observer.get();
        TeardownReport r = Teardown(containment_->scope(&*child_), t).run();
        if (!r.ok()) log("mcpwarden: " + r.verdict().error().message + "\n");
        return r;
    }

    // What the relay would have recorded as session.start, as far as the keeper knows it:
    // used only if the relay died before its record was durable. The client is unknown
    // here (the keeper's parent was the relay), and the record says who wrote it.
    journal::SessionStart session_start_of_keeper() const {
        journal::SessionStart s;
        s.session = cfg_.session_id;
        s.server_name = cfg_.server_name;
        s.writer = journal::WriterIdentity::self();
        s.keeper = s.writer.process;
        s.server = child_->id();
        s.server_argv = cfg_.command;
        char cwd[4096];
        if (::getcwd(cwd, sizeof cwd)) s.cwd = cwd;
        for (const LayerState* l : containment_->layers().all())
            if (l->on) s.layers.push_back(l->name);
        s.extra = journal::Json{{"recorded_by", "keeper"},
                                {"eof_grace_ms", static_cast<int64_t>(cfg_.eof_grace.count())},
                                {"term_grace_ms", static_cast<int64_t>(cfg_.term_grace.count())}};
        return s;
    }

    bool spawn_failed(const Error& e, int exit_code) {
        send(fmt::format("spawn-failed {} {} {}", e.code, exit_code, e.message));
        return false;
    }

    void send(const std::string& line) {
        std::string l = line;
        for (char& c : l)
            if (c == '\n') c = ' ';
        l.push_back('\n');
        (void)write_all(fds_.report.get(), l, "keeper report pipe");
    }

    void log(const std::string& text) { (void)write_all(fds_.log, text, "stderr"); }

    const KeeperConfig& cfg_;
    KeeperFds fds_;
    std::unique_ptr<Containment> containment_;
    std::optional<Child> child_;
    std::optional<SignalFd> sigchld_;
    bool status_sent_ = false;
};

}  // namespace

int keeper_main(const KeeperConfig& cfg, KeeperFds fds) {
    int code;
    {
        Keeper k(cfg, std::move(fds));
        code = k.run();
    }
    return code;
}

}  // namespace warden::shim
