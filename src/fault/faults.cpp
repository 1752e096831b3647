#include "fault/faults.hpp"

#include <cstdio>
#include <cstdlib>
#include <iterator>

namespace warden {

namespace {

// Every fault by its name in MCPWARDEN_FAULT. Faults holds nothing but these flags: the size
// check below fails the build when one is added without its name here.
struct FaultName {
    std::string_view name;
    bool Faults::*flag;
};
constexpr FaultName kFaultNames[] = {
    {"pidfd_open", &Faults::pidfd_open},
    {"clone3", &Faults::clone3},
    {"cgroup", &Faults::cgroup},
    {"cgroup_kill", &Faults::cgroup_kill},
    {"pidfd_getfd", &Faults::pidfd_getfd},
    {"proc_children", &Faults::proc_children},
    {"landlock", &Faults::landlock},
    {"runner_store", &Faults::runner_store},
    {"sandbox_ready_early", &Faults::sandbox_ready_early},
    {"keeper_pgrp", &Faults::keeper_pgrp},
    {"keeper_cpus_kept", &Faults::keeper_cpus_kept},
    {"keeper_client_watch", &Faults::keeper_client_watch},
    {"keeper_session_end", &Faults::keeper_session_end},
    {"keeper_stderr", &Faults::keeper_stderr},
    {"pidns_exit_notice", &Faults::pidns_exit_notice},
    {"pidns_grace", &Faults::pidns_grace},
    {"keeper_journal_late", &Faults::keeper_journal_late},
    {"keeper_journal_slow", &Faults::keeper_journal_slow},
    {"keeper_journal_inline", &Faults::keeper_journal_inline},
    {"keeper_journal_stuck", &Faults::keeper_journal_stuck},
    {"keeper_waits_for_opening", &Faults::keeper_waits_for_opening},
    {"writer_spins", &Faults::writer_spins},
    {"share_deny_ignored", &Faults::share_deny_ignored},
    {"dead_sessions", &Faults::dead_sessions},
    {"sweep_linger", &Faults::sweep_linger},
    {"sweep_left", &Faults::sweep_left},
    {"reap_intents_late", &Faults::reap_intents_late},
    {"equal_ticks_ordered", &Faults::equal_ticks_ordered},
    {"remnant_tree_unchecked", &Faults::remnant_tree_unchecked},
    {"journal_hold_intents", &Faults::journal_hold_intents},
    {"keeper_intents", &Faults::keeper_intents},
    {"keeper_records_first", &Faults::keeper_records_first},
    {"keeper_no_intents", &Faults::keeper_no_intents},
    {"keeper_dies_after_signal", &Faults::keeper_dies_after_signal},
    {"keeper_evidence_wait", &Faults::keeper_evidence_wait},
    {"journal_slow_writer", &Faults::journal_slow_writer},
    {"relay_dies_at_teardown", &Faults::relay_dies_at_teardown},
    {"relay_leaves_keeper", &Faults::relay_leaves_keeper},
    {"journal_owed_file", &Faults::journal_owed_file},
    {"relay_drops_keepers_records", &Faults::relay_drops_keepers_records},
    {"relay_dies_at_report", &Faults::relay_dies_at_report},
    {"keeper_dies_before_report", &Faults::keeper_dies_before_report},
    {"recovery_appends_all", &Faults::recovery_appends_all},
    {"prune_unproven", &Faults::prune_unproven},
    {"early_append_fails", &Faults::early_append_fails},
    {"end_before_recovery", &Faults::end_before_recovery},
    {"loss_slot_off", &Faults::loss_slot_off},
    {"intents_left_unstarted", &Faults::intents_left_unstarted},
    {"journal_start_inline", &Faults::journal_start_inline},
    {"journal_slow_open", &Faults::journal_slow_open},
    {"journal_opening_beside_keeper", &Faults::journal_opening_beside_keeper},
    {"journal_opening_not_yielded", &Faults::journal_opening_not_yielded},
    {"cgroup_kill_members_again", &Faults::cgroup_kill_members_again},
    {"bench_keeper_killed", &Faults::bench_keeper_killed},
    {"plan_ahead_only", &Faults::plan_ahead_only},
    {"ancestors_unprotected", &Faults::ancestors_unprotected},
    {"slow_release", &Faults::slow_release},
    {"relay_copy", &Faults::relay_copy},
    {"divert_uncapped", &Faults::divert_uncapped},
    {"relay_queue_unreclaimed", &Faults::relay_queue_unreclaimed},
    {"journal_unpaced", &Faults::journal_unpaced},
    {"wake_replay", &Faults::wake_replay},
    {"lazy_stale", &Faults::lazy_stale},
    {"lazy_recheck", &Faults::lazy_recheck},
    {"catalog_era", &Faults::catalog_era},
    {"sleep_needs_handshake", &Faults::sleep_needs_handshake},
    {"record_unredacted", &Faults::record_unredacted},
    {"share_peer_unchecked", &Faults::share_peer_unchecked},
    {"share_dir_open", &Faults::share_dir_open},
    {"export_ack_window", &Faults::export_ack_window},
    {"export_prune_unheld", &Faults::export_prune_unheld},
    {"export_ids_random", &Faults::export_ids_random},
    {"log_unredacted", &Faults::log_unredacted},
    {"log_blocking", &Faults::log_blocking},
    {"crash_unexplained", &Faults::crash_unexplained},
    {"restart_unlimited", &Faults::restart_unlimited},
    {"sandbox_launcher", &Faults::sandbox_launcher},
    {"sandbox_inner_commands", &Faults::sandbox_inner_commands},
    {"limits_v1_absent", &Faults::limits_v1_absent},
    {"limits_unwritten", &Faults::limits_unwritten},
    {"limits_unchecked", &Faults::limits_unchecked},
    {"oom_untold", &Faults::oom_untold},
    {"wedged_unjudged", &Faults::wedged_unjudged},
    {"limit_groups_left", &Faults::limit_groups_left},
    {"ping_is_activity", &Faults::ping_is_activity},
    {"oversize_outcome_unscanned", &Faults::oversize_outcome_unscanned},
    {"stream_abandoned", &Faults::stream_abandoned},
    {"probe_unlinked", &Faults::probe_unlinked},
    {"served_protocol_unnoted", &Faults::served_protocol_unnoted},
    {"oom_victim_unnamed", &Faults::oom_victim_unnamed},
    {"denials_uncounted", &Faults::denials_uncounted},
    {"denials_supervisor_gone", &Faults::denials_supervisor_gone},
    {"share_client_queue_unbounded", &Faults::share_client_queue_unbounded},
    {"share_log_unrotated", &Faults::share_log_unrotated},
    {"share_session_vars_kept", &Faults::share_session_vars_kept},
    {"export_metric_totals_lost", &Faults::export_metric_totals_lost},
    {"export_batch_unbounded", &Faults::export_batch_unbounded},
    {"sandbox_launcher_home_untold", &Faults::sandbox_launcher_home_untold},
    {"share_eras_mixed", &Faults::share_eras_mixed},
    {"share_untaken_failed", &Faults::share_untaken_failed},
    {"journal_opened_unlocked", &Faults::journal_opened_unlocked},
};
static_assert(sizeof(Faults) == std::size(kFaultNames) * sizeof(bool),
              "a Faults flag without its name in kFaultNames");

// Calls `each` with every comma-separated token of `spec`, empty ones skipped.
template <class Each>
void for_each_token(std::string_view spec, Each each) {
    while (!spec.empty()) {
        auto comma = spec.find(',');
        if (auto tok = spec.substr(0, comma); !tok.empty()) each(tok);
        if (comma == std::string_view::npos) break;
        spec.remove_prefix(comma + 1);
    }
}

bool Faults::*flag_named(std::string_view name) {
    for (const auto& f : kFaultNames)
        if (f.name == name) return f.flag;
    return nullptr;
}

}  // namespace

Faults Faults::parse(std::string_view spec) {
    Faults f;
    for_each_token(spec, [&](std::string_view tok) {
        if (auto flag = flag_named(tok)) f.*flag = true;
    });
    return f;
}

std::vector<std::string> Faults::unknown(std::string_view spec) {
    std::vector<std::string> out;
    for_each_token(spec, [&](std::string_view tok) {
        if (tok != "none" && !flag_named(tok)) out.emplace_back(tok);
    });
    return out;
}

Faults Faults::from_env() {
    const char* v = std::getenv("MCPWARDEN_FAULT");
    if (!v) return Faults{};
    // A misspelt fault would run as no fault at all, and an A/B would compare a run with
    // itself: said once per process, on stderr.
    static const bool said = [v] {
        for (const auto& name : unknown(v))
            std::fprintf(stderr, "mcpwarden: MCPWARDEN_FAULT: no fault named '%s' (ignored)\n",
                         name.c_str());
        return true;
    }();
    (void)said;
    return parse(v);
}

}  // namespace warden
