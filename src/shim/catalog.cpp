#include "shim/catalog.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "contain/layers.hpp"
#include "journal/crypto.hpp"
#include "journal/journal.hpp"
#include "journal/query.hpp"
#include "journal/redact.hpp"
#include "sandbox/sandbox.hpp"
#include "sys/exec_path.hpp"

extern char** environ;

namespace warden::shim {

namespace {

// A file as the catalog knows it; null when it cannot be stat'ed.
nlohmann::json file_identity(const std::string& path) {
    struct stat st;
    if (path.empty() || ::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return nullptr;
    return nlohmann::json{
        {"path", SensitiveText(path)},  // an argument, named after what it holds, maybe
        {"dev", static_cast<uint64_t>(st.st_dev)},
        {"ino", static_cast<uint64_t>(st.st_ino)},
        {"size", static_cast<int64_t>(st.st_size)},
        {"mtime_ns", static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec}};
}

// A span in words, in the largest unit it has at least two of: "850 ms", "90 s", "7 d".
std::string span_text(int64_t ms) {
    struct Unit {
        int64_t ms;
        const char* name;
    };
    for (Unit u :
         {Unit{86'400'000, "d"}, Unit{3'600'000, "h"}, Unit{60'000, "min"}, Unit{1'000, "s"}})
        if (ms >= 2 * u.ms) return fmt::format("{} {}", ms / u.ms, u.name);
    return fmt::format("{} ms", ms);
}

std::string current_dir() {
    char cwd[4096];
    return ::getcwd(cwd, sizeof cwd) ? std::string(cwd) : std::string();
}

// Our variables configure mcpwarden, not the server's answers; every other one may matter,
// but those the caller names.
std::string environment_hash(std::span<const std::string_view> ignored) {
    std::vector<std::string_view> vars;
    for (char** e = environ; e && *e; ++e) {
        const std::string_view kv(*e);
        const std::string_view name = kv.substr(0, kv.find('='));
        if (kv.starts_with("MCPWARDEN_") ||
            std::find(ignored.begin(), ignored.end(), name) != ignored.end())
            continue;
        vars.emplace_back(kv);
    }
    std::sort(vars.begin(), vars.end());
    std::string all;
    for (auto v : vars) {
        all.append(v);
        all.push_back('\0');
    }
    return journal::to_hex(journal::sha256(all));
}

nlohmann::json json_object_of(std::string_view text) {
    auto j = nlohmann::json::parse(text, nullptr, false);
    return j.is_object() ? j : nlohmann::json();
}

// What of the files differs between the record's and now, in words; "" when nothing does.
std::string changed_file(const nlohmann::json& then, const nlohmann::json& now) {
    auto name = [](const nlohmann::json& f, const char* fallback) {
        return f.is_object() ? f.value("path", std::string(fallback)) : std::string(fallback);
    };
    if (then.value("executable", nlohmann::json()) != now.value("executable", nlohmann::json()))
        return "its executable " + name(now.value("executable", nlohmann::json()), "(gone)") +
               " changed (inode, size or modification time)";
    if (then.value("arguments", nlohmann::json()) != now.value("arguments", nlohmann::json()))
        return "a file named in its arguments changed (inode, size or modification time)";
    if (then.value("mcpwarden", nlohmann::json()) != now.value("mcpwarden", nlohmann::json()))
        return "it was made by another mcpwarden build";
    return {};
}

}  // namespace

bool catalog_method(std::string_view method) {
    return method == "initialize" || method == "server/discover" ||
           !list_capability(method).empty();
}

std::string answer_key(std::string_view method, const nlohmann::json& params) {
    constexpr const char* kVersion = "io.modelcontextprotocol/protocolVersion";
    constexpr const char* kCapabilities = "io.modelcontextprotocol/clientCapabilities";
    const auto meta = params.is_object() ? params.value("_meta", nlohmann::json()) : nullptr;
    const auto version = meta.is_object() ? meta.value(kVersion, nlohmann::json()) : nullptr;
    if (Faults::from_env().catalog_era) return std::string(method);
    if (!version.is_string()) return method == "server/discover" ? "" : std::string(method);
    // What can change the answer: every parameter, and of _meta the version and the
    // client's capabilities; the rest of _meta names this one request (progress, tracing).
    nlohmann::json asked = params;
    asked["_meta"] = {{kVersion, version},
                      {kCapabilities, meta.value(kCapabilities, nlohmann::json())}};
    return fmt::format("{} {} {}", method, version.get<std::string>(),
                       journal::to_hex(journal::sha256(asked.dump())).substr(0, 16));
}

std::string_view key_method(std::string_view key) {
    return key.substr(0, key.find(' '));
}

std::string_view list_capability(std::string_view method) {
    if (method == "tools/list") return "tools";
    if (method == "prompts/list") return "prompts";
    if (method == "resources/list" || method == "resources/templates/list") return "resources";
    return {};
}

nlohmann::json CachedAnswer::result() const {
    auto j = json_object_of(before_id + "0" + after_id);
    return j.is_object() ? j.value("result", nlohmann::json()) : nlohmann::json();
}

nlohmann::json list_difference(std::string_view method, const nlohmann::json& before,
                               const nlohmann::json& after) {
    if (before == after) return nullptr;
    const bool templates = method == "resources/templates/list";
    const std::string items =
        templates ? "resourceTemplates" : std::string(list_capability(method));
    const std::string key = templates ? "uriTemplate" : method == "resources/list" ? "uri" : "name";
    // KEY → item, of the items that have one.
    auto by_key = [&](const nlohmann::json& result) {
        std::map<std::string, nlohmann::json> m;
        const auto list = result.is_object() ? result.value(items, nlohmann::json()) : nullptr;
        if (list.is_array())
            for (const auto& item : list)
                if (item.is_object() && item.value(key, nlohmann::json()).is_string())
                    m[item[key].get<std::string>()] = item;
        return m;
    };
    const auto a = by_key(before), b = by_key(after);
    nlohmann::json added = nlohmann::json::array(), removed = nlohmann::json::array(),
                   changed = nlohmann::json::array();
    for (const auto& [k, item] : b)
        if (auto it = a.find(k); it == a.end())
            added.push_back(k);
        else if (it->second != item)
            changed.push_back(k);
    for (const auto& [k, item] : a)
        if (!b.contains(k)) removed.push_back(k);
    auto without_items = [&](nlohmann::json r) {
        if (r.is_object()) r.erase(items);
        return r;
    };
    nlohmann::json d{{"added", added}, {"removed", removed}, {"changed", changed}};
    if (without_items(before) != without_items(after)) d["other"] = true;
    return d;
}

ServerIdentity server_identity(const RunOptions& o, std::span<const std::string_view> ignored) {
    ServerIdentity id;
    const std::string cwd = current_dir();
    nlohmann::json what{{"argv", o.command},
                        {"cwd", cwd},
                        {"env_sha256", environment_hash(ignored)},
                        {"sandbox",
                         {{"profile", sandbox::to_string(o.sandbox)},
                          {"allow_read", o.allow_read},
                          {"allow_write", o.allow_write},
                          {"net", sandbox::to_string(o.net)},
                          {"allow_connect", o.allow_connect},
                          {"env_allow", o.env_allow}}}};
    id.key = journal::to_hex(journal::sha256(what.dump()));

    nlohmann::json args = nlohmann::json::array();
    for (size_t i = 1; i < o.command.size(); ++i)
        if (auto f = file_identity(o.command[i]); !f.is_null()) args.push_back(std::move(f));
    auto exe = o.command.empty() ? Result<std::string>(Error::msg("no command"))
                                 : find_executable(o.command[0]);
    auto self = self_executable();
    id.files = {{"executable", exe ? file_identity(*exe) : nullptr},
                {"arguments", std::move(args)},
                {"mcpwarden", self ? file_identity(*self) : nullptr}};
    return id;
}

std::optional<CachedAnswer> split_answer(std::string_view line, std::string_view id,
                                         bool stateless) {
    if (id.empty() || id.data() < line.data() || id.data() + id.size() > line.data() + line.size())
        return std::nullopt;
    auto j = json_object_of(line);
    if (!j.is_object() || !j.contains("result") || !j["result"].is_object()) return std::nullopt;
    const size_t at = static_cast<size_t>(id.data() - line.data());
    CachedAnswer a{std::string(line.substr(0, at)), std::string(line.substr(at + id.size()))};
    if (!stateless) return a;
    const auto& r = j["result"];
    const auto ttl = r.value("ttlMs", nlohmann::json());
    if (r.value("cacheScope", std::string("public")) == "private" || !ttl.is_number_integer() ||
        ttl.get<int64_t>() <= 0)
        return std::nullopt;
    a.received_ns = journal::now_ns();
    a.ttl_ms = ttl.get<int64_t>();
    return a;
}

std::optional<std::string> Catalog::answer(std::string_view method, std::string_view id_raw,
                                           const nlohmann::json& params, int64_t now_ns) const {
    const std::string key = answer_key(method, params);
    if (key.empty()) return std::nullopt;
    auto it = answers.find(key);
    if (it == answers.end()) return std::nullopt;
    if (key != method) {  // 2026-07-28: its own ttlMs, every parameter in its key
        const int64_t age_ns = now_ns - it->second.received_ns;
        if (age_ns < 0 || age_ns >= it->second.ttl_ms * 1'000'000) return std::nullopt;
        return it->second.before_id + std::string(id_raw) + it->second.after_id;
    }
    if (method == "initialize") {
        if (params != initialize_params) return std::nullopt;
        auto served = served_initialize();
        return served->before_id + std::string(id_raw) + served->after_id;
    }
    if (params.is_object() && params.contains("cursor")) return std::nullopt;  // first page only
    return it->second.before_id + std::string(id_raw) + it->second.after_id;
}

bool Catalog::same_legacy_version(const nlohmann::json& params) const {
    if (!params.is_object() || Faults::from_env().catalog_era) return true;
    auto version = [](const nlohmann::json& p) {
        return p.is_object() ? p.value("protocolVersion", nlohmann::json()) : nlohmann::json();
    };
    return version(params) == version(initialize_params);
}

nlohmann::json Catalog::initialize_result() const {
    auto it = answers.find("initialize");
    return it == answers.end() ? nlohmann::json() : it->second.result();
}

std::optional<CachedAnswer> Catalog::served_initialize() const {
    auto it = answers.find("initialize");
    if (it == answers.end()) return std::nullopt;
    // Parsed keeping the server's key order, so that what changes is only what is added.
    auto j = nlohmann::ordered_json::parse(it->second.before_id + "0" + it->second.after_id,
                                           nullptr, false);
    if (!j.is_object() || !j.contains("result") || !j["result"].is_object() ||
        !j["result"].contains("capabilities") || !j["result"]["capabilities"].is_object())
        return it->second;
    auto& caps = j["result"]["capabilities"];
    bool added = false;
    for (const auto& [method, answer] : answers) {
        auto cap = std::string(list_capability(method));
        if (cap.empty() || !caps.contains(cap) || !caps[cap].is_object()) continue;
        if (caps[cap].value("listChanged", false) == true) continue;
        caps[cap]["listChanged"] = true;
        added = true;
    }
    if (!added) return it->second;
    // The id is the one part that is not the catalog's: split the new line around a marker.
    constexpr std::string_view kMarker = "mcpwarden-catalog-id-9f1c";
    j["id"] = kMarker;
    const std::string line = j.dump();
    const auto at = line.find(std::string("\"") + std::string(kMarker) + "\"");
    if (at == std::string::npos) return it->second;
    return CachedAnswer{line.substr(0, at), line.substr(at + kMarker.size() + 2)};
}

nlohmann::json Catalog::to_record(const ServerIdentity& id) const {
    nlohmann::json d{{"key", id.key}, {"files", id.files}};
    // An array, not an object by method: the journal's keys are snake_case words.
    nlohmann::json a = nlohmann::json::array();
    for (const auto& [key, answer] : answers) {
        nlohmann::json one{{"method", key_method(key)},
                           {"before_id", answer.before_id},
                           {"after_id", answer.after_id}};
        if (key != key_method(key)) {
            one["key"] = key;
            one["received_ns"] = answer.received_ns;
            one["ttl_ms"] = answer.ttl_ms;
        }
        a.push_back(std::move(one));
    }
    d["answers"] = std::move(a);
    // As text: the journal's keys are snake_case, the client's (clientInfo) are not.
    d["initialize_params"] = initialize_params.dump();
    return d;
}

Result<Catalog> Catalog::from_record(int64_t seq, int64_t ts_ns, std::string_view body) {
    auto j = json_object_of(body);
    const auto d = j.is_object() ? j.value("data", nlohmann::json()) : nlohmann::json();
    if (!d.is_object()) return Error::msg(fmt::format("server.catalog #{}: no data object", seq));
    Catalog c;
    c.seq = seq;
    c.ts_ns = ts_ns;
    c.files = d.value("files", nlohmann::json());
    const auto params = d.value("initialize_params", nlohmann::json());
    if (params.is_string())
        c.initialize_params = nlohmann::json::parse(params.get<std::string>(), nullptr, false);
    const auto answers = d.value("answers", nlohmann::json::array());
    if (!answers.is_array())
        return Error::msg(fmt::format("server.catalog #{}: answers is not an array", seq));
    for (const auto& a : answers) {
        auto text = [&](const char* key) {
            auto v = a.is_object() ? a.value(key, nlohmann::json()) : nlohmann::json();
            return v.is_string() ? std::optional<std::string>(v.get<std::string>()) : std::nullopt;
        };
        auto method = text("method"), before = text("before_id"), after = text("after_id");
        if (!method || !before || !after)
            return Error::msg(fmt::format(
                "server.catalog #{}: an answer without method, before_id and after_id", seq));
        CachedAnswer answer{*before, *after};
        const auto key = text("key");
        if (key) {
            answer.received_ns = a.value("received_ns", int64_t{0});
            answer.ttl_ms = a.value("ttl_ms", int64_t{0});
        }
        c.answers[key.value_or(*method)] = std::move(answer);
    }
    return c;
}

std::optional<std::string> why_not_usable(const Catalog& c, const ServerIdentity& id,
                                          int64_t now_ns, std::chrono::milliseconds max_age) {
    if (auto what = changed_file(c.files, id.files); !what.empty())
        return fmt::format("catalog #{} is stale: {} since it was made", c.seq, what);
    const int64_t age_ns = now_ns - c.ts_ns;
    if (age_ns > std::chrono::nanoseconds(max_age).count())
        return fmt::format("catalog #{} is stale: made {} ago, more than --lazy-max-age {}", c.seq,
                           span_text(age_ns / 1'000'000), span_text(max_age.count()));
    if (c.answers.empty()) return fmt::format("catalog #{} holds no answer", c.seq);
    return std::nullopt;
}

Result<std::optional<Catalog>> find_catalog(const std::string& journal_path,
                                            const ServerIdentity& id) {
    auto r = journal::newest_server_catalog(journal_path, id.key);
    if (!r) return r.error();
    if (!*r) return std::optional<Catalog>();
    auto c = Catalog::from_record((*r)->seq, (*r)->ts, (*r)->body);
    if (!c) return c.error();
    return std::optional<Catalog>(std::move(*c));
}

}  // namespace warden::shim
