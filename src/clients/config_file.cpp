#include "clients/config_file.hpp"

#include "clients/atomic_file.hpp"
#include "clients/line_diff.hpp"
#include "sys/fd.hpp"

namespace warden::clients {

namespace {
Error located(const ConfigFileRef& file, const Error& e) {
    return Error{file.display + ":" + e.message, e.code};
}
}  // namespace

Result<std::vector<ServerEntry>> list_file(const ConfigFileRef& file) {
    auto text = read_file(file.path);
    if (!text) return text.error();
    auto entries = read_entries(*text, file.format, file.layout, file.scope);
    if (!entries) return located(file, entries.error());
    return entries;
}

Result<FileEdit> edit_file(const ConfigFileRef& file, const EditRequest& request) {
    // A client may rewrite its file between our read and our rename; replace_file notices
    // (EAGAIN) and we redo the edit on the new content, a bounded number of times.
    constexpr int kAttempts = 3;
    for (int attempt = 1;; ++attempt) {
        auto text = read_file(file.path);
        if (!text) return text.error();
        auto rw =
            rewrite_text(*text, file.format, file.layout, file.scope, request.action, request.wrap);
        if (!rw) return located(file, rw.error());
        FileEdit out;
        out.entries = std::move(rw->entries);
        out.diff = unified_diff(*text, rw->text, file.path, file.path);
        if (request.dry_run || !rw->changed) return out;
        auto replaced = replace_file(file.path, *text, rw->text);
        if (!replaced) {
            if (replaced.error().code == EAGAIN && attempt < kAttempts) continue;
            return replaced.error();
        }
        out.written = true;
        out.backup = replaced->backup;
        out.backup_written = replaced->backup_written;
        return out;
    }
}

}  // namespace warden::clients
