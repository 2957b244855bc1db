// shardjit-bench: GPU benchmarks of the ops against their baselines, one JSON object per case.
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>

#include "linear_logp_bench.hpp"
#include "linear_logp_sweep.hpp"
#include "linear_logp_tp_bench.hpp"
#include "reduce_scatter_bench.hpp"
#include "shardjit/dtype.hpp"

int main(int argc, char** argv) {
  using namespace shardjit::bench;
  CLI::App app{"shardjit GPU benchmarks (median of CUDA-event timings against a baseline in the same process)"};
  app.require_subcommand(1);
  TimingOptions timing;
  app.add_option("--warmup", timing.warmup, "untimed runs first")->check(CLI::PositiveNumber);
  app.add_option("--iters", timing.iterations, "timed runs; the median is reported")->check(CLI::PositiveNumber);
  app.add_flag("--sequential", timing.sequential,
               "linear-logp: time all of the op's calls, then all of the baseline's, instead of interleaved rounds "
               "(the method of the results before 2026-12-01)");
  app.add_option("--energy", timing.energy_seconds,
                 "linear-logp: also measure the board's energy per call (NVML) over about this many seconds "
                 "for the op and for the baseline")
      ->check(CLI::NonNegativeNumber);

  auto* logp = app.add_subcommand("linear-logp", "fused forward vs cuBLAS GEMM of the same shape");
  std::string shapes = "../shared/bench/shapes.json", only, dtype_text = "bf16";
  std::int64_t n = 0, hidden = 0, vocab = 0;
  bool entropy = false, backward = false;
  std::int64_t keep_logits_bytes = 0;
  logp->add_option("--shapes", shapes, "shapes.json with the standard cases");
  logp->add_option("--case", only, "run only the case of this name");
  logp->add_option("--n", n, "rows (with --hidden and --vocab: one custom case)");
  logp->add_option("--hidden", hidden, "hidden size");
  logp->add_option("--vocab", vocab, "vocabulary rows");
  logp->add_option("--dtype", dtype_text, "bf16, fp16 or fp32");
  logp->add_flag("--entropy", entropy, "also compute the entropy");
  logp->add_flag("--backward", backward, "time forward + backward (ratio over one GEMM; 4x is the recompute bound)");
  logp->add_option("--keep-logits-bytes", keep_logits_bytes,
                   "with --backward: bytes the op may add to keep logits for the backward (LinearLogpConfig::"
                   "keep_logits_bytes; 0: the default)")
      ->check(CLI::NonNegativeNumber);
  SweepOptions sweep;
  bool sweeping = false;
  logp->add_flag("--sweep", sweeping,
                 "time every point of a grid of heads, TP shards, row counts, dtypes and modes (--grid); JSONL rows "
                 "(--out) and the worst points at the end");
  logp->add_option("--grid", sweep.grid, "sweep: the grid file (JSON)");
  logp->add_flag("--quick", sweep.quick, "sweep: the grid's \"quick\" subset instead of \"full\"");
  logp->add_option("--out", sweep.out, "sweep: write one JSON row per point to this file");
  logp->add_flag("--dry-run", sweep.dry_run, "sweep: list the points and a time estimate; no GPU needed");
  logp->add_option("--worst", sweep.worst, "sweep: worst points printed per mode")->check(CLI::NonNegativeNumber);
  logp->add_option("--compile-jobs", sweep.compile_jobs, "sweep: kernels compiled at once first (0: every CPU thread)")
      ->check(CLI::NonNegativeNumber);

  auto* logp_tp = app.add_subcommand(
      "linear-logp-tp", "tensor-parallel forward, one process per GPU: per-rank time over the single-GPU forward, "
                        "and the combine step (all-gather + combine kernel) alone");
  std::string tp_shapes = "../shared/bench/shapes.json", tp_case = "llama3-8b-16k-tp2", single_case = "llama3-8b-16k";
  std::int64_t combine_rows = 16384;
  logp_tp->add_option("--shapes", tp_shapes, "shapes.json with the standard cases");
  logp_tp->add_option("--case", tp_case, "the TP case (its tp is the number of processes and GPUs)");
  logp_tp->add_option("--baseline-case", single_case, "the single-GPU case it is compared with");
  logp_tp->add_option("--combine-n", combine_rows, "rows of the timed combine step")->check(CLI::PositiveNumber);

  auto* rs = app.add_subcommand("reduce-scatter",
                                "ReduceScatter on every GPU (one process each) vs ncclReduceScatter, same communicator");
  std::string rs_shapes = "../shared/bench/shapes.json", rs_case, rs_dtype = "bf16";
  std::int64_t rs_tokens = 0, rs_hidden = 0;
  int rs_ranks = 2;
  rs->add_option("--shapes", rs_shapes, "shapes.json with the standard cases");
  rs->add_option("--case", rs_case, "run only the case of this name");
  rs->add_option("--tokens", rs_tokens, "rows of every rank's input (with --hidden: one custom case)");
  rs->add_option("--hidden", rs_hidden, "hidden size");
  rs->add_option("--dtype", rs_dtype, "bf16, fp16 or fp32");
  rs->add_option("--ranks", rs_ranks, "processes (GPUs)")->check(CLI::Range(2, 8));

  CLI11_PARSE(app, argc, argv);
  if (rs->parsed()) {
    try {
      std::vector<ReduceScatterCase> cases;
      if (rs_tokens > 0 || rs_hidden > 0) {
        auto dtype = shardjit::parse_dtype(rs_dtype);
        if (!dtype || rs_tokens <= 0 || rs_hidden <= 0) {
          std::fprintf(stderr, "shardjit-bench: a custom case needs --tokens, --hidden > 0 and a float --dtype\n");
          return 2;
        }
        cases.push_back({"custom", rs_tokens, rs_hidden, *dtype});
      } else {
        for (const auto& c : load_reduce_scatter_cases(rs_shapes)) {
          if (rs_case.empty() || c.name == rs_case) cases.push_back(c);
        }
      }
      return run_reduce_scatter_cases(cases, rs_ranks, timing);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "shardjit-bench: %s\n", e.what());
      return 1;
    }
  }
  if (logp_tp->parsed()) {
    try {
      LinearLogpTpCase c = load_linear_logp_tp_case(tp_shapes, tp_case, single_case);
      c.combine_rows = combine_rows;
      return run_linear_logp_tp_case(c, timing);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "shardjit-bench: %s\n", e.what());
      return 1;
    }
  }
  try {
    if (sweeping) {
      // Fewer rounds a point than a single case takes, so that the whole grid fits a few minutes;
      // medians of 10 interleaved rounds spread by about 1 % at the standard shapes.
      if (app.count("--warmup") == 0) timing.warmup = 3;
      if (app.count("--iters") == 0) timing.iterations = 10;
      return run_linear_logp_sweep(sweep, timing);
    }
    std::vector<LinearLogpCase> cases;
    if (n > 0 || hidden > 0 || vocab > 0) {
      auto dtype = shardjit::parse_dtype(dtype_text);
      if (!dtype || n <= 0 || hidden <= 0 || vocab <= 0) {
        std::fprintf(stderr, "shardjit-bench: a custom case needs --n, --hidden, --vocab > 0 and a float --dtype\n");
        return 2;
      }
      cases.push_back({"custom", n, hidden, vocab, *dtype, entropy, backward, keep_logits_bytes});
    } else {
      for (auto& c : load_linear_logp_cases(shapes)) {
        if (!only.empty() && c.name != only) continue;
        c.entropy = entropy;
        c.backward = backward;
        c.keep_logits_bytes = keep_logits_bytes;
        cases.push_back(c);
      }
    }
    for (const auto& c : cases) run_linear_logp_case(c, timing);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shardjit-bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
