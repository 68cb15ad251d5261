// Which saved values each op's vjp rule reads, found by scanning the rule's text at compile time.
#pragma once

#include "weft/runtime/OpTable.h"

#include <cstdint>
#include <string_view>

namespace weft {

/// Bit k: the rule reads input k's values; kUsesOutput: it reads the output's values.
inline constexpr uint32_t kUsesOutput = 1u << 31;
inline constexpr uint32_t kUsesAllInputs = 0x7fffffffu;

/// True if bit `i` (or "all inputs") is set.
inline bool usesInput(uint32_t mask, size_t i) {
  return (mask & (1u << (i < 31 ? i : 30))) != 0;
}

namespace detail {
constexpr bool isIdent(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
/// True if the token at `pos` is the argument of shape_of(...), dtype_of(...) or is_floating(...),
/// which read metadata only.
constexpr bool metadataOnly(std::string_view e, size_t pos) {
  size_t p = pos;
  while (p > 0 && e[p - 1] == ' ')
    --p;
  if (p == 0 || e[p - 1] != '(') return false;
  --p;
  for (std::string_view f :
       {std::string_view("shape_of"), std::string_view("shapes_of"), std::string_view("dtype_of"),
        std::string_view("is_floating"), std::string_view("zeros_like")})
    if (p >= f.size() && e.substr(p - f.size(), f.size()) == f &&
        (p == f.size() || !isIdent(e[p - f.size() - 1])))
      return true;
  return false;
}
/// Scans a stringised vjp expression for the names x, a, b, y and in.
constexpr uint32_t scanUses(std::string_view e) {
  uint32_t mask = 0;
  for (size_t i = 0; i < e.size();) {
    if (e[i] == '"') { // skip string literals such as at.i("dim")
      for (++i; i < e.size() && e[i] != '"'; ++i) {
      }
      ++i;
      continue;
    }
    if (!isIdent(e[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < e.size() && isIdent(e[j]))
      ++j;
    std::string_view tok = e.substr(i, j - i);
    bool member = i > 0 && e[i - 1] == '.';
    if (!member && !metadataOnly(e, i)) {
      if (tok == "x" || tok == "a")
        mask |= 1u;
      else if (tok == "b")
        mask |= 2u;
      else if (tok == "in")
        mask |= kUsesAllInputs;
      else if (tok == "y")
        mask |= kUsesOutput;
    }
    i = j;
  }
  return mask;
}
} // namespace detail

/// What `op`'s vjp rule for the gradient of input `input` reads, so its node saves nothing else.
/// (Binary ops have a rule per input; other ops one rule for all.)
uint32_t vjpUses(OpCode op, size_t input);

} // namespace weft
