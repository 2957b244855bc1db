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
  // Programmatic dependent launch (devices of compute capability 9.0 and later): the kernel may
  // be launched while the stream's previous kernel finishes, which hides the launch between
  // back-to-back calls. Only for kernels that call griddep_wait (common/ptx_memory.cuh) before
  // touching memory; the stream's order is otherwise kept, in graphs too.
  bool early_start = false;
  // Blocks a cluster along x (compute capability 9.0 and later), for kernels whose blocks share
  // their shared memory; grid_x is then a multiple of it.
  unsigned cluster_x = 1;
};

// A launch with early_start or clusters (cuLaunchKernelEx and its attributes).
void launch_with_attributes(const LoadedKernel& kernel, const LaunchShape& shape, void** params, CUstream stream);

template <class Args>
void launch(const LoadedKernel& kernel, const LaunchShape& shape, const Args& args, CUstream stream) {
  void* params[] = {const_cast<Args*>(&args)};
  if (shape.early_start || shape.cluster_x > 1) {
    launch_with_attributes(kernel, shape, params, stream);
    return;
  }
  SHARDJIT_CU(cuLaunchKernel(kernel.function, shape.grid_x, shape.grid_y, shape.grid_z, shape.block_x, 1, 1,
                             shape.smem_bytes, stream, params, nullptr));
}

// Raises the kernel's dynamic shared-memory limit (needed past 48 KiB); done once, at op build.
void allow_dynamic_smem(const LoadedKernel& kernel, unsigned bytes);

// How many clusters of `cluster` blocks of `shape` the device runs at once (its multiprocessors
// go to clusters a GPC at a time); 0 where the driver runs none or cannot say. After
// allow_dynamic_smem; a driver call, made once at op build.
int resident_clusters(const LoadedKernel& kernel, const LaunchShape& shape, unsigned cluster);

}  // namespace shardjit
