#include "clients/wrap_record.hpp"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "clients/atomic_file.hpp"

namespace warden::clients {
namespace {

constexpr int kVersion = 1;

// mkdir -p with mode 0700 for what it creates; an existing directory keeps its mode.
Status make_private_dirs(const std::string& dir) {
    for (size_t at = 1; at <= dir.size(); ++at) {
        if (at != dir.size() && dir[at] != '/') continue;
        std::string part = dir.substr(0, at);
        if (::mkdir(part.c_str(), 0700) < 0 && errno != EEXIST)
            return Error::sys("mkdir", part, errno);
    }
    return {};
}

template <class E>
struct Names {
    E value;
    const char* name;
};
constexpr Names<Scope> kScopes[] = {
    {Scope::User, "user"}, {Scope::Project, "project"}, {Scope::Local, "local"}};
constexpr Names<Format> kFormats[] = {{Format::Json, "json"}, {Format::Toml, "toml"}};
constexpr Names<Layout> kLayouts[] = {{Layout::McpServers, "mcpServers"},
                                      {Layout::Servers, "servers"},
                                      {Layout::ContextServers, "context_servers"},
                                      {Layout::ClaudeJson, "claude.json"},
                                      {Layout::CodexToml, "mcp_servers"}};

template <class E, size_t N>
const char* name_of(const Names<E> (&table)[N], E v) {
    for (const auto& n : table)
        if (n.value == v) return n.name;
    return "?";
}

template <class E, size_t N>
E parse(const Names<E> (&table)[N], const std::string& s) {
    for (const auto& n : table)
        if (s == n.name) return n.value;
    throw std::invalid_argument("unknown value \"" + s + "\"");
}

nlohmann::json to_json(const RecordedFile& f) {
    nlohmann::json entries = nlohmann::json::array();
    for (const auto& e : f.entries)
        entries.push_back({{"scope", name_of(kScopes, e.scope)},
                           {"project", e.project},
                           {"name", e.name},
                           {"command", e.command},
                           {"args", e.args},
                           {"added_args", e.added_args}});
    return {{"path", f.path},
            {"client", f.client},
            {"scope", name_of(kScopes, f.scope)},
            {"format", name_of(kFormats, f.format)},
            {"layout", name_of(kLayouts, f.layout)},
            {"backup", f.backup},
            {"entries", entries}};
}

RecordedFile file_from_json(const nlohmann::json& j) {
    RecordedFile f;
    f.path = j.at("path").get<std::string>();
    f.client = j.at("client").get<std::string>();
    f.scope = parse(kScopes, j.at("scope").get<std::string>());
    f.format = parse(kFormats, j.at("format").get<std::string>());
    f.layout = parse(kLayouts, j.at("layout").get<std::string>());
    f.backup = j.at("backup").get<std::string>();
    for (const auto& e : j.at("entries")) {
        RecordedEntry r;
        r.scope = parse(kScopes, e.at("scope").get<std::string>());
        r.project = e.at("project").get<std::string>();
        r.name = e.at("name").get<std::string>();
        r.command = e.at("command").get<std::string>();
        r.args = e.at("args").get<std::vector<std::string>>();
        r.added_args = e.at("added_args").get<bool>();
        f.entries.push_back(std::move(r));
    }
    return f;
}

}  // namespace

std::string state_dir_from_environment(const std::string& home) {
    if (const char* xdg = ::getenv("XDG_STATE_HOME"); xdg && xdg[0] == '/')
        return std::string(xdg) + "/mcpwarden";
    return home + "/.local/state/mcpwarden";
}

Result<WrapRecord> WrapRecord::open(const std::string& state_dir, bool create) {
    struct stat st;
    if (!create && ::stat(state_dir.c_str(), &st) < 0 && errno == ENOENT)
        return WrapRecord(state_dir, Fd());
    if (auto made = make_private_dirs(state_dir + "/backups"); !made) return made.error();
    std::string lock_path = state_dir + "/wrapped.lock";
    auto lock = open_file(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (!lock) return lock.error();
    while (::flock(lock->get(), LOCK_EX) < 0)
        if (errno != EINTR) return Error::sys("flock", lock_path, errno);
    WrapRecord record(state_dir, std::move(*lock));

    auto text = read_file(record.path());
    if (!text) {
        if (text.error().code == ENOENT) return record;
        return text.error();
    }
    try {
        auto j = nlohmann::json::parse(*text);
        if (j.at("version").get<int>() != kVersion)
            throw std::invalid_argument("version " + j.at("version").dump() + " is not " +
                                        std::to_string(kVersion));
        for (const auto& f : j.at("files"))
            record.files_.push_back(file_from_json(f));
    } catch (const std::exception& e) {
        return Error::msg(record.path() + ": cannot read the record of wrapped entries (" +
                          e.what() + "); move it away to start a new one");
    }
    return record;
}

std::string WrapRecord::backup_path(const std::string& path) const {
    // The path, '%' and '/' escaped, as one file name: readable, unique, reversible.
    std::string name;
    for (char c : path) {
        if (c == '%')
            name += "%25";
        else if (c == '/')
            name += "%2F";
        else
            name += c;
    }
    return dir_ + "/backups/" + name;
}

RecordedFile* WrapRecord::find(const std::string& path) {
    for (auto& f : files_)
        if (f.path == path) return &f;
    return nullptr;
}

RecordedFile& WrapRecord::file(const RecordedFile& like) {
    if (auto* f = find(like.path)) return *f;
    files_.push_back(like);
    return files_.back();
}

void WrapRecord::forget(const std::string& path) {
    std::erase_if(files_, [&](const RecordedFile& f) { return f.path == path; });
}

Status WrapRecord::save() const {
    if (files_.empty()) {
        if (::unlink(path().c_str()) < 0 && errno != ENOENT)
            return Error::sys("unlink", path(), errno);
        return {};
    }
    nlohmann::json files = nlohmann::json::array();
    for (const auto& f : files_)
        files.push_back(to_json(f));
    nlohmann::json j{{"version", kVersion}, {"files", files}};
    return write_private_file(path(), j.dump(2) + "\n");
}

const RecordedEntry* find_recorded(const std::vector<RecordedEntry>& entries, Scope scope,
                                   const std::string& project, const std::string& name) {
    for (const auto& e : entries)
        if (e.scope == scope && e.project == project && e.name == name) return &e;
    return nullptr;
}

}  // namespace warden::clients
