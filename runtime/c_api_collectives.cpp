// The C API of the cross-GPU ops (ReduceScatter, MoeCombine); see runtime/c_api.cpp.
#include <cstdint>
#include <string>

#include "runtime/c_api_support.hpp"
#include "shardjit/c_api.h"

using namespace shardjit::c_api;

namespace {

shardjit::CollectivePath path_of(shardjit_collective_path path) {
  if (path < SHARDJIT_COLLECTIVE_AUTO || path > SHARDJIT_COLLECTIVE_NCCL) {
    throw shardjit::Error(shardjit::ErrorCode::kInvalidArgument,
                          "path " + std::to_string(static_cast<int>(path)) + " is not a shardjit_collective_path");
  }
  return static_cast<shardjit::CollectivePath>(path);
}

// Copies the caller's rows_per_rank array: the op keeps its own config, the caller may free it.
shardjit::ReduceScatterConfig config_of(const shardjit_reduce_scatter_config& config) {
  if (config.rows_per_rank == nullptr && config.rows_per_rank_count > 0) {
    throw shardjit::Error(shardjit::ErrorCode::kInvalidArgument,
                          "shardjit_reduce_scatter_create: config->rows_per_rank is NULL with rows_per_rank_count = " +
                              std::to_string(config.rows_per_rank_count) + "; expected one block size per rank");
  }
  shardjit::ReduceScatterConfig cpp;
  cpp.dtype = dtype_of(config.dtype);
  cpp.hidden = config.hidden;
  if (config.rows_per_rank_count > 0) {
    cpp.rows_per_rank.assign(config.rows_per_rank, config.rows_per_rank + config.rows_per_rank_count);
  }
  cpp.path = path_of(config.path);
  cpp.nccl_above_bytes = config.nccl_above_bytes;
  return cpp;
}

shardjit::MoeCombineConfig config_of(const shardjit_moe_combine_config& config) {
  shardjit::MoeCombineConfig cpp;
  cpp.dtype = dtype_of(config.dtype);
  cpp.hidden = config.hidden;
  cpp.capacity = config.capacity;
  cpp.gates = config.gates != 0;
  cpp.path = path_of(config.path);
  cpp.nccl_above_bytes = config.nccl_above_bytes;
  return cpp;
}

shardjit_matrix c_matrix_of(const shardjit::MatrixView& m) {
  return {m.data, static_cast<shardjit_dtype>(m.dtype), m.rows, m.cols, m.row_stride};
}

}  // namespace

static_assert(static_cast<int>(shardjit::CollectivePath::kNccl) == SHARDJIT_COLLECTIVE_NCCL,
              "C collective paths mirror shardjit::CollectivePath");

extern "C" {

const char* shardjit_collective_path_name(shardjit_collective_path path) {
  return shardjit::collective_path_name(static_cast<shardjit::CollectivePath>(path));
}

void shardjit_reduce_scatter_config_init_sized(shardjit_reduce_scatter_config* config, size_t struct_size) {
  const shardjit::ReduceScatterConfig cpp;
  shardjit_reduce_scatter_config defaults{};
  defaults.dtype = static_cast<shardjit_dtype>(cpp.dtype);
  defaults.hidden = cpp.hidden;
  defaults.path = static_cast<shardjit_collective_path>(cpp.path);
  defaults.nccl_above_bytes = cpp.nccl_above_bytes;
  write_defaults(config, struct_size, defaults);
}

shardjit_status shardjit_reduce_scatter_create(shardjit_runtime* runtime, shardjit_comm* comm,
                                               const shardjit_reduce_scatter_config* config,
                                               shardjit_reduce_scatter** out) {
  if (out == nullptr) return null_argument("shardjit_reduce_scatter_create", "out");
  *out = nullptr;
  if (runtime == nullptr) return null_argument("shardjit_reduce_scatter_create", "runtime");
  if (comm == nullptr) return null_argument("shardjit_reduce_scatter_create", "comm");
  if (config == nullptr) return null_argument("shardjit_reduce_scatter_create", "config");
  return guarded([&] {
    const shardjit::ReduceScatterConfig cpp =
        config_of(read_struct(*config, shardjit_reduce_scatter_config_init_sized, kOldestReduceScatterConfigSize,
                              "shardjit_reduce_scatter_config"));
    auto handle = std::make_unique<shardjit_reduce_scatter>();
    handle->op = std::make_unique<shardjit::ReduceScatter>(*runtime->runtime, *comm->comm, cpp);
    *out = handle.release();
  });
}

void shardjit_reduce_scatter_destroy(shardjit_reduce_scatter* op) { delete op; }

shardjit_status shardjit_reduce_scatter_run(shardjit_reduce_scatter* op, shardjit_matrix input, shardjit_matrix output,
                                            void* stream) {
  if (op == nullptr) return null_argument("shardjit_reduce_scatter_run", "op");
  return guarded([&] { op->op->run(matrix_of(input), matrix_of(output), stream); });
}

shardjit_status shardjit_reduce_scatter_path(const shardjit_reduce_scatter* op, shardjit_collective_path* path) {
  if (op == nullptr) return null_argument("shardjit_reduce_scatter_path", "op");
  if (path == nullptr) return null_argument("shardjit_reduce_scatter_path", "path");
  return guarded([&] { *path = static_cast<shardjit_collective_path>(op->op->path()); });
}

shardjit_status shardjit_reduce_scatter_check(shardjit_reduce_scatter* op, void* stream) {
  if (op == nullptr) return null_argument("shardjit_reduce_scatter_check", "op");
  return guarded([&] { op->op->check(stream); });
}

void shardjit_moe_combine_config_init_sized(shardjit_moe_combine_config* config, size_t struct_size) {
  const shardjit::MoeCombineConfig cpp;
  shardjit_moe_combine_config defaults{};
  defaults.dtype = static_cast<shardjit_dtype>(cpp.dtype);
  defaults.hidden = cpp.hidden;
  defaults.capacity = cpp.capacity;
  defaults.gates = cpp.gates ? 1 : 0;
  defaults.path = static_cast<shardjit_collective_path>(cpp.path);
  defaults.nccl_above_bytes = cpp.nccl_above_bytes;
  write_defaults(config, struct_size, defaults);
}

shardjit_status shardjit_moe_combine_create(shardjit_runtime* runtime, shardjit_comm* comm,
                                            const shardjit_moe_combine_config* config, shardjit_moe_combine** out) {
  if (out == nullptr) return null_argument("shardjit_moe_combine_create", "out");
  *out = nullptr;
  if (runtime == nullptr) return null_argument("shardjit_moe_combine_create", "runtime");
  if (comm == nullptr) return null_argument("shardjit_moe_combine_create", "comm");
  if (config == nullptr) return null_argument("shardjit_moe_combine_create", "config");
  return guarded([&] {
    const shardjit::MoeCombineConfig cpp = config_of(read_struct(
        *config, shardjit_moe_combine_config_init_sized, kOldestMoeCombineConfigSize, "shardjit_moe_combine_config"));
    auto handle = std::make_unique<shardjit_moe_combine>();
    handle->op = std::make_unique<shardjit::MoeCombine>(*runtime->runtime, *comm->comm, cpp);
    *out = handle.release();
  });
}

void shardjit_moe_combine_destroy(shardjit_moe_combine* op) { delete op; }

shardjit_status shardjit_moe_combine_run(shardjit_moe_combine* op, const shardjit_moe_combine_call* call, void* stream) {
  if (op == nullptr) return null_argument("shardjit_moe_combine_run", "op");
  if (call == nullptr) return null_argument("shardjit_moe_combine_run", "call");
  return guarded([&] {
    shardjit::MoeCombineCall cpp;
    cpp.rows = optional_matrix_of(call->rows);  // data NULL: the op's own rows buffer
    // positions and output may be absent in a call without tokens (the op checks the rest).
    cpp.positions = optional_matrix_of(call->positions);
    cpp.gates = optional_matrix_of(call->gates);
    cpp.output = optional_matrix_of(call->output);
    op->op->run(cpp, stream);
  });
}

shardjit_status shardjit_moe_combine_rows_buffer(shardjit_moe_combine* op, shardjit_matrix* buffer) {
  if (op == nullptr) return null_argument("shardjit_moe_combine_rows_buffer", "op");
  if (buffer == nullptr) return null_argument("shardjit_moe_combine_rows_buffer", "buffer");
  return guarded([&] { *buffer = c_matrix_of(op->op->rows_buffer()); });
}

shardjit_status shardjit_moe_combine_path(const shardjit_moe_combine* op, shardjit_collective_path* path) {
  if (op == nullptr) return null_argument("shardjit_moe_combine_path", "op");
  if (path == nullptr) return null_argument("shardjit_moe_combine_path", "path");
  return guarded([&] { *path = static_cast<shardjit_collective_path>(op->op->path()); });
}

shardjit_status shardjit_moe_combine_check(shardjit_moe_combine* op, void* stream, int64_t* bad_positions,
                                           int64_t* first_bad_position) {
  if (op == nullptr) return null_argument("shardjit_moe_combine_check", "op");
  return guarded([&] {
    const shardjit::BadPositionReport report = op->op->check(stream);
    if (bad_positions != nullptr) *bad_positions = report.bad_positions;
    if (first_bad_position != nullptr) *first_bad_position = report.first_bad_position;
  });
}

}  // extern "C"
