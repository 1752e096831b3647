// SHA-256 chain hashing and Ed25519 checkpoint keys, through OpenSSL libcrypto (EVP).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "sys/result.hpp"

namespace warden::journal {

using Hash = std::array<uint8_t, 32>;

std::string to_hex(const uint8_t* data, size_t n);
inline std::string to_hex(const Hash& h) {
    return to_hex(h.data(), h.size());
}
// Parses exactly `out_len` bytes of lowercase or uppercase hex.
bool from_hex(std::string_view hex, uint8_t* out, size_t out_len);

// leaf = SHA-256(0x00 ‖ body)
Hash leaf_hash(std::string_view body);
// chain = SHA-256(0x10 ‖ prev ‖ leaf); genesis prev is 32 zero bytes.
Hash chain_hash(const Hash& prev, const Hash& leaf);
Hash sha256(std::string_view data);

// One-shot SHA-256 that reuses its OpenSSL context: verify hashes millions of rows.
class Hasher {
  public:
    Hasher();
    ~Hasher();
    Hasher(const Hasher&) = delete;
    Hasher& operator=(const Hasher&) = delete;
    Hash leaf(std::string_view body);
    Hash chain(const Hash& prev, const Hash& leaf);

  private:
    Hash digest(std::string_view a, std::string_view b, std::string_view c);
    void* ctx_;
};

using PublicKey = std::array<uint8_t, 32>;
using Signature = std::array<uint8_t, 64>;

// An Ed25519 private key in memory (wiped by OpenSSL on free).
class SigningKey {
  public:
    // Loads the 32-byte raw seed (hex, one line) from `path`, creating it with mode 0600 if
    // absent (O_EXCL, O_NOFOLLOW). `created` tells whether this call made it.
    static Result<SigningKey> load_or_create(const std::string& path, bool* created = nullptr);
    static Result<SigningKey> load(const std::string& path);
    static Result<SigningKey> generate();  // in memory only (tests)

    SigningKey(SigningKey&&) noexcept;
    SigningKey& operator=(SigningKey&&) noexcept;
    ~SigningKey();

    const PublicKey& public_key() const { return pub_; }
    Result<Signature> sign(std::string_view message) const;
    // Writes the seed (hex) to `path` with O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600.
    Status save(const std::string& path) const;

  private:
    SigningKey() = default;
    static Result<SigningKey> from_seed(const uint8_t* seed);
    void* pkey_ = nullptr;  // EVP_PKEY*
    PublicKey pub_{};
};

bool verify_signature(const PublicKey& key, std::string_view message, const Signature& sig);

}  // namespace warden::journal
