#include "journal/checkpoint.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sys/fd.hpp"

namespace warden::journal {

std::string checkpoint_message(std::string_view origin, int64_t seq, const Hash& chain) {
    return fmt::format("mcpwarden-checkpoint-v1\n{}\n{}\n{}\n", origin, seq, to_hex(chain));
}

std::string checkpoint_text(const CheckpointFile& f) {
    nlohmann::json j{{"chain", to_hex(f.chain)},
                     {"origin", f.origin},
                     {"public_key", to_hex(f.public_key.data(), f.public_key.size())},
                     {"seq", f.seq},
                     {"signature", to_hex(f.signature.data(), f.signature.size())},
                     {"ts", f.ts}};
    return j.dump() + "\n";
}

Result<CheckpointFile> parse_checkpoint(std::string_view text, std::string_view where) {
    auto j = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
    auto bad = [&](std::string_view why) {
        return Error::msg(fmt::format("checkpoint {}: {}", where, why));
    };
    if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
    CheckpointFile f;
    try {
        f.origin = j.at("origin").get<std::string>();
        f.seq = j.at("seq").get<int64_t>();
        f.ts = j.value("ts", int64_t{0});
        if (!from_hex(j.at("chain").get<std::string>(), f.chain.data(), f.chain.size()))
            return bad("chain is not 64 hex digits");
        if (!from_hex(j.at("public_key").get<std::string>(), f.public_key.data(),
                      f.public_key.size()))
            return bad("public_key is not 64 hex digits");
        if (!from_hex(j.at("signature").get<std::string>(), f.signature.data(), f.signature.size()))
            return bad("signature is not 128 hex digits");
    } catch (const nlohmann::json::exception& e) {
        return bad(e.what());
    }
    return f;
}

bool checkpoint_signature_valid(const CheckpointFile& f) {
    return verify_signature(f.public_key, checkpoint_message(f.origin, f.seq, f.chain),
                            f.signature);
}

Status write_file_atomic(const std::string& path, std::string_view content, int mode) {
    auto slash = path.find_last_of('/');
    std::string dir = slash == std::string::npos ? "." : path.substr(0, slash ? slash : 1);
    std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
    {
        auto fd = open_file(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, mode);
        if (!fd) return fd.error();
        if (auto st = write_all(fd->get(), content, tmp); !st) {
            ::unlink(tmp.c_str());
            return st;
        }
        if (::fsync(fd->get()) != 0) {
            int err = errno;
            ::unlink(tmp.c_str());
            return Error::sys("fsync", tmp, err);
        }
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        int err = errno;
        ::unlink(tmp.c_str());
        return Error::sys("rename", path, err);
    }
    auto dfd = open_file(dir, O_RDONLY | O_DIRECTORY);
    if (!dfd) return dfd.error();
    if (::fsync(dfd->get()) != 0) return Error::sys("fsync", dir, errno);
    return {};
}

Status write_checkpoint_file(const std::string& dir, const CheckpointFile& f) {
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return Error::sys("mkdir", dir, errno);
    return write_file_atomic(fmt::format("{}/{}", dir, f.seq), checkpoint_text(f), 0600);
}

namespace {
bool decimal_name(const char* n) {
    if (!*n) return false;
    for (const char* p = n; *p; ++p)
        if (*p < '0' || *p > '9') return false;
    return std::strlen(n) < 19;
}

Result<std::vector<int64_t>> list_seqs(const std::string& dir) {
    std::vector<int64_t> seqs;
    DIR* d = ::opendir(dir.c_str());
    if (!d) {
        if (errno == ENOENT) return seqs;
        return Error::sys("opendir", dir, errno);
    }
    while (auto* ent = ::readdir(d))
        if (decimal_name(ent->d_name)) seqs.push_back(std::stoll(ent->d_name));
    ::closedir(d);
    std::sort(seqs.begin(), seqs.end());
    return seqs;
}
}  // namespace

Result<CheckpointDir> read_checkpoint_dir(const std::string& dir) {
    auto seqs = list_seqs(dir);
    if (!seqs) return seqs.error();
    CheckpointDir out;
    for (int64_t s : *seqs) {
        std::string path = fmt::format("{}/{}", dir, s);
        auto fd = open_file(path, O_RDONLY | O_NOFOLLOW);
        if (!fd) {
            out.bad.emplace_back(path, fd.error().message);
            continue;
        }
        auto text = read_all(fd->get(), path);
        if (!text) {
            out.bad.emplace_back(path, text.error().message);
            continue;
        }
        auto f = parse_checkpoint(*text, path);
        if (!f) {
            out.bad.emplace_back(path, f.error().message);
            continue;
        }
        if (f->seq != s) {
            out.bad.emplace_back(path,
                                 fmt::format("file name says seq {}, content says {}", s, f->seq));
            continue;
        }
        out.files.emplace_back(path, std::move(*f));
    }
    return out;
}

void prune_checkpoint_files(const std::string& dir, size_t keep) {
    auto seqs = list_seqs(dir);
    if (!seqs || seqs->size() <= keep) return;
    for (size_t i = 0; i + keep < seqs->size(); ++i)
        ::unlink(fmt::format("{}/{}", dir, (*seqs)[i]).c_str());
}

}  // namespace warden::journal
