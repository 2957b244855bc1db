// The file format of one disk cache entry (kernels/<key>.sjk). Versioned: any change to the
// layout below, or to how cache keys are derived, bumps kCacheSchemaVersion; a golden-file test
// (tests/cache/entry_format_test.cpp) pins the bytes.
//
// Layout, schema 1. Integers are unsigned little-endian; offsets and sizes in bytes.
//
//   offset  size  field
//        0     8  magic, the ASCII bytes "SJITKRNL"
//        8     4  schema version (u32), = kCacheSchemaVersion
//       12     4  flags (u32), reserved: must be 0
//       16    64  key: the cache key, 64 lower-case hex characters
//       80     8  spec_text length (u64)
//       88     8  arch length (u64)
//       96     8  lowered_name length (u64)
//      104     8  cubin length (u64)
//      112    32  checksum: SHA-256 of bytes [0, 112) followed by the payload
//      144     -  payload: spec_text, arch, lowered_name, cubin, back to back, no padding
//
// The file is exactly 144 + the four lengths long. The checksum covers the header too (all but
// itself), so any change to any byte of a file is detected.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace shardjit {

inline constexpr std::uint32_t kCacheSchemaVersion = 1;
inline constexpr std::string_view kCacheEntryMagic = "SJITKRNL";
inline constexpr std::size_t kCacheEntryHeaderBytes = 144;
// No kernel's entry comes near it (a CUBIN is KiBs to a few MiB); a larger file is not an entry.
inline constexpr std::uint64_t kMaxCacheEntryBytes = std::uint64_t{256} << 20;

struct CacheEntry {
  std::string key;           // cache_key() of the inputs that made it
  std::string spec_text;     // canonical KernelSpec text, for listings and diagnostics
  std::string arch;          // e.g. "sm_90a"
  std::string lowered_name;  // the kernel's mangled name inside the CUBIN
  std::string cubin;         // the binary itself

  bool operator==(const CacheEntry&) const = default;
};

// Throws Error(kInvalidArgument) when entry.key is not a cache key (see is_cache_key).
std::string encode_entry(const CacheEntry& entry);

// Throws Error(kCacheError, reason) on a wrong magic, another schema version, unknown flags,
// a truncated or over-long file, field sizes inconsistent with the file, a checksum mismatch or
// a malformed key.
CacheEntry decode_entry(std::string_view bytes);

}  // namespace shardjit
