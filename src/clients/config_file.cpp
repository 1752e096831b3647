#include "clients/config_file.hpp"

#include <unistd.h>

#include "clients/atomic_file.hpp"
#include "clients/line_diff.hpp"
#include "sys/fd.hpp"

namespace warden::clients {

namespace {
Error located(const ConfigFileRef& file, const Error& e) {
    return Error{file.display + ":" + e.message, e.code};
}

// Wrap: records what it is about to write. The record is saved before the file, so that a
// crash in between leaves a record of entries that are not wrapped (unwrap forgets them),
// never a wrapped entry that nobody recorded.
void record_wrapped(RecordedFile& rf, const std::vector<EntryResult>& entries) {
    for (const auto& r : entries) {
        if (r.outcome != Outcome::Changed) continue;
        std::erase_if(rf.entries, [&](const RecordedEntry& e) {
            return e.scope == r.scope && e.project == r.project && e.name == r.name;
        });
        rf.entries.push_back({r.scope, r.project, r.name, r.command, r.args, r.added_args});
    }
}

// Unwrap: forgets what it took back, and what is no longer wrapped at all. With every
// entry of the file listed (no --server), a recorded entry that is gone from it goes too.
void forget_unwrapped(RecordedFile& rf, const std::vector<EntryResult>& entries, bool all_listed) {
    std::erase_if(rf.entries, [&](const RecordedEntry& e) {
        for (const auto& r : entries)
            if (r.scope == e.scope && r.project == e.project && r.name == e.name)
                return r.outcome == Outcome::Changed || r.outcome == Outcome::Already;
        return all_listed;
    });
}

// The backup of an mcpwarden before the state directory sat beside the file, in the
// project's repository if it was a project file. Once the file is back to those very
// bytes it holds nothing the file does not: it goes.
std::string remove_legacy_backup(const std::string& real, std::string_view now) {
    std::string legacy = legacy_backup_path(real);
    auto old = read_file(legacy);
    if (!old || *old != now) return {};
    if (::unlink(legacy.c_str()) < 0) return {};
    return legacy;
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
    if (!request.dry_run && !request.record)
        return Error::msg("internal error: an edit of " + file.display + " without a record");
    auto real = real_path(file.path);
    if (!real) return real.error();
    const bool unwrap = request.action == Action::Unwrap;
    RecordedFile* rf = request.record ? request.record->find(*real) : nullptr;
    static const std::vector<RecordedEntry> kNone;
    WrapOptions options = request.wrap;
    if (request.record) options.recorded = rf ? &rf->entries : &kNone;

    // A client may rewrite its file between our read and our rename; replace_file notices
    // (EAGAIN) and we redo the edit on the new content, a bounded number of times.
    constexpr int kAttempts = 3;
    for (int attempt = 1;; ++attempt) {
        auto text = read_file(file.path);
        if (!text) return text.error();
        auto rw =
            rewrite_text(*text, file.format, file.layout, file.scope, request.action, options);
        if (!rw) return located(file, rw.error());
        FileEdit out;
        out.entries = std::move(rw->entries);
        out.diff = unified_diff(*text, rw->text, file.path, file.path);
        if (request.dry_run) return out;
        if (!unwrap && !rw->changed) return out;

        std::string backup = request.record->backup_path(*real);
        if (!unwrap && rw->changed) {
            rf = &request.record->file(
                {*real, file.client, file.scope, file.format, file.layout, backup, {}});
            record_wrapped(*rf, out.entries);
            if (auto saved = request.record->save(); !saved) return saved.error();
        }
        if (rw->changed) {
            auto replaced = replace_file(file.path, *text, rw->text, backup);
            if (!replaced) {
                if (replaced.error().code == EAGAIN && attempt < kAttempts) continue;
                return replaced.error();
            }
            out.written = true;
            out.backup_written = replaced->backup_written;
        }
        if (unwrap) {
            if (out.written) out.legacy_backup_removed = remove_legacy_backup(*real, rw->text);
            if (rf) {
                forget_unwrapped(*rf, out.entries, !request.wrap.server);
                if (rf->entries.empty()) {
                    if (::unlink(rf->backup.c_str()) == 0) out.backup_removed = true;
                    request.record->forget(*real);
                    rf = nullptr;
                }
                if (auto saved = request.record->save(); !saved) return saved.error();
            }
        }
        if (rf) out.backup = rf->backup;
        return out;
    }
}

}  // namespace warden::clients
