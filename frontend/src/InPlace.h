// The two halves of an in-place op (self.op_(...)) written as its out-of-place form: the value to
// compute from, and the write of the result. Internal to the frontend (Ops.cpp, InPlace.cpp).
#pragma once

#include "weft/Tensor.h"
#include "weft/runtime/OpTable.h"

#include <optional>
#include <type_traits>

namespace weft {

/// The value an in-place op reads for `self`: a private recorded copy when autograd will record
/// the op, so the node never saves memory the op then overwrites. Given the primitive that reads
/// self (as its input 0), the copy is made only where one of that op's rules reads the input
/// (x.add_(y) saves neither; x.mul_(y) saves x for y's gradient).
Tensor inPlaceSource(const Tensor& self, const Tensor& other = {},
                     std::optional<OpCode> op = std::nullopt);

/// Writes `result` into `self` (an in-place op): checks shape and dtype, bumps the version and,
/// when grad mode is on, makes `result`'s history self's.
Tensor& assignInPlace(Tensor& self, Tensor result, const char* op);

/// self = f(source), the in-place form `op` of an out-of-place method: `f` computes from
/// inPlaceSource(self) (a recorded copy where autograd records the op: self or one of the tensor
/// `args` the method also takes requires grad).
template <typename F, typename... A>
Tensor& inPlaceOf(Tensor& self, const char* op, F&& f, const A&... args) {
  WEFT_CHECK(self.defined(), Value, op, ": called on an undefined tensor");
  Tensor other;
  auto note = [&other](const auto& a) {
    if constexpr (std::is_same_v<std::decay_t<decltype(a)>, Tensor>)
      if (!other.defined() && a.defined() && a.requires_grad()) other = a;
  };
  (note(args), ...);
  (void)note; // no arguments
  return assignInPlace(self, f(inPlaceSource(self, other)), op);
}

} // namespace weft
