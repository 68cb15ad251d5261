// What compile() builds for one signature, and the pieces of building and calling it: shared by
// Compile.cpp (the cache), DynamicDim.cpp (bucketing) and CompiledBackward.cpp (eager autograd
// through compiled outputs). Internal to the frontend.
#pragma once

#include "Trace.h"
#include "weft/Compile.h"
#include "weft/passes/PaddedRows.h"
#include "weft/passes/Program.h"
#include "weft/runtime/Executable.h"
#include "weft/runtime/Interpreter.h"

#include <memory>
#include <optional>
#include <vector>

namespace weft {

/// The type of each tensor.
std::vector<ir::TensorType> typesOf(const std::vector<Tensor>& args);

/// Records `fn` on traced stand-ins for arguments of `types` (requiring grad as `args` do). On
/// success the trace context holds the graph (user outputs first) and `effects` what each call
/// must redo to leaves' .grad. `loc`: the call that traces, named by errors about what the
/// function returned.
size_t traceInto(TraceContext& tc, const TensorFunction& fn,
                 const std::vector<ir::TensorType>& types, const std::vector<Tensor>& args,
                 std::vector<GradEffect>& effects, std::source_location loc);

/// A tensor over an interpreter buffer (sharing its memory).
Tensor tensorOf(const Buffer& b);

/// Whether `a` and `b` hold the same values element for element (NaN equals NaN).
bool sameValues(const Tensor& a, const Tensor& b);

/// One call's dynamic dimension (CompileOptions::dynamic_dim): the arguments that hold it, how
/// many rows they have, and the bucket those rows are padded to.
struct DynamicCall {
  int64_t dim = 0;
  std::vector<size_t> args;
  int64_t rows = 0, bucket = 0;

  /// The argument types with the dynamic dimension at `size` rows.
  std::vector<ir::TensorType> typesAt(const std::vector<Tensor>& real, int64_t size) const;
  /// The arguments padded to the bucket by repeating their last row, and the mask of valid rows.
  std::vector<Tensor> pad(const std::vector<Tensor>& real) const;
};

/// The dynamic dimension of a call with `args`, or none when the options mark none.
std::optional<DynamicCall> dynamicCall(const CompileOptions& o, const std::vector<Tensor>& args);

/// One compiled signature: the optimized graph, its plan and the real tensors it reads and writes.
struct CompiledSignature {
  std::shared_ptr<ir::Graph> graph;
  /// Whether `graph` went through the pass pipeline (not when its executable came from the disk
  /// cache: graph_text() runs the pipeline on a copy then).
  bool graphOptimized = true;
  /// The graph in runtime terms: signature, steps and kernels (what save() writes).
  Executable program;
  /// How a call finds the real tensor a state input reads.
  struct StateRef {
    /// A constant the trace made (arange, tensor({...}) in the function): owned here.
    Tensor owned;
    /// The user's tensor (a parameter, buffer, captured tensor), held weakly, and how many handles
    /// the user held to it when the function was traced (references weft holds for itself, as a
    /// kept autograd graph does, not counted). When it is gone or has fewer, a handle that held
    /// it (perhaps the one the function reads) was given another tensor or went out of scope:
    /// the executable may be stale, and the function is traced again.
    std::weak_ptr<TensorImpl> user;
    long refs = 0;
    /// Or the .grad of this leaf, whichever tensor it is on this call (the function read it).
    std::weak_ptr<TensorImpl> gradOf;
  };
  std::vector<StateRef> stateRefs;
  std::vector<GradEffect> gradEffects;
  /// Arguments the function writes in place: each call copies their new values into the caller's.
  std::vector<ArgumentWrite> argumentWrites;
  size_t numOutputs = 0;
  /// What the function does to random generators, in program order; each draw's key is a state
  /// input each call fills (see run()).
  std::vector<GeneratorEvent> randomEvents;
  /// Whether each state tensor had a .grad when traced: backward() accumulates differently with and
  /// without one, so a call where this differs needs its own trace.
  std::vector<bool> gradDefined;
  /// Whether each state tensor required grad when traced (a parameter frozen or unfrozen since
  /// needs its own trace: what is differentiated, updated and returned differs).
  std::vector<bool> requiresGrad;
  /// Which state tensors the plan writes.
  std::vector<bool> stateWritten;
  /// What each user output aliases eagerly: calls return those tensors (and views of them) and
  /// keep outputs that eager code computes apart from the inputs and from each other.
  std::vector<ViewOrigin> outputOrigins;
  /// The function kept tensors it made while traced (now state this executable writes): it runs
  /// once, and the next call traces again, reading them as eager code would.
  bool keptTensors = false;
  double buildMs = 0;
  /// Generated kernels the plans run (forward and backward).
  size_t numKernels = 0;
  /// Values the function read while traced (value specialization), where each was read, and the
  /// plan computing them.
  std::vector<Tensor> guardValues;
  std::vector<std::string> guardSources;
  Plan guardPlan;
  /// TracedFlags the function read (module modes) and the values it saw.
  std::vector<std::pair<std::weak_ptr<const std::atomic<bool>>, bool>> flags;
  /// With a dynamic dimension: where each output holds it (its padded rows are cut off).
  std::vector<passes::MaybeAxis> outputAxes;
  /// Grad mode when traced: with it on, outputs that depend on tensors requiring grad get a
  /// backward (unless the function ran backward itself), so a call in the other mode needs its own.
  bool gradMode = false;
  /// Where its plans run and its code is loaded (CompileOptions::device; the CPU so far).
  Device device;
  /// The backward of differentiable outputs: which user outputs have one, the gradients it
  /// computes (edges: the arguments, then the state tensors listed), what it reads, and its plan.
  struct Backward {
    std::vector<size_t> outputs;
    std::vector<size_t> wrtArgs, wrtState;
    std::vector<bool> computed; // per edge: whether the plan returns a gradient for it
    /// Per saved value: an argument, a state tensor, or a forward output (index into all outputs).
    std::vector<passes::Program::Saved> saved;
    std::shared_ptr<ir::Graph> graph;
    Executable program;
  };
  std::optional<Backward> backward;
  /// Why calls of this signature run the function eagerly (it read tensor values while traced:
  /// see CompileOptions::fullgraph), or "" for a compiled one. Such an entry has no graph.
  std::string eagerWhy;

  /// `state` with each draw's key replaced by this call's (the generators advance as eager
  /// draws advance them).
  std::vector<Tensor> withDrawKeys(const std::vector<Tensor>& state) const;
  /// The state tensors, or nullopt when one the user owned is gone or lost a reference since it
  /// was traced (`why` says which).
  std::optional<std::vector<Tensor>> liveState(std::string& why) const;
  /// Records how many references the user holds to each of `state` (this executable's, just
  /// traced), for liveState() to compare with.
  void countUserRefs(const std::vector<Tensor>& state);
  /// Why this executable cannot run a call with `args` (of its signature) and `state` now: a
  /// value read while tracing changed, grad mode, or which parameters have a .grad; "" if it can.
  std::string mismatch(const std::vector<Tensor>& args, const std::vector<Tensor>& state) const;
  /// Whether an argument shares memory with another argument or a state tensor where the function
  /// writes either: compiled code reads each input as a tensor of its own and would not see the
  /// write through the other, so such a call runs eagerly. `why` names the two.
  bool argumentsOverlapWrites(const std::vector<Tensor>& args, const std::vector<Tensor>& state,
                              std::string& why) const;
  /// Makes each user output in `out` that is (a view of) an argument or a real tensor eagerly that
  /// tensor (this call's state tensor, where it is one), the views made again after the call's
  /// writes (see separateComputedOutputs for the outputs eager code computes).
  void aliasOutputs(const std::vector<Tensor>& args, const std::vector<Tensor>& state,
                    std::vector<Tensor>& out, const std::optional<DynamicCall>& dyn) const;
  /// Copies the computed user outputs in `out` that share memory with an input or with an output
  /// eager computes apart (before autograd takes them).
  void separateComputedOutputs(const std::vector<Tensor>& args, const std::vector<Tensor>& state,
                               std::vector<Tensor>& out) const;
  /// Runs the plan on `args` and `state`, redoes the .grad effects, and returns every output:
  /// the user's, the new gradients, then what backward reads.
  std::vector<Tensor> run(const std::vector<Tensor>& args, const std::vector<Tensor>& state) const;
};

/// Asks `program`, which holds `tc`'s traced graph, for the gradients of the function's outputs
/// (its first `numOutputs`) with respect to the arguments and state that require grad, for eager
/// autograd to differentiate through the compiled function (passes output-grads and split make
/// them); none require grad: nullopt. Returns which inputs get gradients.
std::optional<CompiledSignature::Backward> askOutputGradients(TraceContext& tc,
                                                              passes::Program& program,
                                                              const std::vector<Tensor>& args,
                                                              size_t numOutputs);

/// After the split: `program`'s backward graph and what it saves become `exe`'s backward.
void takeBackward(passes::Program& program, CompiledSignature::Backward bw, CompiledSignature& exe);

/// Makes the differentiable outputs of one call outputs of an autograd node running the backward
/// plan. `in`: the executable's arguments (`args` padded, with the valid-row mask, under
/// dynamic_dim); `all`: every output of the call.
void attachBackward(const std::shared_ptr<CompiledSignature>& exe, const std::vector<Tensor>& args,
                    const std::vector<Tensor>& in, const std::vector<Tensor>& state,
                    const std::vector<Tensor>& all, std::vector<Tensor>& out,
                    const std::optional<DynamicCall>& dyn);

/// Traces `fn` once more with the dynamic dimension at twice the bucket's rows: the probe that
/// mask-rows compares `program` with (passes::maskPaddedRows), asked for the same gradients.
/// Returns the probe's trace context, which its custom rules trace into.
std::unique_ptr<TraceContext> addProbe(passes::Program& program, const TensorFunction& fn,
                                       const std::vector<Tensor>& args, const DynamicCall& dyn,
                                       size_t numOutputs, std::source_location loc);

/// After mask-rows: checks what the pass could not (the two traces made the same constants) and
/// records where each output of `exe` holds the dynamic dimension.
void finishMasking(const TraceContext& tc, const TraceContext& probe,
                   const passes::Program& program, CompiledSignature& exe);

} // namespace weft
