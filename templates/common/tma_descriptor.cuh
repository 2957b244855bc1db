// A TMA tensor map as a kernel argument: the driver's opaque 128-byte CUtensorMap
// (cuTensorMapEncodeTiled, runtime/ops/tensor_maps.cpp), held in a type the host and the
// NVRTC kernels share (NVRTC has no cuda.h). The kernel reads it in place from its
// __grid_constant__ parameters, which is where TMA accepts it; 128-byte alignment is what the
// driver's type asks for.
#pragma once

namespace shardjit {
namespace kernels {

struct alignas(128) TmaDescriptor {
  unsigned long long words[16];
};

}  // namespace kernels
}  // namespace shardjit
