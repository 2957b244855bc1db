// The kernels built with the library (runtime/cache/prebuilt_kernels.hpp): an op's
// shape-independent kernels (on sm_90a, all of a 16-bit op's) are found under their run-time keys
// without a compile or a file, the portable loops' shape-specialized ones are not,
// they are what NVRTC makes now, a change to their templates leaves them unused, and a prewarm
// copies them into its folder.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "runtime/cache/kernel_cache.hpp"
#include "runtime/cache/prebuilt_kernels.hpp"
#include "runtime/prewarm/build.hpp"
#include "runtime/prewarm/plan.hpp"
#include "shardjit/error.hpp"
#include "support/temp_dir.hpp"

namespace shardjit {
namespace {

// The build's settings (cmake/prebuilt_kernels.cmake): comma lists, empty with the table off.
constexpr const char* kBuiltArchs = SHARDJIT_PREBUILT_ARCHS;

bool built_for_sm90a() { return std::string(kBuiltArchs).find("sm_90a") != std::string::npos; }

RuntimeConfig config_in(const std::filesystem::path& dir, bool jit) {
  RuntimeConfig config;
  config.cache_dir = (dir / "cache").string();
  config.jit = jit;
  config.cache_max_bytes = 1ull << 30;
  return config;
}

// A bf16 training op's kernels on `arch`, as a prewarm of it lists them.
std::vector<PrewarmItem> training_op_items_on(const std::string& arch, std::int64_t hidden, std::int64_t vocab) {
  PrewarmRequest request;
  request.models = {ModelShape{"test", hidden, vocab, 0}};
  request.archs = {arch};
  request.backward = true;
  return prewarm_items(request);
}

// The same on sm_90a.
std::vector<PrewarmItem> training_op_items(std::int64_t hidden, std::int64_t vocab) {
  return training_op_items_on("sm_90a", hidden, vocab);
}

// The machine code of an ELF64 CUBIN: its ".text.<kernel>" sections by name. (Two compiles of one
// source differ elsewhere: NVRTC names internal-linkage symbols with a per-compile id, which the
// debug sections carry.)
std::map<std::string, std::string> code_sections(const std::string& elf) {
  auto read = [&](std::size_t at, std::size_t bytes) {
    std::uint64_t value = 0;
    for (std::size_t i = 0; i < bytes; ++i) value |= std::uint64_t{static_cast<unsigned char>(elf.at(at + i))} << (8 * i);
    return static_cast<std::size_t>(value);
  };
  const std::size_t headers = read(0x28, 8), header_size = read(0x3a, 2), count = read(0x3c, 2);
  const std::size_t names = headers + read(0x3e, 2) * header_size;
  const std::size_t names_offset = read(names + 0x18, 8);
  std::map<std::string, std::string> sections;
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t header = headers + i * header_size;
    const std::string name(elf.c_str() + names_offset + read(header, 4));
    if (name.rfind(".text.", 0) == 0) sections[name] = elf.substr(read(header + 0x18, 8), read(header + 0x20, 8));
  }
  return sections;
}

bool is_gemm(const PrewarmItem& item) { return item.spec.canonical_text().rfind("gemm<", 0) == 0; }

TEST(PrebuiltKernels, IndexesATableByKey) {
  static const unsigned char bytes[] = {1, 2, 3};
  const PrebuiltKernel table[] = {{"k1", "a<>", "sm_90a", "_Z1a", bytes, 3}, {"k2", "b<>", "sm_80", "_Z1b", bytes, 2}};
  const PrebuiltKernels index(table);
  EXPECT_EQ(index.size(), 2u);
  ASSERT_NE(index.find("k2"), nullptr);
  EXPECT_EQ(std::string(index.find("k2")->spec_text), "b<>");
  EXPECT_EQ(index.find("k3"), nullptr);
  EXPECT_EQ(index.archs(), (std::vector<std::string>{"sm_80", "sm_90a"}));
}

TEST(PrebuiltKernels, TheLibraryHasWhatItsBuildAskedFor) {
  const PrebuiltKernels prebuilt;
  if (std::string(kBuiltArchs).empty()) {
    EXPECT_EQ(prebuilt.size(), 0u) << "built with SHARDJIT_PREBUILT_KERNELS off";
    return;
  }
  EXPECT_GT(prebuilt.size(), 0u);
  for (const std::string& arch : prebuilt.archs()) {
    EXPECT_NE(std::string(kBuiltArchs).find(arch), std::string::npos) << arch;
  }
}

TEST(PrebuiltKernels, EveryKernelOfATrainingOpComesFromTheTableInCacheOnlyMode) {
  if (!built_for_sm90a()) GTEST_SKIP() << "the library was built without sm_90a prebuilt kernels";
  testing::TempDir dir;
  KernelCache cache(config_in(dir.path(), /*jit=*/false));  // nothing may compile, the folder is empty
  std::set<std::string> prebuilt;
  for (const PrewarmItem& item : training_op_items(1000, 5000)) {
    const CachedKernel got = cache.get(item.spec, item.arch, "shardjit prewarm ...");
    EXPECT_EQ(got.origin, KernelOrigin::kPrebuilt) << item.name();
    EXPECT_EQ(got.kernel->spec_text, item.spec.canonical_text());
    EXPECT_FALSE(got.kernel->cubin.empty());
    prebuilt.insert(item.spec.template_name());
  }
  // The forward (both orientations) and the kept chunk's two kernels, the dZ kernel, the GEMMs of grad_weight and
  // grad_hidden, the scale and the combine: on the Hopper loop none is specialized for the shape.
  EXPECT_EQ(prebuilt, (std::set<std::string>{"linear_logp_fwd_hopper", "linear_logp_fwd_rows_as_n", "gemm",
                                             "linear_logp_bwd_dz_hopper",
                                             "linear_logp_fwd_keep", "linear_logp_bwd_kept_dz",
                                             "linear_logp_bwd_scale", "logp_combine"}));
  EXPECT_TRUE(cache.disk().list().empty()) << "a prebuilt kernel is not copied to disk by a load";
}

// The portable loops' forward and dZ kernels are specialized for the shape: never in the table, so
// that an op on them in cache-only mode still asks for a prewarm (here sm_80's, whose other
// kernels are in the table only where the build asked for sm_80).
TEST(PrebuiltKernels, ThePortableLoopsShapeSpecializedKernelsAreNotInTheTable) {
  testing::TempDir dir;
  KernelCache cache(config_in(dir.path(), /*jit=*/false));
  std::vector<KernelSpec> specialized;
  for (const PrewarmItem& item : training_op_items_on("sm_80", 1000, 5000)) {
    const std::string name = item.spec.template_name();
    if (name != "linear_logp_fwd" && name != "linear_logp_bwd_dz") continue;
    specialized.push_back(item.spec);
    EXPECT_THROW(cache.get(item.spec, item.arch, "shardjit prewarm ..."), Error) << item.name();
  }
  EXPECT_EQ(specialized.size(), 2u) << "the forward and the dZ kernel";
  EXPECT_EQ(cache.count_missing(specialized, "sm_80"), specialized.size());
}

// The same for the options a training op may take besides: fp16, a bias, int32 targets, entropy,
// and the shards of tensor parallelism at an odd vocabulary, forward and backward.
TEST(PrebuiltKernels, EveryOptionsKernelsComeFromTheTable) {
  if (!built_for_sm90a()) GTEST_SKIP() << "the library was built without sm_90a prebuilt kernels";
  testing::TempDir dir;
  KernelCache cache(config_in(dir.path(), /*jit=*/false));
  PrewarmRequest request;
  request.models = {ModelShape{"test", 2304, 256001, 0}};
  request.archs = {"sm_90a"};
  request.backward = true;
  request.tp = {1, 2, 8};
  request.dtypes = {DType::kBF16, DType::kFP16};
  request.target_dtypes = {DType::kInt32, DType::kInt64};
  request.bias_dtypes = {std::nullopt, DType::kBF16, DType::kFP16};
  request.entropy = {false, true};
  std::size_t forwards = 0;
  for (const PrewarmItem& item : prewarm_items(request)) {
    const std::string& name = item.spec.template_name();
    if (name == "linear_logp_fwd_hopper" || name == "linear_logp_fwd_rows_as_n") ++forwards;
    EXPECT_EQ(cache.get(item.spec, item.arch, "shardjit prewarm ...").origin, KernelOrigin::kPrebuilt) << item.name();
  }
  // Two dtypes, three bias types, two target types, entropy on and off; each in the default tile
  // and the eight other tiles that single-GPU ops also load, and in the three tiles of the rows as
  // N that keep the backward's chunk, which single-GPU ops with a backward load: 128 columns only,
  // as the 256-column tiles have no keeping kernel, and with entropy 136 and 152 rows only
  // (fwd_tile_keeps). 24 x (1 + 8) + 12 x 3 + 12 x 2.
  EXPECT_EQ(forwards, 276u);
}

// The collectives of a hidden size: ReduceScatter's kernel holds no shape but its vector width (16
// bytes where H's rows are a multiple of 16 bytes) and is in the table for TP 2, 4 and 8;
// MoeCombine's is the hidden size's and is not.
TEST(PrebuiltKernels, ReduceScattersKernelComesFromTheTableMoeCombinesIsCompiled) {
  if (!built_for_sm90a()) GTEST_SKIP() << "the library was built without sm_90a prebuilt kernels";
  testing::TempDir dir;
  KernelCache cache(config_in(dir.path(), /*jit=*/false));
  PrewarmRequest request;
  request.models = {ModelShape{"test", 5120, 0, 0}};
  request.archs = {"sm_90a"};
  request.tp = {2, 4, 8};
  request.dtypes = {DType::kBF16, DType::kFP16};
  request.collectives = true;
  request.linear_logp = false;
  std::size_t reduce_scatters = 0, moe_combines = 0;
  for (const PrewarmItem& item : prewarm_items(request)) {
    if (item.spec.template_name() == "reduce_scatter") {
      ++reduce_scatters;
      EXPECT_EQ(cache.get(item.spec, item.arch, "shardjit prewarm ...").origin, KernelOrigin::kPrebuilt) << item.name();
    } else {
      ASSERT_EQ(item.spec.template_name(), "moe_combine");
      ++moe_combines;
      EXPECT_THROW(cache.get(item.spec, item.arch, "shardjit prewarm ..."), Error) << item.name();
    }
  }
  EXPECT_EQ(reduce_scatters, 6u);
  EXPECT_EQ(moe_combines, 12u) << "with and without gates";
}

TEST(PrebuiltKernels, AreTheBytesNvrtcMakesNow) {
  if (!built_for_sm90a()) GTEST_SKIP() << "the library was built without sm_90a prebuilt kernels";
  testing::TempDir dir;
  KernelCache cache(config_in(dir.path(), /*jit=*/true));
  const std::vector<PrewarmItem> items = training_op_items(1000, 5000);
  const auto gemm = std::find_if(items.begin(), items.end(), is_gemm);
  ASSERT_NE(gemm, items.end());
  const PrebuiltKernel* built = cache.prebuilt().find(cache.key(gemm->spec, gemm->arch));
  ASSERT_NE(built, nullptr) << gemm->name();
  const KernelSource source{gemm->spec.canonical_text(), gemm->spec.name_expression(),
                            cache.flattened(gemm->spec.def().file)};
  const CompiledKernel fresh = NvrtcCompiler().compile(source, gemm->arch);
  EXPECT_EQ(fresh.lowered_name, built->lowered_name);
  const auto fresh_code = code_sections(fresh.cubin);
  ASSERT_EQ(fresh_code.size(), 1u) << "one kernel";
  EXPECT_TRUE(fresh_code == code_sections(std::string(reinterpret_cast<const char*>(built->cubin), built->cubin_size)))
      << "the table's machine code differs from this NVRTC's";
}

TEST(PrebuiltKernels, AChangedTemplateFolderLeavesThemUnused) {
  if (!built_for_sm90a()) GTEST_SKIP() << "the library was built without sm_90a prebuilt kernels";
  testing::TempDir dir;
  const std::filesystem::path templates = dir.path() / "templates";
  std::filesystem::copy(std::filesystem::path(SHARDJIT_SOURCE_DIR) / "templates", templates,
                        std::filesystem::copy_options::recursive);
  std::ofstream(templates / "gemm" / "gemm.cuh", std::ios::app) << "\n// a local change\n";
  RuntimeConfig config = config_in(dir.path(), /*jit=*/false);
  config.template_dir = templates.string();
  KernelCache cache(config);
  const std::vector<PrewarmItem> items = training_op_items(1000, 5000);
  const auto gemm = std::find_if(items.begin(), items.end(), is_gemm);
  ASSERT_NE(gemm, items.end());
  EXPECT_THROW(cache.get(gemm->spec, gemm->arch, "shardjit prewarm ..."), Error)
      << "another GEMM source has another key, which no prebuilt kernel has";
}

TEST(PrebuiltKernels, APrewarmCopiesThemIntoItsFolder) {
  if (!built_for_sm90a()) GTEST_SKIP() << "the library was built without sm_90a prebuilt kernels";
  testing::TempDir dir;
  KernelCache cache(config_in(dir.path(), /*jit=*/true));
  std::vector<PrewarmItem> gemms;
  for (const PrewarmItem& item : training_op_items(1000, 5000)) {
    if (is_gemm(item)) gemms.push_back(item);
  }
  std::vector<PrewarmOutcome> outcomes;
  build_prewarm_items(
      cache, gemms, 2, [&](const PrewarmItem&, PrewarmOutcome outcome, const std::string&) { outcomes.push_back(outcome); },
      [](const PrewarmItem& item, const std::string& error) { ADD_FAILURE() << item.name() << ": " << error; });
  EXPECT_EQ(outcomes, std::vector<PrewarmOutcome>(gemms.size(), PrewarmOutcome::kPrebuilt));
  EXPECT_EQ(cache.disk().list().size(), gemms.size());
  // A process built without the table (or with another compiler) finds them there.
  for (const PrewarmItem& item : gemms) EXPECT_FALSE(cache.disk().entry_problem(cache.key(item.spec, item.arch)));
}

}  // namespace
}  // namespace shardjit
