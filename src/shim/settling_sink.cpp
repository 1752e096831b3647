#include "shim/settling_sink.hpp"

#include "contain/layers.hpp"  // Faults
#include "journal/canonical_json.hpp"

namespace warden::shim {

void SettlingSink::abandon(std::span<const Outstanding> outstanding, bool unanswered_only,
                           JournalSink* journal, const std::string& session,
                           std::string_view cause) {
    std::vector<journal::Event> abandoned;
    for (const Outstanding& o : outstanding) {
        if (unanswered_only && o.answer != 0) continue;
        if (!settled_.insert(key(o)).second) continue;
        if (!journal || !journal->journal() || !journal->records_calls()) continue;
        auto id = journal::rpc_id_from_json_text(o.raw.empty() ? "null" : o.raw);
        abandoned.push_back(ended(o, session, id ? *id : journal::Json(o.raw), cause));
    }
    if (journal) journal->record_evidence(abandoned);
}

journal::Event SettlingSink::ended(const Outstanding& o, const std::string& session,
                                   journal::Json id, std::string_view cause) {
    if (o.method != "subscriptions/listen" || Faults::from_env().stream_abandoned)
        return journal::activity_abandoned(session, o.record, std::move(id), std::string(cause));
    return journal::activity_stream_end(session, o.record, std::move(id), std::string(cause),
                                        cause == "server_exit" ? "server" : "mcpwarden");
}

}  // namespace warden::shim
