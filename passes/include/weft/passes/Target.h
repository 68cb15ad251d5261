// What a device's code generator can do, as the passes ask it: which nodes a generated kernel
// computes, whether kernels reduce, which matmuls it can generate, whether it reads views through
// their strides. codegen answers for each device it generates code for (codegen::CpuTarget for
// the CPU); the passes never assume a device's abilities.
#pragma once

#include "weft/ir/Graph.h"

#include <cstddef>
#include <limits>
#include <string>

namespace weft::passes {

class Target {
public:
  virtual ~Target() = default;
  /// Names it in messages ("cpu x86_64 znver4").
  virtual std::string name() const = 0;
  /// Whether a generated kernel computes elementwise node `n` (its op, in its dtypes).
  virtual bool computes(const ir::Graph& g, const ir::Node& n) const = 0;
  /// Whether kernels add up row reductions (isRowReduction) and column sums (isColumnReduction)
  /// as they compute the values they reduce.
  virtual bool reducesInKernels() const = 0;
  /// Whether matmul `n` can be a generated GEMM (the matmul chooser then decides whether it is).
  virtual bool generatesGemm(const ir::Graph& g, const ir::Node& n) const = 0;
  /// Whether a kernel reads a permute, slice or flip of a value (isViewLeaf) through the view's
  /// strides instead of a copy.
  virtual bool readsViews() const = 0;
  /// The most buffers one kernel may read and write (its inputs and outputs together): a GPU
  /// binds each to a descriptor, of which a device allows a few dozen. No limit on the CPU.
  virtual size_t maxOperands() const { return std::numeric_limits<size_t>::max(); }
};

} // namespace weft::passes
