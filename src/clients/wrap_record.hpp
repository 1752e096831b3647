// What `mcpwarden wrap` did, kept so that `unwrap` undoes exactly that and nothing else.
//
// A config entry that reads `"command": "mcpwarden", "args": ["run", "--", ...]` may have
// been written by wrap or by the user's own hand; only the first is ours to take back. So
// every entry wrap changes is recorded: the file (its real path, client, format), the
// entry's place (scope, project, name), the command and args exactly as wrap wrote them,
// and whether wrap had to add the `args` member (an entry that had `"args": []` and one
// that had no args at all wrap alike; only the record tells unwrap which to give back).
// unwrap takes back an entry only while it still reads as recorded; an entry the user
// changed since is left alone and reported.
//
// The record and the one-time backups of the original files live in the state directory
// ($XDG_STATE_HOME/mcpwarden, else ~/.local/state/mcpwarden), never beside the config: a
// backup next to a project's .mcp.json would sit in the repository, API keys included.
// The directories are 0700 and every file 0600. A backup goes when the last recorded entry
// of its file is unwrapped. Two wraps at once serialise on a lock file there.
//
//   STATE/wrapped.json                     the record
//   STATE/backups/%2Fhome%2Fdev%2F.mcp.json  the original of /home/dev/.mcp.json
#pragma once

#include <string>
#include <vector>

#include "clients/config_doc.hpp"
#include "sys/fd.hpp"
#include "sys/result.hpp"

namespace warden::clients {

struct RecordedEntry {
    Scope scope = Scope::User;
    std::string project;  // Local scope: the projects[] key
    std::string name;
    std::string command;  // as wrap wrote it
    std::vector<std::string> args;
    bool added_args = false;  // the entry had no args member; wrap added one
};

struct RecordedFile {
    std::string path;  // the config file's real path
    std::string client;
    Scope scope = Scope::User;
    Format format = Format::Json;
    Layout layout = Layout::McpServers;
    std::string backup;  // the original, as it was before the first wrap
    std::vector<RecordedEntry> entries;
};

class WrapRecord {
  public:
    // Creates the state directory when missing, takes its lock (held until destruction)
    // and reads the record. A record that does not parse is an error naming it: wrap and
    // unwrap must not act on a guess. `create` false (a dry run): nothing is created; a
    // missing state directory reads as an empty record.
    static Result<WrapRecord> open(const std::string& state_dir, bool create = true);

    const std::string& state_dir() const { return dir_; }
    std::string path() const { return dir_ + "/wrapped.json"; }
    // Where the backup of the config at real path `path` goes.
    std::string backup_path(const std::string& path) const;

    std::vector<RecordedFile>& files() { return files_; }
    RecordedFile* find(const std::string& path);
    // The file's record, created empty when absent.
    RecordedFile& file(const RecordedFile& like);
    void forget(const std::string& path);

    // Writes the record atomically (0600); an empty record removes the file.
    Status save() const;

  private:
    WrapRecord(std::string dir, Fd lock) : dir_(std::move(dir)), lock_(std::move(lock)) {}
    std::string dir_;
    Fd lock_;
    std::vector<RecordedFile> files_;
};

// The entry of `entries` recorded under (scope, project, name), or null.
const RecordedEntry* find_recorded(const std::vector<RecordedEntry>& entries, Scope scope,
                                   const std::string& project, const std::string& name);

// $XDG_STATE_HOME/mcpwarden when XDG_STATE_HOME is absolute, else HOME/.local/state/mcpwarden.
std::string state_dir_from_environment(const std::string& home);

}  // namespace warden::clients
