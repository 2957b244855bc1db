#include "runtime/compile/template_registry.hpp"

#include <algorithm>
#include <iterator>
#include <map>
#include <utility>

#include "runtime/compile/kernel_spec.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

ParamDef int_param(std::string name, std::int64_t min, std::int64_t max, std::int64_t multiple_of,
                   std::string doc) {
  ParamDef p;
  p.name = std::move(name);
  p.kind = ParamKind::kInt;
  p.min = min;
  p.max = max;
  p.multiple_of = multiple_of;
  p.doc = std::move(doc);
  return p;
}

ParamDef type_param(std::string name, std::vector<std::string> allowed, std::string doc) {
  ParamDef p;
  p.name = std::move(name);
  p.kind = ParamKind::kType;
  p.allowed_types = std::move(allowed);
  p.doc = std::move(doc);
  return p;
}

ParamDef bool_param(std::string name, std::string doc) {
  ParamDef p;
  p.name = std::move(name);
  p.kind = ParamKind::kBool;
  p.doc = std::move(doc);
  return p;
}

constexpr std::int64_t kMaxInt32 = 2147483647;

// BM and BN of a GEMM-shaped kernel of 256 threads: 64, 128 or 256 each, and no more fp32
// accumulators than eight warps hold in registers (64 x 64 a warp for the tensor-core loops,
// 32 x 32 for the fp32 FMA ones).
void check_block_tile(const char* name, const KernelSpec& spec, bool fma_loop) {
  const std::int64_t bm = spec.int_param("BM");
  const std::int64_t bn = spec.int_param("BN");
  auto tile_side = [](std::int64_t v) { return v == 64 || v == 128 || v == 256; };
  if (!tile_side(bm) || !tile_side(bn)) {
    throw Error(ErrorCode::kInvalidArgument, std::string("kernel template ") + name + ": BM = " +
                                                 std::to_string(bm) + ", BN = " + std::to_string(bn) +
                                                 "; each must be 64, 128 or 256");
  }
  const std::int64_t max_tile = fma_loop ? 16384 : 32768;
  if (bm * bn > max_tile) {
    throw Error(ErrorCode::kInvalidArgument, std::string("kernel template ") + name + ": BM x BN = " +
                                                 std::to_string(bm) + " x " + std::to_string(bn) + " exceeds " +
                                                 std::to_string(max_tile) + " accumulators for the " +
                                                 (fma_loop ? "fp32 FMA" : "tensor-core") + " main loop");
  }
}

// The Hopper main loop takes 128 x 256 x 64 tiles of 16-bit inputs, and the forward also
// 128 x 128 and 128 x 192 (templates/common/wgmma_mainloop.cuh; runtime/ops/linear_logp/fwd.hpp,
// hopper_other_fwd_tiles; its tiles of the rows as N are linear_logp_fwd_rows_as_n's, checked
// below). `type` names the parameter that holds the input type.
void check_hopper_tile(const char* name, const KernelSpec& spec, const char* type = "T", bool other_tiles_too = false) {
  const std::int64_t bn = spec.int_param("BN");
  if (spec.type_param(type) == "fp32" || spec.int_param("BM") != 128 ||
      (bn != 256 && !(other_tiles_too && (bn == 128 || bn == 192))) || spec.int_param("BK") != 64) {
    throw Error(ErrorCode::kInvalidArgument, std::string("kernel template ") + name + ": WGMMA with " + type +
                                                 " = " + spec.type_param(type) + ", BM x BN x BK = " +
                                                 std::to_string(spec.int_param("BM")) + " x " +
                                                 std::to_string(spec.int_param("BN")) + " x " +
                                                 std::to_string(spec.int_param("BK")) +
                                                 "; the wgmma main loop takes bf16 or fp16 and 128 x 256 x 64" +
                                                 (other_tiles_too ? ", 128 x 192 x 64 or 128 x 128 x 64" : ""));
  }
}

// A template with both main loops: the Hopper one's tile where WGMMA chooses it.
void check_main_loop(const char* name, const KernelSpec& spec, const char* type = "T") {
  if (spec.bool_param("WGMMA")) check_hopper_tile(name, spec, type);
}

// dZ is stored in the input type or in fp32.
void check_dz_type(const char* name, const KernelSpec& spec) {
  const std::string& dz = spec.type_param("DZ");
  if (dz != "fp32" && dz != spec.type_param("T")) {
    throw Error(ErrorCode::kInvalidArgument, std::string("kernel template ") + name + ": DZ = " + dz +
                                                 " must be fp32 or T (" + spec.type_param("T") + ")");
  }
}

// V_VALID columns of a V_LOCAL-row shard.
void check_shard_columns(const char* name, const KernelSpec& spec) {
  if (spec.int_param("V_VALID") > spec.int_param("V_LOCAL")) {
    throw Error(ErrorCode::kInvalidArgument, std::string("kernel template ") + name + ": V_VALID = " +
                                                 std::to_string(spec.int_param("V_VALID")) + " exceeds V_LOCAL = " +
                                                 std::to_string(spec.int_param("V_LOCAL")));
  }
}

void check_linear_logp_fwd(const KernelSpec& spec) {
  check_shard_columns("linear_logp_fwd", spec);
  check_block_tile("linear_logp_fwd", spec, spec.type_param("T") == "fp32");
}

void check_linear_logp_fwd_hopper(const KernelSpec& spec) {
  check_hopper_tile("linear_logp_fwd_hopper", spec, "T", true);
}

// The forward's tiles of the rows as N (templates/linear_logp/fwd_hopper.cuh): kFwdRowsAsNRows rows
// of X by kFwdRowsAsNCols vocabulary columns, of 16-bit inputs, on fwd_rows_as_n_stages(BN) stages,
// keeping the backward's chunk (KEEP) at kFwdRowsAsNKeepCols columns only. BK = 64 is the
// registry's range.
void check_linear_logp_fwd_rows_as_n(const KernelSpec& spec) {
  const std::int64_t bm = spec.int_param("BM");
  const std::int64_t bn = spec.int_param("BN");
  const std::int64_t stages = spec.int_param("STAGES");
  if (spec.type_param("T") == "fp32" || std::ranges::find(kFwdRowsAsNRows, bm) == std::end(kFwdRowsAsNRows)) {
    throw Error(ErrorCode::kInvalidArgument, "kernel template linear_logp_fwd_rows_as_n: T = " +
                                                 spec.type_param("T") + ", BM = " + std::to_string(bm) +
                                                 "; expected bf16 or fp16 and BM one of " + fwd_rows_as_n_rows_text());
  }
  if (stages != fwd_rows_as_n_stages(static_cast<int>(bn))) {
    throw Error(ErrorCode::kInvalidArgument, "kernel template linear_logp_fwd_rows_as_n: BN = " + std::to_string(bn) +
                                                 ", STAGES = " + std::to_string(stages) + "; expected STAGES = " +
                                                 std::to_string(fwd_rows_as_n_stages(static_cast<int>(bn))) +
                                                 " (6 at BN = 128, 4 at 256)");
  }
  // KEEP in 128-column tiles only (kFwdRowsAsNKeepCols).
  if (spec.bool_param("KEEP") && bn != kFwdRowsAsNKeepCols) {
    throw Error(ErrorCode::kInvalidArgument, "kernel template linear_logp_fwd_rows_as_n: KEEP with BN = " +
                                                 std::to_string(bn) + "; a kernel that keeps takes BN = " +
                                                 std::to_string(kFwdRowsAsNKeepCols) + " only");
  }
}

void check_linear_logp_bwd_dz(const KernelSpec& spec) {
  check_shard_columns("linear_logp_bwd_dz", spec);
  check_dz_type("linear_logp_bwd_dz", spec);
  check_block_tile("linear_logp_bwd_dz", spec, spec.type_param("T") == "fp32");
}

void check_linear_logp_bwd_dz_hopper(const KernelSpec& spec) {
  check_dz_type("linear_logp_bwd_dz_hopper", spec);
  check_hopper_tile("linear_logp_bwd_dz_hopper", spec);
}

void check_linear_logp_fwd_keep(const KernelSpec& spec) { check_hopper_tile("linear_logp_fwd_keep", spec); }

// The GEMM's tiles that take the rows as wgmma's N (templates/gemm/gemm_tma.cuh): the TMA loop's,
// of 16-bit operands and an A [m][k], BM x 128 x 64 with BM a multiple of 32 from 160 to 256 (the
// rows of the tiles the host picks, kGemmRowsAsNRows).
void check_gemm_rows_as_n(const KernelSpec& spec) {
  const std::int64_t bm = spec.int_param("BM");
  if (!spec.bool_param("TMA") || !spec.bool_param("WGMMA") || spec.bool_param("A_TRANS") ||
      spec.type_param("TA") == "fp32" || bm < 160 || bm % 32 != 0 || spec.int_param("BN") != 128 ||
      spec.int_param("BK") != 64 || spec.int_param("STAGES") != 4) {
    throw Error(ErrorCode::kInvalidArgument,
                "kernel template gemm: ROWS_AS_N with TA = " + spec.type_param("TA") + ", A_TRANS = " +
                    (spec.bool_param("A_TRANS") ? "true" : "false") + ", TMA = " +
                    (spec.bool_param("TMA") ? "true" : "false") + ", BM x BN x BK = " + std::to_string(bm) + " x " +
                    std::to_string(spec.int_param("BN")) + " x " + std::to_string(spec.int_param("BK")) +
                    ", STAGES = " + std::to_string(spec.int_param("STAGES")) +
                    "; expected 16-bit operands, A not transposed, the TMA loop on four stages and BM x 128 x 64 "
                    "tiles with BM one of 160, 192, 224, 256");
  }
}

void check_gemm(const KernelSpec& spec) {
  const std::string& a = spec.type_param("TA");
  const std::string& b = spec.type_param("TB");
  if (a != "fp32" && a != b) {
    throw Error(ErrorCode::kInvalidArgument, "kernel template gemm: TA = " + a + " with TB = " + b +
                                                 "; a 16-bit A needs the same type for B (tensor cores)");
  }
  if (spec.int_param("BK") == 48) {
    throw Error(ErrorCode::kInvalidArgument, "kernel template gemm: BK = 48; expected 16, 32 or 64");
  }
  if (spec.bool_param("ROWS_AS_N")) {
    check_gemm_rows_as_n(spec);
    return;
  }
  check_main_loop("gemm", spec, "TA");  // first: its message names what WGMMA needs
  if (spec.bool_param("TMA") && (!spec.bool_param("WGMMA") || spec.int_param("STAGES") != 4)) {
    throw Error(ErrorCode::kInvalidArgument, "kernel template gemm: TMA with WGMMA = " +
                                                 std::string(spec.bool_param("WGMMA") ? "true" : "false") +
                                                 ", STAGES = " + std::to_string(spec.int_param("STAGES")) +
                                                 "; the TMA loop is the wgmma loop's, on four stages");
  }
  // A 16-bit A runs the tensor-core loop (B has its type, checked above); an fp32 A the FMA loop.
  check_block_tile("gemm", spec, a == "fp32");
}

// VEC_BYTES of the cross-GPU kernels: 4, 8 or 16 (the range allows 12).
void check_vector_bytes(const KernelSpec& spec) {
  const std::int64_t bytes = spec.int_param("VEC_BYTES");
  if (bytes == 12) {
    throw Error(ErrorCode::kInvalidArgument, "VEC_BYTES = 12; expected 4, 8 or 16");
  }
}

// A row of H elements of T is a whole number of VEC_BYTES chunks.
void check_moe_combine(const KernelSpec& spec) {
  check_vector_bytes(spec);
  const std::int64_t element = spec.type_param("T") == "fp32" ? 4 : 2;
  const std::int64_t row = spec.int_param("H") * element;
  if (row % spec.int_param("VEC_BYTES") != 0) {
    throw Error(ErrorCode::kInvalidArgument, "kernel template moe_combine: a row of H = " +
                                                 std::to_string(spec.int_param("H")) + " elements is " +
                                                 std::to_string(row) + " bytes, not a multiple of VEC_BYTES = " +
                                                 std::to_string(spec.int_param("VEC_BYTES")));
  }
}

// PEERS ranks each hold S / PEERS of the sources; one rank is no peer group.
void check_logp_combine(const KernelSpec& spec) {
  const std::int64_t peers = spec.int_param("PEERS");
  if (peers == 1) {
    throw Error(ErrorCode::kInvalidArgument,
                "kernel template logp_combine: PEERS = 1; expected 0, or 2 to 8 ranks");
  }
}

// The parameters the LinearLogp kernels that recompute logits share, in registry order: the
// input types, then (in the portable loops' kernels, specialized for it) the shard, then the block
// tile. The Hopper loop's kernels take the shard at run time: they are built once per dtype,
// whatever the model.
std::vector<ParamDef> linear_logp_types(std::vector<std::string> input_types = {"bf16", "fp16", "fp32"}) {
  return {type_param("T", std::move(input_types), "dtype of hidden and weight"),
          type_param("BiasT", {"none", "bf16", "fp16", "fp32"}, "dtype of the bias, none without one"),
          type_param("TargetT", {"int32", "int64"}, "dtype of the target ids")};
}

// The 16-bit input types of the Hopper loop's own kernels.
std::vector<ParamDef> hopper_linear_logp_types() { return linear_logp_types({"bf16", "fp16"}); }

std::vector<ParamDef> shard() {
  return {int_param("H", 8, 65536, 8, "hidden size"),
          int_param("V_LOCAL", 1, kMaxInt32, 1, "rows of this shard's weight"),
          int_param("V_VALID", 0, kMaxInt32, 1, "columns of the shard that are not padding (0: all padding)")};
}

std::vector<ParamDef> block_tile() {
  return {int_param("BM", 64, 256, 64, "rows of hidden per tile (64, 128 or 256)"),
          int_param("BN", 64, 256, 64, "vocabulary columns per tile (64, 128 or 256)"),
          int_param("BK", 32, 64, 32, "hidden elements per pipeline stage"),
          int_param("STAGES", 2, 4, 1, "shared-memory pipeline depth")};
}

ParamDef main_loop() {
  return bool_param("WGMMA", "whether the Hopper main loop (wgmma, sm_90a) runs instead of the portable one");
}

ParamDef entropy() { return bool_param("ENTROPY", "whether entropy terms are accumulated"); }

ParamDef dz_type() { return type_param("DZ", {"bf16", "fp16", "fp32"}, "dtype dZ is stored in: T or fp32"); }

ParamDef dz_filter() {
  return bool_param("FILTER", "whether tiles of small gradients are zeroed and marked for the GEMMs to skip");
}

std::vector<ParamDef> concat(std::initializer_list<std::vector<ParamDef>> parts) {
  std::vector<ParamDef> all;
  for (const auto& part : parts) all.insert(all.end(), part.begin(), part.end());
  return all;
}

// The LinearLogp family: the forward, its combine and the backward's own kernels.
std::vector<TemplateDef> linear_logp_templates() {
  std::vector<TemplateDef> registry;
  registry.push_back(TemplateDef{
      "logp_combine",
      "linear_logp/combine.cuh",
      "shardjit::kernels::logp_combine",
      {type_param("TargetT", {"int32", "int64"}, "dtype of the target ids"),
       bool_param("ENTROPY", "whether partials carry entropy terms and entropy is written"),
       int_param("PEERS", 0, 8, 1, "0: partials in one local buffer; else the TP ranks whose symmetric buffers hold them")},
      check_logp_combine});
  registry.push_back(TemplateDef{
      "linear_logp_fwd",
      "linear_logp/fwd.cuh",
      "shardjit::kernels::linear_logp_fwd",
      concat({linear_logp_types(), shard(), block_tile(), {entropy()}}),
      check_linear_logp_fwd});
  registry.push_back(TemplateDef{
      "linear_logp_fwd_hopper",
      "linear_logp/fwd_hopper.cuh",
      "shardjit::kernels::linear_logp_fwd_hopper",
      concat({hopper_linear_logp_types(), block_tile(), {entropy()}}),
      check_linear_logp_fwd_hopper});
  registry.push_back(TemplateDef{
      "linear_logp_fwd_rows_as_n",
      "linear_logp/fwd_hopper.cuh",
      "shardjit::kernels::linear_logp_fwd_rows_as_n",
      concat({hopper_linear_logp_types(),
              {int_param("BM", kFwdRowsAsNRows[0], std::end(kFwdRowsAsNRows)[-1], 8,
                         "rows of X per tile, wgmma's N (one of " + fwd_rows_as_n_rows_text() + ")"),
               int_param("BN", 128, 256, 128, "vocabulary columns per tile, wgmma's M (128 or 256)"),
               int_param("BK", 64, 64, 64, "hidden elements per pipeline stage"),
               int_param("STAGES", fwd_rows_as_n_stages(256), fwd_rows_as_n_stages(128), 2,
                         "TMA ring depth (6 at BN = 128, 4 at 256)")},
              {entropy(), bool_param("KEEP", "whether each tile also keeps its logits for the backward's one chunk "
                                             "(BN = 128 only)")}}),
      check_linear_logp_fwd_rows_as_n});
  registry.push_back(TemplateDef{
      "linear_logp_bwd_dz",
      "linear_logp/bwd_dz.cuh",
      "shardjit::kernels::linear_logp_bwd_dz",
      concat({linear_logp_types(), {dz_type()}, shard(), block_tile(), {dz_filter()}}),
      check_linear_logp_bwd_dz});
  registry.push_back(TemplateDef{
      "linear_logp_bwd_dz_hopper",
      "linear_logp/bwd_dz_hopper.cuh",
      "shardjit::kernels::linear_logp_bwd_dz_hopper",
      concat({hopper_linear_logp_types(), {dz_type()}, block_tile(), {dz_filter()}}),
      check_linear_logp_bwd_dz_hopper});
  registry.push_back(TemplateDef{
      "linear_logp_fwd_keep",
      "linear_logp/fwd_keep.cuh",
      "shardjit::kernels::linear_logp_fwd_keep",
      concat({hopper_linear_logp_types(), block_tile()}),
      check_linear_logp_fwd_keep});
  registry.push_back(TemplateDef{
      "linear_logp_bwd_kept_dz",
      "linear_logp/bwd_kept_dz.cuh",
      "shardjit::kernels::linear_logp_bwd_kept_dz",
      {type_param("TargetT", {"int32", "int64"}, "dtype of the target ids"),
       type_param("DZ", {"bf16", "fp16"}, "dtype dZ is stored in (T)"),
       int_param("BN", 64, 256, 64, "vocabulary columns per tile of the kept chunk (its partials' tiles)")},
      nullptr});
  registry.push_back(TemplateDef{
      "linear_logp_bwd_scale",
      "linear_logp/bwd_scale.cuh",
      "shardjit::kernels::linear_logp_bwd_scale",
      {int_param("LIMIT_LOG2", 1, 100, 1, "the largest |dZ| is scaled below 2^LIMIT_LOG2")},
      nullptr});
  registry.push_back(TemplateDef{
      "linear_logp_bwd_bias",
      "linear_logp/bwd_bias.cuh",
      "shardjit::kernels::linear_logp_bwd_bias",
      {type_param("DZ", {"bf16", "fp16", "fp32"}, "dtype of dZ"),
       type_param("OutT", {"bf16", "fp16", "fp32"}, "dtype of grad_bias")},
      nullptr});
  return registry;
}

// The GEMM the backward's gradients run on.
TemplateDef gemm_template() {
  return TemplateDef{
      "gemm",
      "gemm/gemm.cuh",
      "shardjit::kernels::gemm",
      {type_param("TA", {"bf16", "fp16", "fp32"}, "dtype of A"),
       type_param("TB", {"bf16", "fp16", "fp32"}, "dtype of B"),
       type_param("OutT", {"bf16", "fp16", "fp32"}, "dtype of the output"),
       type_param("AddT", {"bf16", "fp16", "fp32"}, "dtype of the optional addend"),
       bool_param("A_TRANS", "whether A is stored transposed, [k][m]"),
       int_param("BM", 32, 256, 32, "output rows per tile (64, 128 or 256; with ROWS_AS_N 160 to 256)"),
       int_param("BN", 64, 256, 64, "output columns per tile (64, 128 or 256)"),
       int_param("BK", 16, 64, 16, "K elements per pipeline stage"),
       int_param("STAGES", 2, 4, 1, "shared-memory pipeline depth"),
       main_loop(),
       bool_param("TMA", "with WGMMA: whether a producer warp copies the operands by TMA (four stages)"),
       bool_param("FILTER", "whether K slices that a mask marks as zero are skipped"),
       bool_param("ROWS_AS_N", "with TMA: BM x 128 tiles that take the output's rows as wgmma's N")},
      check_gemm};
}

// The cross-GPU ops' kernels.
std::vector<TemplateDef> collective_templates() {
  std::vector<TemplateDef> registry;
  registry.push_back(TemplateDef{
      "reduce_scatter",
      "collective/reduce_scatter.cuh",
      "shardjit::kernels::reduce_scatter",
      {type_param("T", {"bf16", "fp16", "fp32"}, "dtype of the input and output"),
       int_param("WORLD", 2, 8, 1, "ranks in the group"),
       int_param("VEC_BYTES", 4, 16, 4, "bytes per vector load and store (4, 8 or 16)")},
      check_vector_bytes});
  registry.push_back(TemplateDef{
      "moe_combine",
      "collective/moe_combine.cuh",
      "shardjit::kernels::moe_combine",
      {type_param("T", {"bf16", "fp16", "fp32"}, "dtype of the expert outputs and the output"),
       int_param("WORLD", 1, 8, 1, "ranks in the group (source buffers)"),
       int_param("H", 2, 65536, 2, "hidden size"),
       int_param("VEC_BYTES", 4, 16, 4, "bytes per vector load and store (4, 8 or 16)"),
       bool_param("GATES", "whether each contribution is scaled by a gate weight")},
      check_moe_combine});
  return registry;
}

// Every template, the LinearLogp family first (the registry's order is the listing's order).
std::vector<TemplateDef> make_registry() {
  std::vector<TemplateDef> registry = linear_logp_templates();
  registry.push_back(gemm_template());
  for (TemplateDef& def : collective_templates()) registry.push_back(std::move(def));
  return registry;
}

}  // namespace

std::span<const TemplateDef> template_registry() {
  static const std::vector<TemplateDef> registry = make_registry();
  return registry;
}

std::string fwd_rows_as_n_rows_text() {
  std::string text;
  for (const int rows : kFwdRowsAsNRows) text += (text.empty() ? "" : ", ") + std::to_string(rows);
  return text;
}

const TemplateDef& find_template(const std::string& name) {
  for (const TemplateDef& def : template_registry()) {
    if (def.name == name) return def;
  }
  std::string known;
  for (const TemplateDef& def : template_registry()) known += (known.empty() ? "" : ", ") + def.name;
  throw Error(ErrorCode::kNotFound, "no kernel template named '" + name + "'; known: " + known);
}

const char* template_type_spelling(const std::string& type_name) {
  static const std::map<std::string, const char*> spellings = {
      {"bf16", "shardjit::kernels::bf16"}, {"fp16", "shardjit::kernels::fp16"},
      {"fp32", "float"},                   {"int32", "int"},
      {"int64", "long long"},              {"none", "shardjit::kernels::NoBias"}};
  auto found = spellings.find(type_name);
  if (found == spellings.end()) {
    throw Error(ErrorCode::kInternal, "no C++ spelling for template type '" + type_name + "'");
  }
  return found->second;
}

}  // namespace shardjit
