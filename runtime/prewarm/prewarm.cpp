// shardjit::prewarm (include/shardjit/prewarm.hpp): the kernels of prewarm_items, built through
// the Runtime's cache by build_prewarm_items.
#include "shardjit/prewarm.hpp"

#include <string>
#include <utility>

#include "runtime/compile/compile_pool.hpp"
#include "runtime/compile/nvrtc_compiler.hpp"
#include "runtime/prewarm/build.hpp"
#include "runtime/prewarm/plan.hpp"
#include "runtime/runtime_impl.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

void bad_config(const std::string& what) { throw Error(ErrorCode::kInvalidArgument, "prewarm: " + what); }

}  // namespace

void check_prewarm_config(const PrewarmConfig& config) {
  // An empty list would make a prewarm of nothing that reports success, and a server started
  // cache-only after it fails at its first op.
  struct List {
    const char* name;
    bool empty;
    const char* expected;
  };
  const List lists[] = {{"archs", config.archs.empty(), "at least one target arch, e.g. \"sm_90a\""},
                        {"tp", config.tp.empty(), "at least one value"},
                        {"dtypes", config.dtypes.empty(), "at least one value"},
                        {"target_dtypes", config.target_dtypes.empty(), "at least one value"},
                        {"bias_dtypes", config.bias_dtypes.empty(), "at least one value"},
                        {"entropy", config.entropy.empty(), "at least one value"}};
  for (const List& list : lists) {
    if (list.empty) bad_config(std::string(list.name) + ": expected " + list.expected);
  }
  if (config.jobs < 0) bad_config("jobs: expected 1 or more, or 0 for one per hardware thread, got " +
                                  std::to_string(config.jobs));
  // As the CLI's --dz-fp32 and --grad-filter: variants of the backward, meaningless without it.
  for (const auto& [name, on] : {std::pair{"dz_fp32", config.dz_fp32}, std::pair{"grad_filter", config.grad_filter}}) {
    if (on && !config.backward) {
      bad_config(std::string(name) + " adds variants of the backward's kernels; expected backward with it");
    }
  }
  // An arch NVRTC cannot build for would fail every kernel, each as a failure, not an error.
  for (const std::string& arch : config.archs) {
    try {
      NvrtcCompiler::check_arch(arch);
    } catch (const Error& error) {
      bad_config(std::string("archs: ") + error.what());
    }
  }
}

PrewarmResult prewarm(Runtime& runtime, const PrewarmConfig& config) {
  check_prewarm_config(config);
  Runtime::Impl& impl = runtime.impl();
  if (!impl.config.jit) {
    bad_config("the Runtime has JIT off (cache-only, SHARDJIT_JIT=0); expected one that may compile into its cache");
  }
  PrewarmRequest request;
  request.models = {ModelShape{"prewarm", config.hidden, config.vocab, config.valid_vocab}};
  request.tp = config.tp;
  request.dtypes = config.dtypes;
  request.archs = config.archs;
  request.target_dtypes = config.target_dtypes;
  request.bias_dtypes = config.bias_dtypes;
  request.entropy = config.entropy;
  request.backward = config.backward;
  request.dz_fp32 = config.dz_fp32;
  request.grad_filter = config.grad_filter;
  request.collectives = config.collectives;
  request.hopper_path = impl.config.hopper_path;
  const std::vector<PrewarmItem> items = prewarm_items(request);
  PrewarmResult result;
  result.total = items.size();
  const int jobs = config.jobs > 0 ? config.jobs : static_cast<int>(default_compile_jobs());
  build_prewarm_items(impl.cache, items, jobs,
                      [&](const PrewarmItem& item, PrewarmOutcome outcome, const std::string& error) {
                        if (outcome == PrewarmOutcome::kCompiled) ++result.compiled;
                        if (outcome == PrewarmOutcome::kCached) ++result.cached;
                        if (outcome == PrewarmOutcome::kPrebuilt) ++result.prebuilt;
                        if (outcome == PrewarmOutcome::kFailed) {
                          result.failures.push_back(item.name() + ": " + error);
                        }
                      },
                      [&](const PrewarmItem& item, const std::string& error) {
                        result.missing.push_back(item.name() + ": " + error);
                      });
  return result;
}

}  // namespace shardjit
