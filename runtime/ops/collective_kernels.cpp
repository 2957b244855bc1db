#include "runtime/ops/collective_kernels.hpp"

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

}  // namespace shardjit
