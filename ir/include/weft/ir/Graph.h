// The SSA graph: typed values, nodes with an op, operands, attributes and a source location;
// inputs split into arguments and state; outputs plus the new values of updated state.
#pragma once

#include "weft/ir/Types.h"
#include "weft/runtime/Attrs.h"
#include "weft/runtime/OpTable.h"

#include <cstdint>
#include <string>
#include <vector>

namespace weft::ir {

/// Where a node came from in the user's code (file empty when unknown).
struct Location {
  std::string file;
  int line = 0;
  bool known() const { return !file.empty(); }
  /// "file:line", as messages name it.
  std::string text() const { return file + ":" + std::to_string(line); }
  bool operator==(const Location&) const = default;
};

/// Index of a value in its graph.
using ValueId = int32_t;
inline constexpr ValueId kNoValue = -1;

/// One SSA value: its type, and the node that defines it (or -1 for a graph input).
struct Value {
  TensorType type;
  int32_t producer = -1;
  std::string name; // inputs only: how the text form spells it
};

/// One operation: `result = op(operands) {attrs}`.
struct Node {
  OpCode op;
  std::vector<ValueId> operands;
  Attrs attrs;
  ValueId result = kNoValue;
  Location loc;
};

/// Nodes that one generated kernel computes (the fuse pass finds them). `nodes` (ascending) write
/// values of the group's shape (of their part's, below), but for reductions and what reads them:
/// a row kernel's values of its rows' reduced shape, a column kernel's sums, a matmul kernel's
/// GEMM (its operands' shapes differ); `leaves` are scalar constants, broadcasts and views
/// (permutes, slices, flips: the kernel reads their operand at the view's strides; a matmul
/// kernel's transposed B) the kernel computes inline (they may also run on their own for other
/// readers). `inputs` are
/// read, `outputs` are the values others need. The kernel runs where the group's first node is, so
/// every input is computed before it. `inPlace` has, per output, the index in `inputs` of a state
/// input the kernel writes that output over (the state's new value, where nothing reads the old one
/// after the kernel), or -1 for an output of its own.
///
/// A horizontal kernel (`parts` not empty) computes independent groups of different shapes in one
/// launch (an optimizer's updates of many small parameters): each part loops over the elements of
/// its shape, flat, one part after another; a node belongs to the part of its result's shape, and
/// every value it reads has that many elements or one. `shape` is then {their total}.
struct FusionGroup {
  std::vector<int32_t> nodes, leaves;
  std::vector<ValueId> inputs, outputs;
  Shape shape;
  std::vector<int32_t> inPlace;
  std::vector<Shape> parts;
  bool operator==(const FusionGroup&) const = default;
};

/// A state input whose new value the graph produces (an optimizer step, running statistics).
struct StateUpdate {
  ValueId state;    // the state input
  ValueId newValue; // the value written back
};

/// A function in SSA form: nodes in a topological order (each operand defined earlier).
class Graph {
public:
  explicit Graph(std::string name = "main") : name_(std::move(name)) {}

  const std::string& name() const { return name_; }
  /// Adds an argument (a per-call input).
  ValueId addArgument(const TensorType& type, std::string name);
  /// Adds a state input (a parameter, buffer or optimizer state that outlives the call).
  ValueId addState(const TensorType& type, std::string name);
  /// Renames input `v` (an argument or state input) to `name`, which no other input may have.
  void renameInput(ValueId v, std::string name) {
    values_[static_cast<size_t>(v)].name = std::move(name);
  }
  /// Appends a node whose result has `type`; returns the result.
  ValueId addNode(OpCode op, std::vector<ValueId> operands, Attrs attrs, const TensorType& type,
                  Location loc = {});
  /// Marks `v` as the next output.
  void addOutput(ValueId v) {
    kernels_.clear();
    outputs_.push_back(v);
  }
  /// Records that state input `state` takes the value `newValue` after a call.
  void addStateUpdate(ValueId state, ValueId newValue) {
    kernels_.clear();
    updates_.push_back({state, newValue});
  }

  const std::vector<Value>& values() const { return values_; }
  const Value& value(ValueId v) const { return values_[static_cast<size_t>(v)]; }
  const TensorType& type(ValueId v) const { return value(v).type; }
  const std::vector<Node>& nodes() const { return nodes_; }
  std::vector<Node>& mutableNodes() {
    kernels_.clear();
    return nodes_;
  }
  const std::vector<ValueId>& arguments() const { return arguments_; }
  const std::vector<ValueId>& state() const { return state_; }
  const std::vector<ValueId>& outputs() const { return outputs_; }
  std::vector<ValueId>& mutableOutputs() {
    kernels_.clear();
    return outputs_;
  }
  const std::vector<StateUpdate>& stateUpdates() const { return updates_; }
  std::vector<StateUpdate>& mutableStateUpdates() {
    kernels_.clear();
    return updates_;
  }
  /// The kernels the fuse pass grouped nodes into; empty before it runs. They name nodes by
  /// position and values by who reads them, so every change to the graph drops them.
  const std::vector<FusionGroup>& kernels() const { return kernels_; }
  void setKernels(std::vector<FusionGroup> kernels) { kernels_ = std::move(kernels); }
  /// True if `v` is an argument or state input.
  bool isInput(ValueId v) const { return value(v).producer == -1; }
  /// Per value, whether the caller receives it: an output or a state's new value.
  std::vector<bool> returnedValues() const;

  /// Replaces every use of `from` (operands, outputs, state updates) with `to`.
  void replaceAllUses(ValueId from, ValueId to);
  /// Drops nodes for which `dead[i]` is true and renumbers nothing: value ids stay valid, but
  /// values of dropped nodes no longer have a producer and must not be used.
  void eraseNodes(const std::vector<bool>& dead);
  /// Puts the nodes in `order` (a permutation of their positions, which the caller keeps
  /// topological); value ids stay valid.
  void reorderNodes(const std::vector<int32_t>& order);

private:
  /// Keeps the nodes at the positions in `order`, in that order, and renumbers producers.
  void placeNodes(const std::vector<int32_t>& order);

  std::string name_;
  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<ValueId> arguments_, state_, outputs_;
  std::vector<StateUpdate> updates_;
  std::vector<FusionGroup> kernels_;
};

/// `g` in a compact binary form, equal for equal graphs and different otherwise (every value,
/// node with its attributes and, unless `locations` is false, its source location, input, output,
/// state update and kernel): what cache keys hold. Several times faster to make than the text
/// form; not a file format (it changes with the compiler, whose version the keys also hold).
std::vector<uint8_t> keyBytes(const Graph& g, bool locations = true);

} // namespace weft::ir
