// Wrapping and unwrapping server entries, as edits on the original text.
//
// Wrapping turns
//     "command": "npx", "args": ["-y", "x"]
// into
//     "command": "/abs/mcpwarden", "args": ["run", "--name", "NAME", "--", "npx", "-y", "x"]
// by replacing the bytes of the command value and inserting five elements before the first
// argument, in the array's own layout (one per line when the array is one per line). The
// original command and arguments are moved as written, quotes and escapes included: a
// `${input:...}`, `${env:X}` or `$VAR` stays for the client to expand, exactly as before.
// Nothing else in the file changes. Unwrapping deletes exactly what wrapping inserted, so
// wrap + unwrap gives back the original bytes. An entry without `args` gets one, placed
// right before the command member; unwrap removes it again when the record says wrap added
// it (wrap_record.hpp). Given a record, unwrap takes back only the entries it lists, and
// only while they still read as recorded: an entry wrapped by hand is not ours.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "clients/config_doc.hpp"
#include "clients/wrap_record.hpp"

namespace warden::clients {

enum class Action { Wrap, Unwrap };

struct WrapOptions {
    std::string mcpwarden;              // absolute path of the mcpwarden binary to write
    std::optional<std::string> server;  // only entries with this name
    std::string sandbox{};              // "strict", "workspace": adds --sandbox P; "" none
    bool share = false;                 // adds --share (docs/SHARING.md)
    // Unwrap: the entries wrap recorded for this text. Null: every wrapped entry counts as
    // recorded (and an args member before the command is taken to be wrap's).
    const std::vector<RecordedEntry>* recorded = nullptr;
    bool unrecorded = false;  // unwrap also entries the record does not list
};

// The server a wrapped entry runs: what follows `--` in `mcpwarden run ... -- CMD ARGS`.
struct InnerCommand {
    size_t index = 0;  // position of CMD in the wrapped args
    std::string command;
    std::vector<std::string> args;
};

// Whether `program` names an mcpwarden binary: basename "mcpwarden", or exactly `ours`.
bool is_mcpwarden_program(std::string_view program, std::string_view ours = {});
// A stdio entry whose command is mcpwarden and whose args start with "run".
bool is_wrapped(const ServerEntry& e, std::string_view ours = {});
// The original command of a wrapped entry, or nullopt when args hold no "-- CMD".
std::optional<InnerCommand> inner_command(const ServerEntry& e);

enum class Outcome {
    Changed,  // wrapped (or unwrapped) now
    Already,  // already in the wanted state
    Remote,   // a remote (url) server: left alone
    Skipped,  // cannot be edited; `reason` says why
};

struct EntryResult {
    std::string name;
    Scope scope = Scope::User;
    std::string project;
    Outcome outcome = Outcome::Skipped;
    std::string reason;
    // Changed by a wrap: what the entry now holds and whether the args member is new.
    std::string command;
    std::vector<std::string> args;
    bool added_args = false;
};

struct Rewrite {
    std::string text;  // the new file content (the original when nothing changed)
    std::vector<EntryResult> entries;
    bool changed = false;
};

// Wraps or unwraps every selected stdio entry of a config text. Errors only when the text
// does not parse ("LINE:COLUMN: message").
Result<Rewrite> rewrite_text(std::string_view text, Format format, Layout layout, Scope scope,
                             Action action, const WrapOptions& options);

}  // namespace warden::clients
