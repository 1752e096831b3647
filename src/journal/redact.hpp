// Redaction at record time: what the journal keeps of command lines and tool arguments.
//
// A journal cannot be edited, so a secret recorded once is kept for as long as the journal
// is. Command lines are evidence (which server ran, from where, with which options); the
// credentials in them are not, and neither is a prompt the client was started with. So:
//
// * server and process argv keep every argument, with credentials replaced by "***": the
//   user-info of URLs (postgresql://admin:hunter2@db → postgresql://***@db), the value of
//   secret-named flags in both `--k v` and `--k=v` forms (--password, --token, --api-key,
//   --secret, --auth…, --client-secret, …), `NAME=value` arguments whose NAME looks secret
//   (PGPASSWORD=…, API_KEY=…), bearer tokens, and well-known token shapes (sk-…, ghp_…,
//   github_pat_…, glpat-…, xox?-…, AKIA…, JWTs, PEM private keys);
// * the client's argv keeps its executable and its flags, bounded; every other argument
//   (the values a prompt travels in) is reduced to its size: `claude -p <212 bytes>`;
// * tool-argument previews mask the value of every secret-looking key, the key normalised
//   first (case- and Unicode-folded, fullwidth and mathematical letters to ASCII, zero-width
//   characters and separators dropped: "Pass<U+200B>word", a fullwidth "API_KEY" and "apiKey"
//   all match), and
//   any string value whose shape is a credential whatever its key.
//
// Every other text that may hold a secret (a teardown target's command, a note, a cwd, a
// message built from them) travels as a SensitiveText (sys/sensitive_text.hpp), and the
// to_json below is its only way into a record: it is redacted as free text (redact_text).
//
// `--record-argv full` and `--record-args full` opt out; session.start says which was used.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "sys/sensitive_text.hpp"

namespace warden {

// The one way a SensitiveText goes into JSON: redacted (journal::redact_text). Found by
// nlohmann through argument-dependent lookup, so it lives beside the type's namespace.
void to_json(nlohmann::json& j, const SensitiveText& text);

}  // namespace warden

namespace warden::journal {

inline constexpr std::string_view kRedacted = "***";

// Whether a key or variable name looks like it names a secret (normalised as above).
bool secret_name(std::string_view name);

// One free-text value with credentials by shape replaced: URL user-info, "Bearer X",
// well-known token shapes, PEM private keys, and NAME=value with a secret NAME. With `enough`,
// the scan stops once that many bytes are out: what it returns is then the start of the whole
// text's redaction (at least `enough` bytes of it, or all of it), for a caller that keeps only
// a start (a preview).
std::string redact_text(std::string_view text, size_t enough = std::string::npos);

// A SensitiveText as a record may hold it: redact_text of it.
std::string redacted(const SensitiveText& text);

// A server's (or any process's) argv with credentials replaced, every argument kept.
std::vector<std::string> redact_argv(std::span<const std::string> argv);

// The client's argv as evidence: argv[0], then up to `max_args` arguments, flags kept
// (redacted, a `--k=v` value reduced to its size), every other argument replaced by
// "<N bytes>", and "<N more arguments>" when cut.
std::vector<std::string> client_argv_evidence(std::span<const std::string> argv,
                                              size_t max_args = 16);

}  // namespace warden::journal
