// A cold NVRTC compile of each kernel template for a tiny shape: what a cache miss costs, and
// what a prewarm spends per kernel. NvrtcCompiler is called directly, so no cache is involved.
#include <benchmark/benchmark.h>

#include "runtime/compile/nvrtc_compiler.hpp"
#include "runtime/compile/template_sources.hpp"
#include "tools/bench/host/bench_support.hpp"

namespace shardjit::bench {
namespace {

constexpr const char* kArch = "sm_90a";

void compile_template(benchmark::State& state, const std::string& template_name) {
  const KernelSpec spec = tiny_spec(template_name, kArch);
  const KernelSource source{spec.canonical_text(), spec.name_expression(),
                            TemplateSources::embedded().flatten(spec.def().file)};
  const NvrtcCompiler compiler;
  for (auto _ : state) {
    CompiledKernel compiled = compiler.compile(source, kArch);
    benchmark::DoNotOptimize(compiled.cubin.data());
  }
  state.SetLabel(spec.canonical_text());
}

void BM_CompileLogpCombine(benchmark::State& state) { compile_template(state, "logp_combine"); }
void BM_CompileLinearLogpFwd(benchmark::State& state) { compile_template(state, "linear_logp_fwd_hopper"); }

BENCHMARK(BM_CompileLogpCombine)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CompileLinearLogpFwd)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace shardjit::bench
