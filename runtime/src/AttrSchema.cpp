// The attribute schema of every op kind.
#include "weft/runtime/AttrSchema.h"

#include <utility>
#include <vector>

namespace weft {
namespace {

enum class AttrType { Int, Float, Number, Bool, Ints, DType, String };

const char* typeName(AttrType t) {
  switch (t) {
  case AttrType::Int:
    return "an integer";
  case AttrType::Float:
    return "a float";
  case AttrType::Number:
    return "a number";
  case AttrType::Bool:
    return "a bool";
  case AttrType::Ints:
    return "a list of integers";
  case AttrType::DType:
    return "a dtype";
  case AttrType::String:
    return "a string";
  }
  return "?";
}

bool hasType(const AttrValue& v, AttrType t) {
  switch (t) {
  case AttrType::Int:
    return std::holds_alternative<int64_t>(v);
  case AttrType::Float:
    return std::holds_alternative<double>(v);
  case AttrType::Number:
    return std::holds_alternative<double>(v) || std::holds_alternative<int64_t>(v);
  case AttrType::Bool:
    return std::holds_alternative<bool>(v);
  case AttrType::Ints:
    return std::holds_alternative<Shape>(v);
  case AttrType::DType:
    return std::holds_alternative<DType>(v);
  case AttrType::String:
    return std::holds_alternative<std::string>(v);
  }
  return false;
}

using Schema = std::vector<std::pair<const char*, AttrType>>;

Schema buildSchema(OpCode op) {
  using T = AttrType;
  const Schema conv{
      {"stride", T::Ints}, {"padding", T::Ints}, {"dilation", T::Ints}, {"groups", T::Int}};
  switch (opInfo(op).kind) {
  case OpKind::Unary:
  case OpKind::Binary:
  case OpKind::Identity:
  case OpKind::Where:
  case OpKind::MatMul:
  case OpKind::Matrix:
    return {};
  case OpKind::Cast:
    return {{"dtype", T::DType}};
  case OpKind::Reduce:
    return {{"dims", T::Ints}, {"keepdim", T::Bool}};
  case OpKind::ArgReduce:
    return {{"dim", T::Int}, {"keepdim", T::Bool}};
  case OpKind::Scan:
  case OpKind::ArgScan:
  case OpKind::Normalize:
    return {{"dim", T::Int}};
  case OpKind::Sort:
    return {{"dim", T::Int}, {"descending", T::Bool}};
  case OpKind::Reshape:
  case OpKind::Expand:
    return {{"shape", T::Ints}};
  case OpKind::Permute:
  case OpKind::Flip:
    return {{"dims", T::Ints}};
  case OpKind::Slice:
    return {{"dim", T::Int}, {"start", T::Int}, {"end", T::Int}, {"step", T::Int}};
  case OpKind::Pad:
    return {{"pads", T::Ints}, {"value", T::Float}};
  case OpKind::Cat:
  case OpKind::Gather:
  case OpKind::Scatter:
  case OpKind::IndexSelect:
  case OpKind::IndexAdd:
    return {{"dim", T::Int}};
  case OpKind::CheckIndex:
    return {{"size", T::Int}, {"dim", T::Int}, {"wrap", T::Bool}, {"op", T::String}};
  case OpKind::Conv:
    return conv;
  case OpKind::ConvInputGrad: {
    Schema s = conv;
    s.emplace_back("input_shape", T::Ints);
    return s;
  }
  case OpKind::ConvWeightGrad: {
    Schema s = conv;
    s.emplace_back("weight_shape", T::Ints);
    return s;
  }
  case OpKind::Pool:
    return {{"kernel_size", T::Ints},
            {"stride", T::Ints},
            {"padding", T::Ints},
            {"dilation", T::Ints},
            {"ceil_mode", T::Bool}};
  case OpKind::Full:
    return {{"shape", T::Ints}, {"dtype", T::DType}, {"value", T::Number}};
  case OpKind::Random: {
    Schema s{{"shape", T::Ints}, {"dtype", T::DType}};
    if (op == OpCode::Uniform) {
      s.emplace_back("low", T::Float);
      s.emplace_back("high", T::Float);
    } else {
      s.emplace_back("mean", T::Float);
      s.emplace_back("std", T::Float);
    }
    return s;
  }
  }
  return {};
}

/// Every op's schema, built once: checkAttrs runs on every eager op.
const Schema& schemaOf(OpCode op) {
  static const std::vector<Schema> schemas = [] {
    std::vector<Schema> all;
    for (int i = 0; i < kNumOps; ++i)
      all.push_back(buildSchema(static_cast<OpCode>(i)));
    return all;
  }();
  return schemas[static_cast<size_t>(op)];
}

} // namespace

std::optional<Diagnostic> checkAttrs(OpCode op, const Attrs& attrs) {
  const Schema& schema = schemaOf(op);
  std::string_view name = opName(op);
  for (const auto& [attr, type] : schema) {
    if (!attrs.has(attr)) return diag(ErrorKind::Value, name, ": missing attribute '", attr, "'");
    bool ok = false;
    for (const auto& [k, v] : attrs.items())
      if (k == attr) ok = hasType(v, type);
    if (!ok)
      return diag(ErrorKind::Value, name, ": attribute '", attr, "' must be ", typeName(type));
  }
  for (const auto& [k, v] : attrs.items()) {
    bool known = false;
    for (const auto& entry : schema)
      known = known || k == entry.first;
    if (!known) return diag(ErrorKind::Value, name, ": unknown attribute '", k, "'");
  }
  return std::nullopt;
}

} // namespace weft
