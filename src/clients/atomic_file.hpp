// Replacing a client's config file without ever leaving it half-written.
//
// The new content goes to a temporary file in the same directory, gets the original's
// mode (and owner, when we are root), is fsynced, and is renamed over the original; the
// directory is fsynced after. A symlinked config (dotfile managers) is written through:
// the link's target is replaced, the link stays. Before the first modification the
// original bytes are saved once to the backup path the caller names (in mcpwarden's state
// directory, mode 0600: these files can hold API keys); later edits never overwrite that
// backup. Clients rewrite their own files
// (Claude Code writes ~/.claude.json constantly): right before the rename the file is read
// again, and if it no longer holds what we edited, nothing is written and the error has
// code EAGAIN so the caller can start over from the new content.
#pragma once

#include <string>
#include <string_view>

#include "sys/result.hpp"

namespace warden::clients {

// The backup that mcpwarden before 0.2 wrote beside the config (FILE.mcpwarden.bak).
std::string legacy_backup_path(const std::string& path);

struct Replaced {
    std::string path;             // the file really written (a symlink's target)
    bool backup_written = false;  // true when this call created the backup
};

// The real path of `path` (symlinks resolved): the file a write lands in.
Result<std::string> real_path(const std::string& path);

// Replaces `path`, which must still hold `expected`, with `content`; first saves
// `expected` to `backup` (mode 0600) unless that exists already.
Result<Replaced> replace_file(const std::string& path, std::string_view expected,
                              std::string_view content, const std::string& backup);

// Writes `content` to `path` atomically, mode 0600.
Status write_private_file(const std::string& path, std::string_view content);

}  // namespace warden::clients
