// audit_verify(): `mcpwarden audit verify` over src/journal/verify.hpp, every option.
#include <exception>

#include "api/internal.hpp"
#include "journal/verify.hpp"
#include "mcpwarden/audit.hpp"

namespace warden::api {

AuditReport audit_verify(const AuditOptions& options) {
    AuditReport out;
    try {
        journal::VerifyOptions o;
        o.path = options.path;
        o.require_anchored = options.require_anchored;
        o.trusted_checkpoints = options.trusted_checkpoints;
        o.public_key_file = options.public_key_file;
        journal::VerifyReport r = journal::verify(o);
        out.exit_code = r.exit_code;
        out.ok = r.ok;
        out.records = r.records;
        out.first_bad_seq = r.first_bad_seq;
        out.unanchored = r.unanchored;
        out.reason = r.reason;
        out.json = journal::report_json(r);
        out.text = journal::format_report(r);
    } catch (const std::exception& e) {
        journal::VerifyReport failed;
        failed.exit_code = 2;
        failed.reason = std::string("audit verify: ") + e.what();
        out = AuditReport{};
        out.exit_code = 2;
        out.reason = failed.reason;
        out.json = journal::report_json(failed);
        out.text = out.reason + "\n";
    }
    return out;
}

Result<std::string> audit_anchor(const std::string& path) {
    try {
        auto line = journal::anchor_line(path);
        if (!line) return line.error();
        return *line;
    } catch (const std::exception& e) {
        return internal_error("audit anchor", e);
    }
}

}  // namespace warden::api
