// The registry of kernel templates: each template's file, its C++ symbol and its parameters with
// their valid values. A KernelSpec is checked against its entry before anything is rendered.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace shardjit {

class KernelSpec;

enum class ParamKind { kInt, kType, kBool };

struct ParamDef {
  std::string name;
  ParamKind kind = ParamKind::kInt;
  std::int64_t min = 0;                    // kInt: inclusive range
  std::int64_t max = 0;
  std::int64_t multiple_of = 1;            // kInt
  std::vector<std::string> allowed_types;  // kType: "bf16", "fp16", "fp32", "int32", "int64", "none"
  std::string doc;
};

struct TemplateDef {
  std::string name;    // "linear_logp_fwd"
  std::string file;    // relative to templates/
  std::string symbol;  // "shardjit::kernels::linear_logp_fwd"
  std::vector<ParamDef> params;
  // Constraints between parameters; throws Error(kInvalidArgument). May be empty.
  std::function<void(const KernelSpec&)> check;
};

std::span<const TemplateDef> template_registry();

// The rows of X in the forward's tiles of the rows as N (linear_logp_fwd_rows_as_n, BM x BN x 64):
// steps of 16 rows, so that two tiles cover any call of 257 to 336 rows with at most 31 rows past
// it (one, 129 to 168 rows, with 15). wgmma issues these widths of N (templates/common/ptx_wgmma.cuh);
// the registry accepts them and the host's plans choose among them.
inline constexpr int kFwdRowsAsNRows[] = {136, 152, 168};

// Their vocabulary columns, wgmma's M: 128, or 256 (each warpgroup two m64 blocks of them), whose
// products move fewer shared-memory bytes each (rows_as_n_slice_work, runtime/ops/gemm.hpp).
inline constexpr int kFwdRowsAsNCols[] = {128, 256};

// The only one of them whose kernel keeps the backward's one chunk as well (KEEP): the kept
// chunk's maxima go by 128-column tiles (kKeptColumnTileCols, templates/linear_logp/fwd_layout.cuh),
// and the 256-column fold merges a row's lanes every tile, which the keep's stores do not follow.
inline constexpr int kFwdRowsAsNKeepCols = 128;

// The stages of their TMA ring: the most the shared memory holds at every height, 6 of 128
// columns, 4 of 256. A slice of the 128-column tiles takes the tensor cores 40 % less time than one
// of the 128 x 256 tiles, so the four stages of those covered too little of the loads' latency
// (docs/perf-notes.md, "Forward tiles per call").
constexpr int fwd_rows_as_n_stages(int cols) { return cols == 256 ? 4 : 6; }

// kFwdRowsAsNRows as text, for errors: "136, 152, 168".
std::string fwd_rows_as_n_rows_text();

// Throws Error(kNotFound) listing the known templates.
const TemplateDef& find_template(const std::string& name);

// The C++ spelling of a type parameter's value inside templates ("bf16" -> "shardjit::kernels::bf16").
const char* template_type_spelling(const std::string& type_name);

}  // namespace shardjit
