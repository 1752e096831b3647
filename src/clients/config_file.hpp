// Reading and editing one client config file on disk: list its servers; wrap or unwrap
// them (dry run: only the diff), written atomically with a one-time backup in the state
// directory, every change recorded (wrap_record.hpp) so that unwrap takes back exactly what
// wrap did. Every error names the file as the user knows it:
// "~/.cursor/mcp.json:7:3: expected ',' or '}'".
#pragma once

#include <string>
#include <vector>

#include "clients/discover.hpp"
#include "clients/wrap.hpp"

namespace warden::clients {

Result<std::vector<ServerEntry>> list_file(const ConfigFileRef& file);

struct EditRequest {
    Action action = Action::Wrap;
    WrapOptions wrap;  // its `recorded` is filled in from `record`
    bool dry_run = false;
    WrapRecord* record = nullptr;  // required unless dry_run
};

struct FileEdit {
    std::vector<EntryResult> entries;
    std::string diff;  // unified diff of the change; empty when nothing changed
    bool written = false;
    std::string backup;  // the original's copy, while the record holds entries of the file
    bool backup_written = false;
    bool backup_removed = false;        // unwrap took back the last recorded entry
    std::string legacy_backup_removed;  // FILE.mcpwarden.bak of an older mcpwarden, removed
};

// Wraps or unwraps the selected servers of `file`. When the file does not parse, or the
// write fails, the file is left as it was. Unwrap also forgets recorded entries that are no
// longer wrapped (the user took them back by hand) and, when none is left, the backup.
Result<FileEdit> edit_file(const ConfigFileRef& file, const EditRequest& request);

}  // namespace warden::clients
