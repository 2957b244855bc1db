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
};

void launch_early_start(const LoadedKernel& kernel, const LaunchShape& shape, void** params, CUstream stream);

template <class Args>
void launch(const LoadedKernel& kernel, const LaunchShape& shape, const Args& args, CUstream stream) {
  void* params[] = {const_cast<Args*>(&args)};
  if (shape.early_start) {
    launch_early_start(kernel, shape, params, stream);
    return;
  }
  SHARDJIT_CU(cuLaunchKernel(kernel.function, shape.grid_x, shape.grid_y, shape.grid_z, shape.block_x, 1, 1,
                             shape.smem_bytes, stream, params, nullptr));
}

// Raises the kernel's dynamic shared-memory limit (needed past 48 KiB); done once, at op build.
void allow_dynamic_smem(const LoadedKernel& kernel, unsigned bytes);

}  // namespace shardjit
