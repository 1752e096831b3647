// The C ABI (include/mcpwarden/mcpwarden.h) over the C++ API.
//
// Every entry point catches everything: an exception crossing into C is undefined
// behaviour, so each one runs its body through guard(), which turns bad_alloc into
// MCPW_ENOMEM and anything else into MCPW_EINTERNAL with the message kept for
// mcpw_last_error(). The last error is thread-local, like errno.
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include <nlohmann/json.hpp>

#include "api/internal.hpp"
#include "mcpwarden/mcpwarden.h"

struct mcpw_server {
    warden::api::Server server;
};

struct mcpw_journal {
    warden::api::Journal journal;
};

namespace {

thread_local std::string last_error;
thread_local int last_errno = 0;

int fail(int code, std::string message, int err = 0) {
    last_error = std::move(message);
    last_errno = err;
    return code;
}

int succeed() {
    last_error.clear();
    last_errno = 0;
    return MCPW_OK;
}

template <class F>
int guard(F&& body) {
    try {
        return body();
    } catch (const std::bad_alloc&) {
        return fail(MCPW_ENOMEM, "out of memory", ENOMEM);
    } catch (const std::exception& e) {
        return fail(MCPW_EINTERNAL, std::string("internal error: ") + e.what());
    } catch (...) {
        return fail(MCPW_EINTERNAL, "internal error");
    }
}

// A malloc'd copy the caller releases with mcpw_free (free() across the boundary is fine
// too, but mcpw_free keeps hosts independent of our allocator).
int out_string(const std::string& s, char** out) {
    if (!out) return MCPW_OK;
    *out = static_cast<char*>(std::malloc(s.size() + 1));
    if (!*out) return fail(MCPW_ENOMEM, "out of memory", ENOMEM);
    std::memcpy(*out, s.c_str(), s.size() + 1);
    return MCPW_OK;
}

std::vector<std::string> strings(const char* const* list) {
    std::vector<std::string> v;
    for (size_t i = 0; list && list[i] && i < 100000; ++i)
        v.emplace_back(list[i]);
    return v;
}

warden::api::Stdio stdio_mode(int m) {
    switch (m) {
        case MCPW_STDIO_INHERIT:
            return warden::api::Stdio::Inherit;
        case MCPW_STDIO_NULL:
            return warden::api::Stdio::Null;
        default:
            return warden::api::Stdio::Pipe;
    }
}

int spawn_code(const warden::api::Error& e) {
    if (e.code == ENOENT) return MCPW_ENOENT;
    if (e.code == EACCES || e.code == ENOEXEC) return MCPW_EACCES;
    if (e.code == EINVAL) return MCPW_EINVAL;
    return MCPW_ESPAWN;
}

}  // namespace

extern "C" {

const char* mcpw_version(void) {
    return MCPW_VERSION_STRING;
}
int mcpw_abi_version(void) {
    return MCPW_ABI_VERSION;
}

const char* mcpw_build_info_json(void) {
    static const std::string json = [] {
        warden::api::BuildInfo b = warden::api::build_info();
        return nlohmann::json{{"version", b.version},       {"sanitizers", b.sanitizers},
                              {"libsystemd", b.libsystemd}, {"pidfd", b.pidfd},
                              {"cgroup", b.cgroup},         {"pidns", b.pidns},
                              {"clone3", b.clone3}}
            .dump();
    }();
    return json.c_str();
}

const char* mcpw_last_error(void) {
    return last_error.c_str();
}
int mcpw_last_errno(void) {
    return last_errno;
}
void mcpw_free(void* p) {
    std::free(p);
}

void mcpw_spawn_options_init(mcpw_spawn_options* o) {
    if (!o) return;
    *o = mcpw_spawn_options{};
    o->struct_size = sizeof *o;
    o->stdin_mode = MCPW_STDIO_PIPE;
    o->stdout_mode = MCPW_STDIO_PIPE;
    o->stderr_mode = MCPW_STDIO_INHERIT;
    o->use_cgroup = 1;
    o->use_pidfd = 1;
    o->use_pidns = 0;
    o->use_subreaper = 1;
    o->pdeathsig = 9;
}

void mcpw_teardown_options_init(mcpw_teardown_options* o) {
    if (!o) return;
    *o = mcpw_teardown_options{};
    o->struct_size = sizeof *o;
    o->eof_window_ms = 500;
    o->grace_ms = 2000;
    o->kill_wait_ms = 3000;
    o->verify_ports = 1;
}

int mcpw_spawn(const char* const* argv, const char* const* env, const char* cwd,
               const mcpw_spawn_options* options, mcpw_server** out) {
    return guard([&] {
        if (!out) return fail(MCPW_EINVAL, "mcpw_spawn: out is NULL", EINVAL);
        *out = nullptr;
        if (!argv || !argv[0] || !*argv[0])
            return fail(MCPW_EINVAL, "mcpw_spawn: empty argv", EINVAL);
        mcpw_spawn_options o;
        mcpw_spawn_options_init(&o);
        if (options) {
            if (options->struct_size < sizeof(uint32_t) || options->struct_size > sizeof o)
                return fail(MCPW_EINVAL,
                            "mcpw_spawn: options->struct_size is not set "
                            "(call mcpw_spawn_options_init)",
                            EINVAL);
            std::memcpy(&o, options, options->struct_size);
            o.struct_size = sizeof o;
        }
        warden::api::SpawnOptions so;
        so.in = stdio_mode(o.stdin_mode);
        so.out = stdio_mode(o.stdout_mode);
        so.err = stdio_mode(o.stderr_mode);
        so.use_cgroup = o.use_cgroup != 0;
        so.use_pidfd = o.use_pidfd != 0;
        so.use_pidns = o.use_pidns != 0;
        so.use_subreaper = o.use_subreaper != 0;
        so.pdeathsig = o.pdeathsig;
        // Fields past an older caller's struct_size kept the defaults set by init above.
        if (o.session_id) so.session_id = o.session_id;
        if (o.cgroup_base) so.cgroup_base = o.cgroup_base;
        warden::api::Supervisor sup(so);
        auto s = sup.spawn(strings(argv), strings(env), cwd ? cwd : "");
        if (!s) return fail(spawn_code(s.error()), s.error().message, s.error().code);
        *out = new mcpw_server{std::move(*s)};
        return succeed();
    });
}

int mcpw_server_pid(const mcpw_server* s) {
    return s ? s->server.pid() : -1;
}
int mcpw_server_pidfd(const mcpw_server* s) {
    return s ? s->server.pidfd() : -1;
}
int mcpw_server_stdin(const mcpw_server* s) {
    return s ? s->server.stdin_fd() : -1;
}
int mcpw_server_stdout(const mcpw_server* s) {
    return s ? s->server.stdout_fd() : -1;
}
int mcpw_server_stderr(const mcpw_server* s) {
    return s ? s->server.stderr_fd() : -1;
}
const char* mcpw_server_session(const mcpw_server* s) {
    return s ? s->server.session_id().c_str() : "";
}

int mcpw_server_close_stdin(mcpw_server* s) {
    if (!s) return fail(MCPW_EINVAL, "mcpw_server_close_stdin: NULL server", EINVAL);
    s->server.close_stdin();
    return succeed();
}

int mcpw_server_layers(const mcpw_server* s, char** json_out) {
    return guard([&] {
        if (!s || !json_out) return fail(MCPW_EINVAL, "mcpw_server_layers: NULL argument", EINVAL);
        if (int rc = out_string(s->server.layers_json(), json_out); rc != MCPW_OK) return rc;
        return succeed();
    });
}

int mcpw_teardown(mcpw_server* s, const mcpw_teardown_options* options, char** report_json,
                  int* survivors) {
    return guard([&] {
        if (report_json) *report_json = nullptr;
        if (!s) return fail(MCPW_EINVAL, "mcpw_teardown: NULL server", EINVAL);
        mcpw_teardown_options o;
        mcpw_teardown_options_init(&o);
        if (options) {
            if (options->struct_size < sizeof(uint32_t) || options->struct_size > sizeof o)
                return fail(MCPW_EINVAL,
                            "mcpw_teardown: options->struct_size is not set "
                            "(call mcpw_teardown_options_init)",
                            EINVAL);
            std::memcpy(&o, options, options->struct_size);
        }
        warden::api::TeardownOptions t;
        t.eof_window = std::chrono::milliseconds(o.eof_window_ms < 0 ? 0 : o.eof_window_ms);
        t.grace = std::chrono::milliseconds(o.grace_ms < 0 ? 0 : o.grace_ms);
        t.kill_wait = std::chrono::milliseconds(o.kill_wait_ms < 0 ? 0 : o.kill_wait_ms);
        t.verify_ports = o.verify_ports != 0;
        warden::api::TeardownReport r = s->server.teardown(t);
        if (survivors) *survivors = static_cast<int>(r.survivors.size());
        if (int rc = out_string(r.json, report_json); rc != MCPW_OK) return rc;
        if (!r.ok())
            return fail(MCPW_ESURVIVORS,
                        std::to_string(r.survivors.size()) + " processes survived teardown");
        return succeed();
    });
}

void mcpw_server_free(mcpw_server* s) {
    try {
        delete s;  // ~Server tears down what was not torn down yet
    } catch (...) {
    }
}

int mcpw_inventory_scan(int all_users, char** json_out) {
    return guard([&] {
        if (!json_out) return fail(MCPW_EINVAL, "mcpw_inventory_scan: json_out is NULL", EINVAL);
        *json_out = nullptr;
        warden::api::InventoryOptions o;
        o.all_users = all_users != 0;
        auto r = warden::api::inventory_scan(o);
        if (!r) return fail(MCPW_ESYSTEM, r.error().message, r.error().code);
        if (int rc = out_string(r->json, json_out); rc != MCPW_OK) return rc;
        return succeed();
    });
}

int mcpw_journal_open(const char* path, mcpw_journal** out) {
    return guard([&] {
        if (!out) return fail(MCPW_EINVAL, "mcpw_journal_open: out is NULL", EINVAL);
        *out = nullptr;
        auto j = warden::api::Journal::open(path ? path : "");
        if (!j) return fail(MCPW_EJOURNAL, j.error().message, j.error().code);
        *out = new mcpw_journal{std::move(*j)};
        return succeed();
    });
}

int mcpw_journal_append(mcpw_journal* j, const char* kind, const char* session,
                        const char* data_json, int64_t* seq_out) {
    return guard([&] {
        if (!j || !kind) return fail(MCPW_EINVAL, "mcpw_journal_append: NULL argument", EINVAL);
        auto r = j->journal.append(kind, session ? session : "", data_json ? data_json : "");
        if (!r)
            return fail(r.error().code == EINVAL ? MCPW_EINVAL : MCPW_EJOURNAL, r.error().message,
                        r.error().code);
        if (seq_out) *seq_out = *r;
        return succeed();
    });
}

void mcpw_journal_close(mcpw_journal* j) {
    try {
        delete j;
    } catch (...) {
    }
}

int mcpw_journal_verify(const char* path, char** report_json) {
    return guard([&] {
        if (report_json) *report_json = nullptr;
        warden::api::VerifyResult r = warden::api::journal_verify(path ? path : "");
        if (int rc = out_string(r.json, report_json); rc != MCPW_OK) return rc;
        if (r.exit_code == 1)
            return fail(MCPW_EVERIFY, "journal integrity failure at seq " +
                                          std::to_string(r.first_bad_seq) + ": " + r.reason);
        if (r.exit_code == 2) return fail(MCPW_EJOURNAL, r.reason);
        return succeed();
    });
}

}  // extern "C"
