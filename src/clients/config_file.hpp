// Reading and editing one client config file on disk: list its servers; wrap or unwrap
// them (dry run: only the diff), written atomically with a one-time backup. Every error
// names the file as the user knows it: "~/.cursor/mcp.json:7:3: expected ',' or '}'".
#pragma once

#include <string>
#include <vector>

#include "clients/discover.hpp"
#include "clients/wrap.hpp"

namespace warden::clients {

Result<std::vector<ServerEntry>> list_file(const ConfigFileRef& file);

struct EditRequest {
    Action action = Action::Wrap;
    WrapOptions wrap;
    bool dry_run = false;
};

struct FileEdit {
    std::vector<EntryResult> entries;
    std::string diff;  // unified diff of the change; empty when nothing changed
    bool written = false;
    std::string backup;  // set when written
    bool backup_written = false;
};

// Wraps or unwraps the selected servers of `file`. When the file does not parse, or the
// write fails, the file is left as it was.
Result<FileEdit> edit_file(const ConfigFileRef& file, const EditRequest& request);

}  // namespace warden::clients
