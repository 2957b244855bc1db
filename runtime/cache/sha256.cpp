#include "runtime/cache/sha256.hpp"

#include <openssl/evp.h>

#include "shardjit/error.hpp"

namespace shardjit {
namespace {

void check_openssl(int status, const char* call) {
  if (status != 1) {
    throw Error(ErrorCode::kInternal, std::string("OpenSSL call ") + call + " failed for SHA-256");
  }
}

}  // namespace

void Sha256::ContextDeleter::operator()(evp_md_ctx_st* context) const noexcept {
  EVP_MD_CTX_free(context);
}

Sha256::Sha256() : context_(EVP_MD_CTX_new()) {
  if (!context_) throw Error(ErrorCode::kInternal, "OpenSSL call EVP_MD_CTX_new failed");
  check_openssl(EVP_DigestInit_ex(context_.get(), EVP_sha256(), nullptr), "EVP_DigestInit_ex");
}

Sha256::~Sha256() = default;
Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;

void Sha256::update(std::string_view data) {
  if (!context_ || finished_) {
    throw Error(ErrorCode::kInternal, "Sha256::update called after the digest was taken");
  }
  if (data.empty()) return;
  check_openssl(EVP_DigestUpdate(context_.get(), data.data(), data.size()), "EVP_DigestUpdate");
}

Sha256Digest Sha256::digest() {
  if (!context_ || finished_) {
    throw Error(ErrorCode::kInternal, "Sha256::digest called twice on one hasher");
  }
  Sha256Digest out{};
  unsigned int length = 0;
  check_openssl(EVP_DigestFinal_ex(context_.get(), out.data(), &length), "EVP_DigestFinal_ex");
  finished_ = true;
  if (length != kSha256Bytes) {
    throw Error(ErrorCode::kInternal, "EVP_DigestFinal_ex returned " + std::to_string(length) +
                                          " bytes for SHA-256; expected 32");
  }
  return out;
}

std::string Sha256::hex_digest() {
  Sha256Digest raw = digest();
  return to_hex(std::string_view(reinterpret_cast<const char*>(raw.data()), raw.size()));
}

std::string sha256_hex(std::string_view data) {
  Sha256 hasher;
  hasher.update(data);
  return hasher.hex_digest();
}

std::string to_hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) {
    auto byte = static_cast<unsigned char>(c);
    out.push_back(kDigits[byte >> 4]);
    out.push_back(kDigits[byte & 0x0f]);
  }
  return out;
}

}  // namespace shardjit
