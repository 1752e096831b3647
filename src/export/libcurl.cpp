#include "export/libcurl.hpp"

#include <dlfcn.h>

#include <fmt/format.h>

namespace warden::exporter {

namespace {

// The soname of the ABI <curl/curl.h> declares (stable since libcurl 7.16); Debian's libcurl4.
constexpr const char* kSoname = "libcurl.so.4";

template <typename F>
bool bind(void* lib, const char* name, F& out, std::string& missing) {
    out = reinterpret_cast<F>(::dlsym(lib, name));
    if (!out && missing.empty()) missing = name;
    return out != nullptr;
}

Result<Libcurl> open_libcurl() {
    // RTLD_LOCAL: its symbols stay out of the global namespace; RTLD_NOW: a missing symbol
    // is found here, not at the first call. Never closed: it lives as long as the process.
    void* lib = ::dlopen(kSoname, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char* why = ::dlerror();
        return Error::msg(
            fmt::format("cannot load {} ({}): the exporter sends HTTP with libcurl; "
                        "install the libcurl4 package",
                        kSoname, why ? why : "unknown reason"));
    }
    Libcurl c{};
    std::string missing;
    bind(lib, "curl_global_init", c.global_init, missing);
    bind(lib, "curl_easy_init", c.easy_init, missing);
    bind(lib, "curl_easy_cleanup", c.easy_cleanup, missing);
    bind(lib, "curl_easy_reset", c.easy_reset, missing);
    bind(lib, "curl_easy_setopt", c.easy_setopt, missing);
    bind(lib, "curl_easy_perform", c.easy_perform, missing);
    bind(lib, "curl_easy_getinfo", c.easy_getinfo, missing);
    bind(lib, "curl_easy_strerror", c.easy_strerror, missing);
    bind(lib, "curl_slist_append", c.slist_append, missing);
    bind(lib, "curl_slist_free_all", c.slist_free_all, missing);
    bind(lib, "curl_getdate", c.getdate, missing);
    bind(lib, "curl_free", c.free, missing);
    bind(lib, "curl_url", c.url, missing);
    bind(lib, "curl_url_set", c.url_set, missing);
    bind(lib, "curl_url_get", c.url_get, missing);
    bind(lib, "curl_url_cleanup", c.url_cleanup, missing);
    bind(lib, "curl_url_strerror", c.url_strerror, missing);
    if (!missing.empty())
        return Error::msg(
            fmt::format("{} has no {}: libcurl 7.62 or later is needed", kSoname, missing));
    // Not thread-safe in libcurl before 7.84: here, once, under the static's initialisation.
    if (CURLcode rc = c.global_init(CURL_GLOBAL_DEFAULT); rc != CURLE_OK)
        return Error::msg(
            fmt::format("{}: curl_global_init failed ({})", kSoname, c.easy_strerror(rc)));
    return c;
}

}  // namespace

Result<const Libcurl*> libcurl() {
    static const Result<Libcurl> opened = open_libcurl();
    if (!opened) return opened.error();
    return &*opened;
}

}  // namespace warden::exporter
