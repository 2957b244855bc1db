// Launch shape of the kernels that run the TMA ring (templates/common/tma_ring.cuh), read by the
// host (plain C++) and by the kernels, so both agree by construction.
#pragma once

#include "common/host_device.cuh"

namespace shardjit {
namespace kernels {

// Two compute warpgroups and a producer warpgroup.
constexpr int kTmaRingBlockThreads = 3 * 128;

// The ring's mbarriers after its stages: a full and an empty one, 8 bytes each, a stage.
SHARDJIT_HOST_DEVICE constexpr int tma_ring_barrier_bytes(int stages) { return 16 * stages; }

}  // namespace kernels
}  // namespace shardjit
