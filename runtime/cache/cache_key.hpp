// The content address of a compiled kernel: SHA-256 over everything that changes the binary.
// No absolute path, user name or time belongs in these inputs; a cache keyed on them is useless
// on another machine or after a move.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shardjit {

struct CacheKeyInputs {
  std::uint32_t schema_version = 0;  // kCacheSchemaVersion
  std::string library_version;
  std::string source;         // the specialized source with everything it includes, flattened
  std::string spec_text;      // canonical KernelSpec text
  std::string nvrtc_version;  // e.g. "13.0"
  std::string arch;           // e.g. "sm_90a"
  std::vector<std::string> options;  // canonical compile options, in order
};

// 64 lower-case hex characters: the SHA-256 of
//   text("shardjit-kernel-key"), u64(schema_version), text(library_version), text(source),
//   text(spec_text), text(nvrtc_version), text(arch), u64(options.size()), text(option)...
// where u64(n) is n as 8 little-endian bytes and text(s) is u64(s.size()) followed by s. The
// length prefixes keep one field from running into the next. Changing this derivation changes
// every key: bump kCacheSchemaVersion with it (tests/cache/cache_key_test.cpp pins a key).
std::string cache_key(const CacheKeyInputs& inputs);

// True for the shape of a key: exactly 64 lower-case hex characters. Keys name files in the
// cache folder, so anything else (a '/', "..") is refused before it reaches a path.
bool is_cache_key(std::string_view text) noexcept;

}  // namespace shardjit
