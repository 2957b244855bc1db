#include "runtime/sched/stream_k_workspace.hpp"

#include "runtime/driver/cuda_driver.hpp"
#include "runtime/logging.hpp"

namespace shardjit {

namespace {

// At most `resident` workers of two slots each, and a counter a split tile (fewer than resident:
// the tiles of one wave at most).
std::size_t slot_count(int resident_blocks) { return 2 * static_cast<std::size_t>(resident_blocks); }

}  // namespace

StreamKWorkspace::StreamKWorkspace(const DeviceContext& device, int tile_accumulators, bool partial_waves)
    : device_(&device),
      resident_blocks_(device.info().sm_count),
      partial_waves_(partial_waves),
      partial_bytes_(slot_count(device.info().sm_count) * static_cast<std::size_t>(tile_accumulators) *
                     sizeof(float)) {}

void StreamKWorkspace::allocate() {
  if (allocated() || device_ == nullptr) return;
  const std::size_t counter_bytes = slot_count(resident_blocks_) * sizeof(unsigned int);
  log().debug("split-tile workspace: {} bytes", partial_bytes_ + counter_bytes);
  buffer_ = DeviceBuffer(*device_, partial_bytes_ + counter_bytes);
  ScopedContext scope(*device_);
  SHARDJIT_CU(cuMemsetD8(buffer_.ptr() + partial_bytes_, 0, counter_bytes));
}

kernels::StreamKPlan StreamKWorkspace::plan(int tiles, int slices, int row_tiles) const {
  kernels::StreamKPlan plan = kernels::plan_stream_k(tiles, slices, allocated() ? resident_blocks_ : 0, row_tiles,
                                                         partial_waves_);
  if (allocated()) {
    plan.partials = buffer_.as<float>();
    plan.arrivals = reinterpret_cast<unsigned int*>(buffer_.ptr() + partial_bytes_);
  }
  return plan;
}

}  // namespace shardjit
