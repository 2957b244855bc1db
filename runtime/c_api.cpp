// The C API over the C++ one: every entry point catches everything, maps shardjit::Error codes to
// statuses and keeps the message per thread.
#include "shardjit/c_api.h"

#include <exception>
#include <memory>
#include <new>
#include <string>

#include "shardjit/shardjit.hpp"

struct shardjit_runtime {
  std::unique_ptr<shardjit::Runtime> runtime;
};

struct shardjit_linear_logp {
  std::unique_ptr<shardjit::LinearLogp> op;
};

namespace {

thread_local std::string last_error;

shardjit_status fail(shardjit_status status, const std::string& message) {
  last_error = message;
  return status;
}

// Runs `body`; turns any exception into a status and the thread's last error.
template <class Body>
shardjit_status guarded(Body&& body) {
  try {
    body();
    last_error.clear();
    return SHARDJIT_OK;
  } catch (const shardjit::Error& e) {
    return fail(static_cast<shardjit_status>(e.code()), e.what());
  } catch (const std::bad_alloc&) {
    return fail(SHARDJIT_ERROR_INTERNAL, "out of host memory");
  } catch (const std::exception& e) {
    return fail(SHARDJIT_ERROR_INTERNAL, e.what());
  } catch (...) {
    return fail(SHARDJIT_ERROR_INTERNAL, "unknown error");
  }
}

shardjit_status null_argument(const char* function, const char* name) {
  return fail(SHARDJIT_ERROR_INVALID_ARGUMENT, std::string(function) + ": " + name + " is NULL");
}

shardjit::DType dtype_of(shardjit_dtype dtype) {
  if (dtype < SHARDJIT_BF16 || dtype > SHARDJIT_INT64) {
    throw shardjit::Error(shardjit::ErrorCode::kInvalidArgument,
                          "dtype " + std::to_string(static_cast<int>(dtype)) + " is not a shardjit_dtype");
  }
  return static_cast<shardjit::DType>(dtype);
}

shardjit::MatrixView matrix_of(const shardjit_matrix& m) {
  return {m.data, dtype_of(m.dtype), m.rows, m.cols, m.row_stride};
}

shardjit::VectorView vector_of(const shardjit_vector& v) {
  return {v.data, v.data ? dtype_of(v.dtype) : shardjit::DType::kFP32, v.size};
}

}  // namespace

static_assert(static_cast<int>(shardjit::ErrorCode::kInternal) == SHARDJIT_ERROR_INTERNAL,
              "C status codes mirror shardjit::ErrorCode");
static_assert(static_cast<int>(shardjit::DType::kInt64) == SHARDJIT_INT64, "C dtypes mirror shardjit::DType");

extern "C" {

const char* shardjit_last_error(void) { return last_error.c_str(); }

const char* shardjit_status_name(shardjit_status status) {
  return shardjit::error_code_name(static_cast<shardjit::ErrorCode>(status));
}

const char* shardjit_version(void) { return shardjit::version(); }

void shardjit_runtime_options_init(shardjit_runtime_options* options) {
  if (options != nullptr) *options = shardjit_runtime_options{nullptr, -1, nullptr, nullptr};
}

shardjit_status shardjit_runtime_create(const shardjit_runtime_options* options, shardjit_runtime** out) {
  if (out == nullptr) return null_argument("shardjit_runtime_create", "out");
  *out = nullptr;
  return guarded([&] {
    shardjit::RuntimeOptions cpp;
    if (options != nullptr) {
      if (options->cache_dir) cpp.cache_dir = options->cache_dir;
      if (options->jit >= 0) cpp.jit = options->jit != 0;
      if (options->template_dir) cpp.template_dir = options->template_dir;
      if (options->log_level) cpp.log_level = options->log_level;
    }
    auto handle = std::make_unique<shardjit_runtime>();
    handle->runtime = std::make_unique<shardjit::Runtime>(cpp);
    *out = handle.release();
  });
}

void shardjit_runtime_destroy(shardjit_runtime* runtime) { delete runtime; }

void shardjit_linear_logp_config_init(shardjit_linear_logp_config* config) {
  if (config == nullptr) return;
  const shardjit::LinearLogpConfig defaults;
  *config = shardjit_linear_logp_config{};
  config->dtype = static_cast<shardjit_dtype>(defaults.dtype);
  config->bias_dtype = SHARDJIT_BF16;
  config->target_dtype = static_cast<shardjit_dtype>(defaults.target_dtype);
  config->ignore_index = defaults.ignore_index;
  config->temperature = defaults.temperature;
}

shardjit_status shardjit_linear_logp_create(shardjit_runtime* runtime, const shardjit_linear_logp_config* config,
                                            shardjit_linear_logp** out) {
  if (out == nullptr) return null_argument("shardjit_linear_logp_create", "out");
  *out = nullptr;
  if (runtime == nullptr) return null_argument("shardjit_linear_logp_create", "runtime");
  if (config == nullptr) return null_argument("shardjit_linear_logp_create", "config");
  return guarded([&] {
    shardjit::LinearLogpConfig cpp;
    cpp.hidden = config->hidden;
    cpp.vocab_start = config->vocab_start;
    cpp.vocab_local = config->vocab_local;
    cpp.vocab_global = config->vocab_global;
    cpp.valid_vocab = config->valid_vocab;
    cpp.dtype = dtype_of(config->dtype);
    if (config->has_bias) cpp.bias_dtype = dtype_of(config->bias_dtype);
    cpp.target_dtype = dtype_of(config->target_dtype);
    cpp.ignore_index = config->ignore_index;
    cpp.temperature = config->temperature;
    cpp.want_entropy = config->want_entropy != 0;
    cpp.strict = config->strict != 0;
    cpp.device = config->device;
    cpp.max_rows = config->max_rows;
    cpp.want_backward = config->want_backward != 0;
    cpp.grad_weight_fp32 = config->grad_weight_fp32 != 0;
    cpp.dz_fp32 = config->dz_fp32 != 0;
    cpp.backward_workspace_bytes = config->backward_workspace_bytes;
    cpp.grad_filter_threshold = config->grad_filter_threshold;
    auto handle = std::make_unique<shardjit_linear_logp>();
    handle->op = std::make_unique<shardjit::LinearLogp>(*runtime->runtime, cpp);
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
    shardjit::LinearLogpGrads cpp;
    cpp.hidden = matrix_of(grads->hidden);
    cpp.weight = matrix_of(grads->weight);
    cpp.bias = vector_of(grads->bias);
    cpp.accumulate = grads->accumulate != 0;
    op->op->backward({matrix_of(hidden), matrix_of(weight), vector_of(bias), vector_of(targets)}, vector_of(lse),
                     vector_of(grad_logp), vector_of(grad_lse), cpp, stream);
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
