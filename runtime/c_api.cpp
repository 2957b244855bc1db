// The C API over the C++ one: every entry point catches everything, maps shardjit::Error codes to
// statuses and keeps the message per thread. This file: errors, log lines, the runtime, the
// communicator and LinearLogp; runtime/c_api_collectives.cpp: ReduceScatter and MoeCombine.
#include "shardjit/c_api.h"

#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/c_api_support.hpp"
#include "runtime/env.hpp"
#include "shardjit/logging.hpp"

using namespace shardjit::c_api;

namespace {

// The caller's config (its struct_size checked, read over the defaults) as the C++ one.
shardjit::LinearLogpConfig config_of(const shardjit_linear_logp_config& given) {
  const shardjit_linear_logp_config config = read_struct(given, shardjit_linear_logp_config_init_sized,
                                                         kOldestLinearLogpConfigSize, "shardjit_linear_logp_config");
  shardjit::LinearLogpConfig cpp;
  cpp.hidden = config.hidden;
  cpp.vocab_start = config.vocab_start;
  cpp.vocab_local = config.vocab_local;
  cpp.vocab_global = config.vocab_global;
  cpp.valid_vocab = config.valid_vocab;
  cpp.dtype = dtype_of(config.dtype);
  if (config.has_bias) cpp.bias_dtype = dtype_of(config.bias_dtype);
  cpp.target_dtype = dtype_of(config.target_dtype);
  cpp.ignore_index = config.ignore_index;
  cpp.temperature = config.temperature;
  cpp.want_entropy = config.want_entropy != 0;
  cpp.strict = config.strict != 0;
  cpp.device = config.device;
  cpp.max_rows = config.max_rows;
  cpp.want_backward = config.want_backward != 0;
  cpp.grad_weight_fp32 = config.grad_weight_fp32 != 0;
  cpp.dz_fp32 = config.dz_fp32 != 0;
  cpp.backward_workspace_bytes = config.backward_workspace_bytes;
  cpp.grad_filter_threshold = config.grad_filter_threshold;
  cpp.keep_logits_bytes = config.keep_logits_bytes;
  return cpp;
}

// A field of shardjit_runtime_options whose value is out of its range.
[[noreturn]] void bad_option(const char* field, std::int64_t value, const char* expected) {
  throw shardjit::Error(shardjit::ErrorCode::kInvalidArgument, std::string("shardjit_runtime_options.") + field +
                                                                   " = " + std::to_string(value) + "; expected " +
                                                                   expected);
}

// An int switch of shardjit_runtime_options: -1 leaves it to the environment.
std::optional<bool> switch_of(const char* field, int value) {
  if (value == -1) return std::nullopt;
  if (value != 0 && value != 1) bad_option(field, value, "-1 (from the environment), 0 or 1");
  return value == 1;
}

// A count of shardjit_runtime_options other than -1 (which leaves it to the environment).
std::uint64_t count_of(const char* field, std::int64_t value) {
  if (value < 0) bad_option(field, value, "-1 (from the environment) or >= 0");
  return static_cast<std::uint64_t>(value);
}

// A communicator's options from the C timeout: 0 means the C++ default; a negative one is the
// caller's mistake, reported in the C API's own terms.
shardjit::CommOptions comm_options_of(const char* function, int64_t timeout_ms) {
  shardjit::CommOptions options;
  if (timeout_ms < 0) {
    throw shardjit::Error(shardjit::ErrorCode::kInvalidArgument,
                          std::string(function) + ": timeout_ms = " + std::to_string(timeout_ms) +
                              "; expected a positive number of milliseconds, or 0 for the default");
  }
  if (timeout_ms > 0) options.timeout = std::chrono::milliseconds(timeout_ms);
  return options;
}

// The C gradients as the C++ op takes them; a view with NULL data is not computed.
shardjit::LinearLogpGrads grads_of(const shardjit_linear_logp_grads& grads, bool reduce_hidden) {
  shardjit::LinearLogpGrads cpp;
  cpp.hidden = optional_matrix_of(grads.hidden);
  cpp.weight = optional_matrix_of(grads.weight);
  cpp.bias = vector_of(grads.bias);
  cpp.accumulate = grads.accumulate != 0;
  cpp.reduce_hidden = reduce_hidden;
  return cpp;
}

}  // namespace

static_assert(static_cast<int>(shardjit::ErrorCode::kInternal) == SHARDJIT_ERROR_INTERNAL,
              "C status codes mirror shardjit::ErrorCode");
static_assert(static_cast<int>(shardjit::DType::kInt64) == SHARDJIT_INT64, "C dtypes mirror shardjit::DType");
static_assert(sizeof(shardjit::CommUniqueId) == SHARDJIT_COMM_UNIQUE_ID_BYTES,
              "a C unique id holds a CommUniqueId");

extern "C" {


const char* shardjit_last_error(void) { return last_error_text(); }

const char* shardjit_status_name(shardjit_status status) {
  return shardjit::error_code_name(static_cast<shardjit::ErrorCode>(status));
}

const char* shardjit_version(void) { return shardjit::version(); }

shardjit_status shardjit_set_log_handler(shardjit_log_handler handler, void* user) {
  return guarded([&] {
    if (handler == nullptr) {
      shardjit::set_log_handler(nullptr);
      return;
    }
    shardjit::set_log_handler([handler, user](shardjit::LogLevel level, std::string_view text) {
      const std::string line(text);  // NUL-terminated for C
      handler(static_cast<int>(level), line.c_str(), user);
    });
  });
}

void shardjit_runtime_options_init_sized(shardjit_runtime_options* options, size_t struct_size) {
  write_defaults(options, struct_size,
                 shardjit_runtime_options{sizeof(shardjit_runtime_options), nullptr, -1, nullptr, nullptr, -1, nullptr,
                                          -1, -1, -1, -1, -1});
}

shardjit_status shardjit_runtime_create(const shardjit_runtime_options* options, shardjit_runtime** out) {
  if (out == nullptr) return null_argument("shardjit_runtime_create", "out");
  *out = nullptr;
  return guarded([&] {
    // NULL options: all defaults, every setting from the environment.
    shardjit_runtime_options given;
    shardjit_runtime_options_init(&given);
    if (options != nullptr) {
      given = read_struct(*options, shardjit_runtime_options_init_sized, kOldestRuntimeOptionsSize,
                          "shardjit_runtime_options");
    }
    shardjit::RuntimeOptions cpp;
    if (given.cache_dir) cpp.cache_dir = given.cache_dir;
    cpp.jit = switch_of("jit", given.jit);
    if (given.template_dir) cpp.template_dir = given.template_dir;
    if (given.log_level) cpp.log_level = given.log_level;
    if (given.cache_max_bytes != -1) cpp.cache_max_bytes = count_of("cache_max_bytes", given.cache_max_bytes);
    if (given.dump_dir) cpp.dump_dir = given.dump_dir;
    if (given.peer_blocks != -1) cpp.peer_blocks = static_cast<int>(count_of("peer_blocks", given.peer_blocks));
    cpp.peer_lines = switch_of("peer_lines", given.peer_lines);
    cpp.hopper_path = switch_of("hopper_path", given.hopper_path);
    cpp.autotune = switch_of("autotune", given.autotune);
    if (given.compile_jobs != -1) {
      if (given.compile_jobs < 0 || given.compile_jobs > shardjit::kMaxCompileJobs) {
        bad_option("compile_jobs", given.compile_jobs, "-1 (from the environment) or 0 (one per hardware thread) to 4096");
      }
      cpp.compile_jobs = given.compile_jobs;
    }
    auto handle = std::make_unique<shardjit_runtime>();
    handle->runtime = std::make_unique<shardjit::Runtime>(cpp);
    *out = handle.release();
  });
}

void shardjit_runtime_destroy(shardjit_runtime* runtime) { delete runtime; }

shardjit_status shardjit_comm_new_unique_id(char out[SHARDJIT_COMM_UNIQUE_ID_BYTES]) {
  if (out == nullptr) return null_argument("shardjit_comm_new_unique_id", "out");
  return guarded([&] {
    const shardjit::CommUniqueId id = shardjit::Communicator::new_unique_id();
    std::memcpy(out, id.data(), id.size());
  });
}

shardjit_status shardjit_comm_create(shardjit_runtime* runtime, int device, int rank, int size,
                                     const char unique_id[SHARDJIT_COMM_UNIQUE_ID_BYTES], int64_t timeout_ms,
                                     shardjit_comm** out) {
  if (out == nullptr) return null_argument("shardjit_comm_create", "out");
  *out = nullptr;
  if (runtime == nullptr) return null_argument("shardjit_comm_create", "runtime");
  if (unique_id == nullptr) return null_argument("shardjit_comm_create", "unique_id");
  return guarded([&] {
    const shardjit::CommOptions options = comm_options_of("shardjit_comm_create", timeout_ms);
    shardjit::CommUniqueId id{};
    std::memcpy(id.data(), unique_id, id.size());
    auto handle = std::make_unique<shardjit_comm>();
    handle->comm = std::make_unique<shardjit::Communicator>(
        shardjit::Communicator::create(*runtime->runtime, device, rank, size, id, options));
    *out = handle.release();
  });
}

shardjit_status shardjit_comm_wrap(shardjit_runtime* runtime, void* nccl_comm, int device, int64_t timeout_ms,
                                   shardjit_comm** out) {
  if (out == nullptr) return null_argument("shardjit_comm_wrap", "out");
  *out = nullptr;
  if (runtime == nullptr) return null_argument("shardjit_comm_wrap", "runtime");
  if (nccl_comm == nullptr) return null_argument("shardjit_comm_wrap", "nccl_comm");
  return guarded([&] {
    const shardjit::CommOptions options = comm_options_of("shardjit_comm_wrap", timeout_ms);
    auto handle = std::make_unique<shardjit_comm>();
    handle->comm = std::make_unique<shardjit::Communicator>(
        shardjit::Communicator::wrap(*runtime->runtime, nccl_comm, device, options));
    *out = handle.release();
  });
}

void shardjit_comm_destroy(shardjit_comm* comm) { delete comm; }

shardjit_status shardjit_comm_rank(const shardjit_comm* comm, int* rank) {
  if (comm == nullptr) return null_argument("shardjit_comm_rank", "comm");
  if (rank == nullptr) return null_argument("shardjit_comm_rank", "rank");
  return guarded([&] { *rank = comm->comm->rank(); });
}

shardjit_status shardjit_comm_size(const shardjit_comm* comm, int* size) {
  if (comm == nullptr) return null_argument("shardjit_comm_size", "comm");
  if (size == nullptr) return null_argument("shardjit_comm_size", "size");
  return guarded([&] { *size = comm->comm->size(); });
}

shardjit_status shardjit_comm_device(const shardjit_comm* comm, int* device) {
  if (comm == nullptr) return null_argument("shardjit_comm_device", "comm");
  if (device == nullptr) return null_argument("shardjit_comm_device", "device");
  return guarded([&] { *device = comm->comm->device(); });
}

shardjit_status shardjit_comm_set_timeout(shardjit_comm* comm, int64_t timeout_ms) {
  if (comm == nullptr) return null_argument("shardjit_comm_set_timeout", "comm");
  return guarded([&] {
    if (timeout_ms <= 0) {
      throw shardjit::Error(shardjit::ErrorCode::kInvalidArgument,
                            "shardjit_comm_set_timeout: timeout_ms = " + std::to_string(timeout_ms) +
                                "; expected a positive number of milliseconds");
    }
    comm->comm->set_timeout(std::chrono::milliseconds(timeout_ms));
  });
}

shardjit_status shardjit_comm_abort(shardjit_comm* comm) {
  if (comm == nullptr) return null_argument("shardjit_comm_abort", "comm");
  return guarded([&] { comm->comm->abort(); });
}

shardjit_status shardjit_comm_aborted(const shardjit_comm* comm, int* aborted) {
  if (comm == nullptr) return null_argument("shardjit_comm_aborted", "comm");
  if (aborted == nullptr) return null_argument("shardjit_comm_aborted", "aborted");
  return guarded([&] { *aborted = comm->comm->aborted() ? 1 : 0; });
}

static_assert(SHARDJIT_KEEP_LOGITS_AUTO == shardjit::kKeepLogitsAuto, "the C and C++ names of one default");

void shardjit_linear_logp_config_init_sized(shardjit_linear_logp_config* config, size_t struct_size) {
  const shardjit::LinearLogpConfig cpp;
  shardjit_linear_logp_config defaults{};
  defaults.dtype = static_cast<shardjit_dtype>(cpp.dtype);
  defaults.bias_dtype = SHARDJIT_BF16;
  defaults.target_dtype = static_cast<shardjit_dtype>(cpp.target_dtype);
  defaults.ignore_index = cpp.ignore_index;
  defaults.temperature = cpp.temperature;
  defaults.keep_logits_bytes = cpp.keep_logits_bytes;
  write_defaults(config, struct_size, defaults);
}

shardjit_status shardjit_linear_logp_create(shardjit_runtime* runtime, const shardjit_linear_logp_config* config,
                                            shardjit_linear_logp** out) {
  if (out == nullptr) return null_argument("shardjit_linear_logp_create", "out");
  *out = nullptr;
  if (runtime == nullptr) return null_argument("shardjit_linear_logp_create", "runtime");
  if (config == nullptr) return null_argument("shardjit_linear_logp_create", "config");
  return guarded([&] {
    const shardjit::LinearLogpConfig cpp = config_of(*config);
    auto handle = std::make_unique<shardjit_linear_logp>();
    handle->op = std::make_unique<shardjit::LinearLogp>(*runtime->runtime, cpp);
    *out = handle.release();
  });
}

shardjit_status shardjit_linear_logp_create_tp(shardjit_runtime* runtime, const shardjit_linear_logp_config* config,
                                               shardjit_comm* comm, shardjit_linear_logp** out) {
  if (out == nullptr) return null_argument("shardjit_linear_logp_create_tp", "out");
  *out = nullptr;
  if (runtime == nullptr) return null_argument("shardjit_linear_logp_create_tp", "runtime");
  if (config == nullptr) return null_argument("shardjit_linear_logp_create_tp", "config");
  if (comm == nullptr) return null_argument("shardjit_linear_logp_create_tp", "comm");
  return guarded([&] {
    const shardjit::LinearLogpConfig cpp = config_of(*config);
    auto handle = std::make_unique<shardjit_linear_logp>();
    handle->op = std::make_unique<shardjit::LinearLogp>(*runtime->runtime, cpp, *comm->comm);
    *out = handle.release();
  });
}

void shardjit_linear_logp_destroy(shardjit_linear_logp* op) { delete op; }

shardjit_status shardjit_linear_logp_forward(shardjit_linear_logp* op, shardjit_matrix hidden, shardjit_matrix weight,
                                             shardjit_vector bias, shardjit_vector targets, shardjit_vector logp,
                                             shardjit_vector lse, shardjit_vector entropy, void* stream) {
  if (op == nullptr) return null_argument("shardjit_linear_logp_forward", "op");
  return guarded([&] {
    op->op->forward({matrix_of(hidden), matrix_of(weight), vector_of(bias), vector_of(targets)},
                    {vector_of(logp), vector_of(lse), vector_of(entropy)}, stream);
  });
}

shardjit_status shardjit_linear_logp_backward(shardjit_linear_logp* op, shardjit_matrix hidden, shardjit_matrix weight,
                                              shardjit_vector bias, shardjit_vector targets, shardjit_vector lse,
                                              shardjit_vector grad_logp, shardjit_vector grad_lse,
                                              const shardjit_linear_logp_grads* grads, void* stream) {
  if (op == nullptr) return null_argument("shardjit_linear_logp_backward", "op");
  if (grads == nullptr) return null_argument("shardjit_linear_logp_backward", "grads");
  return guarded([&] {
    const shardjit::LinearLogpBackwardInputs cpp{vector_of(lse), {}, vector_of(grad_logp), vector_of(grad_lse), {}};
    op->op->backward({matrix_of(hidden), matrix_of(weight), vector_of(bias), vector_of(targets)}, cpp,
                     grads_of(*grads, true), stream);
  });
}

shardjit_status shardjit_linear_logp_backward_v2(shardjit_linear_logp* op, shardjit_matrix hidden,
                                                 shardjit_matrix weight, shardjit_vector bias, shardjit_vector targets,
                                                 const shardjit_linear_logp_backward_inputs* inputs,
                                                 const shardjit_linear_logp_grads* grads, int reduce_grad_hidden,
                                                 void* stream) {
  if (op == nullptr) return null_argument("shardjit_linear_logp_backward_v2", "op");
  if (inputs == nullptr) return null_argument("shardjit_linear_logp_backward_v2", "inputs");
  if (grads == nullptr) return null_argument("shardjit_linear_logp_backward_v2", "grads");
  return guarded([&] {
    if (reduce_grad_hidden != 0 && reduce_grad_hidden != 1) {
      throw shardjit::Error(shardjit::ErrorCode::kInvalidArgument,
                            "shardjit_linear_logp_backward_v2: reduce_grad_hidden = " +
                                std::to_string(reduce_grad_hidden) + "; expected 0 or 1");
    }
    const shardjit::LinearLogpBackwardInputs cpp{vector_of(inputs->lse), vector_of(inputs->entropy),
                                                 vector_of(inputs->grad_logp), vector_of(inputs->grad_lse),
                                                 vector_of(inputs->grad_entropy)};
    op->op->backward({matrix_of(hidden), matrix_of(weight), vector_of(bias), vector_of(targets)}, cpp,
                     grads_of(*grads, reduce_grad_hidden == 1), stream);
  });
}

shardjit_status shardjit_linear_logp_check(shardjit_linear_logp* op, void* stream, int64_t* bad_rows,
                                           int64_t* first_bad_id) {
  if (op == nullptr) return null_argument("shardjit_linear_logp_check", "op");
  return guarded([&] {
    shardjit::BadTargetReport report = op->op->check(stream);
    if (bad_rows != nullptr) *bad_rows = report.bad_rows;
    if (first_bad_id != nullptr) *first_bad_id = report.first_bad_id;
  });
}

}  // extern "C"
