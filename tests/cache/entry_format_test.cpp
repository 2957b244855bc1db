#include "runtime/cache/entry_format.hpp"

#include <string>

#include <gtest/gtest.h>

#include "runtime/cache/sha256.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

CacheEntry fixed_entry() {
  CacheEntry entry;
  entry.key = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  entry.spec_text = "linear_logp_fwd{hidden=4096,vocab_local=16032,dtype=bf16,tp=8}";
  entry.arch = "sm_90a";
  entry.lowered_name = "_Z15linear_logp_fwdILi4096ELi16032EEvv";
  entry.cubin = std::string(
                    "\x7f"
                    "ELF\x02\x01\x01\x00\x00\x00",
                    10) +
                std::string(6, '\0') + "cubin";
  return entry;
}

// The reason decode_entry gives for bytes, or "" when it accepts them.
std::string decode_error(std::string_view bytes) {
  try {
    decode_entry(bytes);
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kCacheError);
    return error.what();
  }
  return "";
}

TEST(EntryFormat, RoundTrip) {
  CacheEntry entry = fixed_entry();
  EXPECT_EQ(decode_entry(encode_entry(entry)), entry);
}

TEST(EntryFormat, RoundTripWithEmptyFieldsAndLargeCubin) {
  CacheEntry entry = fixed_entry();
  entry.spec_text.clear();
  entry.lowered_name.clear();
  entry.cubin.assign(1 << 20, '\0');
  for (std::size_t i = 0; i < entry.cubin.size(); i += 7) entry.cubin[i] = static_cast<char>(i);
  EXPECT_EQ(decode_entry(encode_entry(entry)), entry);
}

// Pins the on-disk layout. If this digest changes, files written by earlier builds no longer
// read the same way: bump kCacheSchemaVersion with the change, then update the pinned digest.
TEST(EntryFormat, GoldenBytes) {
  std::string bytes = encode_entry(fixed_entry());
  const CacheEntry entry = fixed_entry();
  EXPECT_EQ(bytes.size(), kCacheEntryHeaderBytes + entry.spec_text.size() + entry.arch.size() +
                              entry.lowered_name.size() + entry.cubin.size());
  EXPECT_EQ(bytes.substr(0, 8), "SJITKRNL");
  EXPECT_EQ(bytes.substr(8, 4), std::string("\x01\x00\x00\x00", 4));
  EXPECT_EQ(bytes.substr(16, 64), entry.key);
  EXPECT_EQ(bytes.size(), 271u);
  EXPECT_EQ(sha256_hex(bytes), "3d7f82498f1465bd9bd19c694c22c1da1d034e32b297321188fcb12c52101a4e");
}

TEST(EntryFormat, EveryTruncationIsRejected) {
  std::string bytes = encode_entry(fixed_entry());
  for (std::size_t size = 0; size < bytes.size(); ++size) {
    EXPECT_NE(decode_error(std::string_view(bytes).substr(0, size)), "")
        << "accepted " << size << " bytes";
  }
}

TEST(EntryFormat, TrailingBytesAreRejected) {
  std::string bytes = encode_entry(fixed_entry()) + "x";
  EXPECT_NE(decode_error(bytes).find("sizes inconsistent"), std::string::npos)
      << decode_error(bytes);
}

TEST(EntryFormat, EverySingleBitFlipIsDetected) {
  CacheEntry entry = fixed_entry();
  entry.cubin = "tiny";  // keeps the loop short: every bit of the file is flipped once
  const std::string bytes = encode_entry(entry);
  for (std::size_t bit = 0; bit < bytes.size() * 8; ++bit) {
    std::string flipped = bytes;
    flipped[bit / 8] = static_cast<char>(flipped[bit / 8] ^ (1 << (bit % 8)));
    ASSERT_NE(decode_error(flipped), "")
        << "flip of bit " << bit % 8 << " of byte " << bit / 8 << " went unnoticed";
  }
}

TEST(EntryFormat, WrongMagicIsRejected) {
  std::string bytes = encode_entry(fixed_entry());
  bytes[3] = 'X';
  EXPECT_NE(decode_error(bytes).find("wrong magic"), std::string::npos) << decode_error(bytes);
  EXPECT_NE(decode_error("\x7f"
                         "ELF and more bytes")
                .find("wrong magic"),
            std::string::npos);
}

TEST(EntryFormat, OtherSchemaVersionIsRejected) {
  std::string bytes = encode_entry(fixed_entry());
  bytes[8] = 2;
  EXPECT_NE(decode_error(bytes).find("schema version 2"), std::string::npos) << decode_error(bytes);
}

TEST(EntryFormat, NonZeroFlagsAreRejected) {
  std::string bytes = encode_entry(fixed_entry());
  bytes[12] = 1;
  EXPECT_NE(decode_error(bytes).find("flags"), std::string::npos) << decode_error(bytes);
}

TEST(EntryFormat, ChangedPayloadFailsTheChecksum) {
  std::string bytes = encode_entry(fixed_entry());
  bytes[bytes.size() - 1] ^= 0x20;
  EXPECT_NE(decode_error(bytes).find("checksum"), std::string::npos) << decode_error(bytes);
}

TEST(EntryFormat, EncodeRefusesAKeyThatIsNotACacheKey) {
  CacheEntry entry = fixed_entry();
  entry.key = "../../etc/passwd";
  try {
    encode_entry(entry);
    FAIL() << "encode_entry accepted a path as key";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace shardjit
