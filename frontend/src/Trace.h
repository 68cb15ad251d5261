// Tracing: while a TraceContext is active on a thread, ops append graph nodes instead of running.
#pragma once

#include "TensorImpl.h"
#include "weft/Functions.h"
#include "weft/ir/Graph.h"
#include "weft/passes/Autodiff.h"
#include "weft/runtime/Interpreter.h"

#include <tuple>
#include <unordered_map>
#include <vector>

namespace weft {

/// What a leaf's .grad became during a trace, to be redone after every call.
struct GradEffect {
  /// A state tensor's .grad becomes the output; an argument's .grad accumulates it (as an eager
  /// backward accumulates into the caller's tensor).
  enum class Of : uint8_t { State, Argument };
  Of of = Of::State;
  size_t index = 0;    ///< which state tensor or argument
  int32_t output = -1; ///< graph output holding the gradient; -1: a state's gradient was cleared
};

/// An argument the function wrote in place (or through a view of it): graph output `output` holds
/// its final value, which every call copies into the caller's tensor, as the eager write did.
struct ArgumentWrite {
  size_t index = 0;
  int32_t output = -1;
};

/// What a traced tensor views, as eager code made it: the tensor at the root of its chain of view
/// ops (an argument, a real tensor made outside the function, or a value the function computed)
/// and the view ops from there. An output of a compiled function aliases what eager's does.
struct ViewOrigin {
  /// The argument at the root, or -1.
  int32_t argument = -1;
  /// The real tensor at the root (captured, made outside the function), if any, and the state
  /// input it is (-1: none; a call's tensor is read through the state, as a .grad is).
  std::weak_ptr<TensorImpl> real;
  int32_t state = -1;
  /// A computed root: outputs with the same one are one tensor, or views of one, eagerly.
  const TensorImpl* computed = nullptr;
  /// The view ops from the root, in order.
  std::vector<std::pair<OpCode, Attrs>> views;
};

/// What the traced code did to a random generator, in program order, redone on every call.
struct GeneratorEvent {
  /// Draw: a random node took the next offset. Seed: made or manual_seed (offset 0). Offset:
  /// set_offset.
  enum class Kind : uint8_t { Draw, Seed, Offset };
  Kind kind = Kind::Draw;
  Generator generator;
  size_t key = 0;     ///< a draw: the state input holding its key (seed, offset)
  uint64_t value = 0; ///< the seed or the offset
};

/// The key of `g`'s next draw, int64 [2] = (seed, offset), the input a random op reads; takes the
/// offset from `g`.
Tensor drawKey(Generator& g);

/// The graph being recorded, and the real tensors it reads and writes.
struct TraceContext {
  ir::Graph graph{"traced"};
  /// Real tensors the traced code touched, in state-input order, with their values' current graph
  /// value (in-place writes rebind it: functionalization).
  std::vector<Tensor> state;
  std::vector<ir::ValueId> current;
  std::unordered_map<const TensorImpl*, size_t> stateIndex;
  /// .grad of each captured leaf when it was captured (restored after tracing).
  std::vector<Tensor> gradBefore;
  /// Whether each captured tensor required grad when it was captured.
  std::vector<bool> requiresGradBefore;
  /// Draws and reseeds in program order: each call draws fresh numbers at the generators' counters.
  std::vector<GeneratorEvent> generatorEvents;
  /// Each generator the trace touched, with its seed and offset before (restored by finish()).
  std::vector<std::tuple<Generator, uint64_t, uint64_t>> generatorsBefore;
  /// Remembers `g`'s seed and offset before the trace first changes it.
  void rememberGenerator(const Generator& g);
  /// Records a draw, reseed or move of a generator.
  void recordGenerator(GeneratorEvent e);
  /// Where the traced function's real tensors are, and where a value read while tracing is
  /// computed (CompileOptions::device).
  Device device;
  /// With value specialization: the real arguments of the traced call, and each value read during
  /// the trace with what it was (the executable checks these before it runs).
  bool specialize = false;
  std::vector<Tensor> realArgs;
  struct Guard {
    ir::ValueId value;
    Tensor expected;
    std::string source; ///< "item() at train.cpp:12": what read it, for the recompile log
  };
  std::vector<Guard> guards;
  /// Each TracedFlag read, with the value the trace saw.
  std::vector<std::pair<std::weak_ptr<const std::atomic<bool>>, bool>> flags;
  /// The arguments have a dynamic dimension padded to a bucket: averages count their elements
  /// with graph values (see compile's dynamic_dim).
  bool dynamicDim = false;
  /// backward() or autograd::grad ran inside the trace.
  bool usedAutodiff = false;
  /// The function read a tensor's value without value specialization (the error that stopped
  /// the trace): compile() runs it eagerly instead, unless CompileOptions::fullgraph.
  bool readValues = false;
  /// A trace that failed left tensors the function made and kept without values
  /// (keepEscapedTensors).
  bool keptAfterFailure = false;
  /// The real value of traced `t`, computed by running the graph recorded so far on the real
  /// arguments and state; recorded as a guard read by `what`.
  Tensor evaluate(const Tensor& t, const char* what);
  /// User-defined autograd functions called in the trace: differentiated by their own backward.
  struct CustomRegion {
    std::vector<ir::ValueId> inputs, outputs;
    std::shared_ptr<autograd::CustomNode> node;
  };
  std::vector<CustomRegion> customRegions;

  /// The stand-ins of the function's arguments.
  std::vector<Tensor> arguments;
  /// The arguments written in place, with the outputs holding their new values (set by finish()).
  std::vector<ArgumentWrite> argumentWrites;
  /// Each real gradient the function read from a real leaf (leaf.grad()) -> (the gradient, kept so
  /// its address is not reused, and the leaf): captured as state, it is read through the leaf on
  /// every call.
  std::unordered_map<const TensorImpl*, std::pair<Tensor, Tensor>> gradOf;
  /// Writes to each tensor so far; views of it whose value predates a write re-read it.
  std::unordered_map<const TensorImpl*, uint64_t> writes;
  /// Real views (made outside the trace) read inside it: their value, and the writes it reflects.
  std::unordered_map<const TensorImpl*, std::pair<ir::ValueId, uint64_t>> realViews;
  /// Each traced view, with what it views (see ViewOrigin).
  std::unordered_map<const TensorImpl*, ViewOrigin> viewOrigins;
  /// What `t`, an output of the function, aliases eagerly.
  ViewOrigin originOf(const Tensor& t) const;
  /// What each output of the function aliases (set as the function returns).
  std::vector<ViewOrigin> outputOrigins;

  /// The graph value `t` stands for; real tensors become state inputs, views are read from their
  /// base's current value.
  ir::ValueId valueOf(const Tensor& t);
  /// A traced tensor for value `v`.
  Tensor traced(ir::ValueId v);
  /// Appends `op` (the dispatcher's tracing path).
  Tensor record(OpCode op, std::span<const Tensor> inputs, const Attrs& attrs,
                const ir::TensorType& type);
  /// `self` takes the value of `result` (an in-place op). A view's base takes the new elements.
  void assign(Tensor& self, const Tensor& result, const char* op);
  /// loss.backward() inside a trace: appends the backward graph and sets the leaves' .grad.
  void backward(const Tensor& root, const Tensor& gradient);
  /// Raises eager's error when `root` depends differentiably on none of `wrt` (every leaf that
  /// requires grad): backward() of a value that does not require grad.
  void checkRequiresGrad(const Tensor& root, const std::vector<ir::ValueId>& wrt);
  /// autograd::grad inside a trace.
  std::vector<Tensor> grad(const Tensor& output, const std::vector<Tensor>& inputs,
                           const Tensor& gradOutput);
  /// The custom regions as autodiff rules that call back into the user's backward.
  std::vector<passes::CustomRule> customRules();
  /// Makes each tensor the function made and kept (traced, or a constant) a real tensor that the
  /// executable writes after every call (see keptTensors).
  void keepEscapedTensors(bool failed);
  /// How many writes `base` has had in this trace.
  uint64_t writesTo(const TensorImpl* base) const;
  /// The value of `view`, gathered from its base's current value.
  ir::ValueId readView(const std::shared_ptr<TensorImpl>& view);
  /// Scatters `value` into `view`'s base, which takes the result as its new value.
  void writeView(const std::shared_ptr<TensorImpl>& view, const Tensor& value, const char* op);
  /// Every traced tensor made, to find those the function kept after it returned.
  std::vector<std::weak_ptr<TensorImpl>> made;
  /// The function kept tensors it made (an optimizer's state made on its first step): they became
  /// state the executable writes, and the next call traces again to read them.
  bool keptTensors = false;
  /// Undoes what tracing did to real tensors' .grad and returns what each call must redo (and makes
  /// each argument's new value an output: argumentWrites). After a
  /// trace that `failed`, kept traced tensors are left without a value instead of becoming state.
  std::vector<GradEffect> finish(bool failed = false);
};

/// The trace active on this thread, or null.
TraceContext* currentTrace();
/// True while a trace is recorded on this thread (the function, or backward graphs traced after
/// it), even where a TraceScope(nullptr) pauses the recording: tensors made then are the trace's.
bool inTracedFunction();

/// Makes `tc` the active trace for its lifetime (null: pauses recording).
class TraceScope {
public:
  explicit TraceScope(TraceContext* tc);
  ~TraceScope();
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

private:
  TraceContext* prev_;
  bool records_;
};

/// Throws the "cannot read a traced value" error if `t` is traced.
void checkNotTraced(const Tensor& t, const char* what);
/// The buffers the interpreter takes for real tensors (their memory, strides included).
std::vector<Buffer> buffersOf(const std::vector<Tensor>& tensors);

/// The value `t` has at this point: `t` itself outside a trace; inside one, its value for this call
/// (guarded) when the trace specializes on values, else a clear error naming `what`.
Tensor readValue(const Tensor& t, const char* what);

} // namespace weft
