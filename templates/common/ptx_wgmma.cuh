// Wrappers over the sm_90a warpgroup instructions (wgmma and the fences around it) that the
// Hopper main loop uses (templates/common/wgmma_mainloop.cuh, and the ring's proxy fence in
// templates/common/slice_ring.cuh): one instruction per function, named after it. Only kernels
// compiled for sm_90a instantiate them.
#pragma once

#include "common/host_device.cuh"
#include "common/types.cuh"

namespace shardjit {
namespace kernels {

// Makes this thread's completed generic-proxy writes to shared memory (cp.async copies landed
// by cp.async.wait_group) visible to the async proxy, through which wgmma reads its operands.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Orders this warpgroup's earlier register and shared-memory accesses before the wgmma that
// follow (needed before the first wgmma and whenever the accumulators were touched in between).
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }

__device__ __forceinline__ void wgmma_commit_group() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

// Waits until at most N of this warpgroup's committed wgmma groups are still in flight.
template <int N>
__device__ __forceinline__ void wgmma_wait_group() {
  static_assert(N >= 0 && N <= 7, "wgmma.wait_group takes an immediate in [0, 7]");
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Ties a register to the asm statements around it, so that the compiler neither reads an
// accumulator before the wgmma that write it have been waited for nor moves a write of it past
// the wgmma that read it.
__device__ __forceinline__ void fence_register(float& r) { asm volatile("" : "+f"(r)::"memory"); }

// Shared-memory matrix descriptor of an operand tile in the 128-byte swizzle of the PTX ISA:
// 1024-byte atoms of 8 rows of 128 bytes, chunk c of row r at slot c ^ (r % 8), addressed through
// absolute shared-memory address bits (so atoms start on 1024-byte boundaries). Fields: start
// address >> 4 (bits 0-13); leading byte offset >> 4 (bits 16-29); stride byte offset >> 4 (bits
// 32-45); base offset 0 (bits 49-51); swizzle mode 1 = 128 bytes (bits 62-63).
//   K contiguous operand (rows of 64 16-bit elements along K): the stride byte offset is the
//   distance between 8-row groups, the leading one is unused (1).
//   M / N contiguous operand (rows of 64 elements along M or N, one row per K index): the
//   leading byte offset is the distance between atoms along M / N, the stride byte offset the
//   distance between groups of 8 K indices.
__device__ __forceinline__ unsigned long long wgmma_descriptor_128b(unsigned int smem_address,
                                                                    unsigned int leading_bytes,
                                                                    unsigned int stride_bytes) {
  return static_cast<unsigned long long>((smem_address & 0x3FFFFu) >> 4) |
         (static_cast<unsigned long long>(leading_bytes >> 4) << 16) |
         (static_cast<unsigned long long>(stride_bytes >> 4) << 32) | (1ull << 62);
}

// The accumulator operands of wgmma m64nNk16 in parts of 16 registers (32 columns of N): part
// j's register list and its output constraints (d[16 j .. 16 j + 15]).
#define SHARDJIT_WGMMA_REGS_0 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
#define SHARDJIT_WGMMA_REGS_1 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define SHARDJIT_WGMMA_REGS_2 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47"
#define SHARDJIT_WGMMA_REGS_3 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define SHARDJIT_WGMMA_REGS_4 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79"
#define SHARDJIT_WGMMA_REGS_5 "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define SHARDJIT_WGMMA_REGS_6 "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111"
#define SHARDJIT_WGMMA_REGS_7 "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define SHARDJIT_WGMMA_OUTS_0 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
#define SHARDJIT_WGMMA_OUTS_1 "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define SHARDJIT_WGMMA_OUTS_2 "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47])
#define SHARDJIT_WGMMA_OUTS_3 "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define SHARDJIT_WGMMA_OUTS_4 "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79])
#define SHARDJIT_WGMMA_OUTS_5 "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
#define SHARDJIT_WGMMA_OUTS_6 "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111])
#define SHARDJIT_WGMMA_OUTS_7 "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
// The first 4 and 12 of part 4 (N = 136: 68 registers; N = 152: 76), the first 4 of part 5
// (N = 168: 84 registers).
#define SHARDJIT_WGMMA_OUTS_4_FIRST4 "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67])
#define SHARDJIT_WGMMA_OUTS_4_FIRST12 \
  SHARDJIT_WGMMA_OUTS_4_FIRST4, "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), \
      "+f"(d[74]), "+f"(d[75])
#define SHARDJIT_WGMMA_OUTS_5_FIRST4 "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83])
#define SHARDJIT_WGMMA_COMMA ,

// One wgmma instruction of SHAPE and TYPE over the accumulator operands REGS / OUTS; PRED, DESCS
// and FLAGS name the operands after them (accumulate; desc_a and desc_b; TRANS_A and TRANS_B).
// OUTS is substituted into the asm statement only, never into another macro's arguments, whose
// commas it would split.
#define SHARDJIT_WGMMA_M64NK16(SHAPE, TYPE, REGS, OUTS, PRED, DESCS, FLAGS) \
  asm volatile("{\n"                                                                                  \
               ".reg .pred p;\n"                                                                       \
               "setp.ne.b32 p, " PRED ", 0;\n"                                                         \
               "wgmma.mma_async.sync.aligned." SHAPE ".f32." TYPE "." TYPE " {" REGS "}, " DESCS   \
               ", p, 1, 1, " FLAGS ";\n"                                                               \
               "}\n"                                                                                  \
               : OUTS                                                                                  \
               : "l"(desc_a), "l"(desc_b), "r"(accumulate), "n"(TRANS_A), "n"(TRANS_B));

// The widths of N these wrappers issue: the multiples of 32 up to 256, and 136, 152 and 168, the
// heights of the forward's tiles of the rows as N (templates/linear_logp/fwd_hopper.cuh).
SHARDJIT_HOST_DEVICE constexpr bool wgmma_takes_n(int n) {
  return (n % 32 == 0 && n >= 32 && n <= 256) || n == 136 || n == 152 || n == 168;
}

// D[64 x N] (+)= A[64 x 16] * B[16 x N]^T for N as wgmma_takes_n, both operands in
// shared memory (descriptors above), K contiguous where TRANS_A / TRANS_B is 0 and M / N
// contiguous where it is 1; fp32 accumulators in the fragment order of the PTX ISA: register
// 4 j + i of lane l of warp w (of the warpgroup) holds row 16 w + l / 4 + 8 (i / 2), column
// 8 j + 2 (l % 4) + i % 2. accumulate = 0 overwrites D instead of adding to it. N = 256 and 128
// serve the logit kernels and the GEMM's usual tile, the others the tiles that take the output's
// rows as N: the GEMM's (templates/gemm/gemm_tma.cuh) and, at 136, 152 and 168, the forward's (two
// of 152 cover 300 rows in 304, two of 168 333 in 336, where 128-row tiles pad both to 384;
// fwd_hopper.cuh).
template <class T, int N, int TRANS_A, int TRANS_B>
__device__ __forceinline__ void wgmma_m64nNk16(float (&d)[N / 2], unsigned long long desc_a,
                                               unsigned long long desc_b, int accumulate) {
  static_assert(is_same_type<T, bf16>::value || is_same_type<T, fp16>::value, "wgmma takes bf16 or fp16 here");
  static_assert(wgmma_takes_n(N), "wgmma n of a multiple of 32 up to 256, or 136, 152 or 168");
  static_assert((TRANS_A == 0 || TRANS_A == 1) && (TRANS_B == 0 || TRANS_B == 1), "a transpose flag is 0 or 1");
  constexpr bool kBf16 = is_same_type<T, bf16>::value;
  // Operands: the N / 2 accumulators, then desc_a, desc_b, accumulate and the two flags.
#define SHARDJIT_WGMMA_N32(TYPE) \
  SHARDJIT_WGMMA_M64NK16("m64n32k16", TYPE, SHARDJIT_WGMMA_REGS_0, \
                         SHARDJIT_WGMMA_OUTS_0, \
                         "%18", "%16, %17", "%19, %20")
#define SHARDJIT_WGMMA_N64(TYPE) \
  SHARDJIT_WGMMA_M64NK16("m64n64k16", TYPE, SHARDJIT_WGMMA_REGS_0 ", " SHARDJIT_WGMMA_REGS_1, \
                         SHARDJIT_WGMMA_OUTS_0 SHARDJIT_WGMMA_COMMA SHARDJIT_WGMMA_OUTS_1, \
                         "%34", "%32, %33", "%35, %36")
#define SHARDJIT_WGMMA_N96(TYPE) \
  SHARDJIT_WGMMA_M64NK16("m64n96k16", TYPE, SHARDJIT_WGMMA_REGS_0 ", " SHARDJIT_WGMMA_REGS_1 ", " SHARDJIT_WGMMA_REGS_2, \
                         SHARDJIT_WGMMA_OUTS_0 SHARDJIT_WGMMA_COMMA SHARDJIT_WGMMA_OUTS_1 SHARDJIT_WGMMA_COMMA SHARDJIT_WGMMA_OUTS_2, \
                         "%50", "%48, %49", "%51, %52")
#define SHARDJIT_WGMMA_N128(TYPE) \
  SHARDJIT_WGMMA_M64NK16("m64n128k16", TYPE, SHARDJIT_WGMMA_REGS_0 ", " SHARDJIT_WGMMA_REGS_1 ", " SHARDJIT_WGMMA_REGS_2 ", " SHARDJIT_WGMMA_REGS_3, \
                         SHARDJIT_WGMMA_OUTS_0 SHARDJIT_WGMMA_COMMA SHARDJIT_WGMMA_OUTS_1 SHARDJIT_WGMMA_COMMA SHARDJIT_WGMMA_OUTS_2 SHARDJIT_WGMMA_COMMA SHARDJIT_WGMMA_OUTS_3, \
                         "%66", "%64, %65", "%67, %68")
#define SHARDJIT_WGMMA_N136(TYPE) \
  SHARDJIT_WGMMA_M64NK16("m64n136k16", TYPE, SHARDJIT_WGMMA_REGS_0 ", " SHARDJIT_WGMMA_REGS_1 ", " SHARDJIT_WGMMA_REGS_2 ", " SHARDJIT_WGMMA_REGS_3 ", %64, %65, %66, %67", \
                         SHARDJIT_WGMMA_OUTS_0 SHARDJIT_WGMMA_COMMA SHARDJIT_WGMMA_OUTS_1 SHARDJIT_WGMMA_COMMA SHARDJIT_WGMMA_OUTS_2 SHARDJIT_WGMMA_COMMA SHARDJIT_WGMMA_OUTS_3 SHARDJIT_WGMMA_COMMA SHARDJIT_WGMMA_OUTS_4_FIRST4, \
                         "%70", "%68, %69", "%71, %72")
#define SHARDJIT_WGMMA_N152(TYPE) \
  SHARDJIT_WGMMA_M64NK16("m64n152k16", TYPE, SHARDJIT_WGMMA_REGS_0 ", " SHARDJIT_WGMMA_REGS_1 ", " SHARDJIT_WGMMA_REGS_2 ", " SHARDJIT_WGMMA_REGS_3 ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75", \
                         SHARDJIT_WGMMA_OUTS_0 SHARDJIT_WGMMA_COMMA SHARDJIT_WGMMA_OUTS_1 SHARDJIT_WGMMA_COMMA SHARDJIT_WGMMA_OUTS_2 SHARDJIT_WGMMA_COMMA SHARDJIT_WGMMA_OUTS_3 SHARDJIT_WGMMA_COMMA SHARDJIT_WGMMA_OUTS_4_FIRST12, \
                         "%78", "%76, %77", "%79, %80")
#define SHARDJIT_WGMMA_N160(TYPE) \
  SHARDJIT_WGMMA_M64NK16("m64n160k16", TYPE, SHARDJIT_WGMMA_REGS_0 ", " SHARDJIT_WGMMA_REGS_1 ", " SHARDJIT_WGMMA_REGS_2 ", " SHARDJIT_WGMMA_REGS_3 ", " SHARDJIT_WGMMA_REGS_4, \
                         SHARDJIT_WGMMA_OUTS_0 SHARDJIT_WGMMA_COMMA SHARDJIT_WGMMA_OUTS_1 SHARDJIT_WGMMA_COMMA SHARDJIT_WGMMA_OUTS_2 SHARDJIT_WGMMA_COMMA SHARDJIT_WGMMA_OUTS_3 SHARDJIT_WGMMA_COMMA SHARDJIT_WGMMA_OUTS_4, \
                         "%82", "%80, %81", "%83, %84")
#define SHARDJIT_WGMMA_N168(TYPE) \
  SHARDJIT_WGMMA_M64NK16("m64n168k16", TYPE, SHARDJIT_WGMMA_REGS_0 ", " SHARDJIT_WGMMA_REGS_1 ", " SHARDJIT_WGMMA_REGS_2 ", " SHARDJIT_WGMMA_REGS_3 ", " SHARDJIT_WGMMA_REGS_4 ", %80, %81, %82, %83", \
                         SHARDJIT_WGMMA_OUTS_0 SHARDJIT_WGMMA_COMMA SHARDJIT_WGMMA_OUTS_1 SHARDJIT_WGMMA_COMMA SHARDJIT_WGMMA_OUTS_2 SHARDJIT_WGMMA_COMMA SHARDJIT_WGMMA_OUTS_3 SHARDJIT_WGMMA_COMMA SHARDJIT_WGMMA_OUTS_4 SHARDJIT_WGMMA_COMMA SHARDJIT_WGMMA_OUTS_5_FIRST4, \
                         "%86", "%84, %85", "%87, %88")
#define SHARDJIT_WGMMA_N192(TYPE) \
  SHARDJIT_WGMMA_M64NK16("m64n192k16", TYPE, SHARDJIT_WGMMA_REGS_0 ", " SHARDJIT_WGMMA_REGS_1 ", " SHARDJIT_WGMMA_REGS_2 ", " SHARDJIT_WGMMA_REGS_3 ", " SHARDJIT_WGMMA_REGS_4 ", " SHARDJIT_WGMMA_REGS_5, \
                         SHARDJIT_WGMMA_OUTS_0 SHARDJIT_WGMMA_COMMA SHARDJIT_WGMMA_OUTS_1 SHARDJIT_WGMMA_COMMA SHARDJIT_WGMMA_OUTS_2 SHARDJIT_WGMMA_COMMA SHARDJIT_WGMMA_OUTS_3 SHARDJIT_WGMMA_COMMA SHARDJIT_WGMMA_OUTS_4 SHARDJIT_WGMMA_COMMA SHARDJIT_WGMMA_OUTS_5, \
                         "%98", "%96, %97", "%99, %100")
#define SHARDJIT_WGMMA_N224(TYPE) \
  SHARDJIT_WGMMA_M64NK16("m64n224k16", TYPE, SHARDJIT_WGMMA_REGS_0 ", " SHARDJIT_WGMMA_REGS_1 ", " SHARDJIT_WGMMA_REGS_2 ", " SHARDJIT_WGMMA_REGS_3 ", " SHARDJIT_WGMMA_REGS_4 ", " SHARDJIT_WGMMA_REGS_5 ", " SHARDJIT_WGMMA_REGS_6, \
                         SHARDJIT_WGMMA_OUTS_0 SHARDJIT_WGMMA_COMMA SHARDJIT_WGMMA_OUTS_1 SHARDJIT_WGMMA_COMMA SHARDJIT_WGMMA_OUTS_2 SHARDJIT_WGMMA_COMMA SHARDJIT_WGMMA_OUTS_3 SHARDJIT_WGMMA_COMMA SHARDJIT_WGMMA_OUTS_4 SHARDJIT_WGMMA_COMMA SHARDJIT_WGMMA_OUTS_5 SHARDJIT_WGMMA_COMMA SHARDJIT_WGMMA_OUTS_6, \
                         "%114", "%112, %113", "%115, %116")
#define SHARDJIT_WGMMA_N256(TYPE) \
  SHARDJIT_WGMMA_M64NK16("m64n256k16", TYPE, SHARDJIT_WGMMA_REGS_0 ", " SHARDJIT_WGMMA_REGS_1 ", " SHARDJIT_WGMMA_REGS_2 ", " SHARDJIT_WGMMA_REGS_3 ", " SHARDJIT_WGMMA_REGS_4 ", " SHARDJIT_WGMMA_REGS_5 ", " SHARDJIT_WGMMA_REGS_6 ", " SHARDJIT_WGMMA_REGS_7, \
                         SHARDJIT_WGMMA_OUTS_0 SHARDJIT_WGMMA_COMMA SHARDJIT_WGMMA_OUTS_1 SHARDJIT_WGMMA_COMMA SHARDJIT_WGMMA_OUTS_2 SHARDJIT_WGMMA_COMMA SHARDJIT_WGMMA_OUTS_3 SHARDJIT_WGMMA_COMMA SHARDJIT_WGMMA_OUTS_4 SHARDJIT_WGMMA_COMMA SHARDJIT_WGMMA_OUTS_5 SHARDJIT_WGMMA_COMMA SHARDJIT_WGMMA_OUTS_6 SHARDJIT_WGMMA_COMMA SHARDJIT_WGMMA_OUTS_7, \
                         "%130", "%128, %129", "%131, %132")
  if constexpr (N == 32) {
    if constexpr (kBf16) {
      SHARDJIT_WGMMA_N32("bf16")
    } else {
      SHARDJIT_WGMMA_N32("f16")
    }
  } else if constexpr (N == 64) {
    if constexpr (kBf16) {
      SHARDJIT_WGMMA_N64("bf16")
    } else {
      SHARDJIT_WGMMA_N64("f16")
    }
  } else if constexpr (N == 96) {
    if constexpr (kBf16) {
      SHARDJIT_WGMMA_N96("bf16")
    } else {
      SHARDJIT_WGMMA_N96("f16")
    }
  } else if constexpr (N == 128) {
    if constexpr (kBf16) {
      SHARDJIT_WGMMA_N128("bf16")
    } else {
      SHARDJIT_WGMMA_N128("f16")
    }
  } else if constexpr (N == 136) {
    if constexpr (kBf16) {
      SHARDJIT_WGMMA_N136("bf16")
    } else {
      SHARDJIT_WGMMA_N136("f16")
    }
  } else if constexpr (N == 152) {
    if constexpr (kBf16) {
      SHARDJIT_WGMMA_N152("bf16")
    } else {
      SHARDJIT_WGMMA_N152("f16")
    }
  } else if constexpr (N == 160) {
    if constexpr (kBf16) {
      SHARDJIT_WGMMA_N160("bf16")
    } else {
      SHARDJIT_WGMMA_N160("f16")
    }
  } else if constexpr (N == 168) {
    if constexpr (kBf16) {
      SHARDJIT_WGMMA_N168("bf16")
    } else {
      SHARDJIT_WGMMA_N168("f16")
    }
  } else if constexpr (N == 192) {
    if constexpr (kBf16) {
      SHARDJIT_WGMMA_N192("bf16")
    } else {
      SHARDJIT_WGMMA_N192("f16")
    }
  } else if constexpr (N == 224) {
    if constexpr (kBf16) {
      SHARDJIT_WGMMA_N224("bf16")
    } else {
      SHARDJIT_WGMMA_N224("f16")
    }
  } else if constexpr (N == 256) {
    if constexpr (kBf16) {
      SHARDJIT_WGMMA_N256("bf16")
    } else {
      SHARDJIT_WGMMA_N256("f16")
    }
  }
#undef SHARDJIT_WGMMA_N32
#undef SHARDJIT_WGMMA_N64
#undef SHARDJIT_WGMMA_N96
#undef SHARDJIT_WGMMA_N128
#undef SHARDJIT_WGMMA_N136
#undef SHARDJIT_WGMMA_N152
#undef SHARDJIT_WGMMA_N160
#undef SHARDJIT_WGMMA_N168
#undef SHARDJIT_WGMMA_N192
#undef SHARDJIT_WGMMA_N224
#undef SHARDJIT_WGMMA_N256
}

#undef SHARDJIT_WGMMA_M64NK16
#undef SHARDJIT_WGMMA_REGS_0
#undef SHARDJIT_WGMMA_OUTS_0
#undef SHARDJIT_WGMMA_REGS_1
#undef SHARDJIT_WGMMA_OUTS_1
#undef SHARDJIT_WGMMA_REGS_2
#undef SHARDJIT_WGMMA_OUTS_2
#undef SHARDJIT_WGMMA_REGS_3
#undef SHARDJIT_WGMMA_OUTS_3
#undef SHARDJIT_WGMMA_REGS_4
#undef SHARDJIT_WGMMA_OUTS_4
#undef SHARDJIT_WGMMA_REGS_5
#undef SHARDJIT_WGMMA_OUTS_5
#undef SHARDJIT_WGMMA_OUTS_4_FIRST4
#undef SHARDJIT_WGMMA_OUTS_4_FIRST12
#undef SHARDJIT_WGMMA_OUTS_5_FIRST4
#undef SHARDJIT_WGMMA_REGS_6
#undef SHARDJIT_WGMMA_OUTS_6
#undef SHARDJIT_WGMMA_REGS_7
#undef SHARDJIT_WGMMA_OUTS_7
#undef SHARDJIT_WGMMA_COMMA

}  // namespace kernels
}  // namespace shardjit
