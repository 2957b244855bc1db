// Device memory of the Hopper kernels' tiles split along K (templates/common/stream_k.cuh): a
// partial-sum slot for the first and the last piece of each block's run, and a counter a split
// tile. One workspace serves every kernel of an op, since they run in the order of its stream.
// It is allocated only once a call may split (allocate); until then nothing is split.
#pragma once

#include <array>
#include <cstddef>

#include "common/stream_k.cuh"
#include "runtime/driver/device.hpp"
#include "runtime/sched/launch.hpp"

namespace shardjit {

class StreamKWorkspace {
 public:
  StreamKWorkspace() = default;
  // For tiles of `tile_accumulators` fp32 sums on the device's multiprocessors, one block each.
  // `partial_waves`: plan_stream_k's rule (RuntimeConfig::split_partial_waves); `clusters`: whether
  // measure_clusters may allow clusters (RuntimeConfig::split_clusters).
  StreamKWorkspace(const DeviceContext& device, int tile_accumulators, bool partial_waves = true,
                   bool clusters = true);

  // Allocates the workspace, once (the counters start at zero, and each launch leaves them so);
  // nothing for a workspace built without a device (the portable path).
  void allocate();
  bool allocated() const { return buffer_.bytes() > 0; }

  // The plan of a launch of `tiles` tiles of `slices` K slices each; unsplit until allocated.
  // `row_tiles`: plan_stream_k's, for a kernel that walks split plans row after row.
  kernels::StreamKPlan plan(int tiles, int slices, int row_tiles = 1) const;

  // Counts, once at op build, the clusters of 2 to kStreamKMaxCluster blocks of a kernel launched
  // as `shape` that the device runs at once (resident_clusters); until then, and with clusters
  // off, clustered() leaves every plan as it is.
  void measure_clusters(const LoadedKernel& kernel, const LaunchShape& shape);
  // `plan`, split whole over `row_tiles` row tiles, in clusters of them where cluster_stream_k
  // allows it and the device runs such clusters (the GEMM's shared B slices).
  kernels::StreamKPlan clustered(const kernels::StreamKPlan& plan, int row_tiles) const;

  int resident_blocks() const { return resident_blocks_; }
  bool partial_waves() const { return partial_waves_; }

  // Blocks to launch for `plan` (stream_k_grid on this device's resident blocks, at least one).
  int grid(const kernels::StreamKPlan& plan, bool persistent) const {
    return kernels::stream_k_grid(plan, resident_blocks_ > 0 ? resident_blocks_ : 1, persistent);
  }

 private:
  const DeviceContext* device_ = nullptr;
  DeviceBuffer buffer_;
  int resident_blocks_ = 0;
  bool partial_waves_ = true;
  bool clusters_ = true;
  std::size_t partial_bytes_ = 0;
  std::array<int, kernels::kStreamKMaxCluster + 1> resident_clusters_{};  // by blocks a cluster
};

}  // namespace shardjit
