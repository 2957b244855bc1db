#include "runtime/prewarm/plan.hpp"

#include "runtime/ops/collective/kernels.hpp"

#include <algorithm>

#include "runtime/ops/linear_logp/kernels.hpp"
#include "runtime/ops/linear_logp/tuning.hpp"
#include "shardjit/error.hpp"

namespace shardjit {

std::vector<ShardRange> even_shards(std::int64_t vocab, int tp) {
  if (tp < 1 || tp > 1024) {
    throw Error(ErrorCode::kInvalidArgument, "TP degree " + std::to_string(tp) + " is not supported; expected 1..1024");
  }
  if (vocab < tp) {
    throw Error(ErrorCode::kInvalidArgument, "vocabulary of " + std::to_string(vocab) +
                                                 " cannot be split over " + std::to_string(tp) + " ranks");
  }
  const std::int64_t per_rank = (vocab + tp - 1) / tp;
  // ceil(V / tp) rows a rank can leave the last ranks none (9 over 4: 3, 3, 3 and 0), a shard no
  // LinearLogp takes.
  if (per_rank * (tp - 1) >= vocab) {
    throw Error(ErrorCode::kInvalidArgument,
                "vocabulary of " + std::to_string(vocab) + " cannot be split evenly over " + std::to_string(tp) +
                    " ranks: ceil(" + std::to_string(vocab) + " / " + std::to_string(tp) + ") = " +
                    std::to_string(per_rank) + " rows a rank leaves the last rank none");
  }
  std::vector<ShardRange> shards;
  for (std::int64_t start = 0; start < vocab; start += per_rank) {
    shards.push_back({start, std::min(per_rank, vocab - start)});
  }
  return shards;
}

namespace {

// Every (dtype, targets, bias, entropy, shard) combination of one model at one TP degree.
std::vector<LinearLogpConfig> layouts_of(const PrewarmRequest& request, const ModelShape& model, int tp) {
  const std::vector<ShardRange> shards =
      request.shard ? std::vector<ShardRange>{*request.shard} : even_shards(model.vocab, tp);
  std::vector<LinearLogpConfig> configs;
  for (DType dtype : request.dtypes)
    for (DType targets : request.target_dtypes)
      for (const auto& bias : request.bias_dtypes)
        for (bool entropy : request.entropy)
          for (const ShardRange& shard : shards) {
            LinearLogpConfig config;
            config.hidden = model.hidden;
            config.vocab_start = shard.start;
            config.vocab_local = shard.size;
            config.vocab_global = model.vocab;
            config.valid_vocab = model.valid_vocab;
            config.dtype = dtype;
            config.bias_dtype = bias;
            config.target_dtype = targets;
            config.want_entropy = entropy;
            config.want_backward = request.backward;
            configs.push_back(config);
          }
  return configs;
}

// The backward options that choose kernels.
struct BackwardVariant {
  bool grad_weight_fp32;
  bool dz_fp32;
  bool grad_filter;
  bool operator==(const BackwardVariant&) const = default;
};

// Whether two configs have one forward tuning record: everything its key reads
// (runtime/ops/linear_logp/tuning.cpp, fwd_tuning_key) that a prewarm varies.
bool same_forward_tuning(const LinearLogpConfig& a, const LinearLogpConfig& b) {
  return a.hidden == b.hidden && a.vocab_start == b.vocab_start && a.vocab_local == b.vocab_local &&
         a.vocab_global == b.vocab_global && a.valid_vocab == b.valid_vocab && a.dtype == b.dtype &&
         a.bias_dtype == b.bias_dtype && a.target_dtype == b.target_dtype && a.want_entropy == b.want_entropy &&
         fwd_tuning_rows(a) == fwd_tuning_rows(b);
}

// Appends `tunable` unless an op of the same tuning record is already there.
void add_tunable(std::vector<TunableForward>& tunables, TunableForward tunable) {
  const bool known = std::any_of(tunables.begin(), tunables.end(), [&](const TunableForward& t) {
    return same_forward_tuning(t.config, tunable.config);
  });
  if (!known) tunables.push_back(std::move(tunable));
}

}  // namespace

void PrewarmItemSet::add(PrewarmItem item) {
  const auto [at, is_new] = index_.emplace(item.spec.canonical_text() + "@" + item.arch, items_.size());
  if (is_new) {
    items_.push_back(std::move(item));
    return;
  }
  std::vector<TunableForward>& tunables = items_[at->second].tunables;
  for (TunableForward& tunable : item.tunables) add_tunable(tunables, std::move(tunable));
}

std::vector<PrewarmItem> prewarm_items(const PrewarmRequest& request) {
  if (request.models.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "prewarm: no model given; pass a config.json or --hidden and --vocab");
  }
  if (request.archs.empty()) throw Error(ErrorCode::kInvalidArgument, "prewarm: no target arch given");
  PrewarmItemSet items;
  auto add = [&](const KernelSpec& spec, const std::string& arch, const std::string& origin,
                 std::vector<TunableForward> tunables = {}) {
    items.add(PrewarmItem{spec, arch, origin, std::move(tunables)});
  };
  // Backward: both grad_weight dtypes (fp32 is common in training; their GEMM kernels do not
  // depend on the shapes, so the second costs little), and the dZ variants asked for.
  std::vector<BackwardVariant> variants = {{false, false, false}};
  if (request.backward) {
    for (bool fp32_grads : {false, true}) {
      for (bool dz_fp32 : {false, request.dz_fp32}) {
        for (bool filter : {false, request.grad_filter}) {
          const BackwardVariant variant{fp32_grads, dz_fp32, filter};
          if (std::find(variants.begin(), variants.end(), variant) == variants.end()) variants.push_back(variant);
        }
      }
    }
  }

  for (const ModelShape& model : request.models) {
    for (int tp : request.tp) {
      if (request.collectives) {
        for (DType dtype : request.dtypes) {
          const std::string origin = model.name + " tp=" + std::to_string(tp) + " " + dtype_name(dtype) + " collectives";
          for (const std::string& arch : request.archs) {
            for (const KernelSpec& spec : collective_kernels(dtype, tp, model.hidden)) add(spec, arch, origin);
          }
        }
      }
      if (!request.linear_logp) continue;
      for (LinearLogpConfig config : layouts_of(request, model, tp)) {
        const std::string origin = model.name + " tp=" + std::to_string(tp) + " " + dtype_name(config.dtype);
        for (const BackwardVariant& variant : variants) {
          config.grad_weight_fp32 = variant.grad_weight_fp32;
          config.dz_fp32 = variant.dz_fp32;
          // Any threshold: it reaches the kernels as an argument; only whether there is one matters.
          config.grad_filter_threshold = variant.grad_filter ? 1e-6f : 0.0f;
          const LinearLogpLayout layout = resolve_layout(config);
          for (const std::string& arch : request.archs) {
            LinearLogpKernels kernels = linear_logp_kernels(layout, arch, tp, request.hopper_path);
            std::vector<TunableForward> tunables;
            // Only single-GPU ops are tuned (tensor-parallel ones take the default tile).
            if (tp == 1) {
              for (std::int64_t max_rows : request.tune_max_rows) {
                LinearLogpConfig tuned = config;
                tuned.max_rows = max_rows;
                add_tunable(tunables,
                            {tuned, max_rows > 0 ? origin + " max_rows=" + std::to_string(max_rows) : origin});
              }
            }
            add(kernels.fwd, arch, origin, std::move(tunables));
            add(kernels.combine, arch, origin);
            for (const OtherFwdSpec& other : kernels.other_fwd) add(other.spec, arch, origin);
            for (const OtherFwdSpec& keeping : kernels.keeping_fwd) add(keeping.spec, arch, origin);
            if (kernels.peer_combine) add(*kernels.peer_combine, arch, origin);
            if (kernels.backward) {
              for (const KernelSpec& spec : kernels.backward->all()) add(spec, arch, origin);
            }
          }
        }
      }
    }
  }
  return items.take();
}

}  // namespace shardjit
