// known_clients(), discover_clients(), edit_client_configs(): the public face of src/clients
// (mcpwarden/clients.hpp). Discovery, parsing and the byte-exact edits stay there.
#include <algorithm>
#include <exception>

#include "api/internal.hpp"
#include "clients/clients.hpp"
#include "mcpwarden/clients.hpp"

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
        if (!o) return to_public(o.error());
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

Result<ClientsEditReport> edit_client_configs(const EditClientsOptions& options) {
    try {
        if (auto bad = unknown_client(options.clients)) return Error{*bad, EINVAL};
        if (!options.mcpwarden.empty() && options.mcpwarden[0] != '/')
            return Error{"the mcpwarden path must be absolute: " + options.mcpwarden, EINVAL};
        if (!options.unwrap && options.mcpwarden.empty())
            return Error{"wrap: no mcpwarden path to write", EINVAL};
        clients::EditRequest req;
        req.action = options.unwrap ? clients::Action::Unwrap : clients::Action::Wrap;
        req.dry_run = options.dry_run;
        if (!options.server.empty()) req.wrap.server = options.server;
        req.wrap.mcpwarden = options.mcpwarden;
        if (options.sandbox != "off") req.wrap.sandbox = options.sandbox;
        auto o = clients::DiscoverOptions::from_environment(options.project_dir);
        if (!o) return to_public(o.error());

        ClientsEditReport out;
        for (const auto& c : clients::discover(*o)) {
            if (!options.clients.empty() &&
                std::find(options.clients.begin(), options.clients.end(), c.client.id) ==
                    options.clients.end())
                continue;
            for (const auto& f : c.files) {
                ClientFileEdit pf;
                pf.client = c.client.id;
                pf.path = f.path;
                pf.display = f.display;
                auto edit = clients::edit_file(f, req);
                if (!edit) {
                    pf.error = edit.error().message;
                    out.files.push_back(std::move(pf));
                    continue;
                }
                out.matched += edit->entries.size();
                for (const auto& r : edit->entries)
                    pf.entries.push_back({r.name, std::string(clients::scope_name(r.scope)),
                                          r.project, outcome_name(r.outcome), r.reason});
                pf.diff = edit->diff;
                pf.written = edit->written;
                pf.backup_written = edit->backup_written;
                pf.backup = edit->backup;
                if (!pf.backup.empty())
                    pf.backup_display = clients::display_path(pf.backup, o->home);
                out.files.push_back(std::move(pf));
            }
        }
        return out;
    } catch (const std::exception& e) {
        return internal_error("clients", e);
    }
}

}  // namespace warden::api
