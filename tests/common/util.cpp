#include "common/util.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <thread>

#include "sys/fd.hpp"

namespace warden::testing {

bool wait_until(const std::function<bool()>& pred, Millis timeout, Millis step) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        if (pred()) return true;
        if (std::chrono::steady_clock::now() >= deadline) return pred();
        std::this_thread::sleep_for(step);
    }
}

bool wait_for_file(const std::string& path, Millis timeout) {
    return wait_until(
        [&] {
            struct stat st {};
            return ::stat(path.c_str(), &st) == 0 && st.st_size > 0;
        },
        timeout);
}

namespace {
std::optional<long long> read_number_file(const std::string& path) {
    auto text = read_file(path);
    if (!text.ok() || text->empty()) return std::nullopt;
    char* end = nullptr;
    long long v = std::strtoll(text->c_str(), &end, 10);
    if (end == text->c_str()) return std::nullopt;
    return v;
}
}  // namespace

std::optional<uint16_t> read_port_file(const std::string& path) {
    auto v = read_number_file(path);
    if (!v || *v <= 0 || *v > 65535) return std::nullopt;
    return static_cast<uint16_t>(*v);
}

std::optional<pid_t> read_pid_file(const std::string& path) {
    auto v = read_number_file(path);
    if (!v || *v <= 0) return std::nullopt;
    return static_cast<pid_t>(*v);
}

bool port_bindable(uint16_t port) {
    Fd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!s) return false;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    return ::bind(s.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
}

std::string unique_tag() {
    static std::atomic<unsigned> counter{0};
    std::random_device rd;
    return "t" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" +
           std::to_string(rd());
}

TempDir::TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/warden-test-XXXXXX";
    if (::mkdtemp(tmpl.data())) path_ = tmpl;
}

TempDir::TempDir(TempDir&& o) noexcept : path_(std::move(o.path_)) {
    o.path_.clear();
}

TempDir::~TempDir() {
    if (path_.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
}

}  // namespace warden::testing
