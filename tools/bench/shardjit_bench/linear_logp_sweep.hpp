// `shardjit-bench linear-logp --sweep`: the fused op against the same-process cuBLAS GEMM over a
// grid of shapes (LM heads, their TP shards, row counts, dtypes, forward and forward + backward)
// read from a JSON file (tools/bench/sweep_grid.json), one JSONL row per point.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpu_timer.hpp"
#include "linear_logp_bench.hpp"

namespace shardjit::bench {

// One point of the grid: a case, and where in the grid it comes from.
struct SweepPoint {
  std::string head;  // the head's name in the grid, e.g. "deepseek-v3/tp8"
  int tp = 1;        // the head's vocabulary is split this many ways; the point times one shard
  LinearLogpCase c;  // vocab is the shard's rows, ceil(head vocab / tp)
};

// The points of the grid's list of blocks named `list` ("full", "quick", "backward", ...), each
// point once, ordered so that the points of one compiled op (hidden, vocabulary and its padding,
// dtype) follow each other. Throws std::runtime_error naming the file and what in it is wrong (a list it does
// not have: with the lists it has).
std::vector<SweepPoint> load_sweep_points(const std::string& grid_path, const std::string& list);

// A rough roofline estimate of a point's GPU seconds (warm-up and timed rounds of the op and the
// GEMM, plus setting the point up), for choosing a grid that fits the time there is.
double estimated_point_seconds(const SweepPoint& point, const TimingOptions& timing);

struct SweepOptions {
  std::string grid = SHARDJIT_BENCH_SWEEP_GRID;  // tools/bench/sweep_grid.json of the sources
  std::string list = "full";  // the grid's list of blocks to run (--list; --quick: "quick")
  std::string out;        // JSONL file, one row per point; empty: stdout only
  bool resume = false;    // keep out's rows of points already timed, time the others
  bool dry_run = false;   // list the points and the estimate; no GPU
  int worst = 10;         // worst points printed per mode at the end
  int compile_jobs = 0;   // kernels compiled at once before timing; 0: the CPU's threads
};

// Runs (or with dry_run lists) the sweep; returns the process's exit code. Every kernel of the
// grid is compiled first, in parallel, so that no point waits for NVRTC. A point that fails is
// written as a row with "error" and the sweep goes on.
int run_linear_logp_sweep(const SweepOptions& options, const TimingOptions& timing);

}  // namespace shardjit::bench
