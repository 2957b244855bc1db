// NVRTC compiles every registered template for sm_80 and sm_90a (no GPU needed), and a failed
// compile reports the NVRTC log with the offending template lines.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "runtime/compile/kernel_spec.hpp"
#include "runtime/compile/nvrtc_compiler.hpp"
#include "runtime/compile/template_sources.hpp"
#include "runtime/ops/linear_logp/kernels.hpp"
#include "runtime/ops/linear_logp/combine.hpp"
#include "support/temp_dir.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

struct CompileCase {
  std::string name;
  DType dtype;
  std::int64_t hidden, vocab;
  const char* arch;
  bool hopper_path = true;  // RuntimeConfig::hopper_path: on sm_90a, the wgmma loop or the portable one
};

std::vector<CompileCase> compile_cases() {
  std::vector<CompileCase> cases;
  for (const char* arch : {"sm_80", "sm_90a"}) {
    for (DType dtype : {DType::kBF16, DType::kFP16, DType::kFP32}) {
      cases.push_back({std::string(dtype_name(dtype)) + "_" + arch, dtype, 4096, 128256, arch});
    }
  }
  // The portable loop on Hopper (SHARDJIT_HOPPER_PATH=0) stays a compiled path too.
  for (DType dtype : {DType::kBF16, DType::kFP16}) {
    cases.push_back({std::string(dtype_name(dtype)) + "_sm_90a_portable", dtype, 4096, 128256, "sm_90a", false});
  }
  return cases;
}

class RegisteredTemplates : public ::testing::TestWithParam<CompileCase> {};

TEST_P(RegisteredTemplates, CompileToCubin) {
  const CompileCase& c = GetParam();
  LinearLogpConfig config;
  config.hidden = c.hidden;
  config.vocab_local = c.vocab;
  config.dtype = c.dtype;
  config.bias_dtype = DType::kBF16;
  config.want_entropy = true;
  LinearLogpKernels kernels = linear_logp_kernels(resolve_layout(config), c.arch, 1, c.hopper_path);
  TemplateSources sources = TemplateSources::embedded();
  NvrtcCompiler compiler;
  // The forward kernel of this dtype, in the op's tile and its other tiles (sm_90a), and the combine
  // kernel; together every registered template.
  std::vector<const KernelSpec*> specs{&kernels.fwd, &kernels.combine};
  for (const OtherFwdSpec& other : kernels.other_fwd) specs.push_back(&other.spec);
  for (const KernelSpec* spec : specs) {
    KernelSource source{spec->canonical_text(), spec->name_expression(), sources.flatten(spec->def().file)};
    CompiledKernel compiled = compiler.compile(source, c.arch);
    EXPECT_GT(compiled.cubin.size(), 1000u) << spec->canonical_text();
    EXPECT_EQ(compiled.cubin.compare(0, 4, "\x7f" "ELF"), 0) << "a CUBIN is an ELF image";
    EXPECT_FALSE(compiled.lowered_name.empty());
    EXPECT_FALSE(ptxas_performance_loss(compiled)) << spec->canonical_text() << "\n" << compiled.log;
  }
}

INSTANTIATE_TEST_SUITE_P(Arches, RegisteredTemplates, ::testing::ValuesIn(compile_cases()),
                         [](const auto& param_info) { return param_info.param.name; });

TEST(NvrtcCompiler, EveryRegisteredTemplateIsCoveredAbove) {
  // The cases above reach the forwards (linear_logp_fwd on the portable loops,
  // linear_logp_fwd_hopper and linear_logp_fwd_rows_as_n on sm_90a's) and the combine. Adding a
  // template means adding it to the compile cases above, or, for the backward's
  // templates (linear_logp_bwd_dz and linear_logp_bwd_dz_hopper, linear_logp_bwd_scale,
  // linear_logp_bwd_bias, gemm, and the kept chunk's linear_logp_fwd_keep and
  // linear_logp_bwd_kept_dz), to bwd_compile_test.cpp, or, for the cross-GPU ones (reduce_scatter,
  // moe_combine), to collective_compile_test.cpp.
  EXPECT_EQ(template_registry().size(), 13u);
}

TEST(NvrtcCompiler, FailedCompileCarriesLogAndOffendingLine) {
  KernelSource source{"broken<>", "broken_kernel<1>",
                      "#line 1 \"demo/broken.cuh\"\n"
                      "template <int N> __global__ void broken_kernel() {\n"
                      "  int x = undeclared_name_here + N;\n"
                      "}\n"};
  try {
    NvrtcCompiler().compile(source, "sm_80");
    FAIL() << "expected a compile error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(e.code(), ErrorCode::kCompileFailed);
    EXPECT_NE(message.find("undeclared_name_here"), std::string::npos) << message;
    EXPECT_NE(message.find("demo/broken.cuh:2:"), std::string::npos) << "quotes the template line:\n" << message;
    EXPECT_NE(message.find("SHARDJIT_DUMP_DIR"), std::string::npos) << "says how to keep the source:\n" << message;
  }
  // With a dump folder the message names the file that holds the specialized source.
  testing::TempDir dir;
  try {
    NvrtcCompiler(dir.path().string()).compile(source, "sm_80");
    FAIL() << "expected a compile error";
  } catch (const Error& e) {
    const std::string message = e.what();
    const std::string::size_type at = message.find("specialized source: ");
    ASSERT_NE(at, std::string::npos) << message;
    const std::string path = message.substr(at + 20, message.find('\n', at) - at - 20);
    EXPECT_TRUE(std::filesystem::exists(path)) << path;
  }
}

TEST(NvrtcCompiler, IdentityNamesTheVersionAndTheLibrary) {
  const std::string identity = NvrtcCompiler::identity();
  EXPECT_EQ(identity.rfind(NvrtcCompiler::version() + " ", 0), 0u) << identity;
  EXPECT_GT(identity.size(), NvrtcCompiler::version().size() + 1) << identity;
}

TEST(NvrtcCompiler, PerformanceLossesAreRecognizedInTheLog) {
  CompiledKernel compiled;
  EXPECT_FALSE(ptxas_performance_loss(compiled));
  // As ptxas 13.0 words it (here for a GEMM whose alpha was read before its K loop).
  compiled.log =
      "ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized due to non "
      "wgmma instructions defining accumulator registers of a wgmma between start and end of the pipeline stage in "
      "the function 'gemm'";
  EXPECT_TRUE(ptxas_performance_loss(compiled));
  // A producer warpgroup whose code needs more registers than its setmaxnreg leaves it.
  compiled.log = "ptxas info    : (C7507) Potential Performance Loss: 'setmaxnreg' ignored to maintain minimum "
                 "register requirements.";
  EXPECT_TRUE(ptxas_performance_loss(compiled));
  compiled.log = "linear_logp/combine.cuh(30): warning #39-D: division by zero";
  EXPECT_FALSE(ptxas_performance_loss(compiled));
}

TEST(NvrtcCompiler, DumpFolderReceivesSourcePtxAndCubin) {
  testing::TempDir dir;
  KernelSpec spec = logp_combine_spec(DType::kInt64, false);
  KernelSource source{spec.canonical_text(), spec.name_expression(),
                      TemplateSources::embedded().flatten(spec.def().file)};
  NvrtcCompiler(dir.path().string()).compile(source, "sm_80");
  std::set<std::string> extensions;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    EXPECT_GT(entry.file_size(), 0u) << entry.path();
    extensions.insert(entry.path().extension().string());
  }
  EXPECT_TRUE(extensions.count(".cu") && extensions.count(".ptx") && extensions.count(".cubin"))
      << "dumped: " << extensions.size() << " kinds of file";
}

// check_arch's message for a refused arch ("" when it was accepted, which fails the test).
std::string arch_refusal(const std::string& arch) {
  try {
    NvrtcCompiler::check_arch(arch);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    return e.what();
  }
  ADD_FAILURE() << arch << " was accepted";
  return "";
}

TEST(NvrtcCompiler, UnknownArchIsRejectedWithTheSupportedList) {
  const std::string message = arch_refusal("sm_999");
  EXPECT_NE(message.find("sm_90a"), std::string::npos) << message;
}

// NVRTC still builds sm_75, but the kernels need Ampere's instructions: refused before a compile,
// by name, rather than with ptxas's errors.
TEST(NvrtcCompiler, ArchsOlderThanTheKernelsAreRejected) {
  const std::vector<std::string> archs = NvrtcCompiler::supported_archs();
  EXPECT_EQ(std::find(archs.begin(), archs.end(), "sm_75"), archs.end());
  EXPECT_NE(std::find(archs.begin(), archs.end(), "sm_80"), archs.end());
  const std::string message = arch_refusal("sm_75");
  EXPECT_NE(message.find("need sm_80 or newer"), std::string::npos) << message;
}

TEST(NvrtcCompiler, OptionsNameTheArch) {
  auto options = NvrtcCompiler::compile_options("sm_90a");
  EXPECT_NE(std::find(options.begin(), options.end(), "-arch=sm_90a"), options.end());
}

}  // namespace
}  // namespace shardjit
