// What the pass pipeline compiles: a traced function's graphs, what joins them, and in the end the
// executables that run them. The program passes (output-grads, mask-rows, split, lower,
// plan-memory) work on the whole program; every other pass works on each of its graphs alone.
#pragma once

#include "weft/ir/Graph.h"
#include "weft/passes/Autodiff.h"
#include "weft/passes/PaddedRows.h"
#include "weft/runtime/Executable.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace weft::passes {

struct Program {
  /// The function as traced; after "output-grads" also the gradients of its outputs (the joint
  /// graph), after "split" the forward alone.
  ir::Graph graph;
  /// After "split": the backward (arguments: the saved values, then the seeds; outputs: the
  /// gradients output-grads computed, in `wrt` order).
  std::optional<ir::Graph> backward;

  // What "output-grads" differentiates, set by whoever builds the program (none: it does nothing).
  /// Arguments and state values of `graph` whose gradients the caller wants.
  std::vector<ir::ValueId> wrt;
  /// The leading outputs gradients flow back from (the function's own; later outputs, such as new
  /// values of arguments written in place, have none).
  size_t differentiableOutputs = 0;
  /// Regions differentiated by their own backward (user-defined autograd functions).
  std::vector<CustomRule> customRules;

  // Set by "output-grads".
  /// The outputs that depend on some `wrt` value, each with a seed: a new argument for its
  /// gradient (the graph computes the gradients of sum(output * seed) over those outputs).
  std::vector<size_t> seededOutputs;
  std::vector<ir::ValueId> seeds;
  /// Per `wrt` value, its gradient, or kNoValue where no seeded output depends on it. Ids of the
  /// joint graph: after "split" they tell only which gradients the backward computes.
  std::vector<ir::ValueId> grads;

  // A dynamic dimension, set by whoever builds the program (see PaddedTrace); "mask-rows" masks
  // the padded rows and drops the probe.
  /// The same function traced with `probeRows` rows (output-grads differentiates it alike).
  std::shared_ptr<Program> probe;
  int64_t rows = 0, probeRows = 0;
  /// Per argument: where it holds the dynamic dimension (see PaddedTrace::arguments).
  std::vector<MaybeAxis> argumentAxes;
  /// After "mask-rows": per output of `graph`, where it holds the dimension. The graph then has
  /// one more argument after the others, bool [rows], true for valid rows.
  std::vector<MaybeAxis> outputAxes;

  // Set by "split": where the backward's saved values come from, in its argument order.
  struct Saved {
    enum class From : uint8_t { Argument, State, Output };
    From from = From::Output;
    size_t index = 0; ///< argument, state or output number in the forward
  };
  std::vector<Saved> saved;

  /// After "lower": per graph (in graphs() order), the executable that runs it; "plan-memory"
  /// gives each its memory plan.
  std::vector<Executable> executables;

  /// The graphs that run: `graph`, then the backward once there is one.
  std::vector<ir::Graph*> graphs();
  std::vector<const ir::Graph*> graphs() const;
};

/// Runs `f` on a program of the graph `g` alone, which gets the graph back whatever `f` does.
template <typename F> ir::Result<bool> runOnGraph(ir::Graph& g, F&& f) {
  Program p;
  p.graph = std::move(g);
  struct GiveBack {
    ir::Graph& to;
    Program& from;
    ~GiveBack() { to = std::move(from.graph); }
  } giveBack{g, p};
  return f(p);
}

/// `p` in text form: each graph, which outputs hold a masked dynamic dimension, and each
/// executable's plan once lowered.
std::string printProgram(const Program& p);

} // namespace weft::passes
