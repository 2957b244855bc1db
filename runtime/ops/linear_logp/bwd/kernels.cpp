#include "runtime/ops/linear_logp/bwd/kernels.hpp"

#include <algorithm>

#include "linear_logp/fwd_layout.cuh"
#include "runtime/ops/linear_logp/bwd/bias.hpp"
#include "runtime/ops/linear_logp/bwd/dz.hpp"
#include "runtime/ops/linear_logp/bwd/chunks.hpp"
#include "runtime/ops/linear_logp/bwd/scale.hpp"
#include "runtime/ops/linear_logp/keep.hpp"

namespace shardjit {

std::vector<KernelSpec> LinearLogpBwdKernels::all() const {
  std::vector<KernelSpec> specs;
  auto add = [&](const KernelSpec& spec) {
    if (std::find(specs.begin(), specs.end(), spec) == specs.end()) specs.push_back(spec);
  };
  add(dz);
  if (scale) add(*scale);
  if (bias) add(*bias);
  add(grad_weight);
  add(grad_hidden_acc);
  add(grad_hidden_out);
  for (const RowsAsN& tile : grad_hidden_rows_as_n) {
    add(tile.acc);
    add(tile.out);
  }
  if (keep) add(*keep);
  if (kept_dz) add(*kept_dz);
  if (kept_dz_columns) add(*kept_dz_columns);
  return specs;
}

LinearLogpBwdKernels linear_logp_bwd_kernels(const LinearLogpLayout& layout, const std::string& arch,
                                             bool hopper_path, int tp) {
  const LinearLogpConfig& c = layout.config;
  check_backward_config(c);
  const DType dz = c.dz_fp32 ? DType::kFP32 : c.dtype;
  const bool filter = c.grad_filter_threshold > 0.0f;
  const DType grad_weight = c.grad_weight_fp32 ? DType::kFP32 : c.dtype;
  std::optional<DType> grad_bias;
  if (c.bias_dtype) grad_bias = c.grad_weight_fp32 ? DType::kFP32 : *c.bias_dtype;

  const FwdTile dz_tile = default_bwd_dz_tile(c.dtype, arch, hopper_path);
  const GemmTile gemm_tile = default_gemm_tile(dz, c.dtype, arch, hopper_path);
  // grad_weight = dZ^T X: A is dZ read transposed, B is hidden.
  GemmKind weight_kind{dz, c.dtype, grad_weight, grad_weight, true, filter};
  // grad_hidden = dZ W: A is dZ, B is the chunk's rows of weight; the addend is the fp32 buffer
  // (or, for fp32 ops, grad_hidden itself).
  GemmKind acc_kind{dz, c.dtype, DType::kFP32, DType::kFP32, false, filter};
  GemmKind out_kind{dz, c.dtype, c.dtype, DType::kFP32, false, filter};

  std::optional<KernelSpec> scale;
  if (dz != DType::kFP32) scale = linear_logp_bwd_scale_spec();
  std::optional<KernelSpec> bias;
  if (grad_bias) bias = linear_logp_bwd_bias_spec(dz, *grad_bias);
  std::optional<KernelSpec> keep;
  std::optional<KernelSpec> kept_dz;
  std::optional<KernelSpec> kept_dz_columns;
  if (op_keeps_chunks(c, dz_tile, dz, tp)) {
    keep = linear_logp_fwd_keep_spec(layout, dz_tile);
    kept_dz = linear_logp_bwd_kept_dz_spec(layout, dz, dz_tile.bn);
    kept_dz_columns = linear_logp_bwd_kept_dz_spec(layout, dz, kernels::kKeptColumnTileCols);
  }
  std::vector<LinearLogpBwdKernels::RowsAsN> rows_as_n;
  if (gemm_tile.tma) {
    for (const int bm : kGemmRowsAsNRows) {
      const GemmTile tile = gemm_rows_as_n_tile(bm);
      rows_as_n.push_back({bm, gemm_spec(acc_kind, tile), gemm_spec(out_kind, tile)});
    }
  }
  return LinearLogpBwdKernels{dz_tile,
                              gemm_tile,
                              dz,
                              grad_weight,
                              grad_bias,
                              linear_logp_bwd_dz_spec(layout, dz, dz_tile, filter),
                              scale,
                              bias,
                              gemm_spec(weight_kind, gemm_tile),
                              gemm_spec(acc_kind, gemm_tile),
                              gemm_spec(out_kind, gemm_tile),
                              keep,
                              kept_dz,
                              kept_dz_columns,
                              weight_kind,
                              acc_kind,
                              out_kind,
                              rows_as_n};
}

}  // namespace shardjit
