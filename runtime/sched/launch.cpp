#include "runtime/sched/launch.hpp"

namespace shardjit {

void launch_early_start(const LoadedKernel& kernel, const LaunchShape& shape, void** params, CUstream stream) {
  CUlaunchAttribute attribute{};
  attribute.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attribute.value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig config{};
  config.gridDimX = shape.grid_x;
  config.gridDimY = shape.grid_y;
  config.gridDimZ = shape.grid_z;
  config.blockDimX = shape.block_x;
  config.blockDimY = 1;
  config.blockDimZ = 1;
  config.sharedMemBytes = shape.smem_bytes;
  config.hStream = stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  SHARDJIT_CU(cuLaunchKernelEx(&config, kernel.function, params, nullptr));
}

void allow_dynamic_smem(const LoadedKernel& kernel, unsigned bytes) {
  SHARDJIT_CU(cuFuncSetAttribute(kernel.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                 static_cast<int>(bytes)));
}

}  // namespace shardjit
