// Kernel launches as the scheduler issues them: one Args struct by value, a launch shape, the
// caller's stream. No allocation, no host synchronization.
#pragma once

#include <cuda.h>

#include "runtime/driver/cuda_driver.hpp"
#include "runtime/driver/module.hpp"

namespace shardjit {

struct LaunchShape {
  unsigned grid_x = 1;
  unsigned grid_y = 1;
  unsigned grid_z = 1;
  unsigned block_x = 1;
  unsigned smem_bytes = 0;
  // Blocks of a thread-block cluster (sm_90 and later); the grid is a whole number of clusters.
  unsigned cluster_x = 1;
  unsigned cluster_y = 1;
};

// Launches kernel(args) with the shape, as a cluster launch when the shape has clusters.
void launch_params(const LoadedKernel& kernel, const LaunchShape& shape, void** params, CUstream stream);

template <class Args>
void launch(const LoadedKernel& kernel, const LaunchShape& shape, const Args& args, CUstream stream) {
  void* params[] = {const_cast<Args*>(&args)};
  launch_params(kernel, shape, params, stream);
}

// Raises the kernel's dynamic shared-memory limit (needed past 48 KiB); done once, at op build.
void allow_dynamic_smem(const LoadedKernel& kernel, unsigned bytes);

}  // namespace shardjit
