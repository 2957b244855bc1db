#include "runtime/ops/collective/kernels.hpp"

#include "shardjit/error.hpp"

namespace shardjit {

KernelSpec reduce_scatter_spec(DType dtype, int world, int vec_bytes) {
  return KernelSpec("reduce_scatter", {{"T", TypeArg{dtype_name(dtype)}},
                                       {"WORLD", std::int64_t{world}},
                                       {"VEC_BYTES", std::int64_t{vec_bytes}}});
}

KernelSpec moe_combine_spec(DType dtype, int world, std::int64_t hidden, int vec_bytes, bool gates) {
  return KernelSpec("moe_combine", {{"T", TypeArg{dtype_name(dtype)}},
                                    {"WORLD", std::int64_t{world}},
                                    {"H", hidden},
                                    {"VEC_BYTES", std::int64_t{vec_bytes}},
                                    {"GATES", gates}});
}

int collective_vector_bytes(std::int64_t row_bytes, const std::string& what) {
  for (int bytes : {16, 8, 4}) {
    if (row_bytes % bytes == 0) return bytes;
  }
  throw Error(ErrorCode::kInvalidArgument, what + ": a row of " + std::to_string(row_bytes) +
                                               " bytes; expected a multiple of 4 bytes (an even hidden size for "
                                               "16-bit dtypes)");
}

std::vector<KernelSpec> collective_kernels(DType dtype, int world, std::int64_t hidden) {
  const int vec = collective_vector_bytes(hidden * static_cast<std::int64_t>(dtype_size(dtype)), "collective kernels");
  std::vector<KernelSpec> specs = {moe_combine_spec(dtype, world, hidden, vec, false),
                                   moe_combine_spec(dtype, world, hidden, vec, true)};
  if (world >= 2) specs.insert(specs.begin(), reduce_scatter_spec(dtype, world, vec));
  return specs;
}

std::string collective_prewarm_command(DType dtype, int world, std::int64_t hidden, const std::string& arch) {
  return "shardjit prewarm --collectives-only --hidden " + std::to_string(hidden) + " --tp " + std::to_string(world) +
         " --dtype " + dtype_name(dtype) + " --arch " + arch;
}

}  // namespace shardjit
