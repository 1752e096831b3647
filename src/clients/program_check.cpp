#include "clients/program_check.hpp"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "sys/fd.hpp"
#include "sys/pipe.hpp"

extern char** environ;

namespace warden::clients {
namespace {

struct Captured {
    int status = -1;  // waitpid status
    std::string out;  // stdout, up to a bound
};

// Runs argv with stdin and stderr on /dev/null and stdout captured, for at most `limit`.
// A child still running then is killed (it is ours: we hold its pid unreaped) and the
// result says so.
Result<Captured> run_captured(const std::vector<std::string>& argv,
                              std::chrono::milliseconds limit) {
    auto out = make_pipe();
    if (!out) return out.error();
    posix_spawn_file_actions_t fa;
    ::posix_spawn_file_actions_init(&fa);
    ::posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    ::posix_spawn_file_actions_adddup2(&fa, out->write.get(), 1);
    ::posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    std::vector<char*> av;
    for (const auto& a : argv)
        av.push_back(const_cast<char*>(a.c_str()));
    av.push_back(nullptr);
    pid_t pid = -1;
    int rc = ::posix_spawn(&pid, av[0], &fa, nullptr, av.data(), environ);
    ::posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return Error::sys("posix_spawn", argv[0], rc);
    out->write.reset();

    Captured c;
    constexpr size_t kMaxOutput = 64 * 1024;
    auto deadline = std::chrono::steady_clock::now() + limit;
    bool timed_out = false;
    for (;;) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            timed_out = true;
            break;
        }
        struct pollfd p = {out->read.get(), POLLIN, 0};
        int n = ::poll(&p, 1, static_cast<int>(left.count()));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) continue;
        char buf[4096];
        ssize_t got = ::read(out->read.get(), buf, sizeof buf);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        if (c.out.size() < kMaxOutput) c.out.append(buf, static_cast<size_t>(got));
    }
    if (timed_out) ::kill(pid, SIGKILL);
    while (::waitpid(pid, &c.status, 0) < 0 && errno == EINTR) {
    }
    if (timed_out)
        return Error::msg("`" + argv[0] + " " + (argv.size() > 1 ? argv[1] : "") +
                          "` did not finish within " + std::to_string(limit.count()) + " ms");
    return c;
}

std::string first_line(const std::string& s) {
    return s.substr(0, s.find('\n'));
}

bool entry_exists(const std::string& path) {
    struct stat st;
    return ::lstat(path.c_str(), &st) == 0;
}

std::string parent_of(const std::string& path) {
    size_t slash = path.rfind('/');
    return slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
}

// The git program on PATH, if any.
std::optional<std::string> find_git() {
    const char* path = ::getenv("PATH");
    std::string dirs = path ? path : "/usr/bin:/bin";
    for (size_t at = 0; at <= dirs.size();) {
        size_t end = dirs.find(':', at);
        if (end == std::string::npos) end = dirs.size();
        std::string candidate = dirs.substr(at, end - at) + "/git";
        if (end > at && ::access(candidate.c_str(), X_OK) == 0) return candidate;
        at = end + 1;
    }
    return std::nullopt;
}

}  // namespace

Status check_mcpwarden_program(const std::string& path) {
    if (path.empty() || path[0] != '/')
        return Error{"the mcpwarden path must be absolute: " + path, EINVAL};
    struct stat st;
    if (::stat(path.c_str(), &st) < 0) return Error{path + ": " + std::strerror(errno), errno};
    if (!S_ISREG(st.st_mode)) return Error{path + " is not a regular file", EINVAL};
    if (::access(path.c_str(), X_OK) != 0) return Error{path + " is not executable", EACCES};
    using namespace std::chrono_literals;
    auto ran = run_captured({path, "--version"}, 5000ms);
    if (!ran) return Error{path + " is not mcpwarden: " + ran.error().message, EINVAL};
    std::string line = first_line(ran->out);
    if (!line.starts_with("mcpwarden ")) {
        std::string said = line.empty() ? "printed nothing" : "printed \"" + line + "\"";
        return Error{path + " is not mcpwarden: `" + path + " --version` " + said, EINVAL};
    }
    return {};
}

std::optional<std::string> version_control_of(const std::string& path) {
    char buf[PATH_MAX];
    std::string real = ::realpath(path.c_str(), buf) ? std::string(buf) : path;
    struct Marker {
        const char* entry;
        const char* what;
    };
    static const Marker markers[] = {
        {".git", "git"},
        {".hg", "a Mercurial working copy"},
        {".jj", "a Jujutsu repository"},
        {".svn", "a Subversion working copy"},
        {".bzr", "a Bazaar branch"},
        {"_darcs", "a Darcs repository"},
        {".fossil", "a Fossil checkout"},
        {"_FOSSIL_", "a Fossil checkout"},
    };
    for (std::string dir = parent_of(real);; dir = parent_of(dir)) {
        std::string prefix = dir == "/" ? "" : dir;
        for (const auto& m : markers) {
            if (!entry_exists(prefix + "/" + m.entry)) continue;
            if (std::string_view(m.entry) != ".git")
                return std::string("inside ") + m.what + " (" + dir + ")";
            auto git = find_git();
            if (!git) return "inside a git work tree (" + dir + ")";
            using namespace std::chrono_literals;
            auto ran = run_captured({*git, "-C", dir, "ls-files", "--error-unmatch", "--",
                                     real.substr(prefix.size() + 1)},
                                    5000ms);
            if (!ran) return "inside a git work tree (" + dir + ")";
            // 0: tracked; 1: not tracked; anything else (no git, a repository git refuses
            // to read) cannot rule it out.
            int rc = WIFEXITED(ran->status) ? WEXITSTATUS(ran->status) : -1;
            if (rc == 0) return "tracked by git (repository " + dir + ")";
            if (rc == 1) return std::nullopt;
            return "inside a git work tree (" + dir + ")";
        }
        if (dir == "/") return std::nullopt;
    }
}

}  // namespace warden::clients
