// Shared-memory size of the Hopper kernels' tile stores (templates/common/fragment_store.cuh,
// fragment_box_store.cuh) for a 128 x 256 tile, read by the host (plain C++) to size the launch
// and by the kernels, so both agree by construction.
#pragma once

#include "common/host_device.cuh"

namespace shardjit {
namespace kernels {

// Column parts a 128 x 256 tile is staged in: 256 bytes of a row's data a part for a 16-bit output
// (two parts), 128 for fp32 (eight), so that the staging area fits beside a ring of four 48 KiB
// stages.
SHARDJIT_HOST_DEVICE constexpr int fragment_store_parts(int out_elem_bytes) { return out_elem_bytes == 2 ? 2 : 8; }

// The staging area: 128 rows of 256 bytes and 16 of padding, a 16-bit part's in padded rows; an
// fp32 part's rows (128 bytes and 32) take less, and a 16-bit part's boxes
// (common/fragment_box_store.cuh) 128 rows of 256 bytes.
constexpr int kFragmentStagingBytes = 128 * 272;

}  // namespace kernels
}  // namespace shardjit
