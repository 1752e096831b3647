// Canonical JSON: for any JSON text the canonicaliser accepts, its output parses back and
// canonicalises to the same bytes (canonical(canonical(x)) == canonical(x)).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "journal/canonical_json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using warden::journal::Json;
    Json value = Json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
    if (value.is_discarded()) return 0;
    auto once = warden::journal::canonical(value);
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
    std::string s(reinterpret_cast<const char*>(data), size);
    (void)warden::journal::valid_utf8(s);
    (void)warden::journal::rpc_id_from_json_text(s);
    return 0;
}
