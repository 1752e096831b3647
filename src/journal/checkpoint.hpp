// Signed checkpoints: Ed25519 over (origin, seq, chain), kept in the database and as files
// beside it, one per checkpoint, named by seq.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "journal/crypto.hpp"
#include "sys/result.hpp"

namespace warden::journal {

struct CheckpointFile {
    std::string origin;
    int64_t seq = 0;
    Hash chain{};
    PublicKey public_key{};
    Signature signature{};
    int64_t ts = 0;
};

// The signed message: "mcpwarden-checkpoint-v1\n<origin>\n<seq>\n<chain hex>\n".
std::string checkpoint_message(std::string_view origin, int64_t seq, const Hash& chain);
// One line of canonical JSON:
// {"chain":HEX,"origin":…,"public_key":HEX,"seq":N,"signature":HEX,"ts":N}
std::string checkpoint_text(const CheckpointFile& f);
Result<CheckpointFile> parse_checkpoint(std::string_view text, std::string_view where);
bool checkpoint_signature_valid(const CheckpointFile& f);

// temp file + fsync + rename + fsync(dir); dir created 0700 if missing.
Status write_file_atomic(const std::string& path, std::string_view content, int mode);
Status write_checkpoint_file(const std::string& dir, const CheckpointFile& f);
// Every file in `dir` whose name is a decimal seq (a missing dir is empty), sorted by seq.
// Unparsable files come back as errors in `bad` (path, reason).
struct CheckpointDir {
    std::vector<std::pair<std::string, CheckpointFile>> files;
    std::vector<std::pair<std::string, std::string>> bad;
};
Result<CheckpointDir> read_checkpoint_dir(const std::string& dir);
// Keeps the newest `keep` files (the table keeps every checkpoint).
void prune_checkpoint_files(const std::string& dir, size_t keep);

}  // namespace warden::journal
