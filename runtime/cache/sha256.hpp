// SHA-256 over OpenSSL's EVP interface: the digest behind cache keys and entry checksums.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

struct evp_md_ctx_st;  // OpenSSL's EVP_MD_CTX, kept out of this header

namespace shardjit {

inline constexpr std::size_t kSha256Bytes = 32;
using Sha256Digest = std::array<unsigned char, kSha256Bytes>;

// Incremental SHA-256. Feed bytes with update(), then take the digest once; a hasher that has
// produced its digest cannot be fed again (Error(kInternal): that is a bug in the caller).
// Every OpenSSL failure is reported as Error(kInternal) naming the call.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(std::string_view data);
  Sha256Digest digest();     // the 32 raw bytes
  std::string hex_digest();  // 64 lower-case hex characters

 private:
  struct ContextDeleter {
    void operator()(evp_md_ctx_st* context) const noexcept;
  };
  std::unique_ptr<evp_md_ctx_st, ContextDeleter> context_;
  bool finished_ = false;
};

// One-shot SHA-256 of data as 64 lower-case hex characters.
std::string sha256_hex(std::string_view data);

// Lower-case hex of a byte string.
std::string to_hex(std::string_view bytes);

}  // namespace shardjit
