// libcurl, opened on first use.
//
// Every `mcpwarden run` is this executable, and runs are most of the processes of ours a user
// has: one per server per client session. Linked, libcurl is loaded at every start with the
// two dozen libraries it needs (HTTP/2, IDN, SSH, LDAP, Kerberos, GnuTLS, …), each mapped and
// relocated, though only the exporter sends HTTP; that doubled the dynamic loader's share of
// a start (docs/BENCHMARKS.md, "run start"). So the exporter opens it with dlopen the first
// time it needs it, by the soname its headers were built for, and calls it through this
// table; a process that never exports never maps it. A machine without the library hears so
// from the one command that needs it, naming the library and the package.
#pragma once

#include <curl/curl.h>

#include "sys/result.hpp"

namespace warden::exporter {

// The functions of libcurl the exporter calls, by their own declarations (a changed
// signature in the headers is a compile error here, not a crash).
struct Libcurl {
    decltype(&::curl_global_init) global_init;
    decltype(&::curl_easy_init) easy_init;
    decltype(&::curl_easy_cleanup) easy_cleanup;
    decltype(&::curl_easy_reset) easy_reset;
    decltype(&::curl_easy_setopt) easy_setopt;
    decltype(&::curl_easy_perform) easy_perform;
    decltype(&::curl_easy_getinfo) easy_getinfo;
    decltype(&::curl_easy_strerror) easy_strerror;
    decltype(&::curl_slist_append) slist_append;
    decltype(&::curl_slist_free_all) slist_free_all;
    decltype(&::curl_getdate) getdate;
    decltype(&::curl_free) free;
    decltype(&::curl_url) url;
    decltype(&::curl_url_set) url_set;
    decltype(&::curl_url_get) url_get;
    decltype(&::curl_url_cleanup) url_cleanup;
    decltype(&::curl_url_strerror) url_strerror;
};

// The table, opened and initialised (curl_global_init) once per process, from any thread;
// the error says which library could not be opened, or which function it lacks, and why.
Result<const Libcurl*> libcurl();

}  // namespace warden::exporter
