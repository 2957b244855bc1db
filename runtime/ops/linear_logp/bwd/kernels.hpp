// Every kernel the backward of a LinearLogp op of a given layout loads (when the op is built
// with want_backward). Part of linear_logp_kernels(), so that prewarm compiles the same list.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runtime/compile/kernel_spec.hpp"
#include "runtime/ops/gemm.hpp"
#include "runtime/ops/linear_logp/bwd/chunks.hpp"
#include "runtime/ops/linear_logp/fwd.hpp"
#include "runtime/ops/linear_logp/layout.hpp"

namespace shardjit {

struct LinearLogpBwdKernels {
  FwdTile dz_tile;
  GemmTile gemm_tile;
  DType dz_dtype;                 // config.dtype, or fp32 (fp32 ops, or config.dz_fp32)
  DType grad_weight_dtype;        // fp32 with config.grad_weight_fp32, else config.dtype
  std::optional<DType> grad_bias_dtype;  // ops with a bias: fp32 or the bias dtype, as above
  KernelSpec dz;                  // recompute the logits of a chunk, write dZ
  std::optional<KernelSpec> scale;  // 16-bit dZ: the power of two it is stored scaled by
  std::optional<KernelSpec> bias;   // ops with a bias: column sums of dZ
  KernelSpec grad_weight;         // dZ^T X (+ grad_weight) -> grad_weight
  KernelSpec grad_hidden_acc;     // dZ W (+ fp32 buffer) -> fp32 buffer (or grad_hidden for fp32)
  KernelSpec grad_hidden_out;     // dZ W (+ fp32 buffer) -> grad_hidden in config.dtype
  // The kept chunk (see op_keeps_chunks in runtime/ops/linear_logp/keep.hpp): the forward's kernel that writes the first chunk's
  // logits into the dZ buffer, and the backward's that turns them into that chunk's dZ.
  std::optional<KernelSpec> keep;
  std::optional<KernelSpec> kept_dz;
  // The same for a chunk the forward's tiles of the rows as N kept (fwd_column_keep.cuh), whose
  // maxima go by tiles of 128 columns (kKeptColumnTileCols).
  std::optional<KernelSpec> kept_dz_columns;
  // What the three GEMM specs are specialized for (launch_gemm takes them).
  GemmKind grad_weight_kind;
  GemmKind grad_hidden_acc_kind;
  GemmKind grad_hidden_out_kind;
  // grad_hidden's GEMMs on the tiles that take the rows as wgmma's N (gemm_rows_as_n_rows picks one
  // a call, or none), a pair a tile of kGemmRowsAsNRows; none off the TMA loop.
  struct RowsAsN {
    int bm;
    KernelSpec acc;  // as grad_hidden_acc
    KernelSpec out;  // as grad_hidden_out
  };
  std::vector<RowsAsN> grad_hidden_rows_as_n;

  // Every spec above once, in a fixed order.
  std::vector<KernelSpec> all() const;

  // The tiles of the Hopper kernels, as the split and chunk plans take them; none where the
  // kernel runs the portable loop.
  std::optional<BwdTileShape> hopper_dz_shape() const {
    return dz_tile.wgmma ? std::optional<BwdTileShape>(BwdTileShape{dz_tile.bm, dz_tile.bn, dz_tile.bk}) : std::nullopt;
  }
  std::optional<BwdTileShape> hopper_gemm_shape() const {
    return gemm_tile.tma ? std::optional<BwdTileShape>(BwdTileShape{gemm_tile.bm, gemm_tile.bn, gemm_tile.bk})
                         : std::nullopt;
  }
};

// Throws Error(kInvalidArgument) for bad backward options (see check_backward_config). `tp`: the
// tensor-parallel degree the op is built for.
LinearLogpBwdKernels linear_logp_bwd_kernels(const LinearLogpLayout& layout, const std::string& arch,
                                             bool hopper_path, int tp);

}  // namespace shardjit
