// Translating one traced graph into an ONNX GraphProto, op by op (opset 17); for a dynamic
// dimension, with a second trace of the function at another size (the probe).
#pragma once

#include "weft/Onnx.h"
#include "weft/ir/Graph.h"

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

namespace weft::onnx_export {

/// For a dynamic dimension: the function traced again at another size of it, node for node the
/// same graph; the shapes that differ hold the dimension.
struct Probe {
  const ir::Graph* graph = nullptr;
  int64_t rows = 0, probeRows = 0; // the dimension's size in the two traces
  int64_t dim = 0;
  std::string name; // what the model calls it
};

/// Fills `out` with `g`: its arguments as graph inputs (named by `options`), its state as
/// initializers of `state`'s values, its nodes as ONNX nodes, its outputs (named by `options`).
/// An op ONNX lacks, and under a probe what depends on the dynamic size otherwise, are
/// ValueErrors naming the op and the line that called it.
void translateGraph(const ir::Graph& g, const Probe* probe, const std::vector<Tensor>& state,
                    const OnnxOptions& options, onnx::GraphProto& out);

} // namespace weft::onnx_export
