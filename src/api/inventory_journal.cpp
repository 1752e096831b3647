// Journal and journal_verify(): the public face of src/journal, plus build_info().
// (inventory_scan() is in inventory.cpp, with the rest of the inventory.)
#include <sys/syscall.h>

#include <nlohmann/json.hpp>

#include "api/internal.hpp"
#include "journal/journal.hpp"
#include "mcpwarden/audit.hpp"

namespace warden::api {

struct Journal::Impl {
    std::unique_ptr<journal::Journal> j;
};

Journal::Journal(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Journal::Journal(Journal&&) noexcept = default;
Journal& Journal::operator=(Journal&&) noexcept = default;
Journal::~Journal() {
    if (impl_ && impl_->j) (void)impl_->j->close();
}

Result<Journal> Journal::open(const std::string& path) {
    journal::Options o;
    o.path = path;
    auto j = journal::Journal::open(o);
    if (!j) return j.error();
    return Journal(std::make_unique<Impl>(Impl{std::move(*j)}));
}

Result<std::int64_t> Journal::append(const std::string& kind, const std::string& session,
                                     const std::string& data_json) {
    if (!impl_ || !impl_->j) return Error{"journal append: journal is closed", EINVAL};
    if (kind.empty()) return Error{"journal append: empty kind", EINVAL};
    journal::Event e;
    e.kind = kind;
    e.session = session;
    if (!data_json.empty()) {
        e.data = nlohmann::json::parse(data_json, nullptr, /*allow_exceptions=*/false);
        if (e.data.is_discarded() || !e.data.is_object())
            return Error{"journal append: data is not a JSON object: " + data_json.substr(0, 80),
                         EINVAL};
    }
    try {
        auto r = impl_->j->append(e);
        if (!r) return r.error();
        return r->seq;
    } catch (const std::exception& ex) {  // canonical JSON refuses floats by throwing
        return Error{std::string("journal append: ") + ex.what(), EINVAL};
    }
}

const std::string& Journal::path() const {
    static const std::string none;
    return impl_ && impl_->j ? impl_->j->paths().db : none;
}

// The first, smaller form of audit_verify() (mcpwarden/audit.hpp), kept for the ABI: the
// same verification, and like it never throws.
VerifyResult journal_verify(const std::string& path, bool require_anchored) {
    AuditOptions o;
    o.path = path;
    o.require_anchored = require_anchored;
    return audit_verify(o);
}

BuildInfo build_info() {
    BuildInfo b;
    b.version = MCPW_VERSION_STRING;
#ifdef WARDEN_SANITIZED
    b.sanitizers = true;
#endif
#ifdef WARDEN_HAVE_SYSTEMD
    b.libsystemd = true;
#endif
#ifdef SYS_pidfd_open
    b.pidfd = true;
#endif
#ifdef SYS_clone3
    b.clone3 = true;
#endif
    // The cgroup v2 and PID-namespace layers are always compiled in and probed at run time.
    b.cgroup = true;
    b.pidns = true;
    return b;
}

}  // namespace warden::api
