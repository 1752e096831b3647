// known_clients(), discover_clients(), edit_client_configs(): the public face of src/clients
// (mcpwarden/clients.hpp). Discovery, parsing and the byte-exact edits stay there.
#include <algorithm>
#include <exception>
#include <filesystem>

#include "api/internal.hpp"
#include "clients/clients.hpp"
#include "clients/program_check.hpp"
#include "clients/wrap_record.hpp"
#include "journal/journal.hpp"
#include "mcpwarden/clients.hpp"
#include "sys/exec_path.hpp"

namespace warden::api {
namespace {

ClientServer public_entry(const clients::ServerEntry& e) {
    ClientServer s;
    s.name = e.name;
    s.scope = std::string(clients::scope_name(e.scope));
    s.project = e.project;
    s.remote = e.remote;
    s.disabled = e.disabled;
    s.problem = e.problem;
    if (e.remote) return s;
    s.command = e.program.value;
    for (const auto& a : e.args)
        s.args.push_back(a.value);
    s.wrapped = clients::is_wrapped(e);
    if (auto inner = s.wrapped ? clients::inner_command(e) : std::nullopt) {
        s.server_command = inner->command;
        s.server_args = inner->args;
    }
    return s;
}

const char* outcome_name(clients::Outcome o) {
    switch (o) {
        case clients::Outcome::Changed:
            return "changed";
        case clients::Outcome::Already:
            return "already";
        case clients::Outcome::Remote:
            return "remote";
        case clients::Outcome::Skipped:
            return "skipped";
    }
    return "?";
}

std::optional<std::string> unknown_client(const std::vector<std::string>& ids) {
    for (const auto& c : ids) {
        if (clients::find_client(c)) continue;
        std::string known;
        for (const auto& k : clients::known_clients())
            known += (known.empty() ? "" : ", ") + k.id;
        return "unknown client '" + c + "' (known: " + known + ")";
    }
    return std::nullopt;
}

}  // namespace

std::vector<ClientInfo> known_clients() {
    std::vector<ClientInfo> out;
    try {
        for (const auto& c : clients::known_clients())
            out.push_back({c.id, c.display});
    } catch (...) {  // nothing throws across the API: an allocation failure lists fewer
    }
    return out;
}

Result<std::vector<ClientConfigs>> discover_clients(const DiscoverClientsOptions& options) {
    try {
        auto o = clients::DiscoverOptions::from_environment(options.project_dir);
        if (!o) return o.error();
        std::vector<ClientConfigs> out;
        for (const auto& c : clients::discover(*o)) {
            ClientConfigs pc;
            pc.client = {c.client.id, c.client.display};
            pc.detected = c.detected;
            for (const auto& f : c.files) {
                ClientConfigFile pf;
                pf.client = f.client;
                pf.scope = std::string(clients::scope_name(f.scope));
                pf.path = f.path;
                pf.display = f.display;
                if (options.read_files) {
                    auto entries = clients::list_file(f);
                    if (!entries)
                        pf.error = entries.error().message;
                    else
                        for (const auto& e : *entries)
                            pf.servers.push_back(public_entry(e));
                }
                pc.files.push_back(std::move(pf));
            }
            out.push_back(std::move(pc));
        }
        return out;
    } catch (const std::exception& e) {
        return internal_error("clients", e);
    }
}

namespace {

// The files an edit covers: the explicit ones, else the selected clients' user files (and
// their project files when asked for).
warden::Result<std::vector<clients::ConfigFileRef>> files_to_edit(
    const EditClientsOptions& options, const clients::DiscoverOptions& o) {
    std::vector<clients::ConfigFileRef> out;
    if (!options.files.empty()) {
        for (const auto& path : options.files) {
            auto f = clients::config_file_at(path, o);
            if (!f) return f.error();
            out.push_back(std::move(*f));
        }
        return out;
    }
    for (const auto& c : clients::discover(o)) {
        if (!options.clients.empty() && std::find(options.clients.begin(), options.clients.end(),
                                                  c.client.id) == options.clients.end())
            continue;
        for (const auto& f : c.files)
            if (f.scope == clients::Scope::User || options.include_project) out.push_back(f);
    }
    return out;
}

ClientFileEdit public_edit(const clients::ConfigFileRef& f,
                           const warden::Result<clients::FileEdit>& edit, const std::string& home) {
    ClientFileEdit pf;
    pf.client = f.client;
    pf.scope = std::string(clients::scope_name(f.scope));
    pf.path = f.path;
    pf.display = f.display;
    if (!edit) {
        pf.error = edit.error().message;
        return pf;
    }
    for (const auto& r : edit->entries) {
        std::vector<std::string> wrapped;
        if (!r.command.empty()) {
            wrapped.push_back(r.command);
            wrapped.insert(wrapped.end(), r.args.begin(), r.args.end());
        }
        pf.entries.push_back({r.name, std::string(clients::scope_name(r.scope)), r.project,
                              outcome_name(r.outcome), r.reason, std::move(wrapped)});
    }
    pf.diff = edit->diff;
    pf.written = edit->written;
    pf.backup_written = edit->backup_written;
    pf.backup = edit->backup;
    if (!pf.backup.empty()) pf.backup_display = clients::display_path(pf.backup, home);
    pf.backup_removed = edit->backup_removed;
    pf.legacy_backup_removed = edit->legacy_backup_removed;
    return pf;
}

}  // namespace

std::string mcpwarden_problem(const std::string& path) {
    try {
        auto st = clients::check_mcpwarden_program(path);
        return st ? std::string() : st.error().message;
    } catch (const std::exception& e) {
        return internal_error("clients", e).message;
    }
}

Result<std::string> self_executable() {
    auto self = warden::self_executable();
    if (!self) return self.error();
    return *self;
}

Result<ClientsEditReport> edit_client_configs(const EditClientsOptions& options) {
    try {
        if (auto bad = unknown_client(options.clients)) return Error{*bad, EINVAL};
        if (!options.unwrap) {
            if (options.mcpwarden.empty()) return Error{"wrap: no mcpwarden path to write", EINVAL};
            if (auto st = clients::check_mcpwarden_program(options.mcpwarden); !st)
                return Error{"--mcpwarden " + st.error().message, st.error().code};
        }
        clients::EditRequest req;
        req.action = options.unwrap ? clients::Action::Unwrap : clients::Action::Wrap;
        req.dry_run = options.dry_run;
        if (!options.server.empty()) req.wrap.server = options.server;
        req.wrap.mcpwarden = options.mcpwarden;
        if (options.sandbox != "off") req.wrap.sandbox = options.sandbox;
        req.wrap.share = options.share;
        req.wrap.unrecorded = options.unrecorded;
        auto o = clients::DiscoverOptions::from_environment(options.project_dir);
        if (!o) return o.error();
        auto files = files_to_edit(options, *o);
        if (!files) return files.error();
        auto record = clients::WrapRecord::open(o->state_dir, !options.dry_run);
        if (!record) return record.error();
        req.record = &*record;

        ClientsEditReport out;
        for (const auto& f : *files) {
            auto edit = clients::edit_file(f, req);
            ClientFileEdit pf = public_edit(f, edit, o->home);
            out.matched += pf.entries.size();
            bool changes = std::any_of(pf.entries.begin(), pf.entries.end(),
                                       [](const auto& e) { return e.outcome == "changed"; });
            if (!options.unwrap && changes)
                pf.version_control = clients::version_control_of(f.path).value_or("");
            out.files.push_back(std::move(pf));
        }
        return out;
    } catch (const std::exception& e) {
        return internal_error("clients", e);
    }
}

namespace {

// What uninstall removes besides the backups, when they exist: with purge, the journal and
// its sidecars, and the settings file; and the state directory's own files once the record
// is empty. Directories go only when empty (rmdir), except the journal's checkpoints.
void remove_paths(const std::vector<std::string>& files, const std::string& checkpoints,
                  const std::vector<std::string>& dirs, bool dry_run,
                  std::vector<std::string>& removed) {
    namespace fs = std::filesystem;
    std::error_code ec;
    for (const auto& f : files)
        if (fs::exists(fs::symlink_status(f, ec)) && (dry_run || fs::remove(f, ec)))
            removed.push_back(f);
    if (!checkpoints.empty() && fs::is_directory(checkpoints, ec) &&
        (dry_run || fs::remove_all(checkpoints, ec) != static_cast<std::uintmax_t>(-1)))
        removed.push_back(checkpoints + "/");
    for (const auto& d : dirs)
        if (fs::is_directory(d, ec) && (dry_run ? fs::is_empty(d, ec) : fs::remove(d, ec)))
            removed.push_back(d + "/");
}

// Entries that still run mcpwarden: in the user's files and in every file wrap touched.
std::vector<std::string> still_wrapped(const clients::DiscoverOptions& o,
                                       const std::vector<std::string>& recorded_paths) {
    std::vector<clients::ConfigFileRef> files;
    for (const auto& c : clients::discover(o))
        for (const auto& f : c.files)
            files.push_back(f);
    for (const auto& p : recorded_paths)
        if (auto f = clients::config_file_at(p, o)) files.push_back(*f);
    std::vector<std::string> out, seen;
    for (const auto& f : files) {
        auto real = std::filesystem::weakly_canonical(f.path).string();
        if (std::find(seen.begin(), seen.end(), real) != seen.end()) continue;
        seen.push_back(real);
        auto entries = clients::list_file(f);
        if (!entries) continue;
        for (const auto& e : *entries)
            if (clients::is_wrapped(e)) out.push_back(f.display + ": " + e.name);
    }
    return out;
}

}  // namespace

Result<UninstallReport> uninstall(const UninstallOptions& options) {
    try {
        auto o = clients::DiscoverOptions::from_environment(std::nullopt);
        if (!o) return o.error();
        auto record = clients::WrapRecord::open(o->state_dir, !options.dry_run);
        if (!record) return record.error();
        clients::EditRequest req;
        req.action = clients::Action::Unwrap;
        req.dry_run = options.dry_run;
        req.record = &*record;

        UninstallReport out;
        std::vector<std::string> recorded_paths;
        auto recorded = record->files();  // a copy: unwrapping forgets files as it goes
        for (const auto& rf : recorded) {
            recorded_paths.push_back(rf.path);
            clients::ConfigFileRef ref{rf.client, rf.scope,
                                       rf.path,   clients::display_path(rf.path, o->home),
                                       rf.format, rf.layout};
            std::error_code ec;
            if (!std::filesystem::exists(rf.path, ec)) {  // gone: nothing to unwrap
                if (!options.dry_run) record->forget(rf.path);
                remove_paths({rf.backup}, {}, {}, options.dry_run, out.removed);
                continue;
            }
            auto edit = clients::edit_file(ref, req);
            out.files.push_back(public_edit(ref, edit, o->home));
            if (edit && (edit->backup_removed || options.dry_run)) out.removed.push_back(rf.backup);
        }
        if (!options.dry_run)
            if (auto saved = record->save(); !saved) return saved.error();
        if (!options.dry_run) out.still_wrapped = still_wrapped(*o, recorded_paths);

        std::vector<std::string> files, dirs;
        std::string checkpoints;
        if (options.purge) {
            auto db = journal::resolve_path();
            if (db) {
                auto p = journal::Paths::for_db(*db);
                files = {p.db,   p.db + "-wal", p.db + "-shm", p.db + "-journal",
                         p.lock, p.key,         p.pub};
                checkpoints = p.checkpoints;
            }
            files.push_back(o->config_home + "/mcpwarden/config.toml");
            dirs.push_back(o->config_home + "/mcpwarden");
        }
        if (record->files().empty() || options.dry_run) {
            files.push_back(record->path());
            files.push_back(o->state_dir + "/wrapped.lock");
            dirs.push_back(o->state_dir + "/backups");
            dirs.push_back(o->state_dir);
        }
        remove_paths(files, checkpoints, dirs, options.dry_run, out.removed);
        return out;
    } catch (const std::exception& e) {
        return internal_error("uninstall", e);
    }
}

}  // namespace warden::api
