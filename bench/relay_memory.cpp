// bench_relay_memory: how much memory `mcpwarden run` needs to relay one long line.
//
// The server (this binary, --as-server) answers one request with a single JSON-RPC response
// line of N MiB; the client (this benchmark) reads it all as fast as it comes, then reads
// the peak RSS (VmHWM) of the process in between and ends the session. Two processes in
// between, measured in one run:
//   shim    mcpwarden run --no-journal [--max-message M] -- server   (the relay's VmHWM)
//   copier  this binary as a plain 64 KiB read/write byte copier (--as-copier): the least
//           any process in between costs (the baseline)
// for N = 1, 16, 64 and 300 MiB (64 MiB is the default --max-message: a line above it is
// relayed in pieces, never held whole). Printed: the peak RSS of each, the shim's against
// the line size, and the shim's minus the copier's against --max-message.
//
// Usage: bench_relay_memory [--sizes 1,16,64,300] [--max-message BYTES] [--shape text|array]
//                           [--cli PATH]   (another mcpwarden binary, e.g. main's, to compare)
//
// Flood mode (--flood MB): the server (this binary, --as-flooder BYTES) writes one MCP log
// notification of BYTES bytes (86 by default), newline included, again and again, as `yes`
// does; the client reads MB of it in pieces of --read-size bytes (100 by default: a client
// that almost keeps up, so the relay's queue to it never stays empty) and then reads the
// peak RSS. Three processes in between, journaled to a temporary directory:
//   shim        mcpwarden run --journal TMP [--max-message M] -- flooder
//   guards off  the same with MCPWARDEN_FAULT=relay_queue_unreclaimed,journal_unpaced: a
//               queue that keeps what it wrote until it empties, and journal posts (one per
//               line longer than --max-message) that never wait for the writer thread
//   copier      the byte copier, the baseline
//   bench_relay_memory --flood 200 [--line 86] [--max-message 1KiB] [--read-size 100]
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "children.hpp"

namespace {

constexpr size_t kMiB = size_t{1} << 20;

bool write_all(int fd, const char* p, size_t n) {
    while (n > 0) {
        ssize_t w = ::write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= static_cast<size_t>(w);
    }
    return true;
}

// The server: reads one request line, answers with one line of `mib` MiB (written in 1 MiB
// pieces, so the server itself stays small), then waits for EOF. Two shapes of answer: one
// long string ("text", the usual large tool result) or an array of one-digit numbers
// ("array", two bytes per JSON token: the most work for a parser's index).
int as_server(size_t mib, const std::string& shape) {
    char c;
    while (::read(0, &c, 1) == 1 && c != '\n') {
    }
    const bool array = shape == "array";
    const std::string head = array ? R"({"jsonrpc":"2.0","id":1,"result":{"v":[0)"
                                   : R"({"jsonrpc":"2.0","id":1,"result":{"text":")";
    const std::string tail = array ? "]}}\n" : "\"}}\n";
    std::string piece;
    while (piece.size() < kMiB)
        piece += array ? ",1" : "xx";
    size_t body = mib * kMiB - head.size() - tail.size();
    if (!write_all(1, head.data(), head.size())) return 1;
    while (body > 0) {
        size_t n = std::min(body, piece.size());
        if (!write_all(1, piece.data(), n)) return 1;
        body -= n;
    }
    if (!write_all(1, tail.data(), tail.size())) return 1;
    while (::read(0, &c, 1) > 0) {
    }
    return 0;
}

// The flooder: one notification line of `bytes` bytes (newline included), for ever, in
// writes of 8 KiB as `yes` makes them (a relay that reads less than its high-water mark at a
// time copies into its queue what the client does not take at once: shim/relay.cpp, Sink).
int as_flooder(size_t bytes) {
    const std::string head = R"({"jsonrpc":"2.0","method":"notifications/message","params":{)"
                             R"("level":"info","data":")";
    const std::string tail = "\"}}\n";
    const size_t pad = bytes > head.size() + tail.size() ? bytes - head.size() - tail.size() : 1;
    const std::string line = head + std::string(pad, 'x') + tail;
    std::string block = line;  // whole lines in 8 KiB writes, as `yes` writes them
    while (block.size() + line.size() <= 8192)
        block += line;
    while (write_all(1, block.data(), block.size())) {
    }
    return 0;
}

// The baseline: the server as our child, its stdio copied through 64 KiB buffers.
int as_copier(char** server_argv) {
    int in[2], out[2];
    if (::pipe(in) || ::pipe(out)) return 1;
    pid_t pid = ::fork();
    if (pid == 0) {
        ::dup2(in[0], 0);
        ::dup2(out[1], 1);
        ::close(in[0]), ::close(in[1]), ::close(out[0]), ::close(out[1]);
        ::execv(server_argv[0], server_argv);
        ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    std::vector<char> buf(64 << 10);
    pollfd p[2] = {{0, POLLIN, 0}, {out[0], POLLIN, 0}};
    int to_server = in[1];
    while (p[1].fd >= 0) {
        if (::poll(p, 2, -1) < 0 && errno != EINTR) break;
        for (int i = 0; i < 2; ++i) {
            if (p[i].fd < 0 || !p[i].revents) continue;
            ssize_t n = ::read(p[i].fd, buf.data(), buf.size());
            if (n <= 0) {
                if (i == 0) ::close(to_server);
                p[i].fd = -1;
                continue;
            }
            if (!write_all(i == 0 ? to_server : 1, buf.data(), static_cast<size_t>(n)))
                p[i].fd = -1;
        }
    }
    int st = 0;
    ::waitpid(pid, &st, 0);
    return 0;
}

using Proc = warden::bench::PipedChild;

// VmHWM of `pid`, in KiB (0 when unreadable).
long peak_rss_kib(pid_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(f, line);)
        if (line.rfind("VmHWM:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
    return 0;
}

// One session: the request, the whole answer read, the peak RSS of the process in between,
// then EOF. Returns the peak in MiB (negative on failure).
double measure(const std::vector<std::string>& argv, size_t mib) {
    Proc p = warden::bench::spawn_piped(argv, /*keep_stderr=*/true);
    const std::string req = R"({"jsonrpc":"2.0","id":1,"method":"big"})"
                            "\n";
    double peak = -1;
    if (write_all(p.in, req.data(), req.size())) {
        std::vector<char> buf(1 << 20);
        size_t got = 0;
        bool line_done = false;
        while (!line_done) {
            ssize_t n = ::read(p.out, buf.data(), buf.size());
            if (n <= 0) break;
            got += static_cast<size_t>(n);
            line_done = buf[static_cast<size_t>(n) - 1] == '\n' && got >= mib * kMiB;
        }
        if (line_done) peak = static_cast<double>(peak_rss_kib(p.pid)) / 1024.0;
    }
    ::close(p.in);
    ::close(p.out);
    int st = 0;
    ::waitpid(p.pid, &st, 0);
    ::kill(-p.pid, SIGKILL);  // its group: nothing of a failed run is left
    return peak;
}

struct Flood {
    double peak_mib = -1, seconds = 0;
};

// One flood: `mb` MB read in pieces of `read_size` bytes, then the peak RSS of the process in
// between; `fault` is its MCPWARDEN_FAULT (empty: none).
Flood measure_flood(const std::vector<std::string>& argv, const std::string& fault, size_t mb,
                    size_t read_size) {
    if (!fault.empty()) ::setenv("MCPWARDEN_FAULT", fault.c_str(), 1);
    Proc p = warden::bench::spawn_piped(argv, /*keep_stderr=*/false);
    ::unsetenv("MCPWARDEN_FAULT");
    Flood f;
    const auto start = std::chrono::steady_clock::now();
    std::vector<char> buf(read_size);
    size_t got = 0;
    while (got < mb * 1000000) {
        pollfd pf{p.out, POLLIN, 0};  // as an event loop reads: a poll, then a read
        if (::poll(&pf, 1, 10000) <= 0) break;
        ssize_t n = ::read(p.out, buf.data(), buf.size());
        if (n <= 0) break;
        got += static_cast<size_t>(n);
    }
    if (got >= mb * 1000000) {
        f.peak_mib = static_cast<double>(peak_rss_kib(p.pid)) / 1024.0;
        f.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    ::close(p.in);
    ::close(p.out);
    ::kill(-p.pid, SIGTERM);  // the flooder does not stop at EOF; the shim tears it down
    int st = 0;
    ::waitpid(p.pid, &st, 0);
    ::kill(-p.pid, SIGKILL);
    return f;
}

int flood_main(const std::string& self, const std::string& cli, size_t mb, size_t line,
               const std::string& max_message, size_t read_size) {
    char tmpl[] = "/tmp/bench_relay_memory.XXXXXX";
    if (!::mkdtemp(tmpl)) return 1;
    const std::string journal = std::string(tmpl) + "/journal.db";
    std::printf(
        "bench_relay_memory --flood: peak RSS (VmHWM) of the process between a client "
        "reading %zu MB in %zu-byte reads and a server writing %zu-byte notification "
        "lines as fast as it can\nshim: %s, --max-message %s, journal in %s\n\n",
        mb, read_size, line, cli.c_str(), max_message.empty() ? "64MiB" : max_message.c_str(),
        tmpl);
    std::vector<std::string> server = {self, "--as-flooder", std::to_string(line)};
    std::vector<std::string> shim = {cli, "run", "--journal", journal};
    if (!max_message.empty()) shim.insert(shim.end(), {"--max-message", max_message});
    shim.push_back("--");
    shim.insert(shim.end(), server.begin(), server.end());
    std::vector<std::string> copier = {self, "--as-copier"};
    copier.insert(copier.end(), server.begin(), server.end());
    std::printf("%-12s %10s %10s %10s\n", "", "peak MiB", "seconds", "MB/s");
    struct Row {
        const char* name;
        const std::vector<std::string>* argv;
        std::string fault;
    };
    for (const Row& r : {Row{"shim", &shim, ""},
                         Row{"guards off", &shim, "relay_queue_unreclaimed,journal_unpaced"},
                         Row{"copier", &copier, ""}}) {
        const Flood f = measure_flood(*r.argv, r.fault, mb, read_size);
        std::printf("%-12s %10.1f %10.2f %10.1f\n", r.name, f.peak_mib, f.seconds,
                    f.seconds > 0 ? static_cast<double>(mb) / f.seconds : 0.0);
        std::fflush(stdout);
    }
    std::error_code ec;
    std::filesystem::remove_all(tmpl, ec);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc >= 3 && std::strcmp(argv[1], "--as-flooder") == 0)
        return as_flooder(std::strtoul(argv[2], nullptr, 10));
    if (argc >= 3 && std::strcmp(argv[1], "--as-server") == 0)
        return as_server(std::strtoul(argv[2], nullptr, 10), argc >= 4 ? argv[3] : "text");
    if (argc >= 3 && std::strcmp(argv[1], "--as-copier") == 0) return as_copier(argv + 2);

    std::vector<size_t> sizes = {1, 16, 64, 300};
    std::string max_message, shape = "text", cli = WARDEN_CLI;
    size_t flood = 0, line = 86, read_size = 100;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--sizes") == 0) {
            sizes.clear();
            for (const char* s = argv[i + 1]; *s;) {
                char* end = nullptr;
                sizes.push_back(std::strtoul(s, &end, 10));
                s = *end == ',' ? end + 1 : end;
            }
        } else if (std::strcmp(argv[i], "--max-message") == 0) {
            max_message = argv[i + 1];
        } else if (std::strcmp(argv[i], "--cli") == 0) {
            cli = argv[i + 1];
        } else if (std::strcmp(argv[i], "--shape") == 0) {
            shape = argv[i + 1];
        } else if (std::strcmp(argv[i], "--flood") == 0) {
            flood = std::strtoul(argv[i + 1], nullptr, 10);
        } else if (std::strcmp(argv[i], "--line") == 0) {
            line = std::strtoul(argv[i + 1], nullptr, 10);
        } else if (std::strcmp(argv[i], "--read-size") == 0) {
            read_size = std::max<size_t>(1, std::strtoul(argv[i + 1], nullptr, 10));
        }
    }
    char self[4096];
    ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return 1;
    self[n] = 0;
    if (flood) return flood_main(self, cli, flood, line, max_message, read_size);
    const double max_mib =
        max_message.empty()
            ? 64.0
            : static_cast<double>(std::strtoull(max_message.c_str(), nullptr, 10)) / kMiB;

    std::printf("bench_relay_memory: peak RSS (VmHWM) of the process between client and server\n");
    std::printf("shim: %s\n", cli.c_str());
    std::printf(
        "baseline: copier = a plain 64 KiB read/write byte copier; --max-message %.0f MiB; "
        "answer shape: %s\n\n",
        max_mib, shape.c_str());
    std::printf("%8s %12s %12s %12s %18s\n", "line MiB", "shim MiB", "copier MiB", "shim/line",
                "(shim-copier)/max");
    for (size_t mib : sizes) {
        std::vector<std::string> server = {self, "--as-server", std::to_string(mib), shape};
        std::vector<std::string> shim = {cli, "run", "--no-journal"};
        if (!max_message.empty()) shim.insert(shim.end(), {"--max-message", max_message});
        shim.push_back("--");
        shim.insert(shim.end(), server.begin(), server.end());
        std::vector<std::string> copier = {self, "--as-copier"};
        copier.insert(copier.end(), server.begin(), server.end());
        const double s = measure(shim, mib);
        const double c = measure(copier, mib);
        std::printf("%8zu %12.1f %12.1f %12.2f %18.2f\n", mib, s, c, s / static_cast<double>(mib),
                    (s - c) / max_mib);
        std::fflush(stdout);
    }
    return 0;
}
