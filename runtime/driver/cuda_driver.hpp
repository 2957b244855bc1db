// The CUDA driver API, opened at run time. libcuda.so.1 is never linked: the library, the CLI
// and the CPU tests start on machines without a GPU or a driver, and only a GPU operation there
// fails (with Error kNoDevice). Every entry point is fetched through cuGetProcAddress at the
// version of the headers we were built with, so its signature is the one cuda.h declares.
#pragma once

#include <cuda.h>

#include <string>

namespace shardjit {

// X-macro list of the driver entry points shardjit uses. The graph calls at the end serve the
// capture tests and benchmarks, which reach the driver through this table too.
#define SHARDJIT_DRIVER_FUNCTIONS(X) \
  X(cuInit)                          \
  X(cuDriverGetVersion)              \
  X(cuGetErrorName)                  \
  X(cuGetErrorString)                \
  X(cuDeviceGet)                     \
  X(cuDeviceGetCount)                \
  X(cuDeviceGetName)                 \
  X(cuDeviceGetAttribute)            \
  X(cuDeviceTotalMem)                \
  X(cuDeviceGetPCIBusId)             \
  X(cuDeviceGetByPCIBusId)           \
  X(cuDeviceGetP2PAttribute)         \
  X(cuDevicePrimaryCtxRetain)        \
  X(cuDevicePrimaryCtxRelease)       \
  X(cuCtxPushCurrent)                \
  X(cuCtxPopCurrent)                 \
  X(cuModuleLoadData)                \
  X(cuModuleUnload)                  \
  X(cuModuleGetFunction)             \
  X(cuFuncSetAttribute)              \
  X(cuFuncGetAttribute)              \
  X(cuLaunchKernel)                  \
  X(cuLaunchKernelEx)                \
  X(cuOccupancyMaxActiveClusters)    \
  X(cuTensorMapEncodeTiled)          \
  X(cuMemAlloc)                      \
  X(cuMemFree)                       \
  X(cuMemsetD8Async)                 \
  X(cuMemcpyDtoHAsync)               \
  X(cuMemcpyHtoDAsync)               \
  X(cuMemcpyDtoDAsync)               \
  X(cuMemcpy2DAsync)                 \
  X(cuMemsetD8)                      \
  X(cuCtxSynchronize)                \
  X(cuIpcGetMemHandle)               \
  X(cuIpcOpenMemHandle)              \
  X(cuIpcCloseMemHandle)             \
  X(cuStreamSynchronize)             \
  X(cuStreamGetCtx)                  \
  X(cuPointerGetAttribute)           \
  X(cuStreamCreate)                  \
  X(cuStreamDestroy)                 \
  X(cuStreamQuery)                   \
  X(cuStreamWaitEvent)               \
  X(cuStreamIsCapturing)             \
  X(cuStreamGetCaptureInfo)          \
  X(cuThreadExchangeStreamCaptureMode) \
  X(cuLaunchHostFunc)                \
  X(cuEventCreate)                   \
  X(cuEventDestroy)                  \
  X(cuEventRecord)                   \
  X(cuEventSynchronize)              \
  X(cuEventQuery)                    \
  X(cuEventElapsedTime)              \
  X(cuStreamBeginCapture)            \
  X(cuStreamEndCapture)              \
  X(cuGraphInstantiateWithFlags)     \
  X(cuGraphLaunch)                   \
  X(cuGraphExecDestroy)              \
  X(cuGraphGetNodes)                 \
  X(cuGraphDestroy)

struct DriverApi {
#define SHARDJIT_DRIVER_MEMBER(name) decltype(&::name) name = nullptr;
  SHARDJIT_DRIVER_FUNCTIONS(SHARDJIT_DRIVER_MEMBER)
#undef SHARDJIT_DRIVER_MEMBER
  int driver_version = 0;  // e.g. 13000
};

// Opens libcuda and calls cuInit once per process; throws Error(kNoDevice) naming what is
// missing when there is no driver or no device. Thread-safe.
const DriverApi& driver();

// True if driver() would succeed; never throws.
bool driver_available() noexcept;

// Throws Error(kDriverError) naming the call, the code's name and the driver's message.
void check_cu(CUresult result, const char* call);

}  // namespace shardjit

// Checked driver call: SHARDJIT_CU(cuMemAlloc(&ptr, bytes)) calls driver().cuMemAlloc and checks it.
#define SHARDJIT_CU(call) ::shardjit::check_cu(::shardjit::driver().call, #call)
