// The Session's count of what the sandbox refused the server (sandbox/denials.hpp has the
// mechanism and why it cannot weaken the sandbox).
//
// The counter's thread answers each refused call at once and counts it; the relay records the
// count. `sandbox.denied` carries the whole count so far ("total", "by_call", the first few
// calls described in "first"), so the newest record is the session's count and `mcpwarden
// status` reads no other. One is written at the first denial, then at most once a second
// while denials go on (the counter's ready fd paces it), and one at the end when anything
// came since the last: before session.end, so that the end is the session's last word.
#include <fmt/format.h>

#include "contain/layers.hpp"  // Faults
#include "shim/session.hpp"

namespace warden::shim {

void Session::start_denial_counter() {
    if (!denial_receiver_.valid()) return;
    auto c = sandbox::DenialCounter::start(std::move(denial_receiver_),
                                           Faults::from_env().denials_supervisor_gone);
    if (!c) {
        // The filter refuses as it did; without a listener alive, by ENOSYS (denials.hpp).
        log("mcpwarden: --sandbox: " + c.error().message + "; denied calls are not counted\n");
        return;
    }
    denials_ = std::move(*c);
}

void Session::record_denials() {
    if (!denials_) return;
    bool changed = false;
    sandbox::Denials d = denials_->take(&changed);
    if (!changed) return;
    journal::Json by_call = journal::Json::object();
    for (const auto& [call, n] : d.by_call)
        by_call[call] = n;
    record("sandbox.denied", {{"total", d.total}, {"by_call", by_call}, {"first", d.first}});
}

}  // namespace warden::shim
