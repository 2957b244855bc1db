// What `shardjit prewarm` builds: for each model, TP degree, dtype and option set, the layouts
// of every rank and the kernels each rank's ops load (deduplicated), for each target arch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/compile/kernel_spec.hpp"
#include "runtime/ops/linear_logp/layout.hpp"

namespace shardjit {

struct ModelShape {
  std::string name;             // for messages, e.g. the config file
  std::int64_t hidden = 0;
  std::int64_t vocab = 0;       // rows of the LM head (V_global)
  std::int64_t valid_vocab = 0; // 0: all of vocab
};

struct ShardRange {
  std::int64_t start = 0;
  std::int64_t size = 0;
};

struct PrewarmRequest {
  std::vector<ModelShape> models;
  std::vector<int> tp = {1};
  std::vector<DType> dtypes = {DType::kBF16};
  std::vector<std::string> archs;
  std::vector<DType> target_dtypes = {DType::kInt64};
  std::vector<std::optional<DType>> bias_dtypes = {std::nullopt};
  std::vector<bool> entropy = {false};
  bool backward = false;  // also the kernels of LinearLogp::backward
  // With backward: also those of ops built with LinearLogpConfig::dz_fp32, and of ops that filter
  // gradient tiles (grad_filter_threshold > 0; the threshold is an argument, not a parameter).
  bool dz_fp32 = false;
  bool grad_filter = false;
  // Also (or, with linear_logp false, only) ReduceScatter's and MoeCombine's kernels for each
  // model's hidden size, dtype and TP degree up to 8 (a larger one is an error; a group of one
  // rank loads MoeCombine's only: collective_kernels).
  bool collectives = false;
  bool linear_logp = true;
  std::optional<ShardRange> shard;  // one explicit shard instead of the TP split
  bool hopper_path = true;          // RuntimeConfig::hopper_path of the ops that will load them
};

// A single-GPU op whose forward tile `shardjit prewarm --tune` can time
// (runtime/ops/linear_logp/tuning.hpp), and which model / dtype it is, for messages.
struct TunableForward {
  LinearLogpConfig config;
  std::string origin;
};

struct PrewarmItem {
  KernelSpec spec;
  std::string arch;
  std::string origin;  // which model / tp / dtype asked for it first, for messages
  // For a forward kernel: the single-GPU ops that load it, one a forward shape. Several where the
  // kernel does not depend on the shape (the Hopper loop's forward serves every model of a dtype)
  // while each shape's tile is tuned apart.
  std::vector<TunableForward> tunables;

  // "<spec text> <arch>", how messages name the kernel.
  std::string name() const { return spec.canonical_text() + " " + arch; }
};

// Prewarm items without repeats: each kernel (spec and arch) once, under the first asker's origin,
// with the tunable ops of every asker (those of one forward shape once).
class PrewarmItemSet {
 public:
  void add(PrewarmItem item);
  const std::vector<PrewarmItem>& items() const { return items_; }
  std::vector<PrewarmItem> take() { return std::move(items_); }

 private:
  std::vector<PrewarmItem> items_;
  std::map<std::string, std::size_t> index_;  // "<spec text>@<arch>" -> position in items_
};

// The shards of an even TP split: ceil(V / tp) rows per rank, the last rank the rest.
std::vector<ShardRange> even_shards(std::int64_t vocab, int tp);

// Throws Error(kInvalidArgument) for an impossible request (no model, a bad TP degree, ...).
std::vector<PrewarmItem> prewarm_items(const PrewarmRequest& request);

}  // namespace shardjit
