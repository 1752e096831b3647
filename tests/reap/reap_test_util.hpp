// Helpers for the reap tests: a fake MCP client that leaks wrapper + server pairs, a decoy
// with stdin on /dev/null, the CLI driven with its own HOME/XDG dirs, and journal reads.
//
// Every process these helpers start carries kTagVar=<tag> and sits under a TreeGuard, so a
// failing test leaves nothing behind; every `reap --orphans` a test runs is narrowed with
// `--match <tag>`, so it can only ever select this test's own processes (other tests run
// concurrently on the same machine).
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/testing.hpp"

extern char** environ;

namespace warden::testing {

// The fixture under a name that follows the MCP convention ("…-mcp"): what inventory's
// heuristic (stdin and stdout on pipes, an MCP-looking argv) recognises, as it would a real
// `mcp-server-…` or `…-mcp`. One symlink for the whole test binary, removed at exit.
inline const std::string& mcp_fixture() {
    static const TempDir dir;
    static const std::string link = [] {
        std::string l = dir.file("fixture-mcp");
        if (::symlink(kFixture, l.c_str()) != 0) ADD_FAILURE() << "symlink " << l;
        return l;
    }();
    return link;
}

// sh stays a real wrapper process (`; true` keeps it from exec'ing), like the client's
// `sh -c` that leaked 81 MB per restart; the tag is $1, so it shows in sh's command line.
inline std::vector<std::string> pair_argv(const std::string& tag) {
    return {"/bin/sh", "-c", "\"$0\" --on-eof ignore; true", mcp_fixture(), tag};
}

inline std::vector<char*> c_strings(std::vector<std::string>& v) {
    std::vector<char*> out;
    for (auto& s : v)
        out.push_back(s.data());
    out.push_back(nullptr);
    return out;
}

inline std::vector<std::string> tagged_env(const std::string& tag,
                                           std::vector<std::string> extra = {}) {
    // Built with +=, not `string(kTagVar) + "="`: GCC 12's -Warray-bounds misfires on that
    // temporary once the tests' precompiled header is in.
    std::string tag_entry = kTagVar;
    tag_entry += '=';
    std::vector<std::string> env;
    for (char** e = environ; e && *e; ++e)
        if (std::string_view(*e).rfind(tag_entry, 0) != 0 &&
            std::string_view(*e).rfind("MCPWARDEN_SESSION=", 0) != 0)
            env.emplace_back(*e);
    tag_entry += tag;
    env.push_back(std::move(tag_entry));
    for (auto& x : extra)
        env.push_back(std::move(x));
    return env;
}

// Whether wrapper `w` has built its tree: the fixture under it forked its helper.
inline bool pair_ready(pid_t w) {
    auto d = descendants_of(w);
    if (d.size() < 2) return false;
    for (pid_t p : d)
        if (auto st = read_stat(p); st && st->comm == "fixture-helper") return true;
    return false;
}

// A process and everything below it, as (pid, starttime).
inline std::vector<std::pair<pid_t, uint64_t>> identities_below(pid_t root) {
    std::vector<std::pair<pid_t, uint64_t>> out;
    std::vector<pid_t> all{root};
    for (pid_t d : descendants_of(root))
        all.push_back(d);
    for (pid_t p : all)
        if (auto st = read_stat(p)) out.push_back({p, st->starttime});
    return out;
}

// A process that starts `count` pairs with stdin and stdout on pipes it holds, reports the
// wrapper pids, and waits. kill() SIGKILLs and reaps it: the pairs become logical orphans.
// `argv` replaces the pair (a wrapper of another shape, `mcpwarden run -- …`), `extra_env`
// goes to what it starts (e.g. MCPWARDEN_SESSION=…).
class FakeClient {
  public:
    FakeClient(int count, const std::string& tag) : FakeClient(count, tag, pair_argv(tag)) {}
    FakeClient(int count, const std::string& tag, std::vector<std::string> argv_s,
               std::vector<std::string> extra_env = {})
        : guard_(0, tag) {
        auto env_s = tagged_env(tag, std::move(extra_env));
        auto argv = c_strings(argv_s);
        auto envp = c_strings(env_s);
        int report[2];
        if (::pipe2(report, O_CLOEXEC) != 0) return;
        pid_t c = ::fork();
        if (c < 0) return;
        if (c == 0) {
            // Async-signal-safe only from here: pipes, fork, dup2, execve, write, pause.
            for (int i = 0; i < count; ++i) {
                int in[2], out[2];
                if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) ::_exit(3);
                pid_t w = ::fork();
                if (w == 0) {
                    ::dup2(in[0], 0);
                    ::dup2(out[1], 1);
                    ::execve(argv[0], argv.data(), envp.data());
                    ::_exit(127);
                }
                ::close(in[0]);
                ::close(out[1]);
                if (::write(report[1], &w, sizeof w) != sizeof w) ::_exit(4);
            }
            ::close(report[1]);
            for (;;)
                ::pause();
        }
        pid_ = c;
        guard_.set_root(c, true);
        ::close(report[1]);
        pid_t w;
        while (::read(report[0], &w, sizeof w) == sizeof w)
            wrappers_.push_back(w);
        ::close(report[0]);
        for (pid_t x : wrappers_)
            guard_.add(x);
    }

    bool ready(Millis timeout = 10s) {
        if (pid_ <= 0) return false;
        return wait_until(
            [&] {
                for (pid_t w : wrappers_)
                    if (!pair_ready(w)) return false;
                return true;
            },
            timeout);
    }

    // Every process of the pairs, as (pid, starttime): wrappers, servers, helpers; not a
    // `mcpwarden run`'s background worker (mcpwarden-sweep, src/api/dead_sessions.cpp), which
    // ends by itself when its work is done.
    std::vector<std::pair<pid_t, uint64_t>> members() const {
        std::vector<std::pair<pid_t, uint64_t>> out;
        for (pid_t w : wrappers_)
            for (auto m : identities_below(w))
                if (auto st = read_stat(m.first); !st || st->comm != "mcpwarden-sweep")
                    out.push_back(m);
        return out;
    }

    void kill() {
        if (pid_ <= 0) return;
        ::kill(pid_, SIGKILL);
        int st = 0;
        while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
        }
        pid_ = -1;
    }

    const std::vector<pid_t>& wrappers() const { return wrappers_; }
    TreeGuard& guard() { return guard_; }

  private:
    pid_t pid_ = -1;
    std::vector<pid_t> wrappers_;
    TreeGuard guard_;
};

// What a crashed client leaves behind, the setup most reap tests start from: `count` pairs,
// each complete (its server's helper forked and named), then the client SIGKILLed so that
// they are logical orphans. `leaked` is every process of the pairs as (pid, starttime) and
// `helper` the first server's helper, both taken before the kill; the client's guard ends
// them all when the test is done.
struct CrashedClient {
    explicit CrashedClient(const std::string& tag, int count = 1) : client(count, tag) {
        if (!client.ready()) return;
        leaked = client.members();
        for (auto [pid, starttime] : leaked)
            if (auto st = read_stat(pid); st && st->comm == "fixture-helper" && !helper.first)
                helper = {pid, starttime};
        client.kill();
    }
    bool ready() const { return !leaked.empty(); }
    pid_t wrapper() const { return client.wrappers().front(); }

    FakeClient client;
    std::vector<std::pair<pid_t, uint64_t>> leaked;
    std::pair<pid_t, uint64_t> helper{0, 0};
};

// The same pair, started by the test with stdin (and stdout) on /dev/null: an ordinary
// process with the same argv, outside any MCP tree.
class Decoy {
  public:
    explicit Decoy(const std::string& tag, std::vector<std::string> extra_env = {})
        : guard_(0, tag) {
        auto argv_s = pair_argv(tag);
        auto env_s = tagged_env(tag, std::move(extra_env));
        auto argv = c_strings(argv_s);
        auto envp = c_strings(env_s);
        pid_t c = ::fork();
        if (c == 0) {
            int n = ::open("/dev/null", O_RDWR);
            ::dup2(n, 0);
            ::dup2(n, 1);
            ::execve(argv[0], argv.data(), envp.data());
            ::_exit(127);
        }
        pid_ = c;
        if (c > 0) guard_.set_root(c, true);
    }
    pid_t pid() const { return pid_; }
    TreeGuard& guard() { return guard_; }

  private:
    pid_t pid_ = -1;
    TreeGuard guard_;
};

struct CliRun {
    std::string out, err;
    int status = -1;
    int exit_code() const { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }
};

// HOME, XDG_STATE_HOME, XDG_CONFIG_HOME in a temp dir; the journal inside it.
struct CliEnv {
    CliEnv() {
        ::mkdir(dir.file("state").c_str(), 0700);
        ::mkdir(dir.file("config").c_str(), 0700);
    }
    TempDir dir;
    std::string journal() const { return dir.file("state/mcpwarden/journal.db"); }
    std::string config_dir() const { return dir.file("config/mcpwarden"); }
    ChildOptions options() const {
        ChildOptions o;
        o.env = {{"HOME", dir.path()},
                 {"XDG_STATE_HOME", dir.file("state")},
                 {"XDG_CONFIG_HOME", dir.file("config")}};
        o.unset_env = {"MCPWARDEN_JOURNAL", "MCPWARDEN_SESSION"};
        o.capture_stderr = true;
        return o;
    }
    // `extra_env`: more variables for this command (MCPWARDEN_FAULT).
    CliRun run(std::vector<std::string> args,
               std::vector<std::pair<std::string, std::string>> extra_env = {}) const {
        args.insert(args.begin(), kCli);
        ChildOptions o = options();
        for (auto& kv : extra_env)
            o.env.push_back(std::move(kv));
        TestChild c(std::move(args), std::move(o));
        CliRun r;
        if (!c.started()) {
            r.err = c.error();
            return r;
        }
        c.close_stdin();
        r.out = c.read_all_stdout(60s);
        r.err = c.read_stderr(5s);
        r.status = c.wait_exit(60s).value_or(-1);
        return r;
    }
};

struct Record {
    int64_t seq;
    std::string kind;
    nlohmann::json body;
};

// Every record of the journal at `path`, in seq order (read-only, straight from SQLite).
inline std::vector<Record> journal_records(const std::string& path) {
    std::vector<Record> out;
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
        sqlite3_close(db);
        return out;
    }
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, "SELECT seq, kind, body FROM records ORDER BY seq", -1, &st,
                           nullptr) == SQLITE_OK) {
        while (sqlite3_step(st) == SQLITE_ROW) {
            Record r;
            r.seq = sqlite3_column_int64(st, 0);
            r.kind = reinterpret_cast<const char*>(sqlite3_column_text(st, 1));
            auto body = reinterpret_cast<const char*>(sqlite3_column_text(st, 2));
            r.body = nlohmann::json::parse(body ? body : "null", nullptr, false);
            out.push_back(std::move(r));
        }
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return out;
}

// Seq of the first record of `kind` whose data.pid (or data.target.pid) is `pid`; 0 if none.
inline int64_t first_seq(const std::vector<Record>& recs, const std::string& kind, pid_t pid) {
    for (const Record& r : recs) {
        if (r.kind != kind) continue;
        const auto& d = r.body["data"];
        if ((d.contains("pid") && d["pid"] == pid) ||
            (d.contains("target") && d["target"].is_object() && d["target"]["pid"] == pid))
            return r.seq;
    }
    return 0;
}

}  // namespace warden::testing
