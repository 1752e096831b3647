#include "drill/client.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <optional>

#include <nlohmann/json.hpp>

#include "mcpwarden/version.h"
#include "sys/fd.hpp"
#include "sys/pipe.hpp"

namespace warden::drill {
namespace {

using Clock = std::chrono::steady_clock;

void report(int fd, const std::string& line) {
    (void)write_all(fd, line + "\n", "drill report pipe");
}

[[noreturn]] void wait_for_the_kill() {
    for (;;)
        ::pause();
}

[[noreturn]] void fail(int fd, const std::string& why) {
    report(fd, "error " + why);
    wait_for_the_kill();
}

// fork + exec of the server command with stdin/stdout on pipes; returns the pid.
pid_t spawn_server(const ClientConfig& c, int& to_server, int& from_server, int report_fd) {
    auto in = make_pipe();
    auto out = make_pipe();
    if (!in || !out) fail(report_fd, "pipe: " + std::string(std::strerror(errno)));
    std::vector<std::string> env;
    auto dropped = [&](std::string_view entry) {
        auto eq = entry.find('=');
        std::string_view name = entry.substr(0, eq);
        for (const auto& u : c.unset_env)
            if (name == u) return true;
        for (const auto& e : c.env)
            if (name == std::string_view(e).substr(0, e.find('='))) return true;
        return false;
    };
    for (char** e = environ; e && *e; ++e)
        if (!dropped(*e)) env.emplace_back(*e);
    for (const auto& e : c.env)
        env.push_back(e);
    std::vector<char*> av, ev;
    for (const auto& s : c.argv)
        av.push_back(const_cast<char*>(s.c_str()));
    av.push_back(nullptr);
    for (const auto& s : env)
        ev.push_back(const_cast<char*>(s.c_str()));
    ev.push_back(nullptr);
    int err = ::open(c.stderr_path.empty() ? "/dev/null" : c.stderr_path.c_str(),
                     O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    pid_t pid = ::fork();
    if (pid < 0) fail(report_fd, "fork: " + std::string(std::strerror(errno)));
    if (pid == 0) {
        // What exec keeps must look like a fresh client's child: default dispositions
        // (we ignore SIGPIPE), nothing blocked.
        std::signal(SIGPIPE, SIG_DFL);
        std::signal(SIGINT, SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        ::sigprocmask(SIG_SETMASK, &none, nullptr);
        if (!c.drill->cwd.empty() && ::chdir(c.drill->cwd.c_str()) != 0) ::_exit(126);
        ::dup2(in->read.get(), 0);
        ::dup2(out->write.get(), 1);
        if (err >= 0) ::dup2(err, 2);
        ::execvpe(av[0], av.data(), ev.data());
        ::_exit(errno == ENOENT ? 127 : 126);
    }
    if (err >= 0) ::close(err);
    to_server = in->write.release();
    from_server = out->read.release();
    return pid;
}

class Conversation {
  public:
    Conversation(int to, int from, int report_fd, Clock::time_point deadline)
        : to_(to), from_(from), report_(report_fd), deadline_(deadline) {}

    void send(const nlohmann::json& msg) {
        if (!write_all(to_, msg.dump() + "\n", "server stdin"))
            fail(report_, "the server closed its stdin before the crash point");
    }

    // Reads until the response with `id` is complete; other lines (notifications, server
    // requests) are skipped.
    void await(int id, const char* what) {
        for (;;) {
            for (auto nl = buf_.find('\n'); nl != std::string::npos; nl = buf_.find('\n')) {
                std::string line = buf_.substr(0, nl);
                buf_.erase(0, nl + 1);
                auto j = nlohmann::json::parse(line, nullptr, false);
                if (j.is_object() && j.contains("id") && j["id"] == id && !j.contains("method")) {
                    if (j.contains("error"))
                        fail(report_, std::string(what) + " failed: " + j["error"].dump());
                    return;
                }
            }
            if (!fill()) fail(report_, std::string("no answer to ") + what);
        }
    }

    // Mid-response: reads until the first bytes of the answer to `id` are in, and stops there
    // (the rest stays in the pipes). Returns the bytes read and whether it was all of it.
    std::pair<size_t, bool> first_bytes_of(int id) {
        const std::string marker = "\"id\":" + std::to_string(id);
        for (;;) {
            for (auto nl = buf_.find('\n'); nl != std::string::npos; nl = buf_.find('\n')) {
                std::string line = buf_.substr(0, nl);
                buf_.erase(0, nl + 1);
                auto j = nlohmann::json::parse(line, nullptr, false);
                if (j.is_object() && j.contains("id") && j["id"] == id && !j.contains("method"))
                    return {line.size() + 1, true};
            }
            // A partial line that is the answer (the id is in its first bytes, as servers
            // write it) or any partial line once nothing else is pending.
            if (!buf_.empty() && buf_.find(marker) != std::string::npos)
                return {buf_.size(), false};
            if (!fill()) fail(report_, "no answer to the call");
        }
    }

  private:
    bool fill() {
        for (;;) {
            auto left =
                std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now());
            if (left.count() <= 0) return false;
            pollfd p{from_, POLLIN, 0};
            int r = ::poll(&p, 1, static_cast<int>(left.count()));
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) return false;
            char tmp[65536];
            ssize_t n = ::read(from_, tmp, sizeof tmp);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return false;
            buf_.append(tmp, static_cast<size_t>(n));
            return true;
        }
    }

    int to_, from_, report_;
    Clock::time_point deadline_;
    std::string buf_;
};

}  // namespace

void client_main(const ClientConfig& c, int report_fd) {
    // Die with the drill: a client left holding the server's stdin would keep it alive.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (::getppid() == 1) ::_exit(1);
    std::signal(SIGPIPE, SIG_IGN);
    std::signal(SIGINT, SIG_IGN);  // Ctrl-C is the drill's to handle, not ours

    const auto deadline = Clock::now() + c.drill->startup_timeout;
    int to = -1, from = -1;
    pid_t pid = spawn_server(c, to, from, report_fd);
    report(report_fd, "spawned " + std::to_string(pid));

    if (c.drill->crash_at == CrashAt::BeforeInit) {
        ::usleep(static_cast<useconds_t>(c.drill->settle.count()) * 1000);
        report(report_fd, "ready quiet 0");
        wait_for_the_kill();
    }
    Conversation conv(to, from, report_fd, deadline);
    conv.send(
        {{"jsonrpc", "2.0"},
         {"id", 1},
         {"method", "initialize"},
         {"params",
          {{"protocolVersion", "2025-06-18"},
           {"capabilities", nlohmann::json::object()},
           {"clientInfo", {{"name", "mcpwarden-drill"}, {"version", MCPW_VERSION_STRING}}}}}});
    conv.await(1, "initialize");
    conv.send({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});
    conv.send({{"jsonrpc", "2.0"}, {"id", 2}, {"method", "tools/list"}});
    conv.await(2, "tools/list");
    if (c.drill->crash_at == CrashAt::Idle) {
        report(report_fd, "ready idle 0");
        wait_for_the_kill();
    }

    nlohmann::json call{{"jsonrpc", "2.0"}, {"id", kCallId}};
    if (c.drill->tool.empty()) {
        call["method"] = "tools/list";
    } else {
        auto args = nlohmann::json::parse(c.drill->args_json, nullptr, false);
        if (args.is_discarded()) fail(report_fd, "--args is not JSON: " + c.drill->args_json);
        call["method"] = "tools/call";
        call["params"] = {{"name", c.drill->tool}, {"arguments", args}};
    }
    conv.send(call);
    if (c.drill->crash_at == CrashAt::InFlight) {
        report(report_fd, "ready sent 0");
        wait_for_the_kill();
    }
    auto [bytes, complete] = conv.first_bytes_of(kCallId);
    report(report_fd,
           std::string(complete ? "ready answered " : "ready partial ") + std::to_string(bytes));
    wait_for_the_kill();
}

}  // namespace warden::drill
