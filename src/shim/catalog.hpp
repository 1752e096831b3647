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
//   - Age: a record older than --lazy-max-age (RunOptions::lazy_max_age) is not used (code
//     fetched at run time, as `npx -y pkg` does, changes behind an unchanged command line).
//   - A server that says a list changed (`notifications/<capability>/list_changed`) made
//     what it answered to that capability's lists before out of date: those answers are not
//     kept (nor served again); the ones it gives after are.
//   - An answer is served only to the question it answered, in the era it was asked in
//     (rpc/message.hpp): each is kept under its key (answer_key()). A legacy answer's key is
//     its method: `initialize` is served only when the client's params are those the record's
//     initialize was asked with, a list only for its first page (no cursor), and only to a
//     request that names no protocol version, in a session that initialized (if it did) with
//     the version of the catalog's initialize. A 2026-07-28 answer's key is its method, the
//     protocol version and a digest of every parameter that can change it (the cursor, the
//     client's capabilities), volatile _meta aside (progress tokens, trace context): a
//     stateless client is never served what a legacy session left, nor a legacy client what a
//     stateless one did (a 2026 client fails on a result without `resultType`).
//   - A 2026-07-28 answer says how long it may be reused (`ttlMs`) and by whom
//     (`cacheScope`): it is served only within its ttlMs of when the server gave it, and one
//     without a ttlMs, or with `cacheScope: "private"` (for that client alone), is not kept.
//
// An answer is kept as the bytes the server wrote around its id, and served as those bytes
// around the client's id: the client cannot tell it from the server's own. One exception:
// the served `initialize` says `listChanged: true` for each list the catalog holds (of the
// capabilities the server declared). A list served from the record may not be the one the
// server would give now; once the server has started, it is asked again (Hibernation), and
// where its answer differs the client gets `notifications/<list>/list_changed`, which it
// would not expect from a server that had not declared it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "mcpwarden/types.hpp"
#include "sys/result.hpp"

namespace warden::shim {

// Whether a catalog keeps the answer to `method` (its first page, for a legacy list).
bool catalog_method(std::string_view method);
// The key a request's answer is kept and looked up under (see the header): `method` for a
// legacy request, "METHOD VERSION DIGEST" for one that names its protocol version in _meta;
// "" for none (a server/discover that names no version: it belongs to no era).
std::string answer_key(std::string_view method, const nlohmann::json& params);
// The method of a key.
std::string_view key_method(std::string_view key);
// The capability of the initialize result that list `method` belongs to ("tools", "prompts",
// "resources"), and so its `notifications/<capability>/list_changed`; "" for others.
std::string_view list_capability(std::string_view method);

// What the catalog's records are looked up by, and checked against.
struct ServerIdentity {
    std::string key;       // SHA-256 (hex) of argv, cwd, environment and sandbox options
    nlohmann::json files;  // {"executable": FILE, "arguments": [FILE…], "mcpwarden": FILE}
};
// `ignored`: names of variables left out of the environment's digest, besides MCPWARDEN_*.
ServerIdentity server_identity(const RunOptions& o, std::span<const std::string_view> ignored = {});

// A server's answer split around its id: served as before_id + the client's id + after_id.
struct CachedAnswer {
    std::string before_id, after_id;
    // 2026-07-28 answers: when it was given (wall clock) and its ttlMs; 0: a legacy answer,
    // which the catalog's own age rules bound.
    int64_t received_ns = 0, ttl_ms = 0;
    friend bool operator==(const CachedAnswer&, const CachedAnswer&) = default;
    // Its `result` (null when it has none).
    nlohmann::json result() const;
};
// `line` a server's response, `id` a view into it (rpc::Id::raw); nullopt when `id` is not
// within `line`, or the answer is not a result. `stateless`: a 2026-07-28 answer, with its
// cache hints (received now); nullopt too when they say it is not to be kept.
std::optional<CachedAnswer> split_answer(std::string_view line, std::string_view id,
                                         bool stateless = false);

// What differs between two results of list `method`, by the key of its items (a tool's or a
// prompt's name, a resource's uri, a template's uriTemplate): {"added": [KEY…], "removed":
// […], "changed": […]}, and "other": true when something outside the items differs (a cursor);
// null when nothing does.
nlohmann::json list_difference(std::string_view method, const nlohmann::json& before,
                               const nlohmann::json& after);

struct Catalog {
    std::map<std::string, CachedAnswer> answers;  // answer_key() → its answer
    nlohmann::json initialize_params;             // the params its initialize was asked with
    nlohmann::json files;
    int64_t seq = 0, ts_ns = 0;  // of the record it was read from (0: not read)

    // The answer to `method` under `id_raw`, if the catalog holds it for these params (and,
    // for a 2026-07-28 answer, its ttlMs has not run out at `now_ns`); the answer to
    // `initialize` as served_initialize() makes it.
    std::optional<std::string> answer(std::string_view method, std::string_view id_raw,
                                      const nlohmann::json& params, int64_t now_ns) const;
    // Whether its legacy lists may answer a session that initialized with `params` (null: not
    // yet): they were given under the protocol version of the catalog's initialize, and a
    // session that asked for another is of another version.
    bool same_legacy_version(const nlohmann::json& params) const;
    // The result of the initialize answer (null when there is none).
    nlohmann::json initialize_result() const;
    // The initialize answer as it is served: `listChanged: true` in each declared capability
    // whose list the catalog holds (the server's bytes when that changes nothing); nullopt:
    // no initialize answer.
    std::optional<CachedAnswer> served_initialize() const;

    nlohmann::json to_record(const ServerIdentity& id) const;
    static Result<Catalog> from_record(int64_t seq, int64_t ts_ns, std::string_view body);
};

// Why `c` must not be used for `id` now, when a catalog older than `max_age` is too old;
// nullopt when it may.
std::optional<std::string> why_not_usable(const Catalog& c, const ServerIdentity& id,
                                          int64_t now_ns, std::chrono::milliseconds max_age);

// The newest catalog of `id` in the journal at `journal_path`; nullopt when it holds none.
Result<std::optional<Catalog>> find_catalog(const std::string& journal_path,
                                            const ServerIdentity& id);

}  // namespace warden::shim
