// What the C API's source files share: the opaque handles' definitions, the per-thread last
// error, the guard that turns exceptions into statuses, the reading of the versioned option and
// config structs, and the conversions of C views.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
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

// The oldest struct_size the library reads for each option and config struct: the size of its
// first versioned layout. A later version that appends fields keeps the old size here, so that
// callers built against the older header still work (they get the defaults of the new fields).
// An appended field must start at or after the old size (with explicit padding where alignment
// would place it sooner): an old caller's bytes up to its size may end in its layout's trailing
// padding, which would otherwise be read as the new field.
// compile_jobs was appended; the int after the int before it starts at the old size (72 bytes).
inline constexpr std::size_t kOldestRuntimeOptionsSize = offsetof(shardjit_runtime_options, compile_jobs);
// keep_logits_bytes was appended; an int64 after the float before it starts at the old size.
inline constexpr std::size_t kOldestLinearLogpConfigSize = offsetof(shardjit_linear_logp_config, keep_logits_bytes);
inline constexpr std::size_t kOldestReduceScatterConfigSize = sizeof(shardjit_reduce_scatter_config);
inline constexpr std::size_t kOldestMoeCombineConfigSize = sizeof(shardjit_moe_combine_config);

// The body of every *_init_sized: writes `defaults` with struct_size = the caller's size, but no
// more bytes than the caller's struct has nor than this library knows. A size the library does
// not know is kept as it is, so that the create call refuses it with a message (*_init returns
// no status); one too small to hold struct_size itself leaves the struct untouched.
template <class Struct>
void write_defaults(Struct* out, std::size_t struct_size, Struct defaults) noexcept {
  if (out == nullptr || struct_size < sizeof(defaults.struct_size)) return;
  defaults.struct_size = struct_size;
  std::memcpy(out, &defaults, std::min(struct_size, sizeof(Struct)));
}

// The caller's struct as this library reads it: the library's defaults (from `init`) with the
// caller's first struct_size bytes copied over them, so a caller built against an older header
// keeps the defaults of the fields it does not know. A struct_size outside [oldest,
// sizeof(Struct)] is a layout the library does not know (0: a struct never passed through
// *_init; larger: a header newer than the library): its fields would be read at the wrong
// places, so it is refused, naming `type_name`, the value and what was expected.
template <class Struct>
Struct read_struct(const Struct& given, void (*init)(Struct*, std::size_t), std::size_t oldest,
                   const char* type_name) {
  const std::size_t size = given.struct_size;
  if (size < oldest || size > sizeof(Struct)) {
    const std::string expected = oldest == sizeof(Struct)
                                     ? std::to_string(sizeof(Struct))
                                     : std::to_string(oldest) + " to " + std::to_string(sizeof(Struct));
    std::string message = std::string(type_name) + ".struct_size = " + std::to_string(size) + "; expected " + expected;
    if (size > sizeof(Struct)) {
      message += " (the caller's header looks newer than this library, shardjit " +
                 std::string(shardjit::version()) + ")";
    } else {
      message += std::string(" (call ") + type_name + "_init before setting fields)";
    }
    throw shardjit::Error(shardjit::ErrorCode::kInvalidArgument, message);
  }
  Struct read;
  init(&read, sizeof(Struct));
  std::memcpy(&read, &given, size);
  return read;
}

shardjit::DType dtype_of(shardjit_dtype dtype);
shardjit::MatrixView matrix_of(const shardjit_matrix& m);
// A view that may be absent (data NULL): its dtype is then not read.
shardjit::MatrixView optional_matrix_of(const shardjit_matrix& m);
shardjit::VectorView vector_of(const shardjit_vector& v);

}  // namespace shardjit::c_api
