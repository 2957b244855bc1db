// The forward's tile tuning, without a GPU: the candidates each arch times, their names in the
// records, the rows they are timed with and what the record key tells apart.
#include "runtime/ops/linear_logp/tuning.hpp"

#include <gtest/gtest.h>

#include <string>

#include "runtime/ops/linear_logp/fwd.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

std::vector<std::string> names(const std::vector<FwdTile>& tiles) {
  std::vector<std::string> out;
  for (const FwdTile& tile : tiles) out.push_back(fwd_tile_name(tile));
  return out;
}

LinearLogpLayout small_layout(DType dtype = DType::kBF16) {
  LinearLogpConfig config;
  config.hidden = 4096;
  config.vocab_local = 128256;
  config.dtype = dtype;
  return resolve_layout(config);
}

TEST(FwdTuning, CandidatesStartWithTheDefaultAndAreValidKernels) {
  EXPECT_EQ(names(fwd_tile_candidates(DType::kBF16, "sm_90a", true)),
            (std::vector<std::string>{"128x256x64x4-wgmma", "128x256x64x3-wgmma", "128x256x64x3-mma"}));
  EXPECT_EQ(names(fwd_tile_candidates(DType::kFP16, "sm_90a", false)),
            (std::vector<std::string>{"128x256x64x3-mma", "128x256x32x3-mma", "64x256x32x3-mma"}));
  EXPECT_EQ(names(fwd_tile_candidates(DType::kBF16, "sm_80", true)),
            (std::vector<std::string>{"128x256x32x3-mma", "64x256x32x3-mma", "64x128x32x2-mma"}));
  EXPECT_EQ(fwd_tile_candidates(DType::kFP32, "sm_90a", true).size(), 1u);
  for (const char* arch : {"sm_80", "sm_86", "sm_90a"}) {
    for (DType dtype : {DType::kBF16, DType::kFP16}) {
      const std::vector<FwdTile> tiles = fwd_tile_candidates(dtype, arch, true);
      EXPECT_EQ(fwd_tile_name(tiles.front()), fwd_tile_name(default_fwd_tile(dtype, arch, true))) << arch;
      for (const FwdTile& tile : tiles) {
        EXPECT_NO_THROW(linear_logp_fwd_spec(small_layout(dtype), tile)) << fwd_tile_name(tile);
        EXPECT_LE(linear_logp_fwd_smem(dtype, tile), smem_limit_for_arch(arch)) << fwd_tile_name(tile) << " " << arch;
      }
    }
  }
}

TEST(FwdTuning, TileNamesRoundTripAndBadNamesAreRejected) {
  for (const FwdTile& tile : fwd_tile_candidates(DType::kBF16, "sm_90a", true)) {
    const std::optional<FwdTile> parsed = parse_fwd_tile_name(fwd_tile_name(tile));
    ASSERT_TRUE(parsed.has_value()) << fwd_tile_name(tile);
    EXPECT_EQ(fwd_tile_name(*parsed), fwd_tile_name(tile));
    EXPECT_EQ(parsed->wgmma, tile.wgmma);
  }
  for (const char* bad : {"", "128x256x64x4", "128x256x64x4-tma", "128x256x64-mma", "axbxcxd-mma", "128x256x64x4-mma "}) {
    EXPECT_FALSE(parse_fwd_tile_name(bad).has_value()) << bad;
  }
}

TEST(FwdTuning, RowsArePowersOfTwoOfMaxRows) {
  LinearLogpConfig config;
  EXPECT_EQ(fwd_tuning_rows(config), 4096);
  config.max_rows = 1;
  EXPECT_EQ(fwd_tuning_rows(config), 64);
  config.max_rows = 100;
  EXPECT_EQ(fwd_tuning_rows(config), 128);
  config.max_rows = 16384;
  EXPECT_EQ(fwd_tuning_rows(config), 16384);
  config.max_rows = 1 << 20;
  EXPECT_EQ(fwd_tuning_rows(config), 16384);
}

TEST(FwdTuning, InputSetsSpanTwiceTheL2) {
  constexpr std::int64_t kL2 = 50ll << 20;
  // llama3-8b's weight shard alone (1 GiB) is far larger: one set.
  EXPECT_EQ(tuning_input_sets(std::size_t{1} << 30, kL2), 1u);
  EXPECT_EQ(tuning_input_sets(std::size_t{100} << 20, kL2), 1u);
  // Smaller sets rotate: 100 MiB needs 3 of 40 MiB, 2 of 60 MiB; at most 8.
  EXPECT_EQ(tuning_input_sets(std::size_t{40} << 20, kL2), 3u);
  EXPECT_EQ(tuning_input_sets(std::size_t{60} << 20, kL2), 2u);
  EXPECT_EQ(tuning_input_sets(std::size_t{1} << 20, kL2), 8u);
  // An unknown L2 (0) or an empty set: one.
  EXPECT_EQ(tuning_input_sets(std::size_t{1} << 20, 0), 1u);
  EXPECT_EQ(tuning_input_sets(0, kL2), 1u);
}

TEST(FwdTuning, AForcedTileIsOneOfTheCandidatesByName) {
  const std::vector<FwdTile> candidates = forceable_fwd_tiles(DType::kBF16, "sm_90a", true);
  EXPECT_EQ(candidates.size(), 14u) << "ten wgmma tiles and the four portable ones";
  const FwdTile small = forced_fwd_tile("64x256x32x3-mma", candidates);
  EXPECT_EQ(small, (FwdTile{64, 256, 32, 3, false}));
  EXPECT_EQ(forced_fwd_tile("128x256x64x3-wgmma", candidates), (FwdTile{128, 256, 64, 3, true}));
  EXPECT_EQ(forced_fwd_tile("128x128x64x4-wgmma", candidates), (FwdTile{128, 128, 64, 4, true}));
  EXPECT_EQ(forced_fwd_tile("128x192x64x4-wgmma", candidates), (FwdTile{128, 192, 64, 4, true}));
  for (const int rows : {136, 152, 168}) {
    EXPECT_EQ(forced_fwd_tile(std::to_string(rows) + "x128x64x6-wgmma-rows-as-n", candidates),
              (FwdTile{rows, 128, 64, 6, true, true}));
    EXPECT_EQ(forced_fwd_tile(std::to_string(rows) + "x256x64x4-wgmma-rows-as-n", candidates),
              (FwdTile{rows, 256, 64, 4, true, true}));
  }
  EXPECT_EQ(fwd_tile_name(FwdTile{168, 128, 64, 6, true, true}), "168x128x64x6-wgmma-rows-as-n");
  EXPECT_THROW(forced_fwd_tile("152x128x64x4-wgmma-rows-as-n", candidates), Error) << "their rings are deeper";
  for (const char* bad : {"64x256x32x3-wgmma", "128x128x64x9-mma", "fast", ""}) {
    try {
      forced_fwd_tile(bad, candidates);
      ADD_FAILURE() << "'" << bad << "' was taken";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      const std::string message = e.what();
      EXPECT_NE(message.find("SHARDJIT_FWD_TILE"), std::string::npos) << message;
      EXPECT_NE(message.find("128x256x64x4-wgmma"), std::string::npos) << "names the candidates: " << message;
    }
  }
}

TEST(FwdTuning, KeysTellApartWhatTheChoiceDependsOn) {
  const LinearLogpLayout layout = small_layout();
  const std::string source = "template <class T> __global__ void linear_logp_fwd();";
  const std::string key = fwd_tuning_key(layout, "sm_90a", "NVIDIA H200", true, 4096, source);
  EXPECT_EQ(key, fwd_tuning_key(layout, "sm_90a", "NVIDIA H200", true, 4096, source));
  EXPECT_NE(key, fwd_tuning_key(layout, "sm_90a", "NVIDIA H100 80GB HBM3", true, 4096, source));
  EXPECT_NE(key, fwd_tuning_key(layout, "sm_90a", "NVIDIA H200", false, 4096, source));
  EXPECT_NE(key, fwd_tuning_key(layout, "sm_90a", "NVIDIA H200", true, 64, source));
  EXPECT_NE(key, fwd_tuning_key(small_layout(DType::kFP16), "sm_90a", "NVIDIA H200", true, 4096, source));
  LinearLogpConfig entropy = layout.config;
  entropy.want_entropy = true;
  EXPECT_NE(key, fwd_tuning_key(resolve_layout(entropy), "sm_90a", "NVIDIA H200", true, 4096, source));
  // Records timed on other kernel code are not this code's.
  EXPECT_NE(key, fwd_tuning_key(layout, "sm_90a", "NVIDIA H200", true, 4096, source + " "));
  EXPECT_EQ(key.find('\n'), std::string::npos);
}

}  // namespace
}  // namespace shardjit
