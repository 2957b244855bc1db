#include "runtime/cache/cache_key.hpp"

#include "runtime/cache/sha256.hpp"

namespace shardjit {
namespace {

// Fixed-width little-endian, so that the key does not depend on the host's byte order.
void hash_u64(Sha256& hasher, std::uint64_t value) {
  char bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((value >> (8 * i)) & 0xff);
  hasher.update(std::string_view(bytes, sizeof bytes));
}

void hash_field(Sha256& hasher, std::string_view value) {
  hash_u64(hasher, value.size());
  hasher.update(value);
}

}  // namespace

std::string cache_key(const CacheKeyInputs& inputs) {
  Sha256 hasher;
  hash_field(hasher, "shardjit-kernel-key");  // domain tag: these digests name cache entries
  hash_u64(hasher, inputs.schema_version);
  hash_field(hasher, inputs.library_version);
  hash_field(hasher, inputs.source);
  hash_field(hasher, inputs.spec_text);
  hash_field(hasher, inputs.nvrtc_version);
  hash_field(hasher, inputs.arch);
  hash_u64(hasher, inputs.options.size());
  for (const std::string& option : inputs.options) hash_field(hasher, option);
  return hasher.hex_digest();
}

bool is_cache_key(std::string_view text) noexcept {
  if (text.size() != 64) return false;
  for (char c : text) {
    bool digit = c >= '0' && c <= '9';
    bool lower_hex = c >= 'a' && c <= 'f';
    if (!digit && !lower_hex) return false;
  }
  return true;
}

}  // namespace shardjit
