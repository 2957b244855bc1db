#include "runtime/sched/launch.hpp"

namespace shardjit {

namespace {

// The launch's attributes (early start, clusters) in `attributes`; returns how many.
unsigned launch_attributes(const LaunchShape& shape, CUlaunchAttribute (&attributes)[2]) {
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
  return count;
}

CUlaunchConfig launch_config(const LaunchShape& shape, CUstream stream, CUlaunchAttribute (&attributes)[2]) {
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
  config.numAttrs = launch_attributes(shape, attributes);
  return config;
}

}  // namespace

void launch_with_attributes(const LoadedKernel& kernel, const LaunchShape& shape, void** params, CUstream stream) {
  CUlaunchAttribute attributes[2]{};
  const CUlaunchConfig config = launch_config(shape, stream, attributes);
  SHARDJIT_CU(cuLaunchKernelEx(&config, kernel.function, params, nullptr));
}

int resident_clusters(const LoadedKernel& kernel, const LaunchShape& shape, unsigned cluster) {
  LaunchShape clustered = shape;
  clustered.cluster_x = cluster;
  clustered.grid_x = cluster;
  clustered.grid_y = 1;
  clustered.grid_z = 1;
  clustered.early_start = false;
  CUlaunchAttribute attributes[2]{};
  const CUlaunchConfig config = launch_config(clustered, nullptr, attributes);
  int clusters = 0;
  if (driver().cuOccupancyMaxActiveClusters(&clusters, kernel.function, &config) != CUDA_SUCCESS) return 0;
  return clusters;
}

void allow_dynamic_smem(const LoadedKernel& kernel, unsigned bytes) {
  SHARDJIT_CU(cuFuncSetAttribute(kernel.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                 static_cast<int>(bytes)));
}

}  // namespace shardjit
