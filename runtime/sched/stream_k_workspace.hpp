// Device memory of the Hopper kernels' tiles split along K (templates/common/stream_k.cuh): a
// partial-sum slot for the first and the last piece of each block's run, and a counter a split
// tile. One workspace serves every kernel of an op, since they run in the order of its stream.
// It is allocated only once a call may split (allocate); until then nothing is split.
#pragma once

#include <cstddef>

#include "common/stream_k.cuh"
#include "runtime/driver/device.hpp"
#include "runtime/sched/launch.hpp"

namespace shardjit {

class StreamKWorkspace {
 public:
  StreamKWorkspace() = default;
  // For tiles of `tile_accumulators` fp32 sums on the device's multiprocessors, one block each.
  // `partial_waves`: plan_stream_k's rule (RuntimeConfig::split_partial_waves); `cluster_blocks`:
  // RuntimeConfig::split_clusters (-1: cluster_stream_k's rule, 0: no clusters, 1 to
  // kStreamKMaxClusterBlocks: clusters of that many blocks where they divide a plan's row tiles).
  StreamKWorkspace(const DeviceContext& device, int tile_accumulators, bool partial_waves = true,
                   int cluster_blocks = -1);

  // Allocates the workspace, once (the counters start at zero, and each launch leaves them so);
  // nothing for a workspace built without a device (the portable path).
  void allocate();
  bool allocated() const { return buffer_.bytes() > 0; }

  // The plan of a launch of `tiles` tiles of `slices` K slices each over `row_tiles` row tiles
  // (kernels::plan_launch_stream_k; `row_major`: the GEMM's walk), with the workspace; unsplit
  // until allocated.
  kernels::StreamKPlan plan(int tiles, int slices, int row_tiles, bool row_major) const;

  // Counts, once at op build, the clusters of 1 to kStreamKMaxClusterBlocks blocks of a kernel
  // launched as `shape` that the device runs at once (resident_clusters); until then, and with
  // clusters off, clustered() leaves every plan as it is.
  void measure_clusters(const LoadedKernel& kernel, const LaunchShape& shape);
  // `plan` of a GEMM over `row_tiles` row tiles in clusters that share B's slices, where
  // cluster_stream_k finds some (split whole, or split whole for them below a wave); unsplit until
  // allocated.
  kernels::StreamKPlan clustered(const kernels::StreamKPlan& plan, int row_tiles) const;
  // The plan of a GEMM on the tiles that take the rows as N (plan_rows_as_n), of `row_tiles` row
  // tiles; unsplit until allocated.
  kernels::StreamKPlan rows_as_n(int tiles, int slices, int row_tiles) const;
  // What clustered() plans with (none before measure_clusters or with clusters off).
  const kernels::StreamKClusters& clusters() const { return clusters_; }

  int resident_blocks() const { return resident_blocks_; }
  bool partial_waves() const { return partial_waves_; }

  // Blocks to launch for `plan` (stream_k_grid on this device's resident blocks, at least one).
  int grid(const kernels::StreamKPlan& plan, bool persistent) const {
    return kernels::stream_k_grid(plan, resident_blocks_ > 0 ? resident_blocks_ : 1, persistent);
  }

 private:
  // `plan` with the workspace's partials and arrival counters, where it is allocated.
  kernels::StreamKPlan with_workspace(kernels::StreamKPlan plan) const;

  const DeviceContext* device_ = nullptr;
  DeviceBuffer buffer_;
  int resident_blocks_ = 0;
  bool partial_waves_ = true;
  int cluster_blocks_ = -1;
  std::size_t partial_bytes_ = 0;
  kernels::StreamKClusters clusters_{};
};

}  // namespace shardjit
