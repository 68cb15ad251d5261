// Bucketing one dynamic dimension: a graph traced with that dimension padded up to a bucket size
// (the last valid row repeated) is made exact for any number of valid rows up to the bucket.
#pragma once

#include "weft/ir/Graph.h"

#include <optional>
#include <vector>

namespace weft::passes {

/// Where a value holds the dynamic dimension: axis `axis` has length rows * `factor`, and element
/// i along it belongs to row i / factor (the dimension is the outer factor of the axis).
struct DynamicAxis {
  int64_t axis = 0;
  int64_t factor = 1;
  bool operator==(const DynamicAxis&) const = default;
};
using MaybeAxis = std::optional<DynamicAxis>;

/// A graph traced twice from one function: with the dynamic dimension of `size` rows (the bucket)
/// and of `probeSize` rows. Comparing the two tells which values hold the dynamic dimension and
/// catches a function that turns the size into a number (it would compute with the bucket size).
struct PaddedTrace {
  const ir::Graph* graph = nullptr;
  const ir::Graph* probe = nullptr;
  int64_t size = 0, probeSize = 0;
  /// Per graph argument: where it holds the dynamic dimension, if it does. Arguments past the list
  /// (the seeds of output gradients) hold it where their shapes differ between the two traces.
  std::vector<MaybeAxis> arguments;
};

/// `PaddedTrace::graph` rewritten so rows past the valid ones never reach a value that mixes rows.
struct MaskedGraph {
  /// The graph with one more argument after the others: bool [size], true for valid rows.
  ir::Graph graph;
  /// The new id of each value of the traced graph.
  std::vector<ir::ValueId> valueMap;
  /// Per output: where it holds the dynamic dimension (the caller keeps the valid rows).
  std::vector<MaybeAxis> outputs;
};

/// Every reduction or contraction over the dynamic dimension (a loss's mean and its count, a
/// bias's and a weight's gradient, an embedding's index_add, ...) reads the padded rows through a
/// mask that replaces them with the reduction's identity, so the result equals the unpadded one;
/// every other op keeps rows apart, and the padded rows (copies of the last valid row, so finite)
/// are cut from the outputs. Ops that move rows across the dimension (flip, slicing or sorting it,
/// two dynamic axes in one value), a graph whose structure or constants depend on the size, and
/// state written with a value that holds the dimension are errors naming the user's line.
ir::Result<MaskedGraph> maskPaddedRows(const PaddedTrace& trace);

} // namespace weft::passes
