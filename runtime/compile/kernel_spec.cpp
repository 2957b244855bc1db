#include "runtime/compile/kernel_spec.hpp"

#include <algorithm>

#include "shardjit/error.hpp"

namespace shardjit {
namespace {

std::string kind_name(ParamKind kind) {
  switch (kind) {
    case ParamKind::kInt: return "an integer";
    case ParamKind::kBool: return "a bool";
    case ParamKind::kType: return "a type";
  }
  return "?";
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

void validate(const TemplateDef& def, const ParamDef& param, const ParamValue& value) {
  auto fail = [&](const std::string& why) {
    throw Error(ErrorCode::kInvalidArgument,
                "kernel template " + def.name + ": parameter " + param.name + " " + why);
  };
  switch (param.kind) {
    case ParamKind::kInt: {
      if (!std::holds_alternative<std::int64_t>(value)) fail("must be " + kind_name(param.kind));
      std::int64_t v = std::get<std::int64_t>(value);
      if (v < param.min || v > param.max) {
        fail("= " + std::to_string(v) + " is out of range; expected " + std::to_string(param.min) +
             ".." + std::to_string(param.max));
      }
      if (param.multiple_of > 1 && v % param.multiple_of != 0) {
        fail("= " + std::to_string(v) + " must be a multiple of " + std::to_string(param.multiple_of));
      }
      break;
    }
    case ParamKind::kBool:
      if (!std::holds_alternative<bool>(value)) fail("must be " + kind_name(param.kind));
      break;
    case ParamKind::kType: {
      if (!std::holds_alternative<TypeArg>(value)) fail("must be " + kind_name(param.kind));
      const std::string& name = std::get<TypeArg>(value).name;
      if (std::find(param.allowed_types.begin(), param.allowed_types.end(), name) ==
          param.allowed_types.end()) {
        fail("= " + name + " is not allowed; expected one of " + join(param.allowed_types));
      }
      break;
    }
  }
}

std::string render_text(const ParamValue& value) {
  if (auto* i = std::get_if<std::int64_t>(&value)) return std::to_string(*i);
  if (auto* b = std::get_if<bool>(&value)) return *b ? "true" : "false";
  return std::get<TypeArg>(value).name;
}

std::string render_cxx(const ParamValue& value) {
  if (auto* i = std::get_if<std::int64_t>(&value)) return std::to_string(*i);
  if (auto* b = std::get_if<bool>(&value)) return *b ? "true" : "false";
  return template_type_spelling(std::get<TypeArg>(value).name);
}

}  // namespace

KernelSpec::KernelSpec(const std::string& template_name,
                       const std::vector<std::pair<std::string, ParamValue>>& values)
    : def_(&find_template(template_name)) {
  for (const auto& [name, value] : values) {
    auto known = std::find_if(def_->params.begin(), def_->params.end(),
                              [&](const ParamDef& p) { return p.name == name; });
    if (known == def_->params.end()) {
      throw Error(ErrorCode::kInvalidArgument,
                  "kernel template " + def_->name + " has no parameter '" + name + "'");
    }
  }
  values_.reserve(def_->params.size());
  for (const ParamDef& param : def_->params) {
    auto given = std::find_if(values.begin(), values.end(),
                              [&](const auto& entry) { return entry.first == param.name; });
    if (given == values.end()) {
      throw Error(ErrorCode::kInvalidArgument,
                  "kernel template " + def_->name + ": parameter " + param.name + " is missing");
    }
    if (std::count_if(values.begin(), values.end(),
                      [&](const auto& entry) { return entry.first == param.name; }) > 1) {
      throw Error(ErrorCode::kInvalidArgument,
                  "kernel template " + def_->name + ": parameter " + param.name + " is given twice");
    }
    validate(*def_, param, given->second);
    values_.push_back(given->second);
  }
  if (def_->check) def_->check(*this);
}

std::string KernelSpec::canonical_text() const {
  std::string text = def_->name + "<";
  for (std::size_t i = 0; i < values_.size(); ++i) {
    if (i > 0) text += ",";
    text += def_->params[i].name + "=" + render_text(values_[i]);
  }
  return text + ">";
}

std::string KernelSpec::name_expression() const {
  std::string text = def_->symbol + "<";
  for (std::size_t i = 0; i < values_.size(); ++i) {
    if (i > 0) text += ", ";
    text += render_cxx(values_[i]);
  }
  return text + ">";
}

const ParamValue& KernelSpec::value(std::string_view name) const {
  for (std::size_t i = 0; i < def_->params.size(); ++i) {
    if (def_->params[i].name == name) return values_[i];
  }
  throw Error(ErrorCode::kInternal,
              "kernel template " + def_->name + " has no parameter '" + std::string(name) + "'");
}

std::int64_t KernelSpec::int_param(std::string_view name) const {
  return std::get<std::int64_t>(value(name));
}

bool KernelSpec::bool_param(std::string_view name) const { return std::get<bool>(value(name)); }

const std::string& KernelSpec::type_param(std::string_view name) const {
  return std::get<TypeArg>(value(name)).name;
}

}  // namespace shardjit
