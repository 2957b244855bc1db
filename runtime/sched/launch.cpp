#include "runtime/sched/launch.hpp"

namespace shardjit {

void launch_with_attributes(const LoadedKernel& kernel, const LaunchShape& shape, void** params, CUstream stream) {
  CUlaunchAttribute attributes[2]{};
  unsigned count = 0;
  if (shape.early_start) {
    attributes[count].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attributes[count].value.programmaticStreamSerializationAllowed = 1;
    ++count;
  }
  if (shape.cluster_x > 1) {
    attributes[count].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attributes[count].value.clusterDim.x = shape.cluster_x;
    attributes[count].value.clusterDim.y = 1;
    attributes[count].value.clusterDim.z = 1;
    ++count;
  }
  CUlaunchConfig config{};
  config.gridDimX = shape.grid_x;
  config.gridDimY = shape.grid_y;
  config.gridDimZ = shape.grid_z;
  config.blockDimX = shape.block_x;
  config.blockDimY = 1;
  config.blockDimZ = 1;
  config.sharedMemBytes = shape.smem_bytes;
  config.hStream = stream;
  config.attrs = attributes;
  config.numAttrs = count;
  SHARDJIT_CU(cuLaunchKernelEx(&config, kernel.function, params, nullptr));
}

void allow_dynamic_smem(const LoadedKernel& kernel, unsigned bytes) {
  SHARDJIT_CU(cuFuncSetAttribute(kernel.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                 static_cast<int>(bytes)));
}

}  // namespace shardjit
