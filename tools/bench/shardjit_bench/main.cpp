// shardjit-bench: GPU benchmarks of the ops against their baselines, one JSON object per case.
#include <cstdio>
#include <exception>
#include <string>

#include <CLI/CLI.hpp>
#include <cuda_runtime.h>

#include "linear_logp_bench.hpp"
#include "linear_logp_sweep.hpp"
#include "linear_logp_tp_bench.hpp"
#include "reduce_scatter_bench.hpp"
#include "shardjit/dtype.hpp"
#include "shardjit/linear_logp.hpp"

namespace {

using namespace shardjit::bench;

// A custom case's options were given, but not all of them, or a dtype that is not a float one.
constexpr int kBadCustomCase = 2;
// A timing was asked for where no GPU is visible: the skip status of the automake convention,
// which the test tiers' SKIP_RETURN_CODE takes, so that a GPU test of the benchmark skips itself.
constexpr int kNoGpu = 77;

// Why no timing can run here: empty where the CUDA runtime sees a GPU, else its reason.
std::string missing_gpu() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) return cudaGetErrorString(status);
  return count > 0 ? std::string() : std::string("no CUDA device");
}

struct LogpOptions {
  std::string shapes = SHARDJIT_BENCH_SHAPES, only, dtype = "bf16";
  std::int64_t n = 0, hidden = 0, vocab = 0, valid_vocab = 0;
  bool entropy = false, backward = false;
  std::int64_t keep_logits_bytes = shardjit::LinearLogpConfig{}.keep_logits_bytes;
  bool sweeping = false;
  SweepOptions sweep;
};

struct LogpTpOptions {
  std::string shapes = SHARDJIT_BENCH_SHAPES, tp_case = "llama3-8b-16k-tp2", single_case = "llama3-8b-16k";
  std::int64_t combine_rows = 16384;
};

struct ReduceScatterOptions {
  std::string shapes = SHARDJIT_BENCH_SHAPES, only, dtype = "bf16";
  std::int64_t tokens = 0, hidden = 0;
  int ranks = 2;
};

void add_timing_options(CLI::App& app, TimingOptions& timing) {
  app.add_option("--warmup", timing.warmup, "untimed runs first")->check(CLI::PositiveNumber);
  app.add_option("--iters", timing.iterations, "timed runs; the median is reported")->check(CLI::PositiveNumber);
  app.add_flag("--sequential", timing.sequential,
               "linear-logp: time all of the op's calls, then all of the baseline's, instead of interleaved rounds "
               "(the method of the results before 2026-12-01)");
  app.add_option("--energy", timing.energy_seconds,
                 "linear-logp: also measure the board's energy per call (NVML) over about this many seconds "
                 "for the op and for the baseline")
      ->check(CLI::NonNegativeNumber);
}

CLI::App* add_logp(CLI::App& app, LogpOptions& o) {
  auto* logp = app.add_subcommand("linear-logp", "fused forward vs cuBLAS GEMM of the same shape");
  logp->add_option("--shapes", o.shapes, "shapes.json with the standard cases (default: tools/bench/shapes.json of the sources)");
  logp->add_option("--case", o.only, "run only the case of this name");
  logp->add_option("--n", o.n, "rows (with --hidden and --vocab: one custom case)");
  logp->add_option("--hidden", o.hidden, "hidden size");
  logp->add_option("--vocab", o.vocab, "vocabulary rows");
  logp->add_option("--valid-vocab", o.valid_vocab,
                   "tokens of the vocabulary: rows at or past it are padding, outside the softmax (0: every row)")
      ->check(CLI::NonNegativeNumber);
  logp->add_option("--dtype", o.dtype, "bf16, fp16 or fp32");
  logp->add_flag("--entropy", o.entropy, "also compute the entropy (with --backward: and take its gradient)");
  logp->add_flag("--backward", o.backward, "time forward + backward (ratio over one GEMM; 4x is the recompute bound)");
  logp->add_option("--keep-logits-bytes", o.keep_logits_bytes,
                   "with --backward: bytes the op may add to keep logits for the backward (LinearLogpConfig::"
                   "keep_logits_bytes; default: the op's)")
      ->check(CLI::NonNegativeNumber);
  logp->add_flag("--sweep", o.sweeping,
                 "time every point of a grid of heads, TP shards, row counts, dtypes and modes (--grid); JSONL rows "
                 "(--out) and the worst points at the end");
  logp->add_option("--grid", o.sweep.grid,
                   "sweep: the grid file (JSON; default: tools/bench/sweep_grid.json of the sources)");
  logp->add_option("--list", o.sweep.list,
                   "sweep: the grid's list of blocks to run (default \"full\"; tools/bench/sweep_grid.json also has "
                   "\"quick\", \"forward\" and \"backward\")");
  logp->add_flag_callback("--quick", [&o] { o.sweep.list = "quick"; }, "sweep: --list quick");
  logp->add_option("--out", o.sweep.out, "sweep: write one JSON row per point to this file");
  logp->add_flag("--resume", o.sweep.resume,
                 "sweep: keep the rows of --out whose points were timed (failed ones are dropped) and time the rest");
  logp->add_flag("--dry-run", o.sweep.dry_run, "sweep: list the points and a time estimate; no GPU needed");
  logp->add_option("--worst", o.sweep.worst, "sweep: worst points printed per mode")->check(CLI::NonNegativeNumber);
  logp->add_option("--compile-jobs", o.sweep.compile_jobs, "sweep: kernels compiled at once first (0: every CPU thread)")
      ->check(CLI::NonNegativeNumber);
  return logp;
}

CLI::App* add_logp_tp(CLI::App& app, LogpTpOptions& o) {
  auto* logp_tp = app.add_subcommand(
      "linear-logp-tp", "tensor-parallel forward, one process per GPU: per-rank time over the single-GPU forward, "
                        "and the combine step (all-gather + combine kernel) alone");
  logp_tp->add_option("--shapes", o.shapes, "shapes.json with the standard cases (default: tools/bench/shapes.json of the sources)");
  logp_tp->add_option("--case", o.tp_case, "the TP case (its tp is the number of processes and GPUs)");
  logp_tp->add_option("--baseline-case", o.single_case, "the single-GPU case it is compared with");
  logp_tp->add_option("--combine-n", o.combine_rows, "rows of the timed combine step")->check(CLI::PositiveNumber);
  return logp_tp;
}

CLI::App* add_reduce_scatter(CLI::App& app, ReduceScatterOptions& o) {
  auto* rs = app.add_subcommand("reduce-scatter",
                                "ReduceScatter on every GPU (one process each) vs ncclReduceScatter, same communicator");
  rs->add_option("--shapes", o.shapes, "shapes.json with the standard cases (default: tools/bench/shapes.json of the sources)");
  rs->add_option("--case", o.only, "run only the case of this name");
  rs->add_option("--tokens", o.tokens, "rows of every rank's input (with --hidden: one custom case)");
  rs->add_option("--hidden", o.hidden, "hidden size");
  rs->add_option("--dtype", o.dtype, "bf16, fp16 or fp32");
  rs->add_option("--ranks", o.ranks, "processes (GPUs)")->check(CLI::Range(2, 8));
  return rs;
}

int run_logp(const LogpOptions& o, TimingOptions timing, const CLI::App& app) {
  if (o.sweeping) {
    // Fewer rounds a point than a single case takes, so that the whole grid fits a few minutes;
    // medians of 10 interleaved rounds spread by about 1 % at the standard shapes.
    if (app.count("--warmup") == 0) timing.warmup = 3;
    if (app.count("--iters") == 0) timing.iterations = 10;
    return run_linear_logp_sweep(o.sweep, timing);
  }
  std::vector<LinearLogpCase> cases;
  if (o.n > 0 || o.hidden > 0 || o.vocab > 0) {
    auto dtype = shardjit::parse_dtype(o.dtype);
    if (!dtype || o.n <= 0 || o.hidden <= 0 || o.vocab <= 0 || o.valid_vocab > o.vocab) {
      std::fprintf(stderr, "shardjit-bench: a custom case needs --n, --hidden, --vocab > 0, --valid-vocab <= --vocab "
                           "and a float --dtype\n");
      return kBadCustomCase;
    }
    cases.push_back(
        {"custom", o.n, o.hidden, o.vocab, *dtype, o.entropy, o.backward, o.keep_logits_bytes, o.valid_vocab});
  } else {
    for (auto& c : load_linear_logp_cases(o.shapes)) {
      if (!o.only.empty() && c.name != o.only) continue;
      c.entropy = o.entropy;
      c.backward = o.backward;
      c.keep_logits_bytes = o.keep_logits_bytes;
      cases.push_back(c);
    }
  }
  for (const auto& c : cases) {
    std::printf("%s\n", run_linear_logp_case(c, timing).dump().c_str());
    std::fflush(stdout);
  }
  return 0;
}

int run_logp_tp(const LogpTpOptions& o, const TimingOptions& timing) {
  LinearLogpTpCase c = load_linear_logp_tp_case(o.shapes, o.tp_case, o.single_case);
  c.combine_rows = o.combine_rows;
  return run_linear_logp_tp_case(c, timing);
}

int run_reduce_scatter(const ReduceScatterOptions& o, const TimingOptions& timing) {
  std::vector<ReduceScatterCase> cases;
  if (o.tokens > 0 || o.hidden > 0) {
    auto dtype = shardjit::parse_dtype(o.dtype);
    if (!dtype || o.tokens <= 0 || o.hidden <= 0) {
      std::fprintf(stderr, "shardjit-bench: a custom case needs --tokens, --hidden > 0 and a float --dtype\n");
      return kBadCustomCase;
    }
    cases.push_back({"custom", o.tokens, o.hidden, *dtype});
  } else {
    for (const auto& c : load_reduce_scatter_cases(o.shapes)) {
      if (o.only.empty() || c.name == o.only) cases.push_back(c);
    }
  }
  return run_reduce_scatter_cases(cases, o.ranks, timing);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"shardjit GPU benchmarks (median of CUDA-event timings against a baseline in the same process)"};
  app.require_subcommand(1);
  TimingOptions timing;
  add_timing_options(app, timing);
  LogpOptions logp;
  LogpTpOptions logp_tp;
  ReduceScatterOptions rs;
  add_logp(app, logp);
  CLI::App* logp_tp_command = add_logp_tp(app, logp_tp);
  CLI::App* rs_command = add_reduce_scatter(app, rs);
  CLI11_PARSE(app, argc, argv);
  try {
    if (!(logp.sweeping && logp.sweep.dry_run)) {
      if (const std::string missing = missing_gpu(); !missing.empty()) {
        std::fprintf(stderr, "shardjit-bench: a timing needs a GPU (%s); --sweep --dry-run lists a sweep without one\n",
                     missing.c_str());
        return kNoGpu;
      }
    }
    if (rs_command->parsed()) return run_reduce_scatter(rs, timing);
    if (logp_tp_command->parsed()) return run_logp_tp(logp_tp, timing);
    return run_logp(logp, timing, app);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shardjit-bench: %s\n", e.what());
    return 1;
  }
}
