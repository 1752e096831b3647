// warden::api::Supervisor and Server: the public spawn/teardown over src/contain.
//
// A host is not the shim's keeper: it has threads, other children, maybe other servers of
// ours. So the teardown scope differs from Containment::scope() in two ways that matter for
// "never the wrong process": the host's children are NOT all members (subreaper = false:
// only the server's descendants, the session cgroup and the MCPWARDEN_SESSION marker define
// the tree), and waitpid(-1) is never used (sole_parent = false: the engine reaps only the
// targets whose parent is us). Orphans of the tree still reparent to the host when the
// subreaper layer is on, so their zombies are reaped by the teardown instead of piling up
// under PID 1's care.
#include <sys/random.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>

#include "api/internal.hpp"
#include "contain/layers.hpp"
#include "contain/spawner.hpp"
#include "contain/teardown.hpp"
#include "mcpwarden/mcpwarden.hpp"
#include "record/teardown_record.hpp"

namespace warden::api {

struct Server::Impl {
    std::unique_ptr<Containment> containment;
    Child child;
    std::optional<TeardownReport> report;
};

namespace {

std::string generate_session_id() {
    static std::atomic<unsigned> counter{0};
    unsigned char rnd[4] = {};
    if (::getrandom(rnd, sizeof rnd, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof rnd))
        rnd[0] = static_cast<unsigned char>(::getpid());
    char buf[64];
    std::snprintf(buf, sizeof buf, "lib-%d-%u-%02x%02x%02x%02x", static_cast<int>(::getpid()),
                  counter.fetch_add(1), rnd[0], rnd[1], rnd[2], rnd[3]);
    return buf;
}

TeardownReport to_public(const warden::TeardownReport& r) {
    TeardownReport out;
    static_cast<TeardownCounts&>(out) = r;
    out.targets = static_cast<int>(r.targets.size());
    out.survivors = r.survivors;
    out.server_status = r.root_status;
    out.total_ms = r.phases.total_ms;
    out.json = journal::teardown_report_json(r);
    out.text = r.render_text();
    return out;
}

}  // namespace

Error internal_error(std::string_view where, const std::exception& e) {
    return Error{std::string(where) + ": internal error: " + e.what(), 0};
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Server::Server(Server&&) noexcept = default;
Server& Server::operator=(Server&& o) noexcept {
    if (this != &o) {
        if (impl_ && !impl_->report) teardown();
        impl_ = std::move(o.impl_);
    }
    return *this;
}
Server::~Server() {
    if (impl_ && !impl_->report) teardown();
}

pid_t Server::pid() const {
    return impl_ ? impl_->child.pid() : -1;
}
int Server::pidfd() const {
    return impl_ && impl_->child.pidfd() ? impl_->child.pidfd().get() : -1;
}
int Server::stdin_fd() const {
    return impl_ ? impl_->child.stdin_fd().get() : -1;
}
int Server::stdout_fd() const {
    return impl_ ? impl_->child.stdout_fd().get() : -1;
}
int Server::stderr_fd() const {
    return impl_ ? impl_->child.stderr_fd().get() : -1;
}
void Server::close_stdin() {
    if (impl_) impl_->child.stdin_fd().reset();
}
const std::string& Server::session_id() const {
    static const std::string none;
    return impl_ ? impl_->containment->session_id() : none;
}
std::string Server::layers_json() const {
    return impl_ ? impl_->containment->layers().to_json_string() : "{}";
}
std::optional<int> Server::poll_exit() {
    return impl_ ? impl_->child.try_reap() : std::nullopt;
}
bool Server::torn_down() const {
    return impl_ && impl_->report.has_value();
}

TeardownReport Server::teardown(const TeardownOptions& options) {
    if (!impl_) return {};
    if (impl_->report) return *impl_->report;
    impl_->child.stdin_fd().reset();  // the EOF window starts now
    TeardownScope scope = impl_->containment->scope(&impl_->child);
    scope.subreaper = false;    // the host's other children are not ours to end
    scope.sole_parent = false;  // never waitpid(-1) in someone else's process
    warden::TeardownOptions t;
    t.eof_window = options.eof_window;
    t.grace = options.grace;
    t.kill_wait = options.kill_wait;
    t.verify_ports = options.verify_ports;
    warden::TeardownReport r = Teardown(std::move(scope), t).run();
    // The server's pipes are of no use any more; closing them frees the host's fds now.
    impl_->child.stdout_fd().reset();
    impl_->child.stderr_fd().reset();
    impl_->report = to_public(r);
    return *impl_->report;
}

Supervisor::Supervisor(SpawnOptions defaults) : defaults_(std::move(defaults)) {}

Result<Server> Supervisor::spawn(const std::vector<std::string>& argv,
                                 const std::vector<std::string>& env, const std::string& cwd) {
    return spawn(argv, env, cwd, defaults_);
}

Result<Server> Supervisor::spawn(const std::vector<std::string>& argv,
                                 const std::vector<std::string>& env, const std::string& cwd,
                                 const SpawnOptions& o) {
    if (argv.empty() || argv[0].empty()) return Error{"spawn: empty argv", EINVAL};
    ContainOptions co;
    co.use_subreaper = o.use_subreaper;
    co.use_cgroup = o.use_cgroup;
    co.use_pidfd = o.use_pidfd;
    co.use_pidns = o.use_pidns;
    co.cgroup_base = o.cgroup_base;
    auto c = Containment::setup(o.session_id.empty() ? generate_session_id() : o.session_id, co);
    if (!c) return c.error();
    warden::SpawnOptions so;
    so.argv = argv;
    so.env_add = env;
    so.in = o.in;
    so.out = o.out;
    so.err = o.err;
    so.pdeathsig = o.pdeathsig;
    so.cwd = cwd;
    auto child = warden::spawn(**c, so);
    if (!child) return child.error();
    auto impl = std::make_unique<Server::Impl>(
        Server::Impl{std::move(*c), std::move(*child), std::nullopt});
    return Server(std::move(impl));
}

}  // namespace warden::api
