// The names that the documentation's C++ examples take from the program around them, declared
// only: the examples are compiled, never run (tests/docs/CMakeLists.txt).
#pragma once

#include <cstdint>

#include <shardjit/shardjit.hpp>

namespace shardjit_docs {

// Device memory of the caller's tensors.
extern void *hidden_ptr, *weight_ptr, *target_ptr, *logp_ptr, *lse_ptr, *entropy_ptr, *in_ptr, *out_ptr;
extern std::int64_t n;                 // rows of this call
extern shardjit::StreamHandle stream;  // the caller's cudaStream_t
extern shardjit::LinearLogpInputs inputs;
extern shardjit::LinearLogpOutputs outputs;
extern shardjit::VectorView lse_view, entropy_view, grad_logp_view, grad_lse_view, grad_entropy_view, grad_bias_view;
extern shardjit::MatrixView grad_hidden_view, grad_weight_view, rows_view, positions_view, gates_view, out_view;
// The launcher's: this process's rank, the world size, its GPU, and how rank 0's id reaches it.
extern int rank, world, local_gpu;
shardjit::CommUniqueId receive_id();

}  // namespace shardjit_docs
