#include "runtime/cache/cache_key.hpp"

#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace shardjit {
namespace {

CacheKeyInputs fixed_inputs() {
  CacheKeyInputs inputs;
  inputs.schema_version = 1;
  inputs.library_version = "0.1.0";
  inputs.source = "template <int H> __global__ void k() {}\n";
  inputs.spec_text = "linear_logp_fwd{hidden=4096,dtype=bf16,tp=8}";
  inputs.nvrtc_version = "13.0";
  inputs.arch = "sm_90a";
  inputs.options = {"--std=c++17", "-arch=sm_90a", "-default-device"};
  return inputs;
}

// Pins the key derivation. If this value changes, every cache on disk is invalidated: that must
// go with a bump of kCacheSchemaVersion (and a new pinned value here), never on its own.
TEST(CacheKey, FixedInputHasPinnedKey) {
  EXPECT_EQ(cache_key(fixed_inputs()),
            "d9e64d5ea558a7f2da7afd64b3a5e9771fac388b80cc91de681b590f02ab61bb");
}

TEST(CacheKey, IsSixtyFourLowerCaseHexCharacters) {
  std::string key = cache_key(fixed_inputs());
  EXPECT_EQ(key.size(), 64u);
  EXPECT_TRUE(is_cache_key(key));
}

TEST(CacheKey, EqualInputsGiveEqualKeys) {
  EXPECT_EQ(cache_key(fixed_inputs()), cache_key(fixed_inputs()));
  EXPECT_EQ(cache_key(CacheKeyInputs{}), cache_key(CacheKeyInputs{}));
}

TEST(CacheKey, EveryFieldChangesTheKey) {
  const std::string base = cache_key(fixed_inputs());
  std::vector<std::pair<const char*, std::function<void(CacheKeyInputs&)>>> changes = {
      {"schema_version", [](CacheKeyInputs& in) { in.schema_version = 2; }},
      {"library_version", [](CacheKeyInputs& in) { in.library_version = "0.1.1"; }},
      {"source", [](CacheKeyInputs& in) { in.source += " "; }},
      {"spec_text",
       [](CacheKeyInputs& in) { in.spec_text = "linear_logp_fwd{hidden=4096,dtype=fp16,tp=8}"; }},
      {"nvrtc_version", [](CacheKeyInputs& in) { in.nvrtc_version = "12.8"; }},
      {"arch", [](CacheKeyInputs& in) { in.arch = "sm_80"; }},
      {"one option", [](CacheKeyInputs& in) { in.options[1] = "-arch=sm_80"; }},
      {"option order", [](CacheKeyInputs& in) { std::swap(in.options[0], in.options[2]); }},
      {"option added", [](CacheKeyInputs& in) { in.options.push_back("-lineinfo"); }},
      {"empty option added", [](CacheKeyInputs& in) { in.options.push_back(""); }},
      {"option removed", [](CacheKeyInputs& in) { in.options.pop_back(); }},
  };
  std::set<std::string> seen = {base};
  for (const auto& [field, change] : changes) {
    CacheKeyInputs inputs = fixed_inputs();
    change(inputs);
    std::string key = cache_key(inputs);
    EXPECT_NE(key, base) << "changing " << field << " kept the key";
    EXPECT_TRUE(seen.insert(key).second) << "changing " << field << " collided with another change";
  }
}

TEST(CacheKey, FieldsCannotRunIntoEachOther) {
  CacheKeyInputs a = fixed_inputs();
  CacheKeyInputs b = fixed_inputs();
  a.source = "ab";
  a.spec_text = "c";
  b.source = "a";
  b.spec_text = "bc";
  EXPECT_NE(cache_key(a), cache_key(b));

  CacheKeyInputs joined = fixed_inputs();
  CacheKeyInputs split = fixed_inputs();
  joined.options = {"-ab"};
  split.options = {"-a", "b"};
  EXPECT_NE(cache_key(joined), cache_key(split));

  CacheKeyInputs option_in_arch = fixed_inputs();
  CacheKeyInputs option_alone = fixed_inputs();
  option_in_arch.arch = "sm_90a-x";
  option_in_arch.options = {};
  option_alone.arch = "sm_90a";
  option_alone.options = {"-x"};
  EXPECT_NE(cache_key(option_in_arch), cache_key(option_alone));
}

TEST(CacheKey, IsCacheKeyAcceptsOnlyLowerCaseHexOfLength64) {
  EXPECT_TRUE(is_cache_key(std::string(64, 'a')));
  EXPECT_TRUE(is_cache_key(std::string(64, '0')));
  EXPECT_FALSE(is_cache_key(std::string(63, 'a')));
  EXPECT_FALSE(is_cache_key(std::string(65, 'a')));
  EXPECT_FALSE(is_cache_key(std::string(64, 'A')));
  EXPECT_FALSE(is_cache_key(std::string(64, 'g')));
  EXPECT_FALSE(is_cache_key(""));
  EXPECT_FALSE(is_cache_key("../" + std::string(61, 'a')));
}

}  // namespace
}  // namespace shardjit
