#include "contain/layers.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "contain/spawner.hpp"
#include "contain/teardown.hpp"
#include "sys/clone3.hpp"
#include "sys/prctl.hpp"

namespace warden {

std::vector<const LayerState*> LayerReport::all() const {
    return {&subreaper, &cgroup, &pidns, &pidfd, &autokill, &clone3};
}

std::string LayerReport::render_text() const {
    std::string out;
    for (const LayerState* l : all())
        out += fmt::format("{:<15} {:<4} {}\n", l->name, l->on ? "on" : "off", l->reason);
    return out;
}

nlohmann::json LayerReport::to_json() const {
    nlohmann::json j = nlohmann::json::object();
    for (const LayerState* l : all())
        j[l->name] = {{"on", l->on}, {"reason", l->reason}};
    return j;
}

std::string LayerReport::to_json_string() const {
    return to_json().dump();
}

namespace {

bool valid_session_id(const std::string& id) {
    if (id.empty() || id.size() > 64) return false;
    for (char c : id)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-'))
            return false;
    return id != "." && id != "..";
}

void on(LayerState& l, std::string why) {
    l.on = true;
    l.reason = std::move(why);
}
void off(LayerState& l, std::string why) {
    l.on = false;
    l.reason = std::move(why);
}

// Can we create a new PID namespace (as root directly, else inside a new user namespace)?
// Spawns one trivial child to find out; the answer is what the kernel says, not a guess
// from sysctls (AppArmor restrictions do not show in /proc/sys).
Status probe_pidns() {
    CloneRequest req;
    req.want_pidfd = false;
    req.new_pid_ns = true;
    req.new_user_ns = ::geteuid() != 0;
    auto r = clone_child(req);
    if (!r) return r.error();
    if (r->pid == 0) ::_exit(::getpid() == 1 ? 0 : 1);
    int st = 0;
    while (::waitpid(r->pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return Error::msg("the child of CLONE_NEWPID was not PID 1 of its namespace");
    return {};
}

}  // namespace

Result<std::unique_ptr<Containment>> Containment::setup(std::string session_id,
                                                        const ContainOptions& opts) {
    if (!valid_session_id(session_id))
        return Error::msg("invalid session id '" + session_id +
                          "': use 1-64 characters of [A-Za-z0-9._-]");
    std::unique_ptr<Containment> c(new Containment());
    c->session_id_ = std::move(session_id);
    c->opts_ = opts;
    LayerReport& L = c->layers_;
    const Faults& f = opts.faults;

    if (!opts.use_subreaper) {
        off(L.subreaper, "disabled by option");
    } else if (auto st = set_child_subreaper(true); !st) {
        off(L.subreaper, st.error().message);
    } else {
        on(L.subreaper, "PR_SET_CHILD_SUBREAPER set and read back: orphans come back to us");
    }

    if (!opts.use_pidfd) {
        off(L.pidfd, "disabled by option: starttime checks and kill(2) instead");
    } else if (f.pidfd_open) {
        off(L.pidfd, "pidfd_open: injected fault (MCPWARDEN_FAULT): starttime checks instead");
    } else if (!pidfd_supported()) {
        off(L.pidfd, "pidfd_open/pidfd_send_signal unavailable (Linux < 5.3)");
    } else {
        on(L.pidfd, "pidfd_open, pidfd_send_signal and poll for exit work");
    }

    if (f.clone3) {
        off(L.clone3, "clone3: injected fault (MCPWARDEN_FAULT): fork() instead");
    } else if (!clone3_supported()) {
        off(L.clone3, "clone3 unavailable (Linux < 5.3 or seccomp): fork() instead");
    } else {
        on(L.clone3, "clone3 works: pidfd and cgroup from birth");
    }

    if (!opts.use_autokill) {
        off(L.autokill, "disabled by option");
    } else if (!L.clone3.on || !L.pidfd.on) {
        off(L.autokill, "needs clone3 and pidfds");
    } else if (!clone_autokill_supported()) {
        off(L.autokill, "kernel rejects CLONE_PIDFD_AUTOKILL (EINVAL): Linux < 7.1");
    } else {
        on(L.autokill, "closing the keeper's pidfd SIGKILLs the server");
    }

    c->setup_cgroup();
    if (opts.limits.any())
        c->limits_ = SessionLimits::apply(c->session_id_, opts.limits,
                                          c->session_dir_.valid() ? c->session_dir_.path() : "", f);

    if (!opts.use_pidns) {
        off(L.pidns, "not asked for (--isolate=pidns)");
    } else if (auto st = probe_pidns(); !st) {
        off(L.pidns, "cannot create a PID namespace: " + st.error().message);
    } else {
        on(L.pidns, ::geteuid() == 0
                        ? "new PID namespace; its init dies with us and takes every member"
                        : "new user+PID namespace; its init dies with us and takes every member");
    }
    return c;
}

void Containment::setup_cgroup() {
    LayerState& l = layers_.cgroup;
    if (!opts_.use_cgroup) return off(l, "disabled by option");
    if (opts_.faults.cgroup)
        return off(l, "creating the session cgroup: injected fault (MCPWARDEN_FAULT)");
    std::string base = opts_.cgroup_base;
    std::string own;
    if (base.empty()) {
        auto mnt = cgroup2_mount();
        if (!mnt) return off(l, mnt.error().message);
        auto self = own_cgroup();
        if (!self) return off(l, self.error().message);
        own = *self;
        base = *mnt + (own == "/" ? "" : own);
    }
    // The session gets its own directory with the server in a leaf `payload`: the
    // supervisor never sits in a node that also has to hold the server's processes, and a
    // second leaf (e.g. for helpers) can be added beside payload without moving anything.
    auto dir = Cgroup::create(base + "/mcpwarden-" + session_id_);
    if (!dir) return off(l, "no writable cgroup v2 here: " + dir.error().message);
    auto payload = Cgroup::create(dir->path() + "/payload");
    if (!payload) return off(l, payload.error().message);
    if (!payload->has_kill())
        return off(l, "no cgroup.kill in " + payload->path() + " (Linux < 5.14)");
    session_dir_ = std::move(*dir);
    payload_ = std::move(*payload);
    std::string why =
        "session cgroup " + payload_.path() + " (cgroup.kill, cgroup.freeze, cgroup.events)";
    if (!own.empty() && own != "/")
        why += "; supervisor stays in " + own + ", now an inner node without controllers";
    on(l, why);
}

Containment::~Containment() {
    // The teardown emptied payload, but its last member can still be on its way out of the
    // group (Cgroup::remove_once_empty says why); a directory left then outlives the
    // command that made it. A payload that stays busy holds live processes: not removable,
    // and the teardown report already says so.
    if (Faults::from_env().slow_release && (payload_.valid() || session_dir_.valid()))
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
    if (payload_.valid()) (void)payload_.remove_once_empty(kSessionGroupLastExitMs);
    if (session_dir_.valid()) (void)session_dir_.remove();
}

void remove_session_cgroup(const std::string& dir) {
    if (auto payload = Cgroup::open(dir + "/payload"))
        (void)payload->remove_once_empty(kSessionGroupLastExitMs);
    if (auto group = Cgroup::open(dir)) (void)group->remove();
}

Result<Pidfd> Containment::open_pidfd(pid_t pid) const {
    if (!layers_.pidfd.on) return Error::sys("pidfd_open", std::to_string(pid), ENOSYS);
    return Pidfd::open(pid);
}

TeardownScope Containment::scope(Child* child) const {
    TeardownScope s;
    if (child) {
        if (child->ns_init().pid > 0) {
            s.roots.push_back(child->ns_init());
            s.ns_init = child->ns_init().pid;
        }
        if (child->pid() > 0) s.roots.push_back(child->id());
    }
    s.cgroup = cgroup();
    s.subreaper = layers_.subreaper.on;
    // The keeper's only children are the server (or its namespace init) and the orphans the
    // subreaper inherited, so every child it has belongs to the tree.
    s.sole_parent = layers_.subreaper.on;
    s.session_marker = session_id_;
    s.use_pidfd = layers_.pidfd.on;
    s.faults = opts_.faults;
    s.layers = layers_;
    s.child = child;
    return s;
}

}  // namespace warden
