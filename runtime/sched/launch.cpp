#include "runtime/sched/launch.hpp"

namespace shardjit {

void launch_params(const LoadedKernel& kernel, const LaunchShape& shape, void** params, CUstream stream) {
  if (shape.cluster_x * shape.cluster_y == 1) {
    SHARDJIT_CU(cuLaunchKernel(kernel.function, shape.grid_x, shape.grid_y, shape.grid_z, shape.block_x, 1, 1,
                               shape.smem_bytes, stream, params, nullptr));
    return;
  }
  CUlaunchAttribute cluster{};
  cluster.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  cluster.value.clusterDim.x = shape.cluster_x;
  cluster.value.clusterDim.y = shape.cluster_y;
  cluster.value.clusterDim.z = 1;
  CUlaunchConfig config{};
  config.gridDimX = shape.grid_x;
  config.gridDimY = shape.grid_y;
  config.gridDimZ = shape.grid_z;
  config.blockDimX = shape.block_x;
  config.blockDimY = 1;
  config.blockDimZ = 1;
  config.sharedMemBytes = shape.smem_bytes;
  config.hStream = stream;
  config.attrs = &cluster;
  config.numAttrs = 1;
  SHARDJIT_CU(cuLaunchKernelEx(&config, kernel.function, params, nullptr));
}

void allow_dynamic_smem(const LoadedKernel& kernel, unsigned bytes) {
  SHARDJIT_CU(cuFuncSetAttribute(kernel.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                 static_cast<int>(bytes)));
}

}  // namespace shardjit
