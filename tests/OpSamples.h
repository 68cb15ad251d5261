// Per-op samples for the op-table tests: inputs, attributes and a reference computed in double.
#pragma once

#include "TensorImpl.h"
#include "weft/weft.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

namespace weft::test {

/// A dense row-major array of doubles: what reference implementations compute on.
struct NdArray {
  Shape shape;
  std::vector<double> v;
  double& at(const Shape& idx);
  double at(const Shape& idx) const;
};

NdArray toNd(const Tensor& t);
Shape unravel(int64_t i, const Shape& shape);

/// One way to call a primitive, and what it must compute.
struct OpSample {
  std::string label;
  std::vector<Tensor> inputs; // float64 where floating; the tests derive other dtypes
  Attrs attrs;
  /// Views applied inside the recorded function (non-contiguous inputs); identity when empty.
  std::function<std::vector<Tensor>(const std::vector<Tensor>&)> prepare;
  /// The expected output computed in double from the prepared inputs.
  std::function<NdArray(const std::vector<NdArray>&, const Attrs&)> reference;
  /// For ops without a closed-form reference (random numbers): checks the output directly.
  std::function<::testing::AssertionResult(const Tensor&)> check;
  /// False where finite differences are meaningless (e.g. integer-valued results).
  bool gradcheck = true;

  std::vector<Tensor> prepared(const std::vector<Tensor>& in) const {
    return prepare ? prepare(in) : in;
  }
};

/// True for ops that take integers (and maybe bool) only: their samples hold int64 inputs, which
/// the tests convert to each dtype they try.
bool integralOnly(OpCode op);

/// The samples of `op`; every op in the table must have at least one.
std::vector<OpSample> samplesFor(OpCode op);

/// The double-precision reference of an elementwise op's scalar function.
double unaryReference(OpCode op, double x);
double binaryReference(OpCode op, double a, double b);

} // namespace weft::test
