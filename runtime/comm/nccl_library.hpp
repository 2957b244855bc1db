// NCCL, opened at run time like the driver. libnccl is never linked: the library, the CLI and the
// single-GPU ops load and run on machines without it, and only building a communicator there
// fails (Error kCommError naming what is missing). nccl.h is used for its types only; every entry
// point is looked up with dlsym by its name, so its signature is the one nccl.h declares.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <string>

#include "shardjit/dtype.hpp"

namespace shardjit {

// X-macro list of the NCCL entry points shardjit uses (all present since NCCL 2.14).
#define SHARDJIT_NCCL_FUNCTIONS(X) \
  X(ncclGetVersion)                \
  X(ncclGetErrorString)            \
  X(ncclGetLastError)              \
  X(ncclGetUniqueId)               \
  X(ncclCommInitRankConfig)        \
  X(ncclCommGetAsyncError)         \
  X(ncclCommFinalize)              \
  X(ncclCommDestroy)               \
  X(ncclCommAbort)                 \
  X(ncclCommCount)                 \
  X(ncclCommUserRank)              \
  X(ncclCommCuDevice)              \
  X(ncclAllGather)                 \
  X(ncclAllReduce)                 \
  X(ncclReduceScatter)             \
  X(ncclReduce)                    \
  X(ncclGroupStart)                \
  X(ncclGroupEnd)

struct NcclApi {
#define SHARDJIT_NCCL_MEMBER(name) decltype(&::name) name = nullptr;
  SHARDJIT_NCCL_FUNCTIONS(SHARDJIT_NCCL_MEMBER)
#undef SHARDJIT_NCCL_MEMBER
  int version = 0;  // ncclGetVersion's code, e.g. 22809 for 2.28.9
};

// The soname of NCCL 2.x, looked up on the loader's path (LD_LIBRARY_PATH, ld.so.conf).
inline constexpr const char* kNcclLibrary = "libnccl.so.2";
// Non-blocking communicators, ncclCommGetAsyncError and ncclCommFinalize came with 2.14.
inline constexpr int kMinNcclVersion = 21400;

struct NcclLoad {
  NcclApi api;
  bool ok = false;
  std::string error;  // why not, when !ok: says what is missing and what is needed
};

// Opens `library` and looks up every entry point; never throws. nccl() uses it with
// kNcclLibrary, once per process; tests call it with other names.
NcclLoad load_nccl(const char* library);

// The process's NCCL; throws Error(kCommError) with load_nccl's message when it is missing or
// too old. Thread-safe.
const NcclApi& nccl();

// True if nccl() would succeed; never throws.
bool nccl_available() noexcept;

// "2.28.9" for 22809 (codes before 2.9 were MAJOR*1000 + MINOR*100 + PATCH).
std::string nccl_version_text(int code);

// Throws Error(kCommError) naming the call, NCCL's text for the code and, when `comm` is given,
// NCCL's last error message for it. ncclSuccess and ncclInProgress are not errors here.
void check_nccl(const NcclApi& api, ncclResult_t result, const char* call, ncclComm_t comm);

// NCCL's type for a shardjit dtype, and the bytes of one element of an NCCL type.
ncclDataType_t nccl_type_of(DType dtype);
std::size_t nccl_type_size(ncclDataType_t type);

}  // namespace shardjit
