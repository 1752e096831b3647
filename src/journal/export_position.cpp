#include "journal/export_position.hpp"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "journal/checkpoint.hpp"
#include "journal/journal.hpp"
#include "sys/fd.hpp"

namespace warden::journal {

std::string export_dir(const std::string& db) {
    Paths p = Paths::for_db(db);
    // The checkpoints' directory is named the same way: "checkpoints" or "NAME.checkpoints".
    constexpr std::string_view kCheckpoints = "checkpoints";
    std::string dir = p.checkpoints.substr(0, p.checkpoints.size() - kCheckpoints.size());
    return dir + "export";
}

bool valid_destination_name(std::string_view n) {
    if (n.empty() || n.size() > 64 || n.front() == '.') return false;
    return std::all_of(n.begin(), n.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
    });
}

namespace {

std::string position_file(const std::string& db, const std::string& destination) {
    return fmt::format("{}/{}.json", export_dir(db), destination);
}

Result<ExportPosition> parse_position(const std::string& text, const std::string& file) {
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (!j.is_object() || !j.contains("seq") || !j["seq"].is_number_integer())
        return Error::msg(fmt::format("export position {}: not a position file (no seq)", file));
    ExportPosition p;
    p.destination = j.value("destination", "");
    p.target = j.value("target", "");
    p.seq = j["seq"].get<int64_t>();
    p.hash = j.value("hash", "");
    p.acked_ns = j.value("acked_ns", int64_t{0});
    p.acked_ts = j.value("acked_ts", int64_t{0});
    p.last_error = j.value("last_error", "");
    p.last_error_ns = j.value("last_error_ns", int64_t{0});
    p.pid = j.value("pid", int64_t{0});
    if (j.contains("metrics") && j["metrics"].is_object()) p.metrics = j["metrics"].dump();
    return p;
}

}  // namespace

Result<ExportPosition> read_export_position(const std::string& db, const std::string& destination) {
    std::string file = position_file(db, destination);
    auto text = read_file(file);
    if (!text) {
        struct stat st;
        if (::lstat(file.c_str(), &st) != 0 && errno == ENOENT) {
            ExportPosition p;
            p.destination = destination;
            return p;
        }
        return text.error();
    }
    auto p = parse_position(*text, file);
    if (p) p->destination = destination;
    return p;
}

Result<std::vector<ExportPosition>> read_export_positions(const std::string& db) {
    std::vector<ExportPosition> out;
    std::string dir = export_dir(db);
    DIR* d = ::opendir(dir.c_str());
    if (!d) {
        if (errno == ENOENT) return out;
        return Error::sys("opendir", dir, errno);
    }
    std::vector<std::string> names;
    while (auto* e = ::readdir(d)) {
        std::string_view n = e->d_name;
        if (!n.ends_with(".json")) continue;
        n.remove_suffix(5);
        if (valid_destination_name(n)) names.emplace_back(n);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    for (const auto& n : names) {
        auto p = read_export_position(db, n);
        if (!p) return p.error();
        out.push_back(std::move(*p));
    }
    return out;
}

Status write_export_position(const std::string& db, const ExportPosition& p) {
    if (!valid_destination_name(p.destination))
        return Error::msg(fmt::format("export destination name '{}': use 1-64 of A-Z a-z 0-9 . _ -",
                                      p.destination));
    std::string dir = export_dir(db);
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return Error::sys("mkdir", dir, errno);
    nlohmann::json j{{"destination", p.destination},
                     {"target", p.target},
                     {"seq", p.seq},
                     {"hash", p.hash},
                     {"acked_ns", p.acked_ns},
                     {"acked_ts", p.acked_ts},
                     {"last_error", p.last_error},
                     {"last_error_ns", p.last_error_ns},
                     {"pid", p.pid}};
    if (!p.metrics.empty())
        if (auto m = nlohmann::json::parse(p.metrics, nullptr, false); m.is_object())
            j["metrics"] = std::move(m);
    return write_file_atomic(
        position_file(db, p.destination),
        j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n", 0600);
}

}  // namespace warden::journal
