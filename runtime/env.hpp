// The one table of environment knobs, and the configuration object they are read into once,
// when a Runtime is built. Nothing else in the library calls getenv.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "shardjit/runtime.hpp"

namespace shardjit {

struct EnvKnob {
  const char* name;
  const char* type;           // "path", "bool", "int", "bytes", "string", "level"
  const char* default_value;  // as text, for `shardjit info` and the README
  const char* doc;
};

std::span<const EnvKnob> env_knobs();

// The most compile threads a Runtime takes (RuntimeOptions::compile_jobs, SHARDJIT_COMPILE_JOBS,
// and the C and Python options that set it).
inline constexpr int kMaxCompileJobs = 4096;

struct RuntimeConfig {
  std::string cache_dir;
  bool jit = true;
  std::optional<std::string> template_dir;
  std::uint64_t cache_max_bytes = 0;
  std::optional<std::string> dump_dir;
  // The option, else SHARDJIT_LOG_LEVEL; none where neither is set. The level is the process's
  // (one logger, created at warn): a Runtime sets it only where it was asked to (runtime.cpp).
  std::optional<std::string> log_level;
  std::optional<std::string> arch;  // SHARDJIT_ARCH, the CLI prewarm's default target; empty: the device's own
  int compile_jobs = 0;             // SHARDJIT_COMPILE_JOBS; 0: one per hardware thread
  int peer_blocks = 0;              // 0: one block per SM for the peer-memory kernels
  bool peer_lines = true;           // small peer reduce-scatters in 128-byte lines where links allow
  bool hopper_path = true;          // the wgmma main loop where the target is sm_90a
  bool autotune = false;            // time tile candidates when an op without a tuning record is built
  // Experiments with the single-GPU forward's launch (A/B runs of the rules in one build): a tile
  // forced by name ("64x256x32x3-mma"; empty: the rule's or the tuning record's), and a forced
  // vocabulary split count (0: the rule's).
  std::string fwd_tile;
  int fwd_splits = 0;
  // Where the Hopper forward merges its partials (SHARDJIT_FWD_MERGE): -1 the rule's
  // (fwd_merges_in_kernel), 1 always in the forward kernel, 0 always in the combine kernel.
  int fwd_merge = -1;
  // The single-GPU forward on the tiles of the rows as N where choose_fwd_plan finds them faster:
  // false keeps the tiles of the rows as M (SHARDJIT_FWD_ROWS_AS_N=0), for A/B runs of the rule.
  bool fwd_rows_as_n = true;
  // The Hopper backward kernels' split along K (templates/common/stream_k.cuh): false keeps it to
  // grids of at most half the GPU (SHARDJIT_SPLIT_PARTIAL_WAVES=0), for A/B runs of the rule.
  bool split_partial_waves = true;
  // GEMMs split whole over a few row tiles, and GEMMs of less than a wave, in clusters that share
  // B's slices (cluster_stream_k), for A/B runs (SHARDJIT_SPLIT_CLUSTERS): -1 by its rule, 0 none
  // (the grids of less than a wave then run unsplit), 1 to 8 clusters of that many blocks wherever
  // they divide the row tiles (1: the same splits, each block alone, on as many blocks as fit).
  int split_clusters = -1;
  // The backward's chunk width rule (backward_chunks): false takes the widest chunks the dZ
  // budget allows (SHARDJIT_BWD_CHUNK_WAVES=0), for A/B runs of the rule.
  bool bwd_chunk_waves = true;
  // grad_hidden on the GEMM tiles that take a few hundred rows as wgmma's N where
  // gemm_rows_as_n_rows finds them faster: false keeps the 128 x 256 tiles (SHARDJIT_GEMM_ROWS_AS_N=0),
  // for A/B runs of the rule.
  bool gemm_rows_as_n = true;
};

// Options set in code win over the environment, which wins over the defaults. Throws
// Error(kInvalidArgument) naming the variable when a value cannot be parsed.
RuntimeConfig resolve_config(const RuntimeOptions& options);

// Parses "1", "0", "true", "false", "on", "off", "yes", "no".
std::optional<bool> parse_bool(const std::string& text);
// Parses a byte count: a number with an optional K, M, G or T suffix (powers of 1024).
std::optional<std::uint64_t> parse_bytes(const std::string& text);

}  // namespace shardjit
