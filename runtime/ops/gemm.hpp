// Host side of templates/gemm/gemm.cuh: out = alpha * A B + addend with fp32 accumulation, A
// stored [m][k] or transposed [k][m], B stored [k][n]. The backward of LinearLogp builds
// grad_hidden and grad_weight from it.
#pragma once

#include <cuda.h>

#include <string>

#include "gemm/gemm_args.cuh"
#include "runtime/compile/kernel_spec.hpp"
#include "runtime/driver/module.hpp"
#include "runtime/sched/stream_k_workspace.hpp"
#include "shardjit/dtype.hpp"

namespace shardjit {

struct GemmTile {
  int bm = 128;
  int bn = 128;
  int bk = 32;
  int stages = 4;
  // The Hopper main loop (wgmma, sm_90a only; 128 x 256 x 64 tiles of 16-bit operands) instead of
  // the portable one (templates/gemm/gemm_mainloop_mma.cuh).
  bool wgmma = false;
  // With wgmma: the operands copied by TMA from a producer warp (templates/gemm/gemm_tma.cuh)
  // instead of by cp.async from every thread.
  bool tma = false;
};

// What a GEMM kernel is specialized for, besides its tile.
struct GemmKind {
  DType a = DType::kBF16;
  DType b = DType::kBF16;
  DType out = DType::kFP32;
  DType addend = DType::kFP32;  // the addend's type when one is passed at launch
  bool a_trans = false;
  bool filter = false;
};

// Tensor cores (16-bit A and B of one type): on sm_90a with hopper_path (RuntimeConfig,
// SHARDJIT_HOPPER_PATH) the wgmma loop fed by TMA, 128 x 256 x 64 with four stages; elsewhere mma.sync,
// 128 x 256 x 64 with three stages (128 x 256 x 32 where the arch's shared memory is ~100 KiB).
// fp32 FMA otherwise: 128 x 128 x 16, three stages, fewer where the arch's shared memory is
// smaller.
GemmTile default_gemm_tile(DType a, DType b, const std::string& arch, bool hopper_path);

KernelSpec gemm_spec(const GemmKind& kind, const GemmTile& tile);

// Dynamic shared memory of the kernel of `kind` on `tile` (its launches use exactly this).
unsigned gemm_smem(const GemmKind& kind, const GemmTile& tile);

// Grid from args.m and args.n; nothing is launched when either is zero. The kind is the kernel's
// (gemm_spec): a TMA tile's maps (the addend's too) are encoded from it and args here, tiles of
// few K slices are walked by persistent blocks, and a grid whose last wave would leave many
// blocks idle is split along K in `split` (templates/common/stream_k.cuh).
void launch_gemm(const LoadedKernel& kernel, const kernels::GemmArgs& args, const GemmKind& kind,
                 const GemmTile& tile, const StreamKWorkspace& split, CUstream stream);

}  // namespace shardjit
