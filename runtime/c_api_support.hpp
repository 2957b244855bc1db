// What the C API's source files share: the opaque handles' definitions, the per-thread last
// error, the guard that turns exceptions into statuses, and the conversions of C views.
#pragma once

#include <memory>
#include <new>
#include <string>

#include "shardjit/c_api.h"
#include "shardjit/shardjit.hpp"

struct shardjit_runtime {
  std::unique_ptr<shardjit::Runtime> runtime;
};

struct shardjit_comm {
  std::unique_ptr<shardjit::Communicator> comm;
};

struct shardjit_linear_logp {
  std::unique_ptr<shardjit::LinearLogp> op;
};

struct shardjit_reduce_scatter {
  std::unique_ptr<shardjit::ReduceScatter> op;
};

struct shardjit_moe_combine {
  std::unique_ptr<shardjit::MoeCombine> op;
};

namespace shardjit::c_api {

// This thread's last error: the message of its last failed call, "" after a successful one.
// Nothing here throws: an exception must never cross into a C caller, which has no handler for
// it, and keeping a message can itself run out of memory.
const char* last_error_text() noexcept;
void clear_last_error() noexcept;
shardjit_status fail(shardjit_status status, const char* message) noexcept;

// Runs `body`; turns any exception into a status and the thread's last error.
template <class Body>
shardjit_status guarded(Body&& body) noexcept {
  try {
    body();
    clear_last_error();
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

inline shardjit_status null_argument(const char* function, const char* name) noexcept {
  try {
    return fail(SHARDJIT_ERROR_INVALID_ARGUMENT, (std::string(function) + ": " + name + " is NULL").c_str());
  } catch (...) {
    return fail(SHARDJIT_ERROR_INVALID_ARGUMENT, "an argument is NULL");
  }
}

shardjit::DType dtype_of(shardjit_dtype dtype);
shardjit::MatrixView matrix_of(const shardjit_matrix& m);
// A view that may be absent (data NULL): its dtype is then not read.
shardjit::MatrixView optional_matrix_of(const shardjit_matrix& m);
shardjit::VectorView vector_of(const shardjit_vector& v);

}  // namespace shardjit::c_api
