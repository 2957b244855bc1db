#include "runtime/cache/entry_format.hpp"

#include <array>
#include <cstring>

#include "runtime/cache/cache_key.hpp"
#include "runtime/cache/sha256.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

constexpr std::size_t kSchemaOffset = 8;
constexpr std::size_t kFlagsOffset = 12;
constexpr std::size_t kKeyOffset = 16;
constexpr std::size_t kKeyBytes = 64;
constexpr std::size_t kLengthsOffset = 80;
constexpr std::size_t kFieldCount = 4;  // spec_text, arch, lowered_name, cubin
constexpr std::size_t kChecksumOffset = 112;
static_assert(kLengthsOffset == kKeyOffset + kKeyBytes);
static_assert(kChecksumOffset == kLengthsOffset + 8 * kFieldCount);
static_assert(kCacheEntryHeaderBytes == kChecksumOffset + kSha256Bytes);

void put_le(std::string& out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

std::uint64_t get_le(std::string_view bytes, std::size_t offset, int width) {
  std::uint64_t value = 0;
  for (int i = 0; i < width; ++i) {
    value |= std::uint64_t{static_cast<unsigned char>(bytes[offset + i])} << (8 * i);
  }
  return value;
}

Sha256Digest checksum(std::string_view header_without_checksum, std::string_view payload) {
  Sha256 hasher;
  hasher.update(header_without_checksum);
  hasher.update(payload);
  return hasher.digest();
}

[[noreturn]] void corrupt(const std::string& reason) {
  throw Error(ErrorCode::kCacheError, "bad cache entry: " + reason);
}

// The field lengths the header announces; refuses lengths that overflow or disagree with the
// file's size.
void read_lengths(std::string_view bytes, std::array<std::uint64_t, kFieldCount>& lengths) {
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < kFieldCount; ++i) {
    lengths[i] = get_le(bytes, kLengthsOffset + 8 * i, 8);
    if (lengths[i] > UINT64_MAX - total) corrupt("field lengths overflow");
    total += lengths[i];
  }
  std::uint64_t actual = bytes.size() - kCacheEntryHeaderBytes;
  if (total > actual) {
    corrupt("truncated: the header announces " + std::to_string(total) +
            " payload bytes, the file holds " + std::to_string(actual));
  }
  if (total < actual) {
    corrupt("sizes inconsistent: the header announces " + std::to_string(total) +
            " payload bytes, the file holds " + std::to_string(actual));
  }
}

}  // namespace

std::string encode_entry(const CacheEntry& entry) {
  if (!is_cache_key(entry.key)) {
    throw Error(ErrorCode::kInvalidArgument,
                "cache entry key '" + entry.key +
                    "' is not a cache key; expected 64 lower-case hex characters");
  }
  const std::string* fields[kFieldCount] = {&entry.spec_text, &entry.arch, &entry.lowered_name,
                                            &entry.cubin};
  std::string out;
  std::size_t payload_size = 0;
  for (const std::string* field : fields) payload_size += field->size();
  out.reserve(kCacheEntryHeaderBytes + payload_size);

  out.append(kCacheEntryMagic);
  put_le(out, kCacheSchemaVersion, 4);
  put_le(out, 0, 4);  // flags
  out.append(entry.key);
  for (const std::string* field : fields) put_le(out, field->size(), 8);
  out.append(kSha256Bytes, '\0');  // the checksum, filled in below
  for (const std::string* field : fields) out.append(*field);

  std::string_view view(out);
  Sha256Digest sum = checksum(view.substr(0, kChecksumOffset), view.substr(kCacheEntryHeaderBytes));
  std::memcpy(out.data() + kChecksumOffset, sum.data(), sum.size());
  return out;
}

CacheEntry decode_entry(std::string_view bytes) {
  if (!bytes.starts_with(kCacheEntryMagic)) {
    if (kCacheEntryMagic.starts_with(bytes)) {
      corrupt("truncated: " + std::to_string(bytes.size()) + " bytes, shorter than the header");
    }
    corrupt("wrong magic; expected a file starting with \"SJITKRNL\"");
  }
  if (bytes.size() < kCacheEntryHeaderBytes) {
    corrupt("truncated: " + std::to_string(bytes.size()) + " bytes, shorter than the " +
            std::to_string(kCacheEntryHeaderBytes) + "-byte header");
  }
  auto schema = static_cast<std::uint32_t>(get_le(bytes, kSchemaOffset, 4));
  if (schema != kCacheSchemaVersion) {
    corrupt("schema version " + std::to_string(schema) + "; this build reads schema " +
            std::to_string(kCacheSchemaVersion));
  }
  auto flags = static_cast<std::uint32_t>(get_le(bytes, kFlagsOffset, 4));
  if (flags != 0) corrupt("unknown flags " + std::to_string(flags) + "; expected 0");

  std::array<std::uint64_t, kFieldCount> lengths{};
  read_lengths(bytes, lengths);

  std::string_view payload = bytes.substr(kCacheEntryHeaderBytes);
  Sha256Digest expected = checksum(bytes.substr(0, kChecksumOffset), payload);
  if (std::memcmp(expected.data(), bytes.data() + kChecksumOffset, kSha256Bytes) != 0) {
    corrupt("checksum mismatch: the file's contents changed after it was written");
  }

  CacheEntry entry;
  entry.key = std::string(bytes.substr(kKeyOffset, kKeyBytes));
  if (!is_cache_key(entry.key)) corrupt("malformed key in the header");
  std::string* fields[kFieldCount] = {&entry.spec_text, &entry.arch, &entry.lowered_name,
                                      &entry.cubin};
  std::size_t offset = 0;
  for (std::size_t i = 0; i < kFieldCount; ++i) {
    *fields[i] = std::string(payload.substr(offset, lengths[i]));
    offset += lengths[i];
  }
  return entry;
}

}  // namespace shardjit
