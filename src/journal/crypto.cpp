#include "journal/crypto.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <memory>

#include <fmt/format.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "sys/fd.hpp"

namespace warden::journal {

std::string to_hex(const uint8_t* data, size_t n) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string out(n * 2, '0');
    for (size_t i = 0; i < n; ++i) {
        out[2 * i] = kDigits[data[i] >> 4];
        out[2 * i + 1] = kDigits[data[i] & 15];
    }
    return out;
}

bool from_hex(std::string_view hex, uint8_t* out, size_t out_len) {
    if (hex.size() != out_len * 2) return false;
    auto nib = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    };
    for (size_t i = 0; i < out_len; ++i) {
        int hi = nib(hex[2 * i]), lo = nib(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) return false;
        out[i] = static_cast<uint8_t>(hi << 4 | lo);
    }
    return true;
}

namespace {
// EVP_sha256() only names the algorithm: OpenSSL 3 looks its implementation up in the
// provider (a fetch, under a lock) at every EVP_DigestInit_ex it is given to, every record
// and every request's argument digest. Fetched once here, it is not.
const EVP_MD* sha256_md() {
    static EVP_MD* const fetched = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    return fetched ? fetched : EVP_sha256();
}

Hash digest_in(EVP_MD_CTX* ctx, std::string_view a, std::string_view b, std::string_view c) {
    Hash h{};
    unsigned int len = 0;
    EVP_DigestInit_ex(ctx, sha256_md(), nullptr);
    EVP_DigestUpdate(ctx, a.data(), a.size());
    if (!b.empty()) EVP_DigestUpdate(ctx, b.data(), b.size());
    if (!c.empty()) EVP_DigestUpdate(ctx, c.data(), c.size());
    EVP_DigestFinal_ex(ctx, h.data(), &len);
    return h;
}
}  // namespace

Hasher::Hasher() : ctx_(EVP_MD_CTX_new()) {}
Hasher::~Hasher() {
    EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_));
}

Hash Hasher::digest(std::string_view a, std::string_view b, std::string_view c) {
    return digest_in(static_cast<EVP_MD_CTX*>(ctx_), a, b, c);
}

Hash Hasher::leaf(std::string_view body) {
    static constexpr char kLeafTag = 0x00;
    return digest(std::string_view(&kLeafTag, 1), body, {});
}

Hash Hasher::chain(const Hash& prev, const Hash& leaf) {
    static constexpr char kNodeTag = 0x10;
    return digest(std::string_view(&kNodeTag, 1),
                  std::string_view(reinterpret_cast<const char*>(prev.data()), prev.size()),
                  std::string_view(reinterpret_cast<const char*>(leaf.data()), leaf.size()));
}

Hash leaf_hash(std::string_view body) {
    thread_local Hasher h;
    return h.leaf(body);
}
Hash chain_hash(const Hash& prev, const Hash& leaf) {
    thread_local Hasher h;
    return h.chain(prev, leaf);
}
Hash sha256(std::string_view data) {
    // Its context reused, as Hasher's: this is a request's argument digest, on every call.
    thread_local std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(),
                                                                             &EVP_MD_CTX_free);
    return digest_in(ctx.get(), data, {}, {});
}

SigningKey::SigningKey(SigningKey&& o) noexcept
    : pkey_(std::exchange(o.pkey_, nullptr)), pub_(o.pub_) {}
SigningKey& SigningKey::operator=(SigningKey&& o) noexcept {
    if (this != &o) {
        EVP_PKEY_free(static_cast<EVP_PKEY*>(pkey_));
        pkey_ = std::exchange(o.pkey_, nullptr);
        pub_ = o.pub_;
    }
    return *this;
}
SigningKey::~SigningKey() {
    EVP_PKEY_free(static_cast<EVP_PKEY*>(pkey_));
}

Result<SigningKey> SigningKey::generate() {
    uint8_t seed[32];
    if (RAND_bytes(seed, sizeof seed) != 1)
        return Error::msg("RAND_bytes: no randomness for the journal key");
    auto k = from_seed(seed);
    OPENSSL_cleanse(seed, sizeof seed);
    return k;
}

Result<SigningKey> SigningKey::load(const std::string& path) {
    auto fd = open_file(path, O_RDONLY | O_NOFOLLOW);
    if (!fd) return Error{fmt::format("journal key: {}", fd.error().message), fd.error().code};
    auto text = read_all(fd->get(), path);
    if (!text) return text.error();
    std::string_view t = *text;
    while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' '))
        t.remove_suffix(1);
    uint8_t seed[32];
    if (!from_hex(t, seed, sizeof seed))
        return Error::msg(fmt::format("journal key {}: not a 64-hex-digit Ed25519 seed", path));
    auto k = from_seed(seed);
    OPENSSL_cleanse(seed, sizeof seed);
    return k;
}

Status SigningKey::save(const std::string& path) const {
    uint8_t seed[32];
    size_t len = sizeof seed;
    if (EVP_PKEY_get_raw_private_key(static_cast<EVP_PKEY*>(pkey_), seed, &len) != 1)
        return Error::msg("EVP_PKEY_get_raw_private_key: cannot export the journal key");
    std::string text = to_hex(seed, sizeof seed) + "\n";
    OPENSSL_cleanse(seed, sizeof seed);
    // Written whole to a file of our own, then linked into place: the key appears complete or
    // not at all. Created in place, a writer killed between create and write (a relay
    // SIGKILLed on the journal's first use) left an empty key that made the journal unusable
    // for ever, and a second writer could read it half-written.
    std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
    (void)::unlink(tmp.c_str());  // a leftover of a killed writer that had our pid
    auto fd = open_file(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
    if (!fd)
        return Error{fmt::format("cannot create journal key: {}", fd.error().message),
                     fd.error().code};
    auto st = write_all(fd->get(), text, tmp);
    OPENSSL_cleanse(text.data(), text.size());
    if (st && ::fsync(fd->get()) != 0) st = Error::sys("fsync", tmp, errno);
    if (st && ::link(tmp.c_str(), path.c_str()) != 0)
        st = Error{fmt::format("cannot create journal key {}: {}", path, std::strerror(errno)),
                   errno};
    (void)::unlink(tmp.c_str());
    return st;
}

Result<SigningKey> SigningKey::load_or_create(const std::string& path, bool* created) {
    if (created) *created = false;
    auto k = load(path);
    if (k.ok() || k.error().code != ENOENT) return k;
    auto fresh = generate();
    if (!fresh) return fresh;
    auto st = fresh->save(path);
    if (!st) {
        if (st.error().code == EEXIST) return load(path);  // another writer made it first
        return st.error();
    }
    if (created) *created = true;
    return fresh;
}

Result<Signature> SigningKey::sign(std::string_view message) const {
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    Signature sig{};
    size_t len = sig.size();
    bool ok =
        ctx &&
        EVP_DigestSignInit(ctx, nullptr, nullptr, nullptr, static_cast<EVP_PKEY*>(pkey_)) == 1 &&
        EVP_DigestSign(ctx, sig.data(), &len,
                       reinterpret_cast<const unsigned char*>(message.data()), message.size()) == 1;
    EVP_MD_CTX_free(ctx);
    if (!ok || len != sig.size()) return Error::msg("EVP_DigestSign: Ed25519 signing failed");
    return sig;
}

bool verify_signature(const PublicKey& key, std::string_view message, const Signature& sig) {
    EVP_PKEY* pkey = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, key.data(), key.size());
    if (!pkey) return false;
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    bool ok = ctx && EVP_DigestVerifyInit(ctx, nullptr, nullptr, nullptr, pkey) == 1 &&
              EVP_DigestVerify(ctx, sig.data(), sig.size(),
                               reinterpret_cast<const unsigned char*>(message.data()),
                               message.size()) == 1;
    EVP_MD_CTX_free(ctx);
    EVP_PKEY_free(pkey);
    return ok;
}

Result<SigningKey> SigningKey::from_seed(const uint8_t* seed) {
    EVP_PKEY* pkey = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, seed, 32);
    if (!pkey)
        return Error::msg("EVP_PKEY_new_raw_private_key: cannot load the Ed25519 journal key");
    SigningKey k;
    k.pkey_ = pkey;
    size_t len = k.pub_.size();
    if (EVP_PKEY_get_raw_public_key(pkey, k.pub_.data(), &len) != 1 || len != k.pub_.size())
        return Error::msg("EVP_PKEY_get_raw_public_key: cannot derive the journal public key");
    return k;
}

}  // namespace warden::journal
