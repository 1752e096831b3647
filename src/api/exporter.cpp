// export_run() and export_status(): the exporter of src/export behind the public API.
#include "mcpwarden/exporter.hpp"

#include <cerrno>

#include "api/internal.hpp"
#include "export/follower.hpp"
#include "export/settings.hpp"
#include "journal/journal.hpp"

namespace warden::api {

namespace {

// The settings files' values, with their layer: [export.NAME] above [export], the user's file
// above the system's (the receiver is chosen by the highest layer naming one).
exporter::ConfigLookup config_lookup(const ExportSettings& file) {
    return [file](std::string_view key) -> std::optional<exporter::ConfigValue> {
        for (const Setting& s : file.settings)
            if (s.key == key)
                return exporter::ConfigValue{
                    s.value, s.where,
                    (s.section == "export" ? 2 : 0) + (s.origin == "user" ? 0 : 1)};
        return std::nullopt;
    };
}

}  // namespace

Result<ExportProgress> export_run(const ExportRequest& request, const std::atomic<bool>& stop,
                                  const SettingsFiles& files) {
    try {
        // A settings file with a problem is not used, and the exporter does not start: the
        // file may be what names its receiver, its CA or `include-content = false`.
        ExportSettings file = export_settings(request.name, files);
        if (!file.problems.empty()) {
            std::string all;
            for (const SettingsProblem& p : file.problems)
                all += (all.empty() ? "" : "\n") + p.text;
            return Error{all +
                             "\nnot exporting: fix the settings file (`mcpwarden config check` "
                             "lists every problem)",
                         EINVAL};
        }
        auto settings =
            exporter::resolve_settings(request, exporter::process_env(), config_lookup(file));
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
