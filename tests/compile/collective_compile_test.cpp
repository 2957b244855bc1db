// NVRTC compiles the cross-GPU templates (reduce_scatter, moe_combine) for sm_80 and sm_90a in
// every dtype, world size and vector width the ops use; the registry refuses bad combinations.
#include <gtest/gtest.h>

#include "runtime/compile/nvrtc_compiler.hpp"
#include "runtime/compile/template_sources.hpp"
#include "runtime/ops/collective/kernels.hpp"
#include "runtime/ops/linear_logp/combine.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

CompiledKernel compile(const KernelSpec& spec, const char* arch) {
  static const TemplateSources sources = TemplateSources::embedded();
  NvrtcCompiler compiler;
  return compiler.compile(KernelSource{spec.canonical_text(), spec.name_expression(), sources.flatten(spec.def().file)},
                          arch);
}

void expect_cubin(const KernelSpec& spec, const char* arch) {
  const CompiledKernel compiled = compile(spec, arch);
  EXPECT_EQ(compiled.cubin.compare(0, 4, "\x7f" "ELF"), 0) << spec.canonical_text() << " for " << arch;
  EXPECT_FALSE(compiled.lowered_name.empty());
}

TEST(CollectiveTemplates, ReduceScatterCompilesForEveryDtypeAndWidth) {
  for (const char* arch : {"sm_80", "sm_90a"}) {
    for (DType dtype : {DType::kBF16, DType::kFP16, DType::kFP32}) {
      expect_cubin(reduce_scatter_spec(dtype, 2, 16), arch);
    }
  }
  expect_cubin(reduce_scatter_spec(DType::kBF16, 8, 4), "sm_90a");
  expect_cubin(reduce_scatter_spec(DType::kFP32, 4, 8), "sm_90a");
}

TEST(CollectiveTemplates, MoeCombineCompilesWithAndWithoutGates) {
  for (const char* arch : {"sm_80", "sm_90a"}) {
    for (DType dtype : {DType::kBF16, DType::kFP16, DType::kFP32}) {
      expect_cubin(moe_combine_spec(dtype, 2, 4096, 16, true), arch);
    }
  }
  expect_cubin(moe_combine_spec(DType::kBF16, 1, 4096, 16, false), "sm_90a");
  expect_cubin(moe_combine_spec(DType::kBF16, 8, 7166, 4, false), "sm_90a");
}

TEST(CollectiveTemplates, PeerCombineCompilesAndRefusesASingleRank) {
  for (const char* arch : {"sm_80", "sm_90a"}) expect_cubin(logp_combine_spec(DType::kInt64, true, 2), arch);
  expect_cubin(logp_combine_spec(DType::kInt32, false, 8), "sm_90a");
  EXPECT_THROW(logp_combine_spec(DType::kInt64, false, 1), Error);
  EXPECT_THROW(logp_combine_spec(DType::kInt64, false, 9), Error);
}

TEST(CollectiveTemplates, RegistryRefusesRowsThatAreNotWholeChunks) {
  try {
    moe_combine_spec(DType::kBF16, 2, 4098, 16, false);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("not a multiple of VEC_BYTES"), std::string::npos) << e.what();
  }
  EXPECT_THROW(reduce_scatter_spec(DType::kBF16, 2, 12), Error);
  EXPECT_THROW(reduce_scatter_spec(DType::kBF16, 9, 16), Error);
}

}  // namespace
}  // namespace shardjit
