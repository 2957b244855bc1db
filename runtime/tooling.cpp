#include "runtime/tooling.hpp"

#include "runtime/comm/communicator_impl.hpp"
#include "runtime/driver/cuda_driver.hpp"
#include "runtime/ops/linear_logp/layout.hpp"
#include "runtime/ops/linear_logp/tuning.hpp"
#include "runtime/runtime_impl.hpp"

namespace shardjit::tooling {

KernelCache& kernel_cache(Runtime& runtime) { return runtime.impl().cache; }

const RuntimeConfig& runtime_config(Runtime& runtime) { return runtime.impl().config; }

DeviceContext& device(Runtime& runtime, int ordinal) { return runtime.impl().device(ordinal); }

std::shared_ptr<const LoadedKernel> load_kernel(Runtime& runtime, const KernelSpec& spec, int ordinal) {
  return runtime.impl().load(spec, ordinal, "");
}

std::optional<TuningRecord> forward_tuning_record(Runtime& runtime, const LinearLogpConfig& config) {
  Runtime::Impl& impl = runtime.impl();
  return impl.load_tuning(op_fwd_tuning_key(impl, resolve_layout(config), impl.device(config.device)));
}

int cuda_driver_version() { return driver().driver_version; }

std::vector<std::byte> exchange(Communicator& comm, const void* mine, std::size_t bytes, const char* what) {
  return comm.impl().exchange(mine, bytes, what);
}

void nccl_reduce_scatter_sum(Communicator& comm, const void* send, void* recv, const std::vector<std::size_t>& counts,
                             DType dtype, CUstream stream) {
  comm.impl().reduce_scatter_sum(send, recv, counts, nccl_type_of(dtype), stream);
}

}  // namespace shardjit::tooling
