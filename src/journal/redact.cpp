#include "journal/redact.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <iterator>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fault/faults.hpp"
#include "journal/canonical_json.hpp"

namespace warden::journal {

namespace {

// ---- Names ----------------------------------------------------------------------------------

// The next code point of UTF-8 text at `i` (advancing it); invalid bytes come back as
// themselves, one at a time.
uint32_t next_code_point(std::string_view s, size_t& i) {
    auto b = static_cast<unsigned char>(s[i]);
    int len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 1;
    if (i + static_cast<size_t>(len) > s.size()) len = 1;
    uint32_t cp = len == 1 ? b : len == 2 ? (b & 0x1Fu) : len == 3 ? (b & 0x0Fu) : (b & 0x07u);
    for (int k = 1; k < len; ++k) {
        auto c = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
        if ((c & 0xC0) != 0x80) {
            len = 1;
            cp = b;
            break;
        }
        cp = (cp << 6) | (c & 0x3Fu);
    }
    i += static_cast<size_t>(len);
    return cp;
}

bool zero_width(uint32_t cp) {
    return cp == 0x00AD || cp == 0x034F || cp == 0x180E || cp == 0xFEFF ||
           (cp >= 0x200B && cp <= 0x200F) || (cp >= 0x202A && cp <= 0x202E) ||
           (cp >= 0x2060 && cp <= 0x2064);
}

// The ASCII letter or digit a code point stands for, if any: ASCII itself, fullwidth forms,
// mathematical alphanumerics, and the few compatibility letters that case-fold to ASCII
// (KELVIN SIGN, LATIN SMALL LETTER LONG S, dotless i). 0 for anything else.
char ascii_fold(uint32_t cp) {
    if (cp < 0x80) return static_cast<char>(cp);
    if (cp >= 0xFF01 && cp <= 0xFF5E) return static_cast<char>(cp - 0xFEE0);
    if (cp >= 0x1D400 && cp <= 0x1D6A3) {  // 13 alphabets of 52 letters, A–Z then a–z
        uint32_t k = (cp - 0x1D400) % 52;
        return static_cast<char>(k < 26 ? 'A' + k : 'a' + (k - 26));
    }
    if (cp >= 0x1D7CE && cp <= 0x1D7FF) return static_cast<char>('0' + (cp - 0x1D7CE) % 10);
    if (cp == 0x212A) return 'K';
    if (cp == 0x017F) return 's';
    if (cp == 0x0131) return 'i';
    return 0;
}

bool is_lower(char c) {
    return c >= 'a' && c <= 'z';
}
bool is_upper(char c) {
    return c >= 'A' && c <= 'Z';
}
bool is_alnum(char c) {
    return is_lower(c) || is_upper(c) || (c >= '0' && c <= '9');
}
char lower(char c) {
    return is_upper(c) ? static_cast<char>(c - 'A' + 'a') : c;
}

// Words of a name after folding: split at separators and at camelCase humps, lower-cased.
std::vector<std::string> name_words(std::string_view name) {
    std::vector<std::string> words(1);
    char prev = 0;
    for (size_t i = 0; i < name.size();) {
        uint32_t cp = next_code_point(name, i);
        if (zero_width(cp)) continue;
        char c = ascii_fold(cp);
        if (!is_alnum(c)) {
            if (!words.back().empty()) words.emplace_back();
            prev = 0;
            continue;
        }
        if (is_upper(c) && is_lower(prev) && !words.back().empty()) words.emplace_back();
        words.back() += lower(c);
        prev = c;
    }
    if (words.back().empty()) words.pop_back();
    return words;
}

}  // namespace

bool secret_name(std::string_view name) {
    // Anywhere in the name with its separators dropped ("xapikey", "accesstoken").
    static constexpr std::string_view kInside[] = {
        "password",  "passwd",        "passphrase", "passcode", "secret",  "token",
        "apikey",    "credential",    "bearer",     "cookie",   "private", "session",
        "signature", "authorization", "authtoken",  "accesskey"};
    // A whole word ("pin", not "spinner"; "auth", not "author").
    static constexpr std::string_view kWord[] = {
        "auth", "authn",  "authz", "pin", "tok", "pwd", "pw",  "pass", "key", "keys",
        "sig",  "access", "cvv",   "ssn", "mfa", "jwt", "otp", "totp", "salt"};
    auto words = name_words(name);
    std::string joined;
    for (const auto& w : words) {
        joined += w;
        for (auto k : kWord)
            if (w == k) return true;
        if (w.starts_with("cred")) return true;  // cred, creds, credentials, credz
    }
    return std::any_of(std::begin(kInside), std::end(kInside),
                       [&](std::string_view k) { return joined.find(k) != std::string::npos; });
}

namespace {

// ---- Values by shape ------------------------------------------------------------------------

bool token_char(char c) {
    return is_alnum(c) || c == '-' || c == '_';
}

// The end of the run of bytes from `at` on that start no pattern of redact_text: each follows
// a token character, so it starts no word (the shapes, "Bearer X" and "Basic X" need a word's
// start: boundary_before), and none is a byte that starts a pattern inside a word ('-': a flag
// or a PEM armour; ':': a scheme's "://" or a header; '=': NAME=value). Most of a text is such
// runs, copied whole instead of asking every pattern at every byte.
// After a token character, the run goes on through token characters but '-' (each is again
// followed by one) and takes the first other byte that is not ':' or '=' with it (the next
// byte follows a non-token character: the run ends there).
size_t plain_run_end(std::string_view s, size_t at) {
    static const auto kToken = [] {
        std::array<bool, 256> t{};
        for (int c = 0; c < 256; ++c)
            t[static_cast<size_t>(c)] = token_char(static_cast<char>(c));
        return t;
    }();
    auto token = [&](size_t i) { return kToken[static_cast<unsigned char>(s[i])]; };
    if (at == 0 || !token(at - 1)) return at;
    while (at < s.size() && token(at) && s[at] != '-')
        ++at;
    if (at < s.size() && s[at] != '-' && s[at] != ':' && s[at] != '=') ++at;
    return at;
}

bool boundary_before(std::string_view s, size_t at) {
    return at == 0 || !token_char(s[at - 1]);
}

size_t token_end(std::string_view s, size_t from) {
    while (from < s.size() && token_char(s[from]))
        ++from;
    return from;
}

// Where a well-known credential shape starts at `at` and ends; 0 when none does.
size_t credential_at(std::string_view s, size_t at) {
    struct Shape {
        std::string_view prefix;
        size_t min_rest;  // token characters required after the prefix
    };
    static constexpr Shape kShapes[] = {
        {"sk-", 8},     {"sk_live_", 8}, {"sk_test_", 8}, {"rk_live_", 8}, {"ghp_", 20},
        {"gho_", 20},   {"ghu_", 20},    {"ghs_", 20},    {"ghr_", 20},    {"github_pat_", 20},
        {"glpat-", 16}, {"xoxb-", 8},    {"xoxp-", 8},    {"xoxa-", 8},    {"xoxr-", 8},
        {"xoxs-", 8},   {"xoxe-", 8},    {"xapp-", 8},    {"npm_", 20},    {"hf_", 20},
        {"AIza", 30},   {"AKIA", 16},    {"ASIA", 16},    {"pypi-", 20},   {"dop_v1_", 20},
    };
    // The first characters of the shapes: the scan asks at every boundary of the text, and
    // most boundaries start none.
    static const auto kStarts = [] {
        std::array<bool, 256> first{};
        for (const auto& sh : kShapes)
            first[static_cast<unsigned char>(sh.prefix[0])] = true;
        first['e'] = true;  // a JWT's "eyJ"
        return first;
    }();
    if (!boundary_before(s, at) || !kStarts[static_cast<unsigned char>(s[at])]) return 0;
    for (const auto& sh : kShapes) {
        if (s.compare(at, sh.prefix.size(), sh.prefix) != 0) continue;
        size_t end = token_end(s, at + sh.prefix.size());
        if (end - at - sh.prefix.size() >= sh.min_rest) return end;
    }
    // A JWT: three base64url parts, the first two starting with "eyJ" ({").
    if (s.compare(at, 3, "eyJ") == 0) {
        size_t end = token_end(s, at);
        if (end < s.size() && s[end] == '.' && s.compare(end + 1, 3, "eyJ") == 0) {
            end = token_end(s, end + 1);
            if (end < s.size() && s[end] == '.') return token_end(s, end + 1);
        }
    }
    return 0;
}

bool starts_with_nocase(std::string_view s, size_t at, std::string_view word) {
    if (s.size() - at < word.size()) return false;
    for (size_t k = 0; k < word.size(); ++k)
        if (lower(s[at + k]) != word[k]) return false;
    return true;
}

bool value_end_char(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '&' || c == ';' || c == '"' || c == '\'' ||
           c == ',' || c == '}' || c == ')';
}

// "--api-key", "-password", "--auth-header": a flag whose value is a secret.
bool secret_flag(std::string_view flag) {
    size_t dashes = flag.find_first_not_of('-');
    if (dashes == 0 || dashes == std::string_view::npos) return false;
    std::string_view name = flag.substr(dashes);
    return name.starts_with("auth") || secret_name(name);
}

bool blank(char c) {
    return c == ' ' || c == '\t';
}

// The end of the value that starts at `at`: up to its closing quote when it opens with one,
// else up to the first character that ends a value.
size_t value_end(std::string_view s, size_t at) {
    if (at < s.size() && (s[at] == '"' || s[at] == '\'')) {
        size_t close = s.find(s[at], at + 1);
        return close == std::string_view::npos ? s.size() : close + 1;
    }
    while (at < s.size() && !value_end_char(s[at]))
        ++at;
    return at;
}

// Appends the value s[at, end) as the record keeps it: "***", in its quotes if it had them.
void append_masked(std::string& out, std::string_view s, size_t at, size_t end) {
    const bool quoted = s[at] == '"' || s[at] == '\'';
    if (quoted) out += s[at];
    out += kRedacted;
    if (quoted && end - at >= 2 && s[end - 1] == s[at]) out += s[at];
}

// `--token VALUE` inside a text (a command line in its display form, a `sh -c` script): the
// flag at `at` (a word starting with '-'), blanks, then its value. Where the value ends, or 0
// when `at` starts no secret flag with a value.
size_t flag_value_at(std::string_view s, size_t at, size_t& value_at) {
    if (s[at] != '-' || (at > 0 && (token_char(s[at - 1]) || s[at - 1] == '='))) return 0;
    size_t j = at;
    while (j < s.size() && (token_char(s[j]) || s[j] == '.'))
        ++j;
    if (j == s.size() || !blank(s[j]) || !secret_flag(s.substr(at, j - at))) return 0;
    size_t v = j;
    while (v < s.size() && blank(s[v]))
        ++v;
    if (v == s.size() || s[v] == '-' || (value_end_char(s[v]) && s[v] != '"' && s[v] != '\''))
        return 0;
    value_at = v;
    return value_end(s, v);
}

// `Authorization: Bearer X`, `X-Api-Key: X`, `password: X`: a header or a YAML-like line
// whose name looks secret, at its ':' at `at` (what precedes it is in `out`). Where the value
// ends, or 0; `keep_to` is where the masked part begins (after an auth scheme's word).
size_t header_value_at(std::string_view s, size_t at, const std::string& out, size_t& keep_to) {
    if (s[at] != ':' || at + 1 >= s.size() || !blank(s[at + 1])) return 0;
    size_t n = out.size();
    while (n > 0 && token_char(out[n - 1]))
        --n;
    if (n == out.size() || !secret_name(std::string_view(out).substr(n))) return 0;
    size_t v = at + 1;
    while (v < s.size() && blank(s[v]))
        ++v;
    // The scheme of an Authorization value is not the secret; what follows it is.
    for (std::string_view scheme : {"bearer ", "basic ", "token ", "digest ", "negotiate "})
        if (starts_with_nocase(s, v, scheme)) {
            v += scheme.size();
            while (v < s.size() && blank(s[v]))
                ++v;
            break;
        }
    if (v == s.size() || (value_end_char(s[v]) && s[v] != '"' && s[v] != '\'')) return 0;
    keep_to = v;
    return value_end(s, v);
}

}  // namespace

// The scan asks each pattern at every position; each is tried only where its first character
// is (most of a text's characters start none): the same result, without a string comparison
// per pattern per byte. Every step appends to `out` and decides by the text ahead and by what
// is out already, never by what comes later: so the scan can stop at `enough` bytes out with
// the start of what the whole scan writes.
std::string redact_text(std::string_view s, size_t enough) {
    std::string out;
    out.reserve(std::min(s.size(), enough));
    size_t i = 0;
    while (i < s.size() && out.size() < enough) {
        // A run is copied as it is: cut where `enough` is reached, the scan ends with it.
        const size_t want = enough - out.size();
        const size_t stop = want >= s.size() - i ? s.size() : i + want;
        if (size_t end = plain_run_end(s.substr(0, stop), i); end > i) {
            out.append(s.substr(i, end - i));
            i = end;
            continue;
        }
        // PEM private keys, whole.
        if (s[i] == '-' && s.compare(i, 11, "-----BEGIN ") == 0) {
            size_t head_end = s.find("-----", i + 11);
            if (head_end != std::string_view::npos &&
                s.substr(i, head_end - i).find("PRIVATE KEY") != std::string_view::npos) {
                size_t end = s.find("-----END ", head_end + 5);
                end = end == std::string_view::npos ? s.size() : s.find("-----", end + 9);
                end = end == std::string_view::npos ? s.size() : end + 5;
                out += kRedacted;
                i = end;
                continue;
            }
        }
        // scheme://user:password@host → scheme://***@host
        if (s[i] == ':' && s.compare(i, 3, "://") == 0) {
            size_t at = i + 3, j = at;
            while (j < s.size() && s[j] != '@' && s[j] != '/' && s[j] != '?' && s[j] != '#' &&
                   !value_end_char(s[j]))
                ++j;
            out += "://";
            if (j < s.size() && s[j] == '@' && j > at) {
                out += kRedacted;
                i = j;
            } else {
                i = at;
            }
            continue;
        }
        // "Bearer X", "Basic X" (an Authorization header's value; long enough to be a
        // credential, so that "a basic test" stays prose).
        if (boundary_before(s, i) &&
            (starts_with_nocase(s, i, "bearer ") || starts_with_nocase(s, i, "basic "))) {
            size_t word = starts_with_nocase(s, i, "bearer ") ? 7 : 6;
            size_t end = i + word;
            while (end < s.size() && !value_end_char(s[end]))
                ++end;
            if (end - i - word >= (word == 7 ? 8u : 12u)) {
                out.append(s.substr(i, word));
                out += kRedacted;
                i = end;
                continue;
            }
        }
        if (size_t value_at = 0, end = flag_value_at(s, i, value_at); end) {
            out.append(s.substr(i, value_at - i));
            append_masked(out, s, value_at, end);
            i = end;
            continue;
        }
        if (size_t keep_to = 0, end = header_value_at(s, i, out, keep_to); end) {
            out.append(s.substr(i, keep_to - i));
            append_masked(out, s, keep_to, end);
            i = end;
            continue;
        }
        if (size_t end = credential_at(s, i)) {
            out += kRedacted;
            i = end;
            continue;
        }
        // NAME=value with a secret NAME (an argument, a variable in `sh -c`, a query string).
        if (s[i] == '=' && !out.empty()) {
            size_t n = out.size();
            while (n > 0 && (token_char(out[n - 1]) || out[n - 1] == '.'))
                --n;
            size_t end = value_end(s, i + 1);  // PGPASSWORD="two words" too
            if (n < out.size() && end > i + 1 && secret_name(std::string_view(out).substr(n))) {
                out += '=';
                append_masked(out, s, i + 1, end);
                i = end;
                continue;
            }
        }
        out += s[i++];
    }
    return out;
}

std::vector<std::string> redact_argv(std::span<const std::string> argv) {
    std::vector<std::string> out;
    out.reserve(argv.size());
    for (size_t i = 0; i < argv.size(); ++i) {
        const std::string& a = argv[i];
        bool flag = a.size() > 1 && a[0] == '-';
        size_t eq = a.find('=');
        if (flag && eq != std::string::npos) {
            std::string_view name(a.data(), eq);
            out.push_back(std::string(name) + "=" +
                          (secret_flag(name) ? std::string(kRedacted)
                                             : redact_text(std::string_view(a).substr(eq + 1))));
        } else if (flag && secret_flag(a) && i + 1 < argv.size()) {
            out.push_back(a);
            out.emplace_back(kRedacted);
            ++i;
        } else {
            out.push_back(redact_text(a));
        }
    }
    return out;
}

namespace {

// Arguments a client's argv keeps as they are: a path or a plain word (a subcommand, a
// server name). A prompt is neither: it has spaces, or is long.
bool plain_argument(std::string_view a) {
    if (a.empty() || a.size() > (a[0] == '/' ? 256u : 32u)) return false;
    return std::all_of(a.begin(), a.end(), [](char c) {
        return is_alnum(c) || c == '/' || c == '.' || c == '_' || c == '-' || c == ':' ||
               c == '@' || c == '+';
    });
}

}  // namespace

std::vector<std::string> client_argv_evidence(std::span<const std::string> argv, size_t max_args) {
    std::vector<std::string> out;
    if (argv.empty()) return out;
    out.push_back(redact_text(argv[0]));
    size_t shown = std::min(argv.size() - 1, max_args);
    for (size_t i = 1; i <= shown; ++i) {
        const std::string& a = argv[i];
        size_t eq = a.find('=');
        if (i > 1 && secret_flag(argv[i - 1]) && argv[i - 1].find('=') == std::string::npos)
            out.emplace_back(kRedacted);  // the value of --token, --api-key, …
        else if (a.size() > 1 && a[0] == '-' && eq != std::string::npos)
            out.push_back(fmt::format("{}=<{} bytes>", a.substr(0, std::min<size_t>(eq, 64)),
                                      a.size() - eq - 1));
        else if (a.size() > 1 && a[0] == '-' && a.size() <= 64)
            out.push_back(redact_text(a));
        else if (plain_argument(a))
            out.push_back(redact_text(a));
        else
            out.push_back(fmt::format("<{} bytes>", a.size()));
    }
    if (argv.size() - 1 > shown)
        out.push_back(fmt::format("<{} more arguments>", argv.size() - 1 - shown));
    return out;
}

std::string redacted(const SensitiveText& text) {
    // A guard off for a test's negative control only (Faults::record_unredacted).
    static const bool off = Faults::from_env().record_unredacted;
    return off ? text.unredacted() : redact_text(text.unredacted());
}

}  // namespace warden::journal

namespace warden {

void to_json(nlohmann::json& j, const SensitiveText& text) {
    j = journal::bytes_value(journal::redacted(text));
}

}  // namespace warden
