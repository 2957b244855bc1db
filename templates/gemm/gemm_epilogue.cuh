// Store / accumulate epilogue of the GEMM: out = alpha * acc + addend, two adjacent columns at a
// time, in the output's type. Every element's addend is read before its output is written (by
// the same thread from global memory, or by TMA into shared memory before the epilogue starts),
// so the addend may be the output itself (in-place accumulation); every element belongs to one
// thread of one block, which keeps the result deterministic.
//
// The addend is read kAddendBatch pairs at a time before any of them is written: the output may
// alias it, so the compiler must keep each read behind the writes before it, and one read at a
// time would expose a full memory latency per pair.
//
// The Hopper loop's 16-bit tiles go out through shared memory instead (stage_tile): each column
// part's values are computed in place in the accumulators and staged, and TMA stores write them
// in boxes of the output's map (FragmentTileBoxStore, templates/common/fragment_box_store.cuh).
// The block goes on to its next tile at once and waits for the stores' reads only before it
// stages again or exits, while their writes drain. An fp32 tile (128 KiB) would pass the 34 KiB
// staging area in eight parts, each waiting for the last one's copies: measured slower than its
// direct stores (docs/perf-notes.md, "GEMM design"), so write_tile keeps those. An accumulating fp32 tile added
// by reductions at L2 instead of reading its addend was slower too (the same notes).
#pragma once

#include "common/fragment_box_store.cuh"
#include "common/fragment_store_layout.cuh"
#include "common/ptx.cuh"
#include "common/types.cuh"
#include "gemm/gemm_args.cuh"
#include "gemm/gemm_layout.cuh"

namespace shardjit {
namespace kernels {

__device__ __forceinline__ float2 load_pair(const float* p) {
  return *reinterpret_cast<const float2*>(p);
}

template <class T>
__device__ __forceinline__ float2 load_pair(const T* p) {
  const unsigned int bits = *reinterpret_cast<const unsigned int*>(p);
  T lo, hi;
  lo.bits = static_cast<unsigned short>(bits & 0xffffu);
  hi.bits = static_cast<unsigned short>(bits >> 16);
  return make_float2(to_float(lo), to_float(hi));
}

__device__ __forceinline__ void store_pair(float* p, float v0, float v1) {
  *reinterpret_cast<float2*>(p) = make_float2(v0, v1);
}

template <class T>
__device__ __forceinline__ void store_pair(T* p, float v0, float v1) {
  *reinterpret_cast<unsigned int*>(p) = pack_pair<T>(v0, v1);
}

// K slices before the end of the main loop at which a block asks L2 for its tile of the addend:
// ~6 us of products on an H200 at 128 x 256 x 64, time for a wave's tiles (17 MiB of fp32) to
// arrive from HBM, so that the epilogue's batched reads, or the TMA loads of a staged addend
// (templates/gemm/gemm_staged_addend.cuh) in the last slices, find them in L2.
constexpr int kGemmAddendPrefetchSlices = 8;

// Prefetches into L2 the part of args' addend (of type AddT; none when null) in the BM x BN output
// tile at (m0, n0), a line a thread at a time. Called once a tile, before the epilogue and with
// no accumulator live in its arguments: a value read here and kept across the wgmma loop could
// make ptxas serialize it.
template <class AddT, int BM, int BN, int THREADS>
__device__ __forceinline__ void gemm_prefetch_addend(const GemmArgs& args, long long m0, long long n0, int tid) {
  if (args.addend == nullptr) return;
  const AddT* const addend = static_cast<const AddT*>(args.addend);
  constexpr int kLineElems = 128 / static_cast<int>(sizeof(AddT));
  constexpr int kLinesPerRow = (BN + kLineElems - 1) / kLineElems;
  constexpr int kLines = BM * kLinesPerRow;
  // Not unrolled: in the TMA loop's producer warp (THREADS = 32) it is 32 iterations, which
  // unrolled would not fit the producer's registers.
#pragma unroll 1
  for (int i = tid; i < kLines; i += THREADS) {
    const long long row = m0 + i / kLinesPerRow;
    const long long col = n0 + (i % kLinesPerRow) * kLineElems;
    if (row < args.m && col < args.n) prefetch_l2(addend + row * args.addend_stride + col);
  }
}

template <class OutT, class AddT>
struct GemmEpilogue {
  // Addend reads in flight per thread: 16 pairs, 32 registers beside the accumulators.
  static constexpr int kAddendBatch = 16;

  // The epilogue of the product args describe.
  __device__ static GemmEpilogue of(const GemmArgs& args) {
    return {static_cast<OutT*>(args.out),
            static_cast<const AddT*>(args.addend),
            args.out_stride,
            args.addend_stride,
            args.m,
            args.n,
            args.alpha != nullptr ? *args.alpha : 1.0f};
  }

  OutT* out;
  const AddT* addend;
  long long out_stride;
  long long addend_stride;
  long long m;
  long long n;
  float alpha;

  // The addend pair at output element (row, col), read from global memory (zeros where there is
  // none). A pair's col is even and n a multiple of 8, so a pair is either wholly inside or wholly
  // outside.
  __device__ __forceinline__ float2 global_addend(long long row, long long col) const {
    return addend != nullptr && row < m && col < n ? load_pair(addend + row * addend_stride + col)
                                                   : make_float2(0.0f, 0.0f);
  }

  // A read_addend (below) from global memory.
  __device__ __forceinline__ auto global_reader() const {
    return [this](int, const AccumulatorPair&, long long row, long long col) { return global_addend(row, col); };
  }

  // The addends of the BATCH pairs from `first` into add (pair i, p, at output element (row, col),
  // takes read_addend(i, p, row, col)), all read before the caller uses any (see kAddendBatch).
  template <int BATCH, class Mainloop, class ReadAddend>
  __device__ __forceinline__ void read_addends(const Mainloop& mainloop, int first, long long m0, long long n0,
                                               int warp, int lane, ReadAddend& read_addend, float2 (&add)[BATCH]) const {
#pragma unroll
    for (int i = 0; i < BATCH; ++i) {
      const AccumulatorPair p = mainloop.pair(first + i, warp, lane);
      add[i] = read_addend(first + i, p, m0 + p.row, n0 + p.col);
    }
  }

  // Writes the main loop's tile, whose corner is output element (m0, n0), with the addend read
  // from global memory.
  template <class Mainloop>
  __device__ __forceinline__ void store_tile(const Mainloop& mainloop, long long m0, long long n0, int warp,
                                             int lane) const {
    store_tile(mainloop, m0, n0, warp, lane, global_reader());
  }

  // The same with the addend of pair i (p, at output element (row, col)) from read_addend(i, p,
  // row, col).
  template <class Mainloop, class ReadAddend>
  __device__ __forceinline__ void store_tile(const Mainloop& mainloop, long long m0, long long n0, int warp, int lane,
                                             ReadAddend&& read_addend) const {
    constexpr int kBatch = Mainloop::kPairs < kAddendBatch ? Mainloop::kPairs : kAddendBatch;
    static_assert(Mainloop::kPairs % kBatch == 0, "the pairs split into whole batches");
#pragma unroll
    for (int first = 0; first < Mainloop::kPairs; first += kBatch) {
      float2 add[kBatch];
      read_addends(mainloop, first, m0, n0, warp, lane, read_addend, add);
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        const AccumulatorPair p = mainloop.pair(first + i, warp, lane);
        const long long row = m0 + p.row;
        const long long col = n0 + p.col;
        if (row < m && col < n) {
          store_pair(out + row * out_stride + col, alpha * p.v0 + add[i].x, alpha * p.v1 + add[i].y);
        }
      }
    }
  }

  // The Hopper loop's store of a 16-bit tile (WgmmaTileMainloop's fragments) in boxes of the
  // output's map, [m][n] at out. The staging area may still be read by the stores when stage_tile
  // returns; before the block exits, TileStore::wait_reads.
  template <class Mainloop>
  using TileStore = FragmentTileBoxStore<OutT, Mainloop, fragment_store_parts(sizeof(OutT))>;

  // Writes the main loop's tile, corner (m0, n0), through `staging` (TileStore::kBytes) and
  // out_map, the addend of pair i (p, at output element (row, col)) from read_addend(i, p, row,
  // col).
  template <class Mainloop, class ReadAddend>
  __device__ __forceinline__ void stage_tile(Mainloop& mainloop, unsigned char* staging, const TmaDescriptor* out_map,
                                             long long m0, long long n0, int warp, int lane,
                                             ReadAddend&& read_addend) const {
    using Store = TileStore<Mainloop>;
    // A batch of a part's addend pairs read before any is used (see kAddendBatch).
    constexpr int kBatchGroups = Store::kPartGroups < kAddendBatch / 2 ? Store::kPartGroups : kAddendBatch / 2;
    static_assert(Store::kPartGroups % kBatchGroups == 0, "a part is whole batches");
    float* const acc = mainloop.acc;
    Store::store(acc, staging, out_map, static_cast<int>(n0), m0, warp, lane, [&](int first, int) {
                   // A part is Store::kPartGroups groups (the unnamed count), a constant here.
#pragma unroll
                   for (int g0 = 0; g0 < Store::kPartGroups; g0 += kBatchGroups) {
                     // Pair i = 2 g + h holds acc[2 i] and acc[2 i + 1] (WgmmaTileMainloop::pair).
                     const int i0 = 2 * (first + g0);
                     float2 add[2 * kBatchGroups];
                     read_addends(mainloop, i0, m0, n0, warp, lane, read_addend, add);
#pragma unroll
                     for (int j = 0; j < 2 * kBatchGroups; ++j) {
                       acc[2 * (i0 + j)] = alpha * acc[2 * (i0 + j)] + add[j].x;
                       acc[2 * (i0 + j) + 1] = alpha * acc[2 * (i0 + j) + 1] + add[j].y;
                     }
                   }
                 });
  }

  // The Hopper loop's store of an fp32 tile (WgmmaTileMainloop's fragments) from the registers,
  // 16 bytes a thread (the host gives the TMA loop 16-byte aligned outputs). Lane q of a row's
  // four holds columns 2 q and 2 q + 1 of each 8-column group; lanes l and l ^ 1 trade a pair of
  // two adjacent groups g and g + 1, so that an even q holds columns 2 q .. 2 q + 3 of group g
  // and an odd q columns 2 q - 2 .. 2 q + 1 of group g + 1. A warp's store then writes 64
  // contiguous bytes of each of its 8 rows where the pair stores wrote 32: half the store
  // instructions, and half the line requests, of store_tile (measured: grad_hidden's tiles
  // 0.6 % shorter, docs/perf-notes.md, "GEMM design").
  template <class Mainloop, class ReadAddend>
  __device__ __forceinline__ void store_tile_wide(const Mainloop& mainloop, long long m0, long long n0, int warp,
                                                  int lane, ReadAddend&& read_addend) const {
    static_assert(is_same_type<OutT, float>::value, "fp32 outputs");
    constexpr int kBatch = kAddendBatch;
    // Pairs 2 g + h: a batch is whole 4-pair blocks, groups g (even) and g + 1 of both halves.
    static_assert(Mainloop::kPairs % kBatch == 0 && kBatch % 4 == 0, "batches of whole group pairs");
    const bool odd = (lane & 1) != 0;
#pragma unroll
    for (int first = 0; first < Mainloop::kPairs; first += kBatch) {
      // Each value is computed as its addend arrives, in the read loop: read_addends and a loop
      // after it compile to another schedule of these kernels than the one measured.
      float2 v[kBatch];
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        const AccumulatorPair p = mainloop.pair(first + i, warp, lane);
        const float2 add = read_addend(first + i, p, m0 + p.row, n0 + p.col);
        v[i] = make_float2(alpha * p.v0 + add.x, alpha * p.v1 + add.y);
      }
#pragma unroll
      for (int j = 0; j < kBatch; j += 4) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float2 lo = v[j + h];      // group g
          const float2 hi = v[j + 2 + h];  // group g + 1
          const float2 send = odd ? lo : hi;
          const float2 recv = make_float2(__shfl_xor_sync(0xffffffffu, send.x, 1),
                                          __shfl_xor_sync(0xffffffffu, send.y, 1));
          const AccumulatorPair p = mainloop.pair(first + j + h, warp, lane);
          // Column 8 g + 2 q (even q), or 8 (g + 1) + 2 q - 2 (odd q).
          const long long row = m0 + p.row;
          const long long col = n0 + p.col + (odd ? 6 : 0);
          if (row < m && col < n) {
            *reinterpret_cast<float4*>(out + row * out_stride + col) =
                odd ? make_float4(recv.x, recv.y, hi.x, hi.y) : make_float4(lo.x, lo.y, recv.x, recv.y);
          }
        }
      }
    }
  }

  // The Hopper loop's store of a tile whose fragment rows are the output's columns and whose
  // fragment columns its rows (the tiles that take the output's rows as wgmma's N,
  // templates/gemm/gemm_tma.cuh): pair p holds output elements (m0 + p.col, n0 + p.row) and
  // (m0 + p.col + 1, n0 + p.row). Element by element from the registers, the addend from global
  // memory in batches read before any element is written (it may be the output): eight lanes of a
  // warp write a row's eight adjacent columns, and these tiles serve products of a few hundred
  // rows, whose output is small beside the operands the tile reads.
  template <class Mainloop>
  __device__ __forceinline__ void store_tile_rows_as_n(const Mainloop& mainloop, long long m0, long long n0, int warp,
                                                       int lane) const {
    // kPairs is a multiple of 8 (BM a multiple of 32).
    constexpr int kBatch = Mainloop::kPairs % kAddendBatch == 0 ? kAddendBatch : 8;
    static_assert(Mainloop::kPairs % kBatch == 0, "the pairs split into whole batches");
    // read_addends' reader, at the pair's transposed elements.
    auto transposed_reader = [this, m0, n0](int, const AccumulatorPair& p, long long, long long) {
      return transposed_addend(m0 + p.col, n0 + p.row);
    };
#pragma unroll
    for (int first = 0; first < Mainloop::kPairs; first += kBatch) {
      float2 add[kBatch];
      read_addends(mainloop, first, m0, n0, warp, lane, transposed_reader, add);
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        const AccumulatorPair p = mainloop.pair(first + i, warp, lane);
        const long long row = m0 + p.col;
        const long long col = n0 + p.row;
        if (col >= n) continue;
        if (row < m) out[row * out_stride + col] = from_float<OutT>(alpha * p.v0 + add[i].x);
        if (row + 1 < m) out[(row + 1) * out_stride + col] = from_float<OutT>(alpha * p.v1 + add[i].y);
      }
    }
  }

  // The addends of output elements (row, col) and (row + 1, col), zeros where there is none.
  __device__ __forceinline__ float2 transposed_addend(long long row, long long col) const {
    if (addend == nullptr || col >= n) return make_float2(0.0f, 0.0f);
    const AddT* const p = addend + row * addend_stride + col;
    return make_float2(row < m ? to_float(p[0]) : 0.0f, row + 1 < m ? to_float(p[addend_stride]) : 0.0f);
  }

  // The Hopper loop's write of a tile: stage_tile for a 16-bit output, store_tile_wide for fp32.
  template <class Mainloop, class ReadAddend>
  __device__ __forceinline__ void write_tile(Mainloop& mainloop, unsigned char* staging, const TmaDescriptor* out_map,
                                             long long m0, long long n0, int warp, int lane,
                                             ReadAddend&& read_addend) const {
    if constexpr (gemm_tma_stages_output(sizeof(OutT))) {
      stage_tile(mainloop, staging, out_map, m0, n0, warp, lane, read_addend);
    } else {
      store_tile_wide(mainloop, m0, n0, warp, lane, read_addend);
    }
  }

  // The same with the addend read from global memory. Without an addend there are no reads: a
  // branch a tile, not a predicated load a pair, whose global descriptor ptxas would otherwise
  // rebuild every tile in a loop that also holds the stream-K fixup (docs/perf-notes-jit.md,
  // "Changes and predictions", item 3).
  template <class Mainloop>
  __device__ __forceinline__ void write_tile(Mainloop& mainloop, unsigned char* staging, const TmaDescriptor* out_map,
                                             long long m0, long long n0, int warp, int lane) const {
    if (addend == nullptr) {
      write_tile(mainloop, staging, out_map, m0, n0, warp, lane,
                 [](int, const AccumulatorPair&, long long, long long) { return make_float2(0.0f, 0.0f); });
    } else {
      write_tile(mainloop, staging, out_map, m0, n0, warp, lane, global_reader());
    }
  }
};

}  // namespace kernels
}  // namespace shardjit
