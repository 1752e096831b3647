// Durations ("5m", "1h30m") and the reap configuration file (reap.toml / reap.json).
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>
#include <nlohmann/json.hpp>

#include "reap/reap.hpp"
#include "sys/fd.hpp"

namespace warden::reap {

Result<std::chrono::milliseconds> parse_duration(std::string_view text) {
    auto bad = [&](std::string_view why) {
        return Error::msg(
            fmt::format("duration '{}': {} (e.g. 500ms, 30s, 5m, 2h, 1d, 1h30m)", text, why));
    };
    if (text.empty()) return bad("empty");
    int64_t total = 0;
    size_t i = 0;
    while (i < text.size()) {
        if (!std::isdigit(static_cast<unsigned char>(text[i]))) return bad("expected a number");
        int64_t n = 0;
        while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
            n = n * 10 + (text[i] - '0');
            if (n > 1'000'000'000) return bad("too large");
            ++i;
        }
        size_t u = i;
        while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i])))
            ++i;
        std::string_view unit = text.substr(u, i - u);
        int64_t ms = 0;
        if (unit == "ms")
            ms = 1;
        else if (unit == "s")
            ms = 1000;
        else if (unit == "m")
            ms = 60'000;
        else if (unit == "h")
            ms = 3'600'000;
        else if (unit == "d")
            ms = 86'400'000;
        else if (unit.empty())
            return bad("missing unit");
        else
            return bad(fmt::format("unknown unit '{}'", unit));
        total += n * ms;
    }
    return std::chrono::milliseconds(total);
}

std::string format_duration(std::chrono::milliseconds d) {
    int64_t ms = d.count();
    if (ms == 0) return "0s";
    if (ms % 1000) return fmt::format("{}ms", ms);
    std::string out;
    int64_t s = ms / 1000;
    for (auto [unit, n] : {std::pair{"d", 86400}, {"h", 3600}, {"m", 60}, {"s", 1}}) {
        if (s >= n) {
            out += fmt::format("{}{}", s / n, unit);
            s %= n;
        }
    }
    return out;
}

namespace {

std::string config_dir() {
    if (const char* x = std::getenv("XDG_CONFIG_HOME"); x && *x)
        return std::string(x) + "/mcpwarden";
    if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.config/mcpwarden";
    return {};
}

Status set_timeout(Config& c, const std::string& file, const std::string& text) {
    auto d = parse_duration(text);
    if (!d) return Error::msg(fmt::format("{}: revoke_timeout: {}", file, d.error().message));
    c.revoke_timeout = *d;
    return {};
}

}  // namespace

Result<Config> load_config() {
    Config c;
    std::string dir = config_dir();
    if (dir.empty()) return c;
    const std::string toml_path = dir + "/reap.toml", json_path = dir + "/reap.json";
    if (auto text = read_file(toml_path); text) {
        c.source = toml_path;
        toml::table root;
        try {
            root = toml::parse(*text);
        } catch (const toml::parse_error& err) {
            return Error::msg(fmt::format("{}: {}", toml_path, err.description()));
        }
        if (auto v = root["revoke_cmd"]; v) {
            if (!v.is_string()) return Error::msg(toml_path + ": revoke_cmd must be a string");
            c.revoke_cmd = **v.as_string();
        }
        if (auto v = root["revoke_timeout"]; v) {
            if (!v.is_string())
                return Error::msg(toml_path + ": revoke_timeout must be a string like \"30s\"");
            if (auto st = set_timeout(c, toml_path, **v.as_string()); !st) return st.error();
        }
        return c;
    }
    if (auto text = read_file(json_path); text) {
        c.source = json_path;
        auto j = nlohmann::json::parse(*text, nullptr, false);
        if (j.is_discarded() || !j.is_object())
            return Error::msg(json_path + ": not a JSON object");
        if (auto it = j.find("revoke_cmd"); it != j.end()) {
            if (!it->is_string()) return Error::msg(json_path + ": revoke_cmd must be a string");
            c.revoke_cmd = it->get<std::string>();
        }
        if (auto it = j.find("revoke_timeout"); it != j.end()) {
            if (!it->is_string())
                return Error::msg(json_path + ": revoke_timeout must be a string like \"30s\"");
            if (auto st = set_timeout(c, json_path, it->get<std::string>()); !st) return st.error();
        }
    }
    return c;
}

}  // namespace warden::reap
