#include "runtime/sched/stream_k_workspace.hpp"

#include <string>

#include "runtime/driver/cuda_driver.hpp"
#include "runtime/logging.hpp"

namespace shardjit {

namespace {

// At most `resident` workers of two slots each, and a counter a split tile (fewer than resident:
// the tiles of one wave at most).
std::size_t slot_count(int resident_blocks) { return 2 * static_cast<std::size_t>(resident_blocks); }

}  // namespace

StreamKWorkspace::StreamKWorkspace(const DeviceContext& device, int tile_accumulators, bool partial_waves,
                                   int cluster_blocks)
    : device_(&device),
      resident_blocks_(device.info().sm_count),
      partial_waves_(partial_waves),
      cluster_blocks_(cluster_blocks),
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

kernels::StreamKPlan StreamKWorkspace::with_workspace(kernels::StreamKPlan plan) const {
  if (allocated()) {
    plan.partials = buffer_.as<float>();
    plan.arrivals = reinterpret_cast<unsigned int*>(buffer_.ptr() + partial_bytes_);
  }
  return plan;
}

kernels::StreamKPlan StreamKWorkspace::plan(int tiles, int slices, int row_tiles, bool row_major) const {
  return with_workspace(kernels::plan_launch_stream_k(tiles, slices, allocated() ? resident_blocks_ : 0, row_tiles,
                                                      row_major, partial_waves_));
}

void StreamKWorkspace::measure_clusters(const LoadedKernel& kernel, const LaunchShape& shape) {
  if (cluster_blocks_ == 0 || device_ == nullptr) return;
  ScopedContext scope(*device_);
  std::string counts;
  clusters_.resident[1] = resident_blocks_;  // a block alone
  for (int blocks = 2; blocks <= kernels::kStreamKMaxClusterBlocks; ++blocks) {
    clusters_.resident[blocks] = resident_clusters(kernel, shape, static_cast<unsigned>(blocks));
    counts += (blocks > 2 ? ", " : "") + std::to_string(clusters_.resident[blocks]);
  }
  clusters_.blocks = cluster_blocks_ >= 1 ? cluster_blocks_ : 0;
  log().debug("clusters of 2 to {} blocks the device runs at once: {}", kernels::kStreamKMaxClusterBlocks, counts);
}

kernels::StreamKPlan StreamKWorkspace::rows_as_n(int tiles, int slices, int row_tiles) const {
  return with_workspace(kernels::plan_rows_as_n(tiles, slices, allocated() ? resident_blocks_ : 0, row_tiles,
                                                partial_waves_, clusters_));
}

kernels::StreamKPlan StreamKWorkspace::clustered(const kernels::StreamKPlan& plan, int row_tiles) const {
  if (!allocated()) return plan;
  return kernels::cluster_stream_k(plan, row_tiles, resident_blocks_, clusters_);
}

}  // namespace shardjit
