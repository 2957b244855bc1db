// `shardjit prewarm`: compile every kernel a deployment will load, so that servers can start in
// cache-only mode (SHARDJIT_JIT=0) and never compile on a request path.
#include <cstdio>
#include <memory>

#include "runtime/tooling.hpp"
#include "shardjit/error.hpp"
#include "shardjit/runtime.hpp"
#include "tools/cli/commands.hpp"
#include "tools/cli/prewarm_request.hpp"
#include "tools/cli/prewarm_runner.hpp"
#include "tools/cli/prewarm_tuning.hpp"

namespace shardjit::cli {
namespace {

// A comma-separated list option. It takes one word per use, so that a config file that follows it
// (`--arch sm_90a config.json`) stays a config file; kernels_to_prewarm splits the words at the commas
// itself, refusing empty items (CLI11 would drop them silently).
CLI::Option* add_list_option(CLI::App& sub, const std::string& name, std::vector<std::string>& values,
                             const std::string& help) {
  return sub.add_option(name, values, help)->allow_extra_args(false);
}

void add_model_options(CLI::App& sub, PrewarmOptions& o) {
  sub.add_option("configs", o.configs, "Model config.json files (or model folders holding one)");
  CLI::Option* hidden = sub.add_option("--hidden", o.hidden, "Hidden size of a model given without a config");
  CLI::Option* vocab = sub.add_option("--vocab", o.vocab, "Vocabulary size (LM head rows) of that model");
  CLI::Option* valid = sub.add_option("--valid-vocab", o.valid_vocab,
                                      "Ids at or past it are padding (default: all of --vocab)");
  // --hidden alone is enough for --collectives-only; kernels_to_prewarm checks the pair otherwise.
  vocab->needs(hidden);
  valid->needs(vocab);
  sub.add_option("--shard", o.shard,
                 "One explicit vocabulary shard START:SIZE instead of the even split of each --tp degree");
  add_list_option(sub, "--tp", o.tp, "TP degrees, comma separated (default 1)");
}

void add_kernel_options(CLI::App& sub, PrewarmOptions& o) {
  add_list_option(sub, "--dtype", o.dtypes, "bf16, fp16, fp32 (default: the config's torch_dtype, else bf16)");
  add_list_option(sub, "--arch", o.archs, "Targets such as sm_80,sm_90a (default: SHARDJIT_ARCH, else GPU 0's)");
  add_list_option(sub, "--targets", o.targets, "Target id dtypes: int64, int32 (default int64)");
  add_list_option(sub, "--bias", o.bias, "Bias dtypes: none, bf16, fp16, fp32 (default none)");
  sub.add_option("--entropy", o.entropy, "off, on or both (default off)");
  CLI::Option* backward = sub.add_flag("--backward", o.backward, "Also the kernels of the backward (training)");
  sub.add_flag("--dz-fp32", o.dz_fp32, "With --backward: also those of ops built with dz_fp32")->needs(backward);
  sub.add_flag("--grad-filter", o.grad_filter,
               "With --backward: also those of ops that filter gradient tiles (grad_filter_threshold > 0)")
      ->needs(backward);
  sub.add_flag("--collectives", o.collectives,
               "Also ReduceScatter's and MoeCombine's kernels for each hidden size, dtype and --tp up to 8 (at "
               "--tp 1, MoeCombine's only)");
  sub.add_flag("--collectives-only", o.collectives_only,
               "Only those (then --hidden H is enough; no --vocab)");
  sub.add_option("--jobs,-j", o.jobs, "Parallel compiles (default: one per hardware thread)");
  sub.add_flag("--tune", o.tune,
               "Then time the forward tile candidates of each single-GPU op on GPU 0 and record the fastest "
               "in the cache (needs a GPU; ops with a record keep it)");
}

void print_summary(const PrewarmSummary& summary) {
  std::printf("prewarm: %zu kernels: %zu compiled, %zu prebuilt, %zu already cached, %zu failed (%.1f s)\n",
              summary.total, summary.compiled, summary.prebuilt, summary.cached, summary.failures.size(),
              summary.seconds);
  std::fflush(stdout);
  if (!summary.missing.empty()) {
    std::printf("prewarm: %zu of those kernels are not in the cache folder any more\n", summary.missing.size());
    std::fflush(stdout);
  }
  const auto print_kernels = [](const char* label, const std::vector<PrewarmFailure>& kernels) {
    for (const PrewarmFailure& kernel : kernels) {
      std::fprintf(stderr, "%s: %s (for %s): %s\n", label, kernel.kernel.c_str(), kernel.origin.c_str(),
                   kernel.error.c_str());
    }
  };
  print_kernels("failed", summary.failures);
  print_kernels("missing", summary.missing);
}

int run(const GlobalOptions& globals, const PrewarmOptions& prewarm) {
  RuntimeOptions options = runtime_options(globals);
  options.jit = true;  // a prewarm compiles, whatever SHARDJIT_JIT says for the servers
  // Everything is checked before the Runtime exists: a bad argument must not touch the cache.
  const int jobs = parse_jobs(prewarm.jobs);
  const RuntimeConfig config = resolve_cli_config(globals);
  const std::vector<PrewarmItem> items = kernels_to_prewarm(prewarm, config);
  if (prewarm.tune) {
    if (device_count() == 0) {
      throw Error(ErrorCode::kNoDevice, "prewarm --tune times kernels on GPU 0, and this machine has no GPU; "
                                        "run it on a machine like the servers', or leave --tune out");
    }
    options.autotune = true;
  }
  // A prewarm only counts where its kernels are stored: a cache folder this user cannot write (or
  // create) is refused now, where a Runtime would warn and compile into memory alone.
  open_disk_cache(config, true);
  Runtime runtime(options);
  Progress progress(items.size(), stderr);
  PrewarmSummary summary = run_prewarm(tooling::kernel_cache(runtime), items, jobs, progress);
  print_summary(summary);
  bool ok = summary.failures.empty() && summary.missing.empty();
  if (prewarm.tune) {
    const TuningSummary tuning = tune_prewarmed(runtime, items, stdout);
    std::printf("tune: %zu ops recorded, %zu left for other archs, %zu failed\n", tuning.tuned, tuning.skipped,
                tuning.failed);
    ok = ok && tuning.failed == 0;
  }
  return ok ? kExitOk : kExitFailed;
}

}  // namespace

Command add_prewarm_command(CLI::App& app, const GlobalOptions& globals) {
  auto args = std::make_shared<PrewarmOptions>();
  CLI::App* sub = app.add_subcommand("prewarm", "Compile the kernels of models into the cache ahead of use");
  add_model_options(*sub, *args);
  add_kernel_options(*sub, *args);
  // LinearLogp's settings mean nothing to the collectives alone: refused rather than ignored.
  CLI::Option* collectives_only = sub->get_option("--collectives-only");
  for (const char* name : {"--valid-vocab", "--shard", "--targets", "--bias", "--entropy", "--backward", "--tune"}) {
    collectives_only->excludes(sub->get_option(name));
  }
  return Command{sub, [&globals, args] { return run(globals, *args); }};
}

}  // namespace shardjit::cli
