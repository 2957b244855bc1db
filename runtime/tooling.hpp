// The runtime as the shardjit CLI and benchmarks (tools/) see it: the one internal header they
// include for what the public API (include/shardjit/) leaves out on purpose. It offers
//   - a Runtime's kernel cache, resolved settings, device contexts and kernel loads,
//   - the environment table and the configuration it resolves to (runtime/env.hpp),
//   - device facts (runtime/driver/device.hpp) and the driver's and NVRTC's versions,
//   - the cache folder: kernel entries, tuning records (runtime/cache/),
//   - the prewarm planning and build (runtime/prewarm/),
//   - a Communicator's bootstrap exchange and NCCL calls, for the benchmarks' NCCL baselines.
// Internal like all of runtime/: it changes with the tools. A benchmark that times an op's inner
// steps (tools/bench/shardjit_bench/tp_combine_step.cpp) includes that op's headers as well and
// says so; nothing else in tools/ reaches past this header.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <vector>

#include "runtime/cache/cache_dir.hpp"
#include "runtime/cache/disk_cache.hpp"
#include "runtime/cache/kernel_cache.hpp"
#include "runtime/cache/tuning_store.hpp"
#include "runtime/comm/nccl_library.hpp"
#include "runtime/compile/nvrtc_compiler.hpp"
#include "runtime/driver/device.hpp"
#include "runtime/driver/module.hpp"
#include "runtime/env.hpp"
#include "runtime/logging.hpp"
#include "runtime/prewarm/build.hpp"
#include "runtime/prewarm/plan.hpp"
#include "shardjit/shardjit.hpp"

namespace shardjit::tooling {

// The kernel cache (memory, then the disk folder) that `runtime`'s ops load through.
KernelCache& kernel_cache(Runtime& runtime);

// The settings `runtime` resolved from its options and the environment.
const RuntimeConfig& runtime_config(Runtime& runtime);

// GPU `ordinal`'s context in `runtime`, created on first use. Throws Error(kNoDevice) without it.
DeviceContext& device(Runtime& runtime, int ordinal);

// `spec` compiled for GPU `ordinal` (or found in the cache) and loaded there, as an op loads it.
std::shared_ptr<const LoadedKernel> load_kernel(Runtime& runtime, const KernelSpec& spec, int ordinal);

// The forward-tile tuning record that a single-GPU LinearLogp op of `config` reads on its device;
// nullopt when there is none (or it is not trusted).
std::optional<TuningRecord> forward_tuning_record(Runtime& runtime, const LinearLogpConfig& config);

// The CUDA driver's version, e.g. 13000. Throws the Error that opening the driver gave, if it failed.
int cuda_driver_version();

// Every rank's `bytes` bytes from `mine`, in rank order, through the communicator's host-side
// exchange (bounded by its timeout). Collective.
std::vector<std::byte> exchange(Communicator& comm, const void* mine, std::size_t bytes, const char* what);

// ncclReduceScatter (sum) on the communicator's own NCCL communicator, through its checked call;
// counts[r] elements of `dtype` go to rank r. Collective.
void nccl_reduce_scatter_sum(Communicator& comm, const void* send, void* recv, const std::vector<std::size_t>& counts,
                             DType dtype, CUstream stream);

}  // namespace shardjit::tooling
