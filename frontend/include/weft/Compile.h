// compile(): trace a function once per input signature into a graph, optimize it, and run the
// result on later calls; trace(): just the graph.
#pragma once

#include "weft/Tensor.h"
#include "weft/runtime/Executable.h"

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace weft {

namespace ir {
class Graph;
}

/// What compile() does once it has compiled `recompile_limit` signatures and meets a new one.
enum class RecompileLimitAction { Error, Eager };

/// Options for compile(), spelled like LibTorch's builders.
struct CompileOptions {
  int recompile_limit_ = 8;
  RecompileLimitAction on_limit_ = RecompileLimitAction::Error;
  bool specialize_on_values_ = false;
  bool fullgraph_ = false;
  Device device_;
  std::optional<int64_t> dynamic_dim_;
  std::vector<size_t> dynamic_arguments_;
  std::vector<int64_t> buckets_;
  std::string cpu_target_ = "host";
  /// Lets the function read tensor values (item(), to_vector(), branches on them): each value read
  /// becomes a constant of the compiled graph, guarded on every call; a different value compiles
  /// another version (counted against the recompile limit). Without it such reads are errors.
  CompileOptions& specialize_on_values(bool on = true) {
    specialize_on_values_ = on;
    return *this;
  }
  /// A function that reads a tensor's value while traced without specialize_on_values (item(),
  /// nonzero(), indexing with a boolean mask: a shape or branch that depends on data) runs
  /// eagerly for that input signature, with a warning once; with fullgraph, that read is an error.
  CompileOptions& fullgraph(bool on = true) {
    fullgraph_ = on;
    return *this;
  }
  /// At most this many input signatures are compiled.
  CompileOptions& recompile_limit(int n) {
    recompile_limit_ = n;
    return *this;
  }
  /// Past the limit: throw, or run the function eagerly with a warning.
  CompileOptions& on_recompile_limit(RecompileLimitAction a) {
    on_limit_ = a;
    return *this;
  }
  /// Marks dimension `dim` of the arguments listed (every argument with more than `dim` dims when
  /// the list is empty) as one dynamic size, such as the batch: a call rounds it up to a bucket
  /// (see buckets()) by repeating the last row, and the bucket's executable masks the extra rows
  /// out of every sum, mean, max or contraction over that dimension and cuts them from the outputs.
  /// Batches of 5, 6 and 8 rows share one compilation, and give what eager gives for each.
  /// The function must treat rows alike: an op that moves rows across the dimension (flipping,
  /// slicing or sorting it), or the size itself used as a number (`x / x.size(0)`: use mean()),
  /// is an error naming the line. Random ops draw numbers for the padded rows too.
  CompileOptions& dynamic_dim(int64_t dim, std::vector<size_t> arguments = {}) {
    dynamic_dim_ = dim;
    dynamic_arguments_ = std::move(arguments);
    return *this;
  }
  /// The sizes dynamic_dim rounds up to, ascending; sizes above the last are an error. Default:
  /// powers of two.
  CompileOptions& buckets(std::vector<int64_t> sizes) {
    buckets_ = std::move(sizes);
    return *this;
  }
  /// Where compiled code runs (the CPU interpreter today).
  CompileOptions& device(Device d) {
    device_ = d;
    return *this;
  }
  /// The CPU generated code is built for: "host" (the default: this machine, every feature it
  /// has), a feature level ("x86-64-v2", "x86-64-v3", "x86-64-v4") or a CPU LLVM knows ("znver4"),
  /// so that a saved executable runs on every machine of that level. An unknown name is a
  /// ValueError here; code needing features this machine lacks is a DeviceError when it loads.
  CompileOptions& cpu_target(std::string name) {
    cpu_target_ = std::move(name);
    return *this;
  }
};

/// A C++ boolean that compiled code may branch on, such as a module's training mode: reading it
/// inside a traced function makes the compiled code valid only while it keeps that value, so a
/// change traces again (a plain `bool` would be frozen into the trace). Copies share the value.
class TracedFlag {
public:
  explicit TracedFlag(bool value) : value_(std::make_shared<std::atomic<bool>>(value)) {}
  /// The value; inside a traced function, also a guard of the trace.
  bool read() const;
  void set(bool value) { value_->store(value); }

private:
  std::shared_ptr<std::atomic<bool>> value_;
};

/// A traced function: the graph, and the real tensors its state inputs read (parameters, buffers,
/// optimizer state and constants), in state order.
struct TraceResult {
  std::shared_ptr<ir::Graph> graph;
  std::vector<Tensor> state;
};

using TensorFunction = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

/// Records `fn` applied to tensors shaped like `example_inputs` as a graph, running nothing.
TraceResult trace(const TensorFunction& fn, const std::vector<Tensor>& example_inputs, WEFT_LOC);

/// Compiles a graph ahead of time (trace()'s, or text IR read back with ir::parseGraph): compile()'s
/// pass pipeline, then code generation for `cpu_target` (as CompileOptions::cpu_target names it).
/// The executable's arguments and state have the names the graph gives its inputs, and keeps the
/// optimized graph's text IR. A graph that does not verify is a ValueError naming the problem.
Executable compile_graph(const ir::Graph& graph, const std::string& cpu_target = "host", WEFT_LOC);

/// The signature-keyed cache behind compile(); thread-safe, executables are immutable.
class CompiledFunction {
public:
  /// Checks the options; `loc` is the compile() call errors name.
  explicit CompiledFunction(CompileOptions options, WEFT_LOC);
  /// Runs the executable for `args`' signature, tracing and compiling `fn` on a new signature.
  /// `loc`: the caller's line, which errors of compile() itself name.
  std::vector<Tensor> call(const std::vector<Tensor>& args, const TensorFunction& fn, WEFT_LOC);
  /// How many times the function was compiled (new signatures, and recompilations when a value it
  /// read, grad mode, a .grad or a tensor it captured changed).
  size_t num_compiled() const;
  /// The optimized graph of the most recent compilation, in text form ("" before the first).
  std::string graph_text() const;
  /// Milliseconds the most recent compilation took: tracing, the pass pipeline, code generation
  /// and lowering.
  double compile_ms() const;
  /// Generated (fused) kernels in the most recent compilation; the interpreter runs the rest.
  size_t num_kernels() const;
  /// Bytes of the most recent compilation's memory plan: the one arena a call allocates for the
  /// intermediate buffers it plans (the planned peak; outputs and the buffers the plan leaves to
  /// the allocator come on top).
  int64_t planned_bytes() const;
  /// The runtime executable of the most recent compilation (its forward program: arguments, then
  /// the state tensors the function reads, in the order of the graph's state), which save()
  /// writes as bytes that Executable::load() runs with the runtime alone; null before the first.
  std::shared_ptr<const Executable> executable() const;
  /// The tensors that executable reads as its state, in its order: the live parameters, buffers,
  /// optimizer state and constants it was traced with (empty before the first compilation; a
  /// ValueError when one of them is gone since).
  std::vector<Tensor> state_tensors() const;

  /// state_tensors() by name: each is named as in `known` (a module's named_parameters() and
  /// named_buffers(), an optimizer's state), "<name>.grad" for the gradient of a tensor there,
  /// "rng.<i>" for the key of a random draw (filled anew on every call), and "constant.<i>" for
  /// the rest (tensors the function captured or made).
  std::vector<std::pair<std::string, Tensor>>
  named_state_tensors(const std::vector<std::pair<std::string, Tensor>>& known) const;
  /// Compiles `fn` for `args`' signature (as call() would, the cache included) without running
  /// it, and returns the program to export: the executable with the function's own outputs only
  /// (not the gradients or saved values eager autograd takes from it), its state named as
  /// named_state_tensors(known) names it, and its graph's text IR. A ValueError where no
  /// self-contained program exists: the function reads tensor values, writes its arguments, or
  /// keeps tensors it made (optimizer state made on a first step: see Optimizer::init_state()).
  struct Exported {
    Executable executable;
    std::vector<std::pair<std::string, Tensor>> state;
  };
  Exported export_program(const std::vector<Tensor>& args, const TensorFunction& fn,
                          const std::vector<std::pair<std::string, Tensor>>& known, WEFT_LOC);

private:
  struct State;
  std::shared_ptr<State> state_;
};

/// The callable compile() returns: call it like the function it wraps. Its type names the
/// wrapped function's; to store one where a type must be written (a class member, a container),
/// convert it to `CompiledFn<Signature>`, e.g. `CompiledFn<Tensor(const Tensor&)> step =
/// compile(...)`.
template <typename F> class Compiled {
public:
  Compiled(F fn, CompileOptions options, std::source_location loc)
      : fn_(std::move(fn)), core_(std::move(options), loc) {}
  /// An empty compiled function (calling it is an error) to assign one to later.
  Compiled() : core_(CompileOptions()) {}
  /// Takes over another compiled function whose callable converts to F (its cache included).
  template <typename G>
  requires std::is_constructible_v<F, G&&>
  Compiled(Compiled<G>&& other) // NOLINT: implicit, so `CompiledFn<...> f = compile(...)` reads
      : fn_(std::move(other.fn_)), core_(std::move(other.core_)) {}

  /// The first argument's implicit conversion records the line of the call, which errors of
  /// compile() itself (the recompile limit, bad arguments) name.
  template <typename... Rest> auto operator()(LocatedTensor first, const Rest&... rest) {
    static_assert((std::is_convertible_v<const Rest&, const Tensor&> && ...),
                  "compiled functions take tensors");
    return run<1 + sizeof...(Rest)>({first.tensor, Tensor(rest)...}, first.loc);
  }
  /// A call without arguments.
  auto operator()(std::source_location loc = std::source_location::current()) {
    return run<0>({}, loc);
  }
  /// The cache: how many signatures were compiled, and the latest graph.
  const CompiledFunction& compiled() const { return core_; }

private:
  template <typename> friend class Compiled;
  template <size_t> using TensorAt = const Tensor&;
  template <size_t... I>
  static auto resultOf(std::index_sequence<I...>) -> std::invoke_result_t<F&, TensorAt<I>...>;

  template <size_t N> auto run(std::vector<Tensor> args, std::source_location loc) {
    using R = decltype(resultOf(std::make_index_sequence<N>{}));
    if constexpr (std::is_constructible_v<bool, const F&>) {
      CallSite cs(loc);
      WEFT_CHECK(static_cast<bool>(fn_), Value,
                 "compile: this compiled function is empty (default-constructed or moved from)");
    }
    TensorFunction traced = [this](const std::vector<Tensor>& in) {
      return invokeUnpacked<R>(in, std::make_index_sequence<N>{});
    };
    std::vector<Tensor> out = core_.call(args, traced, loc);
    if constexpr (std::is_same_v<R, Tensor>)
      return out.at(0);
    else if constexpr (!std::is_void_v<R>)
      return out;
  }
  template <typename R, size_t... I>
  std::vector<Tensor> invokeUnpacked(const std::vector<Tensor>& in, std::index_sequence<I...>) {
    if constexpr (std::is_void_v<R>) {
      fn_(in[I]...);
      return {};
    } else if constexpr (std::is_same_v<R, Tensor>) {
      return {fn_(in[I]...)};
    } else {
      return fn_(in[I]...);
    }
  }
  F fn_;
  CompiledFunction core_;
};

/// A compiled function by signature: a type to name in a member or container.
template <typename Signature> using CompiledFn = Compiled<std::function<Signature>>;

/// Compiles `fn` (taking and returning tensors): the first call with a new signature (shapes,
/// dtypes, requires_grad) traces it into a graph and builds an executable; later calls reuse it.
/// Parameters and optimizer state the function reads and updates become state the executable
/// reads and writes back, so a whole train step compiles. WEFT_LOG_RECOMPILES=1 logs each
/// recompilation and why. Captured tensors are the ones the function read when traced: update them
/// in place and the compiled code sees it; once one is gone (its handle was given another tensor),
/// the next call traces again. A captured C++ number is frozen into the trace, silently (a
/// captured `int step` keeps its traced value): keep it in a 0-d tensor updated in place
/// (`step.add_(1)`), as optimizers keep their learning rate. A tensor the function makes and keeps
/// (an optimizer's state made on the first step) becomes state the executable writes, and the
/// next call traces once more to read it.
template <typename F> Compiled<F> compile(F fn, CompileOptions options = {}, WEFT_LOC) {
  return Compiled<F>(std::move(fn), std::move(options), loc);
}

} // namespace weft
