// A kernel specialization: a registered template plus typed, validated parameter values. Its
// canonical text is what the cache key and `shardjit ls` use; its name expression is what NVRTC
// instantiates. Values are rendered from their types, never pasted from caller text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "runtime/compile/template_registry.hpp"

namespace shardjit {

struct TypeArg {
  std::string name;  // "bf16", "fp16", "fp32", "int32", "int64", "none"
  bool operator==(const TypeArg&) const = default;
};

using ParamValue = std::variant<std::int64_t, bool, TypeArg>;

class KernelSpec {
 public:
  // Every parameter of the template must be given exactly once. Throws Error(kInvalidArgument)
  // naming the parameter, the value and what was expected.
  KernelSpec(const std::string& template_name,
             const std::vector<std::pair<std::string, ParamValue>>& values);

  const TemplateDef& def() const { return *def_; }
  const std::string& template_name() const { return def_->name; }

  // "linear_logp_fwd<T=bf16,BiasT=none,...>" in registry order.
  std::string canonical_text() const;
  // "shardjit::kernels::linear_logp_fwd<shardjit::kernels::bf16, ...>".
  std::string name_expression() const;

  std::int64_t int_param(std::string_view name) const;
  bool bool_param(std::string_view name) const;
  const std::string& type_param(std::string_view name) const;

  bool operator==(const KernelSpec& other) const {
    return def_ == other.def_ && values_ == other.values_;
  }

 private:
  const ParamValue& value(std::string_view name) const;
  const TemplateDef* def_;
  std::vector<ParamValue> values_;  // registry order
};

}  // namespace shardjit
