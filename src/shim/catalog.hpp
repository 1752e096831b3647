// The server catalog: what --lazy answers without a server (docs/RUN.md, "Lazy start").
//
// A client's first minutes with a server are mostly questions whose answers do not change
// between sessions: `initialize`, `tools/list`, `prompts/list`, `resources/list`,
// `resources/templates/list`. A session that sees a server answer them keeps the answers, as
// the server wrote them, in a `server.catalog` record, under the identity of the server; a
// later `--lazy` session of the same server answers them from that record and starts the
// server only for the first request the record cannot answer.
//
// What makes that safe is what decides which record is used, and when it is not:
//
//   - The identity (the record's `key`) is what names the server: its command line, the
//     working directory, a hash of the environment (MCPWARDEN_* aside: they configure us)
//     and the sandbox options. Another argument, directory or variable is another server.
//   - The files (the record's `files`) are what the server's code is: the resolved executable
//     and every argument that names a regular file (`node server.js`), each by device, inode,
//     size and modification time, and this mcpwarden's own executable the same way. A change
//     to any of them makes the record stale: the answers may have changed with the code.
//   - Age: a record older than kCatalogMaxAge is not used (code fetched at run time, as
//     `npx -y pkg` does, changes behind an unchanged command line).
//   - A server that said its lists change (`notifications/*/list_changed`) gets a record that
//     says so instead of answers (`stale`): no later session serves them.
//   - An answer is served only to the question it answered: `initialize` only when the
//     client's params are those the record's initialize was asked with, a list only for its
//     first page (no cursor).
//
// An answer is kept as the bytes the server wrote around its id, and served as those bytes
// around the client's id: the client cannot tell it from the server's own.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "mcpwarden/types.hpp"
#include "sys/result.hpp"

namespace warden::shim {

inline constexpr std::chrono::hours kCatalogMaxAge{24 * 7};

// Whether a catalog keeps the answer to `method` (its first page, for a list).
bool catalog_method(std::string_view method);

// What the catalog's records are looked up by, and checked against.
struct ServerIdentity {
    std::string key;       // SHA-256 (hex) of argv, cwd, environment and sandbox options
    nlohmann::json files;  // {"executable": FILE, "arguments": [FILE…], "mcpwarden": FILE}
};
ServerIdentity server_identity(const RunOptions& o);

// A server's answer split around its id: served as before_id + the client's id + after_id.
struct CachedAnswer {
    std::string before_id, after_id;
    friend bool operator==(const CachedAnswer&, const CachedAnswer&) = default;
};
// `line` a server's response, `id` a view into it (rpc::Id::raw); nullopt when `id` is not
// within `line`, or the answer is not a result.
std::optional<CachedAnswer> split_answer(std::string_view line, std::string_view id);

struct Catalog {
    std::map<std::string, CachedAnswer> answers;  // method → its answer
    nlohmann::json initialize_params;             // the params its initialize was asked with
    std::string stale;                            // set: a record that says why not to use it
    nlohmann::json files;
    int64_t seq = 0, ts_ns = 0;  // of the record it was read from (0: not read)

    // The answer to `method` under `id_raw`, if the catalog holds it for these params.
    std::optional<std::string> answer(std::string_view method, std::string_view id_raw,
                                      const nlohmann::json& params) const;
    // The result of the initialize answer (null when there is none).
    nlohmann::json initialize_result() const;

    nlohmann::json to_record(const ServerIdentity& id) const;
    static Result<Catalog> from_record(int64_t seq, int64_t ts_ns, std::string_view body);
};

// Why `c` must not be used for `id` now; nullopt when it may.
std::optional<std::string> why_not_usable(const Catalog& c, const ServerIdentity& id,
                                          int64_t now_ns);

// The newest catalog of `id` in the journal at `journal_path`; nullopt when it holds none.
Result<std::optional<Catalog>> find_catalog(const std::string& journal_path,
                                            const ServerIdentity& id);

}  // namespace warden::shim
