// Canonical JSON: for any JSON text the canonicaliser accepts, its output parses back and
// canonicalises to the same bytes (canonical(canonical(x)) == canonical(x)). And
// canonical_of, the check the relay holds a keeper's intent line to, agrees with it: the
// canonicaliser's output reads back through simdjson as canonical, byte for byte, and a text
// canonical_of takes as it stands is the canonicaliser's own output. canonical_with, which
// splices a member's canonical text into an object, makes what the canonicaliser makes of the
// object with that member parsed into it, and takes no text that is not canonical.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <simdjson.h>

#include "journal/canonical_json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using warden::journal::Json;
    Json value = Json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
    if (value.is_discarded()) return 0;
    auto once = warden::journal::canonical(value);
    std::string s(reinterpret_cast<const char*>(data), size);
    simdjson::dom::parser parser;
    simdjson::dom::element e;
    std::string read;
    if (parser.parse(s).get(e) == simdjson::SUCCESS && warden::journal::canonical_of(read, e) &&
        read == s && (!once || *once != s)) {
        std::fprintf(stderr, "canonical_json_fuzz: taken as canonical, but is not\n  %s\n  %s\n",
                     s.c_str(), once ? once->c_str() : once.error().message.c_str());
        std::abort();
    }
    if (!once) return 0;
    Json back = Json::parse(*once, nullptr, false);
    if (back.is_discarded()) {
        std::fprintf(stderr, "canonical_json_fuzz: output does not parse: %s\n", once->c_str());
        std::abort();
    }
    auto twice = warden::journal::canonical(back);
    if (!twice || *twice != *once) {
        std::fprintf(stderr, "canonical_json_fuzz: not idempotent\n  once:  %s\n  twice: %s\n",
                     once->c_str(), twice ? twice->c_str() : twice.error().message.c_str());
        std::abort();
    }
    read.clear();
    if (parser.parse(*once).get(e) != simdjson::SUCCESS ||
        !warden::journal::canonical_of(read, e) || read != *once) {
        std::fprintf(stderr, "canonical_json_fuzz: canonical text not read as canonical\n  %s\n",
                     once->c_str());
        std::abort();
    }
    // Spliced between two members, after both and before both: the canonicaliser's bytes.
    for (const char* key : {"m", "a", "zz"}) {
        Json object = {{"b", 1}, {"y", Json::array({"x"})}};
        auto spliced = warden::journal::canonical_with(object, key, s);
        if (!spliced) continue;
        object[key] = value;
        auto whole = warden::journal::canonical(object);
        if (s != *once || !whole || *whole != *spliced) {
            std::fprintf(stderr,
                         "canonical_json_fuzz: spliced as %s, not as canonical\n  %s\n  %s\n", key,
                         spliced->c_str(), whole ? whole->c_str() : "(refused)");
            std::abort();
        }
    }
    (void)warden::journal::valid_utf8(s);
    (void)warden::journal::rpc_id_from_json_text(s);
    return 0;
}
