#include "runtime/cache/sha256.hpp"

#include <string>

#include <gtest/gtest.h>

#include "shardjit/error.hpp"

namespace shardjit {
namespace {

// Test vectors from FIPS 180-2, appendix B.
TEST(Sha256, EmptyStringVector) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256, AbcVector) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256, TwoBlockVector) {
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, MillionAVector) {
  Sha256 hasher;
  std::string thousand(1000, 'a');
  for (int i = 0; i < 1000; ++i) hasher.update(thousand);
  EXPECT_EQ(hasher.hex_digest(),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, IncrementalEqualsOneShotAtEverySplit) {
  std::string data;
  for (int i = 0; i < 300; ++i) data.push_back(static_cast<char>((i * 37) & 0xff));
  const std::string expected = sha256_hex(data);
  for (std::size_t split = 0; split <= data.size(); ++split) {
    Sha256 hasher;
    hasher.update(std::string_view(data).substr(0, split));
    hasher.update(std::string_view(data).substr(split));
    ASSERT_EQ(hasher.hex_digest(), expected) << "split at " << split;
  }
  Sha256 byte_by_byte;
  for (char c : data) byte_by_byte.update(std::string_view(&c, 1));
  EXPECT_EQ(byte_by_byte.hex_digest(), expected);
}

TEST(Sha256, RawDigestMatchesHex) {
  Sha256 hasher;
  hasher.update("abc");
  Sha256Digest raw = hasher.digest();
  EXPECT_EQ(to_hex(std::string_view(reinterpret_cast<const char*>(raw.data()), raw.size())),
            sha256_hex("abc"));
}

TEST(Sha256, UseAfterDigestIsAnInternalError) {
  Sha256 hasher;
  hasher.update("abc");
  hasher.hex_digest();
  try {
    hasher.update("more");
    FAIL() << "update after digest did not throw";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kInternal);
  }
  EXPECT_THROW(hasher.digest(), Error);
}

TEST(Sha256, MovedHasherKeepsItsState) {
  Sha256 first;
  first.update("ab");
  Sha256 second = std::move(first);
  second.update("c");
  EXPECT_EQ(second.hex_digest(), sha256_hex("abc"));
}

TEST(Sha256, ToHexIsLowerCase) {
  EXPECT_EQ(to_hex(std::string("\x00\x0f\xab\xff", 4)), "000fabff");
  EXPECT_EQ(to_hex(""), "");
}

}  // namespace
}  // namespace shardjit
