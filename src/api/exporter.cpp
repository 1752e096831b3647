// export_run() and export_status(): the exporter of src/export behind the public API.
#include "mcpwarden/exporter.hpp"

#include <cerrno>

#include "api/internal.hpp"
#include "export/follower.hpp"
#include "export/settings.hpp"
#include "journal/journal.hpp"

namespace warden::api {

Result<ExportProgress> export_run(const ExportRequest& request, const std::atomic<bool>& stop) {
    try {
        auto settings = exporter::resolve_settings(request, exporter::process_env());
        if (!settings) return Error{settings.error().message, EINVAL};
        auto r = exporter::follow(*settings, stop);
        if (!r) return r.error();
        return *r;
    } catch (const std::exception& e) {
        return internal_error("export", e);
    }
}

Result<std::vector<ExporterStatus>> export_status(const std::string& journal) {
    try {
        auto path = journal::resolve_path(journal);
        if (!path) return path.error();
        auto r = exporter::exporters(*path);
        if (!r) return r.error();
        return *r;
    } catch (const std::exception& e) {
        return internal_error("export status", e);
    }
}

}  // namespace warden::api
