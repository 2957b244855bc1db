// NVRTC compiles every backward kernel of LinearLogp (dZ, scale, bias sums, the GEMMs) for sm_80
// and sm_90a, for each dtype and option set the op can ask for (no GPU needed).
#include <gtest/gtest.h>

#include <set>

#include "runtime/compile/nvrtc_compiler.hpp"
#include "runtime/compile/template_sources.hpp"
#include "runtime/ops/gemm.hpp"
#include "runtime/ops/linear_logp/bwd/dz.hpp"
#include "runtime/ops/linear_logp/kernels.hpp"

namespace shardjit {
namespace {

struct BwdCompileCase {
  std::string name;
  DType dtype;
  bool dz_fp32;
  bool filter;
  bool grad_weight_fp32;
  const char* arch;
};

std::vector<BwdCompileCase> bwd_compile_cases() {
  std::vector<BwdCompileCase> cases;
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const std::string suffix = std::string("_") + arch;
    cases.push_back({"bf16" + suffix, DType::kBF16, false, false, true, arch});
    cases.push_back({"fp16_filter" + suffix, DType::kFP16, false, true, false, arch});
    cases.push_back({"fp32" + suffix, DType::kFP32, false, false, false, arch});
    cases.push_back({"bf16_dz_fp32_filter" + suffix, DType::kBF16, true, true, false, arch});
  }
  return cases;
}

class BackwardTemplates : public ::testing::TestWithParam<BwdCompileCase> {};

TEST_P(BackwardTemplates, CompileToCubin) {
  const BwdCompileCase& c = GetParam();
  LinearLogpConfig config;
  config.hidden = 4096;
  config.vocab_local = 64128;
  config.valid_vocab = 64000;
  config.dtype = c.dtype;
  config.bias_dtype = DType::kBF16;
  config.target_dtype = DType::kInt32;
  config.want_backward = true;
  config.dz_fp32 = c.dz_fp32;
  config.grad_filter_threshold = c.filter ? 1e-8f : 0.0f;
  config.grad_weight_fp32 = c.grad_weight_fp32;
  LinearLogpKernels kernels = linear_logp_kernels(resolve_layout(config), c.arch);
  ASSERT_TRUE(kernels.backward.has_value());
  // The kept chunk's two kernels come with a Hopper dZ kernel of 16-bit dZ, unfiltered.
  const bool keeps = std::string(c.arch) == "sm_90a" && c.dtype != DType::kFP32 && !c.dz_fp32 && !c.filter;
  EXPECT_EQ(kernels.backward->keep.has_value(), keeps);
  EXPECT_EQ(kernels.backward->kept_dz.has_value(), keeps);
  if (c.dtype != DType::kFP32) {
    // The default tiles compiled here are the 128 x 256 ones (64 x 64 warp blocks).
    EXPECT_EQ(kernels.backward->dz.int_param("BN"), 256);
    EXPECT_EQ(kernels.backward->grad_weight.int_param("BN"), c.dz_fp32 ? 128 : 256);
    // sm_90a runs both GEMMs on the wgmma loop (A read M contiguous for grad_weight, K
    // contiguous for grad_hidden); an fp32 dZ keeps the FMA loop.
    const bool wgmma = std::string(c.arch) == "sm_90a" && !c.dz_fp32;
    EXPECT_EQ(kernels.backward->grad_weight.bool_param("WGMMA"), wgmma);
    EXPECT_EQ(kernels.backward->grad_hidden_out.bool_param("WGMMA"), wgmma);
  }
  TemplateSources sources = TemplateSources::embedded();
  NvrtcCompiler compiler;
  for (const KernelSpec& spec : kernels.backward->all()) {
    KernelSource source{spec.canonical_text(), spec.name_expression(), sources.flatten(spec.def().file)};
    CompiledKernel compiled = compiler.compile(source, c.arch);
    EXPECT_GT(compiled.cubin.size(), 1000u) << spec.canonical_text();
    EXPECT_EQ(compiled.cubin.compare(0, 4, "\x7f" "ELF"), 0) << "a CUBIN is an ELF image";
    EXPECT_FALSE(compiled.lowered_name.empty());
    EXPECT_FALSE(ptxas_performance_loss(compiled)) << spec.canonical_text() << "\n" << compiled.log;
  }
}

INSTANTIATE_TEST_SUITE_P(Arches, BackwardTemplates, ::testing::ValuesIn(bwd_compile_cases()),
                         [](const auto& param_info) { return param_info.param.name; });

TEST(BackwardTemplates, HalfHeightDzTileOfTheSmallerArchesCompiles) {
  // sm_86 / sm_89 (about 100 KiB of shared memory) get 64-row dZ tiles (64 x 256 x 32 x 3).
  LinearLogpConfig config;
  config.hidden = 200;
  config.vocab_local = 300;
  config.dtype = DType::kBF16;
  config.want_backward = true;
  const LinearLogpLayout layout = resolve_layout(config);
  const FwdTile tile = linear_logp_kernels(layout, "sm_86").backward->dz_tile;
  EXPECT_EQ(tile.bm, 64);
  for (DType dz : {DType::kBF16, DType::kFP32}) {
    KernelSpec spec = linear_logp_bwd_dz_spec(layout, dz, tile, dz == DType::kFP32);
    KernelSource source{spec.canonical_text(), spec.name_expression(),
                        TemplateSources::embedded().flatten(spec.def().file)};
    EXPECT_GT(NvrtcCompiler().compile(source, "sm_80").cubin.size(), 1000u) << spec.canonical_text();
  }
}

// The tiles the defaults can go back to (128 x 128, 64 x 32 warp blocks; on sm_90a the portable
// 128 x 256 of SHARDJIT_HOPPER_PATH=0) and the 256 x 128 ones (4 x 2 warps) still compile, for
// both A layouts of the GEMM.
TEST(BackwardTemplates, FormerAndAlternativeTilesCompile) {
  LinearLogpConfig config;
  config.hidden = 4096;
  config.vocab_local = 64128;
  config.valid_vocab = 64000;
  config.dtype = DType::kBF16;
  config.bias_dtype = DType::kBF16;
  config.want_backward = true;
  const LinearLogpLayout layout = resolve_layout(config);
  TemplateSources sources = TemplateSources::embedded();
  NvrtcCompiler compiler;
  auto compile = [&](const KernelSpec& spec, const char* arch) {
    KernelSource source{spec.canonical_text(), spec.name_expression(), sources.flatten(spec.def().file)};
    EXPECT_GT(compiler.compile(source, arch).cubin.size(), 1000u) << spec.canonical_text() << " " << arch;
  };
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const FwdTile former_dz = std::string(arch) == "sm_80" ? FwdTile{128, 128, 64, 2} : FwdTile{128, 128, 64, 3};
    compile(linear_logp_bwd_dz_spec(layout, DType::kBF16, former_dz, true), arch);
    compile(gemm_spec(GemmKind{DType::kBF16, DType::kBF16, DType::kFP32, DType::kFP32, false, false},
                      GemmTile{128, 128, 32, 4}),
            arch);
    compile(gemm_spec(GemmKind{DType::kBF16, DType::kBF16, DType::kBF16, DType::kBF16, true, true},
                      GemmTile{128, 128, 32, 4}),
            arch);
  }
  for (bool a_trans : {false, true}) {
    compile(gemm_spec(GemmKind{DType::kBF16, DType::kBF16, DType::kBF16, DType::kFP32, a_trans, false},
                      default_gemm_tile(DType::kBF16, DType::kBF16, "sm_90a", false)),
            "sm_90a");
  }
  compile(linear_logp_bwd_dz_spec(layout, DType::kBF16, FwdTile{256, 128, 64, 3}, false), "sm_90a");
  compile(gemm_spec(GemmKind{DType::kBF16, DType::kBF16, DType::kBF16, DType::kBF16, true, false},
                    GemmTile{256, 128, 64, 3}),
          "sm_90a");
}

TEST(BackwardTemplates, EveryBackwardTemplateIsCoveredAbove) {
  // The cases above reach each backward template: dz, scale, bias, gemm (mma and fp32 FMA), and
  // on sm_90a the Hopper loop's dz and the kept chunk's two.
  std::set<std::string> names;
  for (const char* arch : {"sm_80", "sm_90a"}) {
    for (DType dtype : {DType::kBF16, DType::kFP32}) {
      LinearLogpConfig config;
      config.hidden = 64;
      config.vocab_local = 300;
      config.dtype = dtype;
      config.bias_dtype = DType::kFP32;
      config.want_backward = true;
      for (const KernelSpec& spec : linear_logp_kernels(resolve_layout(config), arch).backward->all()) {
        names.insert(spec.template_name());
      }
    }
  }
  EXPECT_EQ(names, (std::set<std::string>{"gemm", "linear_logp_bwd_bias", "linear_logp_bwd_dz", "linear_logp_bwd_dz_hopper",
                                          "linear_logp_bwd_scale", "linear_logp_fwd_keep", "linear_logp_bwd_kept_dz"}));
}

}  // namespace
}  // namespace shardjit
