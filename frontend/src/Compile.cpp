// compile(): a per-signature cache of executables built by tracing, optimizing and lowering.
#include "weft/Compile.h"

#include "Trace.h"
#include "weft/Autograd.h"
#include "weft/ir/Lower.h"
#include "weft/ir/TextFormat.h"
#include "weft/ir/Verifier.h"
#include "weft/passes/Autodiff.h"
#include "weft/passes/GraphBuilder.h"
#include "weft/passes/PaddedRows.h"
#include "weft/passes/Pass.h"
#include "weft/passes/Split.h"
#include "weft/runtime/DebugFlags.h"
#include "weft/runtime/Interpreter.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <optional>
#include <sstream>

namespace weft {
namespace {

struct ArgSignature {
  DType dtype;
  Shape shape;
  bool requiresGrad;
  bool operator==(const ArgSignature&) const = default;
};
using Signature = std::vector<ArgSignature>;

Signature signatureOf(const std::vector<Tensor>& args) {
  Signature s;
  for (size_t i = 0; i < args.size(); ++i) {
    WEFT_CHECK(args[i].defined(), Value, "compiled function: argument ", i,
               " is an undefined tensor");
    s.push_back({args[i].dtype(), args[i].sizes(), args[i].requires_grad()});
  }
  return s;
}

/// Which input changed how, between the closest compiled signature and this one.
std::string describeChange(const Signature& before, const Signature& now) {
  std::ostringstream os;
  if (before.size() != now.size()) {
    os << "the number of inputs changed from " << before.size() << " to " << now.size();
    return os.str();
  }
  for (size_t i = 0; i < now.size(); ++i) {
    const ArgSignature &a = before[i], &b = now[i];
    if (a.shape != b.shape)
      os << (os.tellp() > 0 ? "; " : "") << "input " << i << " shape " << shapeString(a.shape)
         << " -> " << shapeString(b.shape);
    if (a.dtype != b.dtype)
      os << (os.tellp() > 0 ? "; " : "") << "input " << i << " dtype " << dtypeName(a.dtype)
         << " -> " << dtypeName(b.dtype);
    if (a.requiresGrad != b.requiresGrad)
      os << (os.tellp() > 0 ? "; " : "") << "input " << i << " requires_grad "
         << (a.requiresGrad ? "true" : "false") << " -> " << (b.requiresGrad ? "true" : "false");
  }
  return os.str();
}

std::vector<ir::TensorType> typesOf(const std::vector<Tensor>& args) {
  std::vector<ir::TensorType> types;
  for (const Tensor& t : args)
    types.push_back({t.dtype(), t.sizes()});
  return types;
}

/// Records `fn` on traced stand-ins for arguments of `types`. On success the trace context holds
/// the graph (user outputs first) and `effects` what each call must redo to leaves' .grad.
size_t traceInto(TraceContext& tc, const TensorFunction& fn,
                 const std::vector<ir::TensorType>& types, std::vector<GradEffect>& effects) {
  std::vector<Tensor> traced;
  for (size_t i = 0; i < types.size(); ++i)
    traced.push_back(tc.traced(tc.graph.addArgument(types[i], "a" + std::to_string(i))));
  size_t numOutputs = 0;
  try {
    TraceScope scope(&tc);
    std::vector<Tensor> outs = fn(traced);
    for (const Tensor& o : outs)
      tc.graph.addOutput(tc.valueOf(o));
    numOutputs = outs.size();
  } catch (...) {
    tc.finish(); // leave real tensors' .grad as they were
    throw;
  }
  effects = tc.finish();
  return numOutputs;
}

/// One call's dynamic dimension (CompileOptions::dynamic_dim): the arguments that hold it, how
/// many rows they have, and the bucket those rows are padded to.
struct DynamicCall {
  int64_t dim = 0;
  std::vector<size_t> args;
  int64_t rows = 0, bucket = 0;

  /// The argument types with the dynamic dimension at `size` rows.
  std::vector<ir::TensorType> typesAt(const std::vector<Tensor>& real, int64_t size) const {
    std::vector<ir::TensorType> types = typesOf(real);
    for (size_t i : args)
      types[i].shape[static_cast<size_t>(dim)] = size;
    return types;
  }

  /// The arguments padded to the bucket by repeating their last row, and the mask of valid rows.
  std::vector<Tensor> pad(const std::vector<Tensor>& real) const {
    NoGradGuard noGrad;
    std::vector<Tensor> out = real;
    for (size_t i : args)
      if (bucket > rows) {
        Tensor last = real[i].narrow(dim, rows - 1, 1);
        Shape s = last.sizes();
        s[static_cast<size_t>(dim)] = bucket - rows;
        out[i] = cat({real[i], last.expand(s)}, dim);
      }
    out.push_back(arange(bucket) < rows);
    return out;
  }
};

std::optional<DynamicCall> dynamicCall(const CompileOptions& o, const std::vector<Tensor>& args) {
  if (!o.dynamic_dim_) return std::nullopt;
  DynamicCall c;
  c.dim = *o.dynamic_dim_;
  for (size_t i = 0; i < args.size(); ++i)
    if (o.dynamic_arguments_.empty()
            ? args[i].dim() > c.dim
            : std::find(o.dynamic_arguments_.begin(), o.dynamic_arguments_.end(), i) !=
                  o.dynamic_arguments_.end()) {
      WEFT_CHECK(args[i].dim() > c.dim, Shape, "compile: dynamic_dim(", c.dim, ") names argument ",
                 i, " of shape ", shapeString(args[i].sizes()), ", which has no dimension ", c.dim);
      c.args.push_back(i);
    }
  for (size_t i : o.dynamic_arguments_)
    WEFT_CHECK(i < args.size(), Index, "compile: dynamic_dim names argument ", i,
               " but the call has ", args.size(), " arguments");
  WEFT_CHECK(!c.args.empty(), Value, "compile: dynamic_dim(", c.dim,
             ") applies to no argument: none has more than ", c.dim, " dimensions");
  c.rows = args[c.args[0]].size(c.dim);
  for (size_t i : c.args)
    WEFT_CHECK(args[i].size(c.dim) == c.rows, Shape, "compile: dynamic_dim(", c.dim, "): argument ",
               i, " has ", args[i].size(c.dim), " rows where argument ", c.args[0], " has ", c.rows,
               "; name the arguments that share the dynamic dimension with "
               "dynamic_dim(dim, {indices})");
  WEFT_CHECK(c.rows > 0, Value, "compile: dynamic_dim(", c.dim,
             "): a call with 0 rows has no row to pad with; skip empty batches");
  if (o.buckets_.empty()) {
    c.bucket = 1;
    while (c.bucket < c.rows)
      c.bucket *= 2;
  } else {
    auto it = std::lower_bound(o.buckets_.begin(), o.buckets_.end(), c.rows);
    WEFT_CHECK(it != o.buckets_.end(), Value, "compile: ", c.rows,
               " rows exceed the largest bucket (", o.buckets_.back(),
               "); add a larger one to CompileOptions::buckets");
    c.bucket = *it;
  }
  return c;
}

/// The real tensors two traces at different sizes captured must agree: parameters are the same
/// tensors, and a constant the function made (arange(x.size(0)), a literal) must hold the same
/// values, on the rows both have along a dimension of the dynamic size.
void checkConstantsAgree(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  WEFT_INTERNAL_ASSERT(a.size() == b.size(), "the two traces captured different state");
  for (size_t k = 0; k < a.size(); ++k) {
    if (a[k].is_same(b[k])) continue;
    Tensor x = a[k], y = b[k];
    bool same = x.dim() == y.dim() && x.dtype() == y.dtype();
    for (int64_t d = 0; same && d < x.dim(); ++d)
      if (x.size(d) != y.size(d)) {
        int64_t n = std::min(x.size(d), y.size(d));
        x = x.narrow(d, 0, n);
        y = y.narrow(d, 0, n);
      }
    if (same) {
      std::vector<double> u = x.to_vector<double>(), v = y.to_vector<double>();
      for (size_t i = 0; same && i < u.size(); ++i)
        same = u[i] == v[i] || (std::isnan(u[i]) && std::isnan(v[i]));
    }
    WEFT_CHECK(same, Value, "compile: dynamic_dim: the function makes a tensor (state input s", k,
               ") whose values depend on the size of the dynamic dimension; inside the compiled "
               "function that size is the bucket's, not the batch's. Make it outside and pass it "
               "in, or compile without dynamic_dim");
  }
}

Tensor tensorOf(const Buffer& b) {
  auto offset = (static_cast<char*>(b.ref.data) - static_cast<char*>(b.storage->data())) /
                static_cast<int64_t>(elementSize(b.ref.dtype));
  return Tensor(
      std::make_shared<TensorImpl>(b.storage, b.ref.shape, b.ref.strides, offset, b.ref.dtype));
}

/// One compiled signature: the optimized graph, its plan and the real tensors it reads and writes.
struct Executable {
  std::shared_ptr<ir::Graph> graph;
  Plan plan;
  std::vector<Tensor> state;
  std::vector<GradEffect> gradEffects;
  size_t numOutputs = 0;
  std::vector<std::pair<size_t, Generator>> randomSteps;
  /// Whether each state tensor had a .grad when traced: backward() accumulates differently with and
  /// without one, so a call where this differs needs its own trace.
  std::vector<bool> gradDefined;
  double buildMs = 0;
  /// Values the function read while traced (value specialization), and the plan computing them.
  std::vector<Tensor> guardValues;
  Plan guardPlan;
  /// With a dynamic dimension: where each output holds it (its padded rows are cut off).
  std::vector<passes::MaybeAxis> outputAxes;
  /// Grad mode when traced: with it on, outputs that depend on tensors requiring grad get a
  /// backward (unless the function ran backward itself), so a call in the other mode needs its own.
  bool gradMode = false;
  /// The backward of differentiable outputs: which user outputs have one, the gradients it
  /// computes (edges: the arguments, then the state tensors listed), what it reads, and its plan.
  struct Backward {
    std::vector<size_t> outputs;
    std::vector<size_t> wrtArgs, wrtState;
    std::vector<bool> computed; // per edge: whether the plan returns a gradient for it
    /// Per saved value: an argument, a state tensor, or a forward output (index into all outputs).
    enum class From { Argument, State, Output };
    std::vector<std::pair<From, size_t>> saved;
    std::shared_ptr<ir::Graph> graph;
    Plan plan;
  };
  std::optional<Backward> backward;

  /// Whether every value read during tracing has the same value now (run before anything writes).
  bool guardsHold(const std::vector<Tensor>& args) const {
    if (guardValues.empty()) return true;
    std::vector<Buffer> now = runPlan(guardPlan, buffersOf(args), buffersOf(state));
    for (size_t i = 0; i < guardValues.size(); ++i) {
      std::vector<double> a = tensorOf(now[i]).to_vector<double>(),
                          b = guardValues[i].to_vector<double>();
      for (size_t k = 0; k < a.size(); ++k)
        if (a[k] != b[k] && !(std::isnan(a[k]) && std::isnan(b[k]))) return false;
    }
    return true;
  }

  bool gradsMatch() const {
    for (size_t i = 0; i < state.size(); ++i)
      if (state[i].grad().defined() != gradDefined[i]) return false;
    return true;
  }

  std::vector<Tensor> run(const std::vector<Tensor>& args) const {
    std::vector<Attrs> drawn;
    drawn.reserve(randomSteps.size());
    std::vector<const Attrs*> overrides(randomSteps.empty() ? 0 : plan.steps.size(), nullptr);
    for (const auto& [step, gen] : randomSteps) { // fresh numbers each call, as eager draws them
      Generator g = gen;
      drawn.push_back(plan.steps[step].attrs);
      drawn.back().set("seed", static_cast<int64_t>(g.seed()));
      drawn.back().set("offset", static_cast<int64_t>(g.next_offset()));
      overrides[step] = &drawn.back();
    }
    std::vector<Buffer> out = runPlan(plan, buffersOf(args), buffersOf(state), overrides);
    for (const GradEffect& e : gradEffects) {
      Tensor leaf = e.leaf;
      if (e.output < 0) {
        leaf.set_grad({});
        continue;
      }
      Tensor g = tensorOf(out[static_cast<size_t>(e.output)]);
      Tensor current = leaf.grad();
      if (current.defined() && current.sizes() == g.sizes() && current.dtype() == g.dtype()) {
        NoGradGuard guard;
        current.copy_(g); // keep the gradient tensor's identity, as in-place accumulation does
      } else {
        leaf.set_grad(g.is_contiguous() ? g : g.clone());
      }
    }
    std::vector<Tensor> results; // every output: the user's, new gradients, saved for backward
    for (const Buffer& b : out)
      results.push_back(tensorOf(b));
    return results;
  }
};

/// The gradients of a traced function's differentiable outputs, appended to its graph: one seed
/// argument per such output, and the gradient of each argument and state tensor requiring grad.
struct OutputGradients {
  std::vector<ir::ValueId> seeds, grads;
  Executable::Backward backward;
};

/// Lets eager autograd differentiate through the compiled function: when user outputs depend on
/// arguments or state that require grad, appends their gradients to `tc`'s graph.
std::optional<OutputGradients>
appendOutputGradients(TraceContext& tc, const std::vector<Tensor>& args, size_t numOutputs) {
  ir::Graph& g = tc.graph;
  OutputGradients og;
  Executable::Backward& bw = og.backward;
  std::vector<ir::ValueId> wrt;
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].requires_grad()) {
      bw.wrtArgs.push_back(i);
      wrt.push_back(g.arguments()[i]);
    }
  for (size_t k = 0; k < tc.state.size(); ++k)
    if (tc.state[k].requires_grad()) {
      bw.wrtState.push_back(k);
      wrt.push_back(g.state()[k]);
    }
  std::vector<bool> depends(g.values().size(), false);
  for (ir::ValueId v : wrt)
    depends[static_cast<size_t>(v)] = true;
  for (const ir::Node& n : g.nodes())
    if (opInfo(n.op).differentiable && isFloating(g.type(n.result).dtype))
      for (ir::ValueId o : n.operands)
        if (depends[static_cast<size_t>(o)]) depends[static_cast<size_t>(n.result)] = true;
  passes::GraphBuilder b(g);
  passes::GValue loss;
  for (size_t i = 0; i < numOutputs; ++i) {
    ir::ValueId o = g.outputs()[i];
    if (!depends[static_cast<size_t>(o)]) continue;
    bw.outputs.push_back(i);
    og.seeds.push_back(g.addArgument(g.type(o), "g" + std::to_string(i)));
    passes::GValue term =
        passes::reduce_op(OpCode::Sum, b.value(o) * b.value(og.seeds.back()), {}, false);
    loss = loss.defined() ? loss + term : term;
  }
  if (og.seeds.empty()) return std::nullopt;
  if (b.error()) throwError(b.error()->kind, b.error()->message);
  TraceScope scope(&tc); // user-defined backward functions are traced into the graph
  auto grads = passes::appendGradients(g, loss.id, wrt, ir::kNoValue, tc.customRules());
  if (!grads) throwError(grads.diagnostic().kind, grads.diagnostic().message);
  og.grads = grads.value();
  for (ir::ValueId v : og.grads)
    bw.computed.push_back(v != ir::kNoValue);
  return og;
}

/// Splits `tc`'s graph into a forward that also returns what the gradients read, and the backward
/// graph an autograd node runs when backward reaches the outputs.
void splitOutputGradients(TraceContext& tc, OutputGradients og, Executable& exe) {
  ir::Graph& g = tc.graph;
  Executable::Backward& bw = og.backward;
  auto split = passes::splitForwardBackward(g, og.seeds, og.grads);
  if (!split) throwError(split.diagnostic().kind, split.diagnostic().message);
  size_t next = g.outputs().size(); // forward outputs: the joint graph's, then the saved values
  for (ir::ValueId v : split.value().saved) {
    if (!g.isInput(v)) {
      bw.saved.emplace_back(Executable::Backward::From::Output, next++);
      continue;
    }
    const auto& argsV = g.arguments();
    auto a = std::find(argsV.begin(), argsV.end(), v);
    if (a != argsV.end()) {
      bw.saved.emplace_back(Executable::Backward::From::Argument, a - argsV.begin());
    } else {
      auto st = std::find(g.state().begin(), g.state().end(), v);
      bw.saved.emplace_back(Executable::Backward::From::State, st - g.state().begin());
    }
  }
  for (auto& [value, gen] : tc.randoms)
    value = split.value().forwardMap[static_cast<size_t>(value)];
  g = std::move(split.value().forward);
  bw.graph = std::make_shared<ir::Graph>(std::move(split.value().backward));
  exe.backward = std::move(bw);
}

/// Traces `fn` once more with the dynamic dimension at another size, and masks the padded rows of
/// `tc`'s graph (see passes::maskPaddedRows).
void maskPadding(TraceContext& tc, const TensorFunction& fn, const std::vector<Tensor>& args,
                 const DynamicCall& dyn, Executable& exe, std::optional<OutputGradients>& og) {
  TraceContext probe;
  probe.dynamicDim = true;
  std::vector<GradEffect> probeEffects;
  int64_t probeSize = 2 * dyn.bucket;
  try {
    traceInto(probe, fn, dyn.typesAt(args, probeSize), probeEffects);
  } catch (const Error& e) {
    throwError(e.kind(), std::string("compile: dynamic_dim: the function traces with ") +
                             std::to_string(dyn.bucket) + " rows but not with " +
                             std::to_string(probeSize) +
                             "; it must work for any number of rows: " + e.what());
  }
  if (og) appendOutputGradients(probe, args, exe.numOutputs); // the same gradients, at 2x rows
  passes::PaddedTrace pt;
  pt.graph = &tc.graph;
  pt.probe = &probe.graph;
  pt.size = dyn.bucket;
  pt.probeSize = probeSize;
  pt.arguments.assign(args.size(), std::nullopt);
  for (size_t i : dyn.args)
    pt.arguments[i] = passes::DynamicAxis{dyn.dim, 1};
  auto masked = passes::maskPaddedRows(pt);
  if (!masked) throwError(masked.diagnostic().kind, masked.diagnostic().message);
  checkConstantsAgree(tc.state, probe.state); // the same state, as the pass checked
  const std::vector<ir::ValueId>& map = masked.value().valueMap;
  for (auto& [value, gen] : tc.randoms)
    value = map[static_cast<size_t>(value)];
  if (og) {
    for (ir::ValueId& v : og->seeds)
      v = map[static_cast<size_t>(v)];
    for (ir::ValueId& v : og->grads)
      v = v == ir::kNoValue ? v : map[static_cast<size_t>(v)];
  }
  tc.graph = std::move(masked.value().graph);
  exe.outputAxes = std::move(masked.value().outputs);
  for (const GradEffect& e : exe.gradEffects)
    WEFT_INTERNAL_ASSERT(e.output < 0 || !exe.outputAxes[static_cast<size_t>(e.output)],
                         "a gradient of state has the dynamic dimension");
}

/// The pass pipeline every compiled graph runs: simplify, fold, share, then drop what no output
/// needs.
void optimize(ir::Graph& g) {
  passes::PassManager pm;
  for (const char* name : {"simplify", "fold", "simplify", "cse", "dce"})
    pm.add(passes::createPass(name));
  auto r = pm.run(g);
  if (!r) throwError(r.diagnostic().kind, r.diagnostic().message);
}

std::shared_ptr<Executable> build(const TensorFunction& fn, const std::vector<Tensor>& args,
                                  bool specialize, const std::optional<DynamicCall>& dyn) {
  auto start = std::chrono::steady_clock::now();
  TraceContext tc;
  tc.specialize = specialize;
  tc.realArgs = args;
  tc.dynamicDim = dyn.has_value();
  auto exe = std::make_shared<Executable>();
  exe->numOutputs =
      traceInto(tc, fn, dyn ? dyn->typesAt(args, dyn->bucket) : typesOf(args), exe->gradEffects);
  for (const Tensor& g : tc.gradBefore)
    exe->gradDefined.push_back(g.defined());
  std::vector<ir::Diagnostic> problems = ir::verify(tc.graph);
  WEFT_INTERNAL_ASSERT(problems.empty(), "the traced graph does not verify: ",
                       problems.empty() ? "" : problems[0].message);
  if (!tc.guards.empty()) { // the values read while tracing, computed alone before each call
    ir::Graph guards = tc.graph;
    guards.mutableOutputs().clear();
    guards.mutableStateUpdates().clear();
    for (const auto& [value, expected] : tc.guards) {
      guards.addOutput(value);
      exe->guardValues.push_back(expected);
    }
    passes::PassManager gpm;
    gpm.add(passes::createPass("dce"));
    if (auto r = gpm.run(guards); !r) throwError(r.diagnostic().kind, r.diagnostic().message);
    exe->guardPlan = ir::lowerToPlan(guards);
  }
  exe->gradMode = is_grad_enabled();
  std::optional<OutputGradients> og;
  if (exe->gradMode && !tc.usedAutodiff) og = appendOutputGradients(tc, args, exe->numOutputs);
  if (dyn) maskPadding(tc, fn, args, *dyn, *exe, og);
  if (og) splitOutputGradients(tc, std::move(*og), *exe);
  optimize(tc.graph);
  exe->plan = ir::lowerToPlan(tc.graph);
  if (exe->backward) {
    optimize(*exe->backward->graph);
    exe->backward->plan = ir::lowerToPlan(*exe->backward->graph);
  }
  for (const auto& [value, gen] : tc.randoms)
    for (size_t i = 0; i < exe->plan.steps.size(); ++i)
      if (exe->plan.steps[i].output == value) exe->randomSteps.emplace_back(i, gen);
  exe->state = tc.state;
  exe->graph = std::make_shared<ir::Graph>(std::move(tc.graph));
  exe->buildMs =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return exe;
}

/// The autograd node of a compiled function's differentiable outputs: runs the backward plan on
/// what the forward saved and the outputs' gradients.
class CompiledBackward : public autograd::Node {
public:
  CompiledBackward(std::shared_ptr<const Executable> exe, std::vector<autograd::SavedTensor> saved,
                   std::vector<std::shared_ptr<TensorImpl>> outputs, std::optional<DynamicCall> dyn)
      : exe_(std::move(exe)), saved_(std::move(saved)), outputs_(std::move(outputs)),
        dyn_(std::move(dyn)) {
    num_outputs = static_cast<uint32_t>(outputs_.size());
  }
  std::string name() const override { return "CompiledFunctionBackward"; }

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    WEFT_CHECK(!released_, Value,
               "Trying to backward through a compiled function a second time: what it saved is "
               "freed after backward. Specify retain_graph=true to backward twice");
    WEFT_CHECK(
        !is_grad_enabled(), Value,
        "backward with create_graph=true through a compiled function is not supported: its "
        "backward runs compiled and is not recorded. Differentiate twice inside the compiled "
        "function (autograd::grad with create_graph), or run it eagerly");
    std::vector<Tensor> in;
    for (const autograd::SavedTensor& s : saved_)
      in.push_back(s.unpack("CompiledFunctionBackward"));
    for (size_t i = 0; i < outputs_.size(); ++i) {
      const TensorImpl& o = *outputs_[i];
      Tensor g = i < grads.size() ? grads[i] : Tensor();
      if (!g.defined()) g = zeros(o.shape, o.dtype);
      if (g.dtype() != o.dtype) g = cast(g, o.dtype);
      const passes::MaybeAxis& a =
          dyn_ ? exe_->outputAxes[exe_->backward->outputs[i]] : passes::MaybeAxis();
      if (a && dyn_->bucket > dyn_->rows) { // padded rows get no gradient
        Shape pad = g.sizes();
        pad[static_cast<size_t>(a->axis)] = (dyn_->bucket - dyn_->rows) * a->factor;
        g = cat({g, zeros(pad, g.dtype())}, a->axis);
      }
      in.push_back(g);
    }
    std::vector<Buffer> out = runPlan(exe_->backward->plan, buffersOf(in), {});
    const Executable::Backward& bw = *exe_->backward;
    std::vector<Tensor> result(next_edges.size());
    size_t k = 0;
    for (size_t e = 0; e < result.size(); ++e) {
      if (!bw.computed[e]) continue;
      result[e] = tensorOf(out[k++]);
      bool rowsCut =
          dyn_ && e < bw.wrtArgs.size() &&
          std::find(dyn_->args.begin(), dyn_->args.end(), bw.wrtArgs[e]) != dyn_->args.end();
      if (rowsCut) result[e] = result[e].narrow(dyn_->dim, 0, dyn_->rows);
    }
    return result;
  }

  void release_saved() override {
    for (autograd::SavedTensor& s : saved_)
      s.reset();
    released_ = true;
  }

private:
  std::shared_ptr<const Executable> exe_;
  std::vector<autograd::SavedTensor> saved_;
  std::vector<std::shared_ptr<TensorImpl>> outputs_; // shape and dtype only
  std::optional<DynamicCall> dyn_;                   // the call's rows and bucket
  bool released_ = false;
};

/// Makes the differentiable outputs of one call outputs of a CompiledBackward node. `in`: the
/// executable's arguments (`args` padded, with the valid-row mask, under dynamic_dim).
void attachBackward(const std::shared_ptr<Executable>& exe, const std::vector<Tensor>& args,
                    const std::vector<Tensor>& in, const std::vector<Tensor>& all,
                    std::vector<Tensor>& out, const std::optional<DynamicCall>& dyn) {
  const Executable::Backward& bw = *exe->backward;
  using From = Executable::Backward::From;
  std::vector<autograd::SavedTensor> saved;
  for (const auto& [from, i] : bw.saved)
    saved.emplace_back(from == From::Argument ? in[i]
                       : from == From::State  ? exe->state[i]
                                              : all[i],
                       false);
  std::vector<std::shared_ptr<TensorImpl>> meta;
  for (size_t i : bw.outputs) {
    meta.push_back(out[i].impl()->shallowCopy());
    meta.back()->storage = nullptr;
  }
  auto node = std::make_shared<CompiledBackward>(exe, std::move(saved), std::move(meta), dyn);
  for (size_t i : bw.wrtArgs)
    node->next_edges.push_back(autograd::gradient_edge(args[i]));
  for (size_t k : bw.wrtState)
    node->next_edges.push_back(autograd::gradient_edge(exe->state[k]));
  for (size_t j = 0; j < bw.outputs.size(); ++j) {
    Tensor& o = out[bw.outputs[j]];
    o.impl()->gradFn = node;
    o.impl()->outputNr = static_cast<uint32_t>(j);
  }
}

} // namespace

TraceResult trace(const TensorFunction& fn, const std::vector<Tensor>& example_inputs,
                  std::source_location loc) {
  CallSite cs(loc);
  TraceContext tc;
  std::vector<GradEffect> effects;
  traceInto(tc, fn, typesOf(example_inputs), effects);
  return TraceResult{std::make_shared<ir::Graph>(std::move(tc.graph)), tc.state};
}

struct CompiledFunction::State {
  std::mutex mutex;
  CompileOptions options;
  std::vector<std::pair<Signature, std::shared_ptr<Executable>>> cache;
  std::shared_ptr<Executable> latest;
  bool warnedEager = false;
};

CompiledFunction::CompiledFunction(CompileOptions options) : state_(std::make_shared<State>()) {
  WEFT_CHECK(options.device_.type == Device::Type::CPU, Device,
             "compile: only the CPU device runs compiled code so far; Vulkan comes with codegen");
  WEFT_CHECK(options.recompile_limit_ >= 1, Value,
             "compile: recompile_limit must be at least 1, got ", options.recompile_limit_);
  if (options.dynamic_dim_) {
    WEFT_CHECK(*options.dynamic_dim_ >= 0, Value, "compile: dynamic_dim must be >= 0, got ",
               *options.dynamic_dim_);
    WEFT_CHECK(!options.specialize_on_values_, Value,
               "compile: dynamic_dim and specialize_on_values do not combine: values read from "
               "padded rows would be guarded");
  }
  for (size_t i = 0; i < options.buckets_.size(); ++i)
    WEFT_CHECK(options.buckets_[i] > 0 && (i == 0 || options.buckets_[i] > options.buckets_[i - 1]),
               Value, "compile: buckets must be positive and ascending, got ",
               shapeString(options.buckets_));
  state_->options = std::move(options);
}

std::vector<Tensor> CompiledFunction::call(const std::vector<Tensor>& args,
                                           const TensorFunction& fn) {
  // No CallSite here: while tracing, the user's own calls inside the function are the ones errors
  // name.
  WEFT_CHECK(currentTrace() == nullptr, Value,
             "calling a compiled function inside a traced function is not supported");
  Signature sig = signatureOf(args);
  std::optional<DynamicCall> dyn = dynamicCall(state_->options, args);
  if (dyn)
    for (size_t i : dyn->args)
      sig[i].shape[static_cast<size_t>(dyn->dim)] = dyn->bucket;
  std::shared_ptr<Executable> exe;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    bool sameArgs = false;
    for (const auto& [s, e] : state_->cache)
      if (!exe && s == sig) {
        sameArgs = true;
        if (e->gradMode == is_grad_enabled() && e->gradsMatch() && e->guardsHold(args)) exe = e;
      }
    if (!exe) {
      auto& cache = state_->cache;
      if (static_cast<int>(cache.size()) >= state_->options.recompile_limit_) {
        std::string why = sameArgs ? "a value the function reads, grad mode, or whether a "
                                     "parameter has a .grad, changed"
                                   : describeChange(cache.back().first, sig);
        WEFT_CHECK(state_->options.on_limit_ == RecompileLimitAction::Eager, Value,
                   "compile: the recompile limit (", state_->options.recompile_limit_,
                   " signatures) is reached and another is needed: ", why,
                   ". Raise CompileOptions::recompile_limit, or allow eager execution with "
                   "on_recompile_limit");
        if (!state_->warnedEager) {
          std::fprintf(
              stderr,
              "[weft] compile: recompile limit (%d) reached (%s); running this function eagerly\n",
              state_->options.recompile_limit_, why.c_str());
          state_->warnedEager = true;
        }
      } else {
        if (!cache.empty() && debugFlag("WEFT_LOG_RECOMPILES").value_or("0") == "1")
          std::fprintf(stderr, "[weft] compile: recompiling (signature %zu): %s\n",
                       cache.size() + 1,
                       sameArgs ? "a value the function reads, grad mode, or whether a parameter "
                                  "has a .grad, changed"
                                : describeChange(cache.back().first, sig).c_str());
        exe = build(fn, args, state_->options.specialize_on_values_, dyn);
        cache.emplace_back(sig, exe);
      }
    }
    if (exe) state_->latest = exe;
  }
  if (!exe) return fn(args); // past the limit, with RecompileLimitAction::Eager
  std::vector<Tensor> in = dyn ? dyn->pad(args) : args;
  std::vector<Tensor> all = exe->run(in);
  std::vector<Tensor> out(all.begin(), all.begin() + static_cast<ptrdiff_t>(exe->numOutputs));
  if (dyn)
    for (size_t i = 0; i < out.size(); ++i)
      if (const passes::MaybeAxis& a = exe->outputAxes[i])
        out[i] = out[i].narrow(a->axis, 0, dyn->rows * a->factor);
  if (exe->backward) attachBackward(exe, args, in, all, out, dyn);
  return out;
}

size_t CompiledFunction::num_compiled() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->cache.size();
}

double CompiledFunction::compile_ms() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->latest ? state_->latest->buildMs : 0.0;
}

std::string CompiledFunction::graph_text() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->latest ? ir::printGraph(*state_->latest->graph) : "";
}

} // namespace weft
