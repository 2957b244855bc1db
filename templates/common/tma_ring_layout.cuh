// Launch shape and shared-memory needs of the Hopper path's TMA ring (templates/common/tma_ring.cuh),
// read by the host (plain C++) and by the kernels, so both agree by construction.
#pragma once

#include "common/host_device.cuh"

namespace shardjit {
namespace kernels {

// Blocks of a cluster: consecutive row tiles that share every W tile, each block copying its
// part of the tile from L2 once and multicasting it to both.
constexpr int kTmaClusterBlocks = 1;

// The producer warp that issues the copies, next to a kernel's compute warps.
constexpr int kTmaProducerThreads = 32;

// A full and an empty mbarrier (8 bytes each) per stage.
SHARDJIT_HOST_DEVICE constexpr int tma_ring_barrier_bytes(int stages) { return 16 * stages; }

}  // namespace kernels
}  // namespace shardjit
