/* libmcpwarden — the stable C ABI.
 *
 * For hosts in C and in any language with a C FFI (Python ctypes, Rust, Go, Node). Opaque
 * handles, plain integers and NUL-terminated strings only; no C++ type and no exception
 * crosses this boundary. Every function that can fail returns an int: MCPW_OK (0) or a
 * negative MCPW_E* code, and mcpw_last_error() then gives one line naming what failed, on
 * what and why ("cannot run 'nope': command not found"). Strings the library returns through
 * a char** are owned by the caller and released with mcpw_free().
 *
 *     mcpw_server *s; char *report; int survivors;
 *     const char *argv[] = {"my-mcp-server", NULL};
 *     if (mcpw_spawn(argv, NULL, NULL, NULL, &s) != MCPW_OK) die(mcpw_last_error());
 *     write(mcpw_server_stdin(s), ...); read(mcpw_server_stdout(s), ...);
 *     mcpw_teardown(s, NULL, &report, &survivors);   // report: JSON
 *     mcpw_free(report); mcpw_server_free(s);
 *
 * ABI rules (docs/LIBRARY.md): functions are only added; option structs start with
 * struct_size and only grow at the end; error codes keep their values; SONAME
 * libmcpwarden.so.MCPW_ABI_VERSION changes only when one of these rules has to be broken.
 */
#ifndef MCPWARDEN_H
#define MCPWARDEN_H

#include <stddef.h>
#include <stdint.h>

#include "mcpwarden/export.h"
#include "mcpwarden/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes. */
#define MCPW_OK 0
#define MCPW_EINVAL (-1)     /* a bad argument (NULL handle, empty argv, bad JSON, …) */
#define MCPW_ENOENT (-2)     /* the command was not found (a shell would exit 127) */
#define MCPW_EACCES (-3)     /* the command is not executable (a shell would exit 126) */
#define MCPW_ESPAWN (-4)     /* the server could not be started for another reason */
#define MCPW_ESURVIVORS (-5) /* the teardown left survivors (named in the report) */
#define MCPW_EJOURNAL (-6)   /* the journal could not be opened or written */
#define MCPW_EVERIFY (-7)    /* journal verification found an integrity failure */
#define MCPW_ESYSTEM (-8)    /* a system call failed (scan, I/O) */
#define MCPW_ENOMEM (-9)
#define MCPW_EINTERNAL (-10)

/* Stdio modes for mcpw_spawn_options. */
#define MCPW_STDIO_PIPE 0
#define MCPW_STDIO_INHERIT 1
#define MCPW_STDIO_NULL 2

typedef struct mcpw_server mcpw_server;
typedef struct mcpw_journal mcpw_journal;

typedef struct mcpw_spawn_options {
    uint32_t struct_size; /* sizeof(mcpw_spawn_options); set by mcpw_spawn_options_init */
    int stdin_mode, stdout_mode, stderr_mode; /* MCPW_STDIO_*; default pipe, pipe, inherit */
    int use_cgroup;                           /* default 1 */
    int use_pidfd;                            /* default 1 */
    int use_pidns;                            /* default 0 */
    int use_subreaper;                        /* default 1: the host becomes a child subreaper */
    int pdeathsig;           /* default 9 (SIGKILL) when the spawning thread dies; 0: none */
    const char* session_id;  /* NULL: generated */
    const char* cgroup_base; /* NULL: the host's own cgroup */
} mcpw_spawn_options;

typedef struct mcpw_teardown_options {
    uint32_t struct_size;
    int eof_window_ms; /* default 500 */
    int grace_ms;      /* default 2000 */
    int kill_wait_ms;  /* default 3000 */
    int verify_ports;  /* default 1 */
} mcpw_teardown_options;

/* Library identity: "0.1.0", and the build options as JSON. */
MCPW_API const char* mcpw_version(void);
MCPW_API int mcpw_abi_version(void);
MCPW_API const char* mcpw_build_info_json(void);

/* The message of the last failure on this thread; "" when none. Valid until the next
 * mcpwarden call on the same thread. */
MCPW_API const char* mcpw_last_error(void);
/* The errno behind the last failure on this thread, 0 when there was none. */
MCPW_API int mcpw_last_errno(void);
/* Releases a string returned through a char** out-parameter. NULL is fine. */
MCPW_API void mcpw_free(void* p);

MCPW_API void mcpw_spawn_options_init(mcpw_spawn_options* o);
MCPW_API void mcpw_teardown_options_init(mcpw_teardown_options* o);

/* Starts argv (NULL-terminated; argv[0] searched in PATH when it has no '/'). env: extra
 * "KEY=VALUE" entries (NULL-terminated, may be NULL) on top of the host's environment. cwd
 * and options may be NULL. On success *out is a handle to free with mcpw_server_free. */
MCPW_API int mcpw_spawn(const char* const* argv, const char* const* env, const char* cwd,
                        const mcpw_spawn_options* options, mcpw_server** out);

MCPW_API int mcpw_server_pid(const mcpw_server* s);   /* -1 for NULL */
MCPW_API int mcpw_server_pidfd(const mcpw_server* s); /* -1 without pidfds */
MCPW_API int mcpw_server_stdin(const mcpw_server* s); /* -1 unless piped */
MCPW_API int mcpw_server_stdout(const mcpw_server* s);
MCPW_API int mcpw_server_stderr(const mcpw_server* s);
MCPW_API const char* mcpw_server_session(const mcpw_server* s); /* owned by the handle */
MCPW_API int mcpw_server_close_stdin(mcpw_server* s);
/* The containment layers (JSON) into *json_out (mcpw_free it). */
MCPW_API int mcpw_server_layers(const mcpw_server* s, char** json_out);

/* Tears the server's whole tree down. report_json (may be NULL) receives the report as
 * JSON; survivors (may be NULL) their count. Returns MCPW_OK, or MCPW_ESURVIVORS when
 * something survived. A second call returns the first report. */
MCPW_API int mcpw_teardown(mcpw_server* s, const mcpw_teardown_options* options, char** report_json,
                           int* survivors);
/* Frees the handle; a server not torn down yet is torn down first (default options). */
MCPW_API void mcpw_server_free(mcpw_server* s);

/* Inventory: every MCP server tree of this user as JSON ({"servers":[…],"warnings":[…]}). */
MCPW_API int mcpw_inventory_scan(int all_users, char** json_out);

/* Journal. path NULL or "": the default journal. data_json: a JSON object (integers only). */
MCPW_API int mcpw_journal_open(const char* path, mcpw_journal** out);
MCPW_API int mcpw_journal_append(mcpw_journal* j, const char* kind, const char* session,
                                 const char* data_json, int64_t* seq_out);
MCPW_API void mcpw_journal_close(mcpw_journal* j);
/* Verifies a journal offline. Returns MCPW_OK (also when merely unanchored), MCPW_EVERIFY
 * on an integrity failure, MCPW_EJOURNAL when it cannot be read. report_json may be NULL. */
MCPW_API int mcpw_journal_verify(const char* path, char** report_json);

#ifdef __cplusplus
}
#endif

#endif /* MCPWARDEN_H */
