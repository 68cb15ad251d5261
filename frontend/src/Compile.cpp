// compile(): a per-signature cache of executables built by tracing, optimizing and lowering.
#include "weft/Compile.h"

#include "Executable.h"
#include "weft/Autograd.h"
#include "weft/codegen/Elementwise.h"
#include "weft/ir/Lower.h"
#include "weft/ir/TextFormat.h"
#include "weft/ir/Verifier.h"
#include "weft/passes/Fusion.h"
#include "weft/passes/Pass.h"
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

Tensor tensorOf(const Buffer& b) {
  auto offset = (static_cast<char*>(b.ref.data) - static_cast<char*>(b.storage->data())) /
                static_cast<int64_t>(elementSize(b.ref.dtype));
  return Tensor(
      std::make_shared<TensorImpl>(b.storage, b.ref.shape, b.ref.strides, offset, b.ref.dtype));
}

bool Executable::guardsHold(const std::vector<Tensor>& args) const {
  if (guardValues.empty()) return true;
  std::vector<Buffer> now = runPlan(guardPlan, buffersOf(args), buffersOf(state));
  for (size_t i = 0; i < guardValues.size(); ++i)
    if (!sameValues(tensorOf(now[i]), guardValues[i])) return false;
  return true;
}

bool sameValues(const Tensor& a, const Tensor& b) {
  std::vector<double> u = a.to_vector<double>(), v = b.to_vector<double>();
  if (u.size() != v.size()) return false;
  for (size_t k = 0; k < u.size(); ++k)
    if (u[k] != v[k] && !(std::isnan(u[k]) && std::isnan(v[k]))) return false;
  return true;
}

bool Executable::gradsMatch() const {
  for (size_t i = 0; i < state.size(); ++i)
    if (state[i].grad().defined() != gradDefined[i]) return false;
  return true;
}

std::vector<Tensor> Executable::run(const std::vector<Tensor>& args) const {
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

/// The pass pipeline every compiled graph runs: simplify, fold, share, then drop what no output
/// needs.
void optimize(ir::Graph& g) {
  passes::PassManager pm;
  for (const char* name : {"simplify", "fold", "simplify", "cse", "dce"})
    pm.add(passes::createPass(name));
  auto r = pm.run(g);
  if (!r) throwError(r.diagnostic().kind, r.diagnostic().message);
}

/// `g`'s plan: elementwise groups run as generated kernels (unless WEFT_CODEGEN=0 or codegen
/// cannot lower a group, when the interpreter runs every node).
Plan lower(const ir::Graph& g, size_t& numKernels) {
  std::vector<ir::FusedKernel> fused;
  if (debugFlag("WEFT_CODEGEN").value_or("1") != "0") {
    std::vector<ir::FusionGroup> groups = passes::findElementwiseGroups(g);
    if (auto kernels = codegen::compileElementwise(g, groups))
      for (size_t k = 0; k < groups.size(); ++k)
        fused.push_back({std::move(groups[k]), kernels.value()[k]});
  }
  numKernels += fused.size();
  return ir::lowerToPlan(g, fused);
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
  exe->plan = lower(tc.graph, exe->numKernels);
  if (exe->backward) {
    optimize(*exe->backward->graph);
    exe->backward->plan = lower(*exe->backward->graph, exe->numKernels);
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

size_t CompiledFunction::num_kernels() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->latest ? state_->latest->numKernels : 0;
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
