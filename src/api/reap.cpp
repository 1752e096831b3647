// Reaper, parse_duration(), user_id(), reap_check(), reap_config(): the public face of
// src/reap (mcpwarden/reap.hpp). The policy — selection, safety rules, the per-tree order of
// snapshot, revoke, teardown, sweep and verify — stays in src/reap; this file converts.
#include <poll.h>
#include <pwd.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <exception>

#include "api/internal.hpp"
#include "journal/journal.hpp"
#include "mcpwarden/reap.hpp"
#include "reap/reap.hpp"
#include "sys/signalfd.hpp"

namespace warden::api {

struct ReapPlanState {
    reap::Plan plan;
};

struct Reaper::Impl {
    reap::Selection sel;
    reap::PlanOptions plan;
    reap::ActOptions act;
    // Declared before the journal, so the journal (and its writer thread, which inherited
    // the blocked mask) is gone before the mask is restored.
    std::optional<SignalFd> sigs;
    std::unique_ptr<journal::Journal> journal;
};

namespace {

ReapPlan public_plan(reap::Plan plan) {
    ReapPlan out;
    for (const reap::TargetTree& t : plan.trees) {
        ReapTree tree;
        static_cast<ReapTreeFacts&>(tree) = t;
        tree.rss_kb = t.rss_kb();
        tree.capabilities_json = t.capabilities.dump();
        out.trees.push_back(std::move(tree));
    }
    out.refused = plan.refused;
    out.scanned = plan.scanned;
    out.warnings = plan.warnings;
    for (const reap::EmptySessionCgroup& e : plan.empty_cgroups)
        out.empty_cgroups.insert(out.empty_cgroups.end(), e.dirs.begin(), e.dirs.end());
    out.state = std::make_shared<const ReapPlanState>(ReapPlanState{std::move(plan)});
    return out;
}

ReapReport public_report(const reap::ActReport& rep) {
    ReapReport out;
    for (const reap::TreeResult& r : rep.trees) {
        ReapTreeResult t;
        t.root = r.root;
        t.command = r.command.unredacted();  // for the terminal and --json, not a record
        t.outcome = reap::to_string(r.outcome);
        t.detail = r.detail;
        t.ports_free = r.ports_free;
        if (r.revoke) {
            t.revoke_ran = true;
            t.revoke_ok = r.revoke->ok();
            t.revoke_result = r.revoke->describe();
            t.revoke_output = r.revoke->output;
        }
        if (r.report) {
            t.torn_down = true;
            for (const Target& x : r.report->targets)
                t.processes.push_back({x.id, x.command.unredacted(), to_string(x.how)});
            t.survivors = r.report->survivors.size();
        }
        t.cgroup = r.cgroup.lines();
        out.trees.push_back(std::move(t));
    }
    for (const reap::CgroupCleanup& c : rep.empty_cgroups)
        for (std::string& l : c.lines())
            out.cgroups.push_back(std::move(l));
    out.ok = rep.ok();
    return out;
}

// A tree result for every tree of the plan, when acting failed before it could start.
ReapReport failed_report(const ReapPlan& plan, const std::string& why) {
    ReapReport out;
    out.ok = plan.trees.empty();
    for (const ReapTree& t : plan.trees) {
        ReapTreeResult r;
        r.root = t.root();
        r.command = t.command();
        r.outcome = "not-recorded";
        r.detail = why;
        out.trees.push_back(std::move(r));
    }
    return out;
}

}  // namespace

Result<std::chrono::milliseconds> parse_duration(const std::string& text) {
    try {
        auto d = reap::parse_duration(text);
        if (!d) return d.error();
        return *d;
    } catch (const std::exception& e) {
        return internal_error("reap", e);
    }
}

Result<uid_t> user_id(const std::string& name_or_uid) {
    passwd pw{};
    passwd* found = nullptr;
    char buf[4096];
    if (::getpwnam_r(name_or_uid.c_str(), &pw, buf, sizeof buf, &found) == 0 && found)
        return found->pw_uid;
    char* end = nullptr;
    long n = std::strtol(name_or_uid.c_str(), &end, 10);
    if (name_or_uid.empty() || *end != '\0' || n < 0 || n > static_cast<long>(UINT32_MAX - 1))
        return Error{name_or_uid + ": no such user", ENOENT};
    return static_cast<uid_t>(n);
}

std::optional<Error> reap_check(const ReapSelection& selection) {
    try {
        if (auto st = reap::validate(selection); !st) return st.error();
        return std::nullopt;
    } catch (const std::exception& e) {
        return internal_error("reap", e);
    }
}

Result<ReapConfig> reap_config() {
    try {
        return reap::load_config();
    } catch (const std::exception& e) {
        return internal_error("reap", e);
    }
}

Reaper::Reaper(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Reaper::Reaper(Reaper&&) noexcept = default;
Reaper& Reaper::operator=(Reaper&&) noexcept = default;
Reaper::~Reaper() {
    if (impl_ && impl_->journal) (void)impl_->journal->close();
}

Result<Reaper> Reaper::open(const ReapOptions& options) {
    try {
        auto impl = std::make_unique<Impl>();
        impl->sel = options.selection;
        if (auto st = reap::validate(impl->sel); !st) return st.error();
        if (!options.revoke_cmd.empty())
            impl->act.revoke = reap::RevokeHook{options.revoke_cmd, options.revoke_timeout};
        impl->act.force = options.force;
        impl->act.grace = options.grace;
        // The sessions `mcpwarden ps --journal` would read.
        impl->plan.journal_path = options.journal_path;
        impl->plan.use_client_configs = options.use_client_configs;
        if (options.stop_signals) {
            auto s = SignalFd::create({SIGTERM, SIGINT, SIGHUP});
            if (!s) return s.error();
            impl->sigs.emplace(std::move(*s));
        }
        auto path = journal::resolve_path(options.journal_path);
        if (!path) return path.error();
        auto j = journal::Journal::open({.path = *path});
        if (!j) {
            if (options.journal_required)
                return Error{"cannot open the journal, and nothing is reaped off the record: " +
                                 j.error().message,
                             j.error().code};
        } else {
            impl->journal = std::move(*j);
            impl->act.journal = impl->journal.get();
        }
        return Reaper(std::move(impl));
    } catch (const std::exception& e) {
        return internal_error("reap", e);
    }
}

Result<ReapPlan> Reaper::plan() {
    try {
        if (!impl_) return Error{"reap: the reaper was moved from", EINVAL};
        auto p = reap::plan(impl_->sel, impl_->plan);
        if (!p) return p.error();
        return public_plan(std::move(*p));
    } catch (const std::exception& e) {
        return internal_error("reap", e);
    }
}

ReapReport Reaper::act(const ReapPlan& plan) {
    try {
        if (!impl_ || !impl_->journal)
            return failed_report(plan, "no journal: nothing is reaped off the record");
        if (!plan.state) return failed_report(plan, "not a plan of this library");
        reap::ActReport rep = reap::act(plan.state->plan, impl_->act);
        (void)impl_->journal->append(reap::pass_event(impl_->sel, plan.state->plan, &rep, false));
        return public_report(rep);
    } catch (const std::exception& e) {
        return failed_report(plan, internal_error("reap", e).message);
    }
}

void Reaper::record_plan(const ReapPlan& plan, bool dry_run) {
    try {
        if (!impl_ || !impl_->journal || !plan.state) return;
        (void)impl_->journal->append(
            reap::pass_event(impl_->sel, plan.state->plan, nullptr, dry_run));
    } catch (const std::exception&) {  // the pass record is best effort, as the CLI's was
    }
}

bool Reaper::has_journal() const {
    return impl_ && impl_->journal;
}

std::optional<int> Reaper::wait_for_stop(std::chrono::milliseconds timeout) {
    int ms = static_cast<int>(std::clamp<int64_t>(timeout.count(), 0, INT32_MAX));
    if (!impl_ || !impl_->sigs) {
        (void)::poll(nullptr, 0, ms);
        return std::nullopt;
    }
    pollfd p{impl_->sigs->fd(), POLLIN, 0};
    if (::poll(&p, 1, ms) <= 0) return std::nullopt;
    auto s = impl_->sigs->read();
    return s && *s ? static_cast<int>((*s)->ssi_signo) : 0;
}

std::optional<Error> Reaper::close() {
    try {
        if (!impl_ || !impl_->journal) return std::nullopt;
        auto st = impl_->journal->close();
        impl_->act.journal = nullptr;
        impl_->journal.reset();
        if (!st) return st.error();
        return std::nullopt;
    } catch (const std::exception& e) {
        return internal_error("reap", e);
    }
}

}  // namespace warden::api
