// libmcpwarden — `mcpwarden audit verify` with every option: the journal's hash chain,
// checkpoints (also ones kept off this host) and projections, checked offline in one pass.
// journal_verify() in mcpwarden.hpp is the short form (path and require_anchored only), and
// its VerifyResult this AuditReport.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mcpwarden/export.h"
#include "mcpwarden/result.hpp"

namespace warden::api {

struct AuditOptions {
    std::string path;                              // empty: the default journal
    bool require_anchored = false;                 // exit 3 when no checkpoint covers the tail
    std::vector<std::string> trusted_checkpoints;  // checkpoint files kept elsewhere
    std::string public_key_file;                   // the journal's public key kept elsewhere
};

struct AuditReport {
    int exit_code = 2;  // 0 OK, 1 integrity failure, 2 usage or I/O error, 3 OK but unanchored
    bool ok = false;    // no integrity failure (exit 0 or 3)
    std::int64_t records = 0, first_bad_seq = 0, unanchored = 0;
    std::string reason;  // with exit 1 or 2: one line
    std::string text;    // the report for people, as `audit verify` prints it
    std::string json;    // the same as JSON, as `audit verify --json` prints it
};

// Never fails as a call: a journal that cannot be read is exit_code 2 with the reason.
MCPW_API AuditReport audit_verify(const AuditOptions& options);

// The journal's newest signed checkpoint as one line (its checkpoint file's JSON), its
// signature checked: store it off this host, and pass it back to audit_verify as a trusted
// checkpoint. The only defence against a rollback of the whole journal directory.
MCPW_API Result<std::string> audit_anchor(const std::string& path = {});

}  // namespace warden::api
