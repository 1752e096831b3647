/* c_host: a minimal MCP host in C on libmcpwarden's C ABI.
 *
 * Starts the fixture MCP server (shape "setsid": it leaves a helper that called setsid()
 * and holds a port, the kind of process a plain kill of the server misses), sends
 * initialize and tools/call echo over its stdio, checks the answer, tears the whole tree
 * down, prints the report and then checks from outside, through /proc, that no process
 * carrying this run's tag is left.
 *
 * usage: c_host [PATH-TO-mcpwarden-fixture]   (default: $MCPWARDEN_FIXTURE, then the
 *        installed libexec/mcpwarden/mcpwarden-fixture)
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mcpwarden/mcpwarden.h>

#ifndef MCPWARDEN_FIXTURE
#define MCPWARDEN_FIXTURE "/usr/libexec/mcpwarden/mcpwarden-fixture"
#endif

static int write_all(int fd, const char* s) {
    size_t n = strlen(s);
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

/* One newline-terminated line from fd into buf, waiting at most 10 s in total. */
static int read_line(int fd, char* buf, size_t size) {
    size_t used = 0;
    for (int waited = 0; waited < 100 && used + 1 < size;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, 100);
        if (r == 0) {
            ++waited;
            continue;
        }
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        ssize_t n = read(fd, buf + used, 1); /* byte by byte: the reply is small */
        if (n <= 0) return -1;
        if (buf[used] == '\n') {
            buf[used] = '\0';
            return 0;
        }
        ++used;
    }
    return -1;
}

/* Live (not zombie) processes whose environment holds `needle` ("KEY=VALUE"). */
static int count_tagged(const char* needle) {
    int count = 0;
    DIR* d = opendir("/proc");
    if (!d) return -1;
    struct dirent* e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        char path[300], env[65536], stat[512];
        snprintf(path, sizeof path, "/proc/%s/environ", e->d_name);
        FILE* f = fopen(path, "r");
        if (!f) continue;
        size_t n = fread(env, 1, sizeof env - 1, f);
        fclose(f);
        int found = 0;
        for (size_t i = 0; i < n; i += strlen(env + i) + 1) {
            env[n] = '\0';
            if (strcmp(env + i, needle) == 0) {
                found = 1;
                break;
            }
        }
        if (!found) continue;
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        f = fopen(path, "r");
        if (!f) continue;
        size_t m = fread(stat, 1, sizeof stat - 1, f);
        fclose(f);
        stat[m] = '\0';
        const char* rp = strrchr(stat, ')');
        if (rp && rp[1] == ' ' && rp[2] != 'Z') ++count;
    }
    closedir(d);
    return count;
}

int main(int argc, char** argv) {
    const char* fixture = argc > 1 ? argv[1] : getenv("MCPWARDEN_FIXTURE");
    if (!fixture || !*fixture) fixture = MCPWARDEN_FIXTURE;
    printf("libmcpwarden %s (abi %d)\n", mcpw_version(), mcpw_abi_version());

    char tag[96];
    snprintf(tag, sizeof tag, "MCPW_EXAMPLE_TAG=c-host-%ld-%ld", (long)getpid(), (long)time(NULL));
    const char* server_argv[] = {fixture, "--shape", "setsid", NULL};
    const char* server_env[] = {tag, NULL};

    mcpw_server* server = NULL;
    if (mcpw_spawn(server_argv, server_env, NULL, NULL, &server) != MCPW_OK) {
        fprintf(stderr, "c_host: %s\n", mcpw_last_error());
        return 1;
    }
    printf("server pid %d, session %s\n", mcpw_server_pid(server), mcpw_server_session(server));

    int ok = 1;
    char line[65536];
    if (write_all(mcpw_server_stdin(server),
                  "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
                  "\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
                  "\"clientInfo\":{\"name\":\"c_host\",\"version\":\"1\"}}}\n") != 0 ||
        read_line(mcpw_server_stdout(server), line, sizeof line) != 0 ||
        !strstr(line, "\"id\":1")) {
        fprintf(stderr, "c_host: no answer to initialize\n");
        ok = 0;
    }
    if (ok && (write_all(mcpw_server_stdin(server),
                         "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n"
                         "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{"
                         "\"name\":\"echo\",\"arguments\":{\"text\":\"hello from C\"}}}\n") != 0 ||
               read_line(mcpw_server_stdout(server), line, sizeof line) != 0 ||
               !strstr(line, "hello from C"))) {
        fprintf(stderr, "c_host: echo did not answer\n");
        ok = 0;
    }
    if (ok) printf("echo answered: %s\n", line);

    mcpw_teardown_options topts;
    mcpw_teardown_options_init(&topts);
    topts.grace_ms = 1000;
    char* report = NULL;
    int survivors = -1;
    int rc = mcpw_teardown(server, &topts, &report, &survivors);
    printf("teardown report: %s\n", report ? report : "(none)");
    mcpw_free(report);
    if (rc != MCPW_OK) {
        fprintf(stderr, "c_host: teardown: %s\n", mcpw_last_error());
        ok = 0;
    }
    mcpw_server_free(server);

    int left = count_tagged(tag);
    printf("survivors %d, tagged processes left %d\n", survivors, left);
    if (survivors != 0 || left != 0) ok = 0;
    printf(ok ? "c_host: OK\n" : "c_host: FAILED\n");
    return ok ? 0 : 1;
}
