// Wrap and unwrap of client configs. Property: for a text with nothing wrapped in it, when
// wrapping succeeds, unwrapping the result gives back the original bytes exactly; and a
// wrapped text wraps to itself (nothing changes twice).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "clients/wrap.hpp"

namespace {

void check(bool ok, const char* what, std::string_view a = {}, std::string_view b = {}) {
    if (!ok) {
        std::fprintf(stderr, "wrap_fuzz: %s\n--- original\n%.*s\n--- got\n%.*s\n", what,
                     static_cast<int>(a.size()), a.data(), static_cast<int>(b.size()), b.data());
        std::abort();
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace warden::clients;
    if (size < 1) return 0;
    static constexpr Layout kLayouts[] = {Layout::McpServers, Layout::Servers,
                                          Layout::ContextServers, Layout::ClaudeJson,
                                          Layout::CodexToml};
    Layout layout = kLayouts[data[0] % 5];
    Format format = layout == Layout::CodexToml ? Format::Toml : Format::Json;
    std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
    WrapOptions opts;
    opts.mcpwarden = "/usr/local/bin/mcpwarden";

    auto already = rewrite_text(text, format, layout, Scope::User, Action::Unwrap, opts);
    if (!already || already->changed) return 0;  // does not parse, or holds wrapped entries

    auto wrapped = rewrite_text(text, format, layout, Scope::User, Action::Wrap, opts);
    check(bool(wrapped), "wrap fails on a text unwrap parsed", text);
    if (!wrapped->changed) {
        check(wrapped->text == text, "unchanged wrap altered the text", text, wrapped->text);
        return 0;
    }
    auto again = rewrite_text(wrapped->text, format, layout, Scope::User, Action::Wrap, opts);
    check(bool(again), "wrapped text does not parse", text, wrapped->text);
    check(!again->changed && again->text == wrapped->text, "wrapping twice changed the text",
          wrapped->text, again->text);

    auto unwrapped = rewrite_text(wrapped->text, format, layout, Scope::User, Action::Unwrap, opts);
    check(bool(unwrapped), "wrapped text does not parse for unwrap", text, wrapped->text);
    check(unwrapped->text == text, "wrap then unwrap did not restore the bytes", text,
          unwrapped->text);
    return 0;
}
