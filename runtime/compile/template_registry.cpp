#include "runtime/compile/template_registry.hpp"

#include <map>

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

void check_linear_logp_fwd(const KernelSpec& spec) {
  if (spec.int_param("V_VALID") > spec.int_param("V_LOCAL")) {
    throw Error(ErrorCode::kInvalidArgument,
                "kernel template linear_logp_fwd: V_VALID = " + std::to_string(spec.int_param("V_VALID")) +
                    " exceeds V_LOCAL = " + std::to_string(spec.int_param("V_LOCAL")));
  }
}

std::vector<TemplateDef> make_registry() {
  std::vector<TemplateDef> registry;
  registry.push_back(TemplateDef{
      "logp_combine",
      "linear_logp/combine.cuh",
      "shardjit::kernels::logp_combine",
      {int_param("S", 1, 1024, 1, "partial sources merged per row: vocabulary splits x TP ranks"),
       type_param("TargetT", {"int32", "int64"}, "dtype of the target ids"),
       bool_param("ENTROPY", "whether partials carry entropy terms and entropy is written")},
      nullptr});
  registry.push_back(TemplateDef{
      "linear_logp_fwd",
      "linear_logp/fwd.cuh",
      "shardjit::kernels::linear_logp_fwd",
      {type_param("T", {"bf16", "fp16", "fp32"}, "dtype of hidden and weight"),
       type_param("BiasT", {"none", "bf16", "fp16", "fp32"}, "dtype of the bias, none without one"),
       type_param("TargetT", {"int32", "int64"}, "dtype of the target ids"),
       int_param("H", 8, 65536, 8, "hidden size"),
       int_param("V_LOCAL", 1, kMaxInt32, 1, "rows of this shard's weight"),
       int_param("V_VALID", 0, kMaxInt32, 1, "columns of the shard that are not padding (0: all padding)"),
       int_param("BM", 64, 128, 64, "rows of hidden per tile"),
       int_param("BN", 64, 128, 64, "vocabulary columns per tile"),
       int_param("BK", 32, 64, 32, "hidden elements per pipeline stage"),
       int_param("STAGES", 2, 4, 1, "shared-memory pipeline depth"),
       bool_param("ENTROPY", "whether entropy terms are accumulated")},
      check_linear_logp_fwd});
  return registry;
}

}  // namespace

std::span<const TemplateDef> template_registry() {
  static const std::vector<TemplateDef> registry = make_registry();
  return registry;
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
