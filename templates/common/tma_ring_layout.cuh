// Launch shape of the kernels that run the TMA ring (templates/common/tma_ring.cuh), read by the
// host (plain C++) and by the kernels, so both agree by construction.
#pragma once

namespace shardjit {
namespace kernels {

// Two compute warpgroups and a producer warpgroup.
constexpr int kTmaRingBlockThreads = 3 * 128;

}  // namespace kernels
}  // namespace shardjit
