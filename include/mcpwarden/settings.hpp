// libmcpwarden — the settings file: defaults for every `run` option and for `reap`, in
// $XDG_CONFIG_HOME/mcpwarden/config.toml (the user's) over /etc/mcpwarden/config.toml (the
// system's), with [server.NAME] sections for one server. docs/SETTINGS.md has the format.
//
//     auto s = warden::api::run_settings({{"eof-grace", "250ms"}}, {"my-server", "--stdio"});
//     if (!s) { fprintf(stderr, "%s\n", s.error().message.c_str()); return 2; }
//     for (auto& p : s->problems) fprintf(stderr, "%s\n", p.text.c_str());
//     if (!s->problems.empty()) return 2;  // as `run`: never on settings nobody wrote
//     auto rc = warden::api::run_session(s->options);
//
// Precedence, highest first: flag > MCPWARDEN_* variable > the matching [server.NAME]
// section (user's, then system's) > [run] (user's, then system's) > built-in default. A file
// with any problem (bad TOML, an unknown key, a wrong type, a bad value) is not used, nor is
// the other one, and `mcpwarden run` refuses to start (exit 2): the file may be what asked
// for a sandbox, a limit or a redaction, and one that does not parse cannot say whether it
// did (docs/SETTINGS.md, "A broken file").
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "mcpwarden/export.h"
#include "mcpwarden/result.hpp"
#include "mcpwarden/session.hpp"

namespace warden::api {

// The two files, highest precedence first. A path that does not exist is an empty file.
struct SettingsFiles {
    std::string user;    // $XDG_CONFIG_HOME/mcpwarden/config.toml
    std::string system;  // /etc/mcpwarden/config.toml
};
// XDG_CONFIG_HOME when set and absolute, else $HOME/.config, else the home directory in
// the password database; and /etc/mcpwarden/config.toml.
MCPW_API SettingsFiles default_settings_files();

// What is wrong with a settings file, where: text is "FILE:LINE:COL: what" (e.g.
// "/home/u/.config/mcpwarden/config.toml:3:13: [run] eof-grace: cannot parse '3x' as a
// duration (e.g. 250ms, 2s, 1.5s)").
struct SettingsProblem {
    std::string file;
    int line = 0, column = 0;
    std::string message;
    std::string text;
};

// One effective value and where it came from.
struct Setting {
    std::string section;  // "run", "reap", "export" or "export.NAME"
    std::string key;      // "eof-grace"
    std::string value;    // as given (a list: items joined by ':'); "" for no value
    // "flag", "env", "server", "user", "system", "reap.toml" (the older reap-only file) or
    // "built-in".
    std::string origin;
    // "--eof-grace", "MCPWARDEN_EOF_GRACE", "FILE:LINE" or "built-in".
    std::string where;
};

struct RunSettings {
    RunOptions options;                // for run_session(); settings_files/_error filled in
    std::vector<Setting> settings;     // every run option, in --help order
    std::vector<std::string> files;    // the settings files that exist
    std::vector<std::string> servers;  // the sections that matched: "FILE:LINE [server.NAME]"
    // Non-empty: neither file is in `options` or `settings` (they hold the built-in defaults,
    // flags and variables), and `run` refuses to start.
    std::vector<SettingsProblem> problems;
};

// Flags as given on the command line, in order (key without dashes → value; a switch is "1";
// a list option may repeat), the server's command, and the files. Error for a bad flag or
// MCPWARDEN_* variable, worded as run_options() words it, and for an option of the sandbox
// (allow-read, allow-write, net, allow-connect, env-allow, require-sandbox) given, from any
// source, without a sandbox profile ("--allow-read needs a sandbox profile, …"): it would
// confine nothing (a sandbox turned off on purpose refuses only require-sandbox). A bad file
// is a problem.
MCPW_API Result<RunSettings> run_settings(
    const std::vector<std::pair<std::string, std::string>>& flags,
    std::vector<std::string> command = {}, const SettingsFiles& files = default_settings_files());

// The [reap] defaults: grace, interval, revoke-cmd, revoke-timeout (the flags of `mcpwarden
// reap`), falling back to the older $XDG_CONFIG_HOME/mcpwarden/reap.toml for the revoke
// hook. Unlike `run`, `reap` refuses to act when a file has a problem: a revoke hook that
// was meant to run must not be skipped silently.
struct ReapSettings {
    std::vector<Setting> settings;  // in the order above
    std::vector<std::string> files;
    std::vector<SettingsProblem> problems;
    // The value of `key` ("" when none) and whether a file gave it.
    MCPW_API std::string value(const std::string& key) const;
    MCPW_API bool from_file(const std::string& key) const;
};
MCPW_API ReapSettings reap_settings(const SettingsFiles& files = default_settings_files());

// config.toml's [export] and [export.NAME] sections, for `mcpwarden export --name NAME`
// (NAME empty: the `name` of [export], if any). Each key a file gives, from the first of:
// [export.NAME] in the user's file, in the system's, [export] in the user's, in the
// system's; section "export.NAME" or "export", origin "user" or "system", where "FILE:LINE".
// The flags and variables above them are the exporter's to apply (docs/EXPORT.md).
struct ExportSettings {
    std::string destination;        // the name the sections were matched by ("" none)
    std::vector<Setting> settings;  // in the order of the exporter's keys
    std::vector<std::string> files;
    // Non-empty: `settings` is empty (neither file is used), and `export` refuses to start.
    std::vector<SettingsProblem> problems;
    MCPW_API std::string value(const std::string& key) const;  // "" when no file gives it
};
MCPW_API ExportSettings export_settings(const std::string& destination = "",
                                        const SettingsFiles& files = default_settings_files());

// `mcpwarden config check`: every problem of both files, and of the MCPWARDEN_* variables
// of run options that are set (file "" and line 0 for those: "MCPWARDEN_ISOLATE: …").
struct SettingsCheck {
    std::vector<std::string> files;  // the files that exist
    std::vector<SettingsProblem> problems;
};
MCPW_API SettingsCheck check_settings(const SettingsFiles& files = default_settings_files());

// The candidate closest to `word` by edit distance, or "" when none is close enough to be
// what was meant (for "did you mean …?").
MCPW_API std::string closest_word(const std::string& word,
                                  const std::vector<std::string>& candidates);

}  // namespace warden::api
