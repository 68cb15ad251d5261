// compile(): a per-signature cache of executables built by tracing, optimizing and lowering.
// Past 1,000 lines on purpose: export_program() and compile_graph() are compile()'s own path (the
// cache's lookup-or-build, the pass pipeline and the kernel compiler, all private to this file),
// so splitting them off would mean an internal header exposing that machinery; the pieces that
// stand alone already live beside it (CompiledBackward, DynamicDim, ExecutableCache, GemmChoice).
#include "weft/Compile.h"

#include "CompiledSignature.h"
#include "ExecutableCache.h"
#include "GemmChoice.h"
#include "weft/Autograd.h"
#include "weft/codegen/Elementwise.h"
#include "weft/codegen/KernelCache.h"
#include "weft/codegen/Spirv.h"
#include "weft/ir/Lower.h"
#include "weft/ir/TextFormat.h"
#include "weft/ir/Verifier.h"
#include "weft/passes/Pass.h"
#include "weft/runtime/DebugFlags.h"
#include "weft/runtime/Interpreter.h"
#include "weft/runtime/ThreadPool.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <sstream>

namespace weft {

namespace {
/// A DeviceError naming the first of `tensors` (what `what` calls them) that is not on `device`,
/// the device the compiled function runs on.
void checkOnDevice(const std::vector<Tensor>& tensors, const Device& device, const char* what) {
  for (size_t i = 0; i < tensors.size(); ++i)
    WEFT_CHECK(!tensors[i].defined() || tensors[i].device() == device, Device, "compile: ", what,
               " ", i, " is on ", tensors[i].device().str(), "; the compiled function runs on ",
               device.str(), " (CompileOptions().device(...)): move it with .to(", device.str(),
               "), or compile for its device");
}
} // namespace

std::vector<ir::TensorType> typesOf(const std::vector<Tensor>& args) {
  std::vector<ir::TensorType> types;
  for (const Tensor& t : args)
    types.push_back({t.dtype(), t.sizes()});
  return types;
}

size_t traceInto(TraceContext& tc, const TensorFunction& fn,
                 const std::vector<ir::TensorType>& types, const std::vector<Tensor>& args,
                 std::vector<GradEffect>& effects, std::source_location loc) {
  std::vector<Tensor> traced;
  for (size_t i = 0; i < types.size(); ++i) {
    traced.push_back(tc.traced(tc.graph.addArgument(types[i], "a" + std::to_string(i))));
    traced.back().impl()->requiresGrad = args[i].requires_grad(); // as the caller's tensor
    tc.arguments.push_back(traced.back());
  }
  size_t numOutputs = 0;
  try {
    TraceScope scope(&tc);
    std::vector<Tensor> outs = fn(traced);
    for (size_t i = 0; i < outs.size(); ++i) {
      CallSite cs(loc);
      WEFT_CHECK(outs[i].defined(), Value, "compile: the function returned an undefined tensor",
                 outs.size() > 1 ? " as output " + std::to_string(i) : std::string(),
                 "; a compiled function returns tensors");
      tc.graph.addOutput(tc.valueOf(outs[i]));
      tc.outputOrigins.push_back(tc.originOf(outs[i]));
    }
    numOutputs = outs.size();
  } catch (...) {
    traced.clear();
    tc.finish(true); // leave real tensors' .grad as they were
    throw;
  }
  traced.clear(); // what the function still holds now is what it kept
  effects = tc.finish();
  return numOutputs;
}

Tensor tensorOf(const Buffer& b) {
  auto offset = b.ref.byteOffset / static_cast<int64_t>(elementSize(b.ref.dtype));
  return Tensor(
      std::make_shared<TensorImpl>(b.storage, b.ref.shape, b.ref.strides, offset, b.ref.dtype));
}

bool sameValues(const Tensor& a, const Tensor& b) {
  std::vector<double> u = a.to_vector<double>(), v = b.to_vector<double>();
  if (u.size() != v.size()) return false;
  for (size_t k = 0; k < u.size(); ++k)
    if (u[k] != v[k] && !(std::isnan(u[k]) && std::isnan(v[k]))) return false;
  return true;
}

namespace {
/// Of `references` to `t`, those the user holds (handles), not weft itself (autograd graphs that
/// saved it, views of it): a kept graph does not hide a handle that moved on.
long userHandles(const TensorImpl& t, long references) {
  return references - static_cast<long>(t.internalRefs.load(std::memory_order_relaxed));
}

/// "state s2 (float32 [3, 4])", as the recompile log names a captured tensor.
std::string stateName(const ir::Graph& g, size_t k) {
  const ir::TensorType& t = g.type(g.state()[k]);
  return "captured tensor s" + std::to_string(k) + " (" + std::string(dtypeName(t.dtype)) + " " +
         shapeString(t.shape) + ")";
}
} // namespace

std::optional<std::vector<Tensor>> CompiledSignature::liveState(std::string& why) const {
  std::vector<Tensor> state;
  for (size_t k = 0; k < stateRefs.size(); ++k) {
    const StateRef& ref = stateRefs[k];
    if (ref.owned.defined()) {
      state.push_back(ref.owned);
      continue;
    }
    if (!ref.gradOf.expired()) {
      Tensor g = Tensor(ref.gradOf.lock()).grad();
      const ir::TensorType& t = graph->type(graph->state()[k]);
      if (!g.defined() || g.sizes() != t.shape || g.dtype() != t.dtype) {
        why = stateName(*graph, k) + ", the .grad of a leaf the function reads, is " +
              (g.defined() ? "another shape or dtype now" : "undefined now");
        return std::nullopt;
      }
      state.push_back(g);
      continue;
    }
    std::shared_ptr<TensorImpl> impl = ref.user.lock();
    if (!impl) {
      why = stateName(*graph, k) +
            " is gone: the handle the function read it through holds another tensor now, or "
            "went out of scope";
      return std::nullopt;
    }
    if (const ir::TensorType& t = graph->type(graph->state()[k]);
        impl->shape != t.shape || impl->dtype != t.dtype) {
      why = stateName(*graph, k) + " has another shape or dtype now (set_data, Module::to)";
      return std::nullopt;
    }
    if (userHandles(*impl, impl.use_count() - 1) < ref.refs) { // not counting `impl`
      why = stateName(*graph, k) +
            " lost a reference since it was traced: a handle that held it (perhaps the one the "
            "function reads) holds another tensor now, or went out of scope";
      return std::nullopt;
    }
    state.emplace_back(std::move(impl));
  }
  return state;
}

void CompiledSignature::countUserRefs(const std::vector<Tensor>& state) {
  for (size_t k = 0; k < state.size(); ++k)
    if (!stateRefs[k].user.expired()) // not counting `state`
      stateRefs[k].refs = userHandles(*state[k].impl(), state[k].impl().use_count() - 1);
}

std::string CompiledSignature::mismatch(const std::vector<Tensor>& args,
                                        const std::vector<Tensor>& state) const {
  if (gradMode != is_grad_enabled())
    return std::string("grad mode changed (traced with grad ") + (gradMode ? "on" : "off") +
           ", called with it " + (gradMode ? "off" : "on") + ")";
  for (size_t k = 0; k < state.size(); ++k) {
    if (state[k].grad().defined() != gradDefined[k])
      return stateName(*graph, k) + (gradDefined[k] ? " no longer has" : " has") +
             " a .grad (backward accumulates differently)";
    if (state[k].requires_grad() != requiresGrad[k])
      return stateName(*graph, k) + " requires_grad changed to " +
             (requiresGrad[k] ? "false" : "true");
  }
  for (const auto& [flag, value] : flags)
    if (auto f = flag.lock(); f && f->load() != value)
      return std::string(
                 "a flag the function read (such as a module's training mode) changed to ") +
             (value ? "false" : "true");
  if (guardValues.empty()) return "";
  std::vector<Buffer> now =
      runPlan(hal::device(device), guardPlan, buffersOf(args), buffersOf(state));
  for (size_t i = 0; i < guardValues.size(); ++i)
    if (!sameValues(tensorOf(now[i]), guardValues[i]))
      return "the value read by " + guardSources[i] + " changed";
  return "";
}

std::vector<Tensor> CompiledSignature::withDrawKeys(const std::vector<Tensor>& state) const {
  if (randomEvents.empty()) return state;
  std::vector<Tensor> keyed = state;
  for (const GeneratorEvent& e : randomEvents) { // as eager: fresh draws, reseeds between them
    Generator g = e.generator;
    switch (e.kind) {
    case GeneratorEvent::Kind::Seed:
      g.manual_seed(e.value);
      break;
    case GeneratorEvent::Kind::Offset:
      g.set_offset(e.value);
      break;
    case GeneratorEvent::Kind::Draw: // a key of this call's own: calls may run concurrently
      keyed[e.key] = drawKey(g);
      break;
    }
  }
  return keyed;
}

namespace {
/// The bytes of its storage `t` can reach: [first, last) (empty for an empty tensor).
std::pair<int64_t, int64_t> reach(const Tensor& t) {
  const TensorImpl& impl = *t.impl();
  int64_t lo = impl.offset, hi = impl.offset;
  for (size_t d = 0; d < impl.shape.size(); ++d) {
    if (impl.shape[d] == 0) return {0, 0};
    int64_t span = (impl.shape[d] - 1) * impl.strides[d];
    (span < 0 ? lo : hi) += span;
  }
  const auto size = static_cast<int64_t>(elementSize(impl.dtype));
  return {lo * size, (hi + 1) * size};
}

/// Whether `a` and `b` can reach a common byte of one storage.
bool overlaps(const Tensor& a, const Tensor& b) {
  if (a.impl()->storage != b.impl()->storage) return false;
  auto [a0, a1] = reach(a);
  auto [b0, b1] = reach(b);
  return a0 < a1 && b0 < b1 && a0 < b1 && b0 < a1;
}
} // namespace

bool CompiledSignature::argumentsOverlapWrites(const std::vector<Tensor>& args,
                                               const std::vector<Tensor>& state,
                                               std::string& why) const {
  if (argumentWrites.empty() &&
      std::find(stateWritten.begin(), stateWritten.end(), true) == stateWritten.end())
    return false;
  std::vector<bool> argWritten(args.size(), false);
  for (const ArgumentWrite& w : argumentWrites)
    argWritten[w.index] = true;
  for (size_t i = 0; i < args.size(); ++i) {
    for (size_t j = i + 1; j < args.size(); ++j)
      if ((argWritten[i] || argWritten[j]) && overlaps(args[i], args[j])) {
        why = "argument " + std::to_string(i) + " shares memory with argument " +
              std::to_string(j) + ", and the function writes one of them";
        return true;
      }
    for (size_t k = 0; k < state.size(); ++k)
      if ((argWritten[i] || stateWritten[k]) && overlaps(args[i], state[k])) {
        why = "argument " + std::to_string(i) + " shares memory with " + stateName(*graph, k) +
              ", and the function writes one of them";
        return true;
      }
  }
  return false;
}

void CompiledSignature::separateComputedOutputs(const std::vector<Tensor>& args,
                                                const std::vector<Tensor>& state,
                                                std::vector<Tensor>& out) const {
  NoGradGuard guard;
  for (size_t i = 0; i < numOutputs; ++i) {
    const ViewOrigin& o = outputOrigins[i];
    if (o.computed == nullptr) continue; // an input's alias: see aliasOutputs()
    const Storage* mine = out[i].impl()->storage.get();
    auto same = [&](const Tensor& t) { return t.impl()->storage.get() == mine; };
    bool shared = std::any_of(args.begin(), args.end(), same) ||
                  std::any_of(state.begin(), state.end(), same);
    for (size_t j = 0; j < i && !shared; ++j)
      shared = outputOrigins[j].computed != o.computed && same(out[j]);
    if (shared) out[i] = out[i].clone();
  }
}

void CompiledSignature::aliasOutputs(const std::vector<Tensor>& args,
                                     const std::vector<Tensor>& state, std::vector<Tensor>& out,
                                     const std::optional<DynamicCall>& dyn) const {
  for (size_t i = 0; i < numOutputs; ++i) {
    const ViewOrigin& o = outputOrigins[i];
    Tensor root;
    if (o.argument >= 0) {
      const auto a = static_cast<size_t>(o.argument);
      // Views traced at the bucket's size would not fit the call's rows: the plan's view stays.
      if (dyn && !o.views.empty() &&
          std::find(dyn->args.begin(), dyn->args.end(), a) != dyn->args.end())
        continue;
      root = args[a];
    } else if (o.state >= 0) {
      root = state[static_cast<size_t>(o.state)];
    } else if (std::shared_ptr<TensorImpl> real = o.real.lock()) {
      root = Tensor(std::move(real));
    } else {
      continue; // computed
    }
    for (const auto& [op, attrs] : o.views) // as eager made them, with autograd's record
      root = dispatch(op, {root}, attrs);
    out[i] = root;
  }
}

std::vector<Tensor> CompiledSignature::run(const std::vector<Tensor>& args,
                                           const std::vector<Tensor>& state) const {
  // On a device, the CPU scalars a function reads (an optimizer's learning rate and step, as
  // eager ops take them beside device tensors) and the draws' keys go there for the call, and
  // what the program updates of them comes back.
  std::vector<Tensor> keyed = withDrawKeys(state);
  std::vector<std::pair<size_t, Tensor>> staged;
  if (!device.is_cpu()) {
    for (size_t k = 0; k < keyed.size(); ++k) {
      if (!keyed[k].defined() || keyed[k].device() == device) continue;
      const bool key = k >= state.size() || !keyed[k].is_same(state[k]);
      WEFT_CHECK(key || isCpuScalar(keyed[k]), Device, "compile: captured tensor ", k, " (",
                 dtypeName(keyed[k].dtype()), " ", shapeString(keyed[k].sizes()), ") is on ",
                 keyed[k].device().str(), "; the compiled function runs on ", device.str(),
                 " (CompileOptions().device(...)), where only CPU scalars may join it: move it with "
                 ".to(", device.str(), ")");
      keyed[k] = keyed[k].to(device);
      staged.emplace_back(k, keyed[k]);
    }
  } else {
    checkOnDevice(state, device, "captured tensor");
  }
  std::vector<Buffer> out =
      runPlan(hal::device(device), program.plan, buffersOf(args), buffersOf(keyed));
  for (const auto& [k, onDevice] : staged)
    if (stateWritten[k]) {
      NoGradGuard guard;
      Tensor(state[k]).copy_(onDevice.cpu());
    }
  for (const GradEffect& e : gradEffects) {
    if (e.of == GradEffect::Of::Argument) continue; // the caller's tensors: see call()
    Tensor leaf = state[e.index];
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
using Cache = std::vector<std::pair<Signature, std::shared_ptr<CompiledSignature>>>;

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

/// The pass pipeline compile() runs (passes::compilePipeline) as two pass managers: the passes over
/// the whole program (output gradients, padded-row masking, the forward/backward split), then from
/// the first graph pass on the passes each graph runs alone, which a graph the executable cache
/// holds skips: simplify, fold, share, drop what no output needs, recompute in the backward what
/// is cheaper than keeping, move up what frees more than it keeps (hoist), expand softmax and
/// split sums for kernels to compute, group elementwise nodes into kernels, and with `compile`
/// lower to an executable (its kernels compiled by `compile`) and plan its memory.
struct Pipeline {
  passes::PassManager program, graph;
};

/// Whether compile() generates code for an executable: not with WEFT_CODEGEN=0, nor for one that
/// runs `once` (its function kept tensors it made, and the next call traces again).
bool generatesCode(bool once) {
  return !once && debugFlag("WEFT_CODEGEN").value_or("1") != "0";
}

/// The code generator compile() asks and uses for a device: the CPU's (whose GEMMs are chosen by
/// measuring), or SPIR-V for a Vulkan device (from its limits). A null device runs the
/// interpreter alone.
struct CodeTarget {
  std::shared_ptr<const passes::Target> asked; ///< what fuse and remat ask
  std::function<ir::Result<codegen::GroupKernels>(const ir::Graph&,
                                                  std::span<const ir::FusionGroup>)>
      compile;
  passes::MatmulChooser chooseMatmul;
  std::string key;        ///< what its executables are cached under
  bool generates = true;  ///< whether the device runs generated code
};

CodeTarget codeTarget(const codegen::CpuTarget& cpu, const Device& device) {
  CodeTarget t;
  if (device.is_vulkan()) {
    const hal::Limits& limits = hal::device(device).limits();
    auto spirv =
        std::make_shared<const codegen::SpirvTarget>(limits.codeTarget, limits.maxStorageBuffers);
    t.asked = spirv;
    t.compile = [spirv](const ir::Graph& g, std::span<const ir::FusionGroup> groups) {
      return codegen::compileSpirvKernels(g, groups, *spirv);
    };
    t.key = spirv->name();
    return t;
  }
  auto target = std::make_shared<const codegen::CpuTarget>(cpu);
  t.asked = target;
  t.compile = [target](const ir::Graph& g, std::span<const ir::FusionGroup> groups) {
    return codegen::compileElementwise(g, groups, *target);
  };
  t.chooseMatmul = matmulChooser(cpu);
  t.key = cpu.codeTarget();
  t.generates = device.is_cpu();
  return t;
}

Pipeline pipeline(const CodeTarget& target, bool codegen, passes::KernelCompiler compile = {}) {
  Pipeline p;
  // The fuse pass lets matmuls lead the groups reading them where measurement says the generated
  // GEMM wins (not without codegen: the group would run in the interpreter node by node). Nor are
  // softmaxes expanded or sums split then: they serve kernels; the interpreter's softmax and sum
  // are one step each.
  bool graphPasses = false;
  for (const std::string& name : passes::compilePipeline()) {
    if ((name == "expand-softmax" || name == "split-sums") && !codegen) continue;
    if ((name == "lower" || name == "plan-memory") && !compile) continue;
    std::unique_ptr<passes::Pass> pass =
        name == "fuse" && codegen ? passes::createFuse(target.asked, target.chooseMatmul)
        : name == "lower"         ? passes::createLower(compile)
                                  : passes::createPass(name, target.asked);
    graphPasses = graphPasses || !pass->onProgram();
    (graphPasses ? p.graph : p.program).add(std::move(pass));
  }
  return p;
}

/// What the lower pass's kernel compiler did: kernels generated, whether every kernel asked for
/// became code (a group that fell back to the interpreter, a link that failed for want of disk
/// space, say, is built again next time rather than cached), and the milliseconds it took.
struct CodegenStats {
  size_t kernels = 0;
  bool complete = true;
  double ms = 0;
};

/// The kernel compiler of the lower pass: the fuse pass's kernels as generated code for `target`
/// (none when `codegen` is false: every node runs in the interpreter). A group codegen cannot
/// lower runs in the interpreter, node by node, where the group runs (the other kernels' in-place
/// writes assume it); WEFT_LOG_FALLBACKS=1 says which and why. If the whole set fails (linking),
/// every node runs in the interpreter where it stands.
passes::KernelCompiler kernelCompiler(const CodeTarget& target, bool codegen,
                                      CodegenStats& stats) {
  return [&target, codegen, &stats](const ir::Graph& g) -> ir::Result<passes::GeneratedKernels> {
    const auto start = std::chrono::steady_clock::now();
    passes::GeneratedKernels r;
    const std::vector<ir::FusionGroup>& groups = g.kernels();
    if (!codegen || groups.empty()) return r;
    auto kernels = target.compile(g, groups);
    stats.ms +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    const bool log = debugFlag("WEFT_LOG_FALLBACKS").value_or("0") == "1";
    if (!kernels) {
      stats.complete = false;
      if (log)
        std::fprintf(stderr, "[weft] codegen: all %zu kernels run in the interpreter: %s\n",
                     groups.size(), kernels.diagnostic().message.c_str());
      return r;
    }
    for (size_t k = 0; k < groups.size(); ++k) {
      const int32_t kernel = kernels.value().kernelOf[k];
      stats.kernels += kernel >= 0 ? 1 : 0;
      stats.complete = stats.complete && kernel >= 0;
      if (kernel < 0 && log)
        std::fprintf(stderr, "[weft] codegen: kernel %zu %s runs in the interpreter: %s\n", k,
                     shapeString(groups[k].shape).c_str(), kernels.value().failures[k].c_str());
    }
    r.kernelOf = std::move(kernels.value().kernelOf);
    r.table = std::move(kernels.value().table);
    return r;
  };
}

/// The values the function read while traced, computed alone before each call (guards).
void planGuards(const TraceContext& tc, CompiledSignature& exe) {
  ir::Graph guards = tc.graph;
  guards.mutableOutputs().clear();
  guards.mutableStateUpdates().clear();
  for (const TraceContext::Guard& guard : tc.guards) {
    guards.addOutput(guard.value);
    exe.guardValues.push_back(guard.expected);
    exe.guardSources.push_back(guard.source);
  }
  passes::PassManager gpm;
  gpm.add(passes::createPass("dce"));
  if (auto r = gpm.run(guards); !r) throwError(r.diagnostic().kind, r.diagnostic().message);
  exe.guardPlan = ir::lowerToPlan(guards);
}

/// Each argument the function wrote in place takes its new value outside autograd (the call copies
/// it back), so with grad mode on no such value may depend on a tensor that requires grad: eager
/// autograd would record the write into the caller's tensor.
void checkArgumentWrites(TraceContext& tc, const std::vector<Tensor>& args) {
  std::vector<ir::ValueId> wrt;
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].requires_grad()) wrt.push_back(tc.graph.arguments()[i]);
  for (size_t k = 0; k < tc.state.size(); ++k)
    if (tc.state[k].requires_grad()) wrt.push_back(tc.graph.state()[k]);
  if (wrt.empty()) return;
  std::vector<bool> depends = passes::differentiablyDependsOn(tc.graph, wrt, tc.customRules());
  for (const ArgumentWrite& w : tc.argumentWrites)
    WEFT_CHECK(!depends[static_cast<size_t>(tc.graph.outputs()[static_cast<size_t>(w.output)])],
               Value,
               "compile: the function writes a value that requires grad in place into "
               "argument ",
               w.index,
               ", which autograd would have to record in the caller's "
               "tensor. Return the value instead, or write it under NoGradGuard");
}

/// A constant the function made is made anew by every eager call: its writes do not carry over.
/// `g`'s state inputs are `state`.
void dropWritesToOwnConstants(ir::Graph& g, const std::vector<Tensor>& state) {
  const std::vector<ir::ValueId>& states = g.state();
  std::erase_if(g.mutableStateUpdates(), [&](const ir::StateUpdate& u) {
    auto k = static_cast<size_t>(std::find(states.begin(), states.end(), u.state) - states.begin());
    return state[k].impl()->madeInTrace;
  });
}

/// What each call redoes outside the plan: the generators' events (each draw's key a state input),
/// and where each state tensor comes from.
void bindToCalls(const TraceContext& tc, CompiledSignature& exe) {
  exe.randomEvents = tc.generatorEvents;
  for (size_t k = 0; k < tc.state.size(); ++k) { // state is final: traced backwards may add to it
    const Tensor& t = tc.state[k];
    exe.gradDefined.push_back(tc.gradBefore[k].defined());
    exe.requiresGrad.push_back(tc.requiresGradBefore[k]);
    CompiledSignature::StateRef ref;
    if (auto it = tc.gradOf.find(t.impl().get()); it != tc.gradOf.end())
      ref.gradOf = it->second.second.impl();
    else if (t.impl()->madeInTrace) // a constant the trace made (on the CPU): on the device
      ref.owned = t.device() == tc.device ? t : t.to(tc.device);
    else
      ref.user = t.impl(); // its references are counted once the trace holds none
    exe.stateRefs.push_back(std::move(ref));
  }
}

std::shared_ptr<CompiledSignature> build(const TensorFunction& fn, const std::vector<Tensor>& args,
                                         const CompileOptions& options,
                                         const std::optional<DynamicCall>& dyn,
                                         const codegen::CpuTarget& target,
                                         std::source_location loc) {
  auto start = std::chrono::steady_clock::now();
  TraceContext tc;
  tc.specialize = options.specialize_on_values_;
  tc.device = options.device_;
  tc.realArgs = args;
  tc.dynamicDim = dyn.has_value();
  auto exe = std::make_shared<CompiledSignature>();
  exe->gradMode = is_grad_enabled();
  exe->device = options.device_;
  try {
    exe->numOutputs = traceInto(tc, fn, dyn ? dyn->typesAt(args, dyn->bucket) : typesOf(args), args,
                                exe->gradEffects, loc);
  } catch (const Error& e) {
    // Not after the function kept tensors it made (an optimizer's state): left without values,
    // they would fail every eager call after.
    if (!tc.readValues || options.fullgraph_ || tc.keptAfterFailure) throw;
    exe->eagerWhy = e.what(); // a data-dependent function: it runs eagerly
    return exe;
  }
  std::vector<ir::Diagnostic> problems = ir::verify(tc.graph);
  WEFT_INTERNAL_ASSERT(problems.empty(), "the traced graph does not verify: ",
                       problems.empty() ? "" : problems[0].message);
  if (!tc.guards.empty()) planGuards(tc, *exe);
  if (exe->gradMode && !tc.argumentWrites.empty()) checkArgumentWrites(tc, args);
  // The program the pipeline compiles: the traced graph, the gradients eager autograd will ask
  // of its outputs (unless the function differentiated itself), and under dynamic_dim a second
  // trace at another size (the probe).
  passes::Program program;
  program.graph = std::move(tc.graph);
  std::optional<CompiledSignature::Backward> bw;
  if (exe->gradMode && !tc.usedAutodiff)
    bw = askOutputGradients(tc, program, args, exe->numOutputs);
  std::unique_ptr<TraceContext> probe;
  if (dyn) probe = addProbe(program, fn, args, *dyn, exe->numOutputs, loc);
  // With WEFT_TIME_PASSES=1: how long tracing, the pass pipelines and code generation took.
  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
  };
  double traced = since(start), passesMs = 0, codegenMs = 0;
  auto t = Clock::now();
  // A function that kept tensors it made (an optimizer's state, made on its first step) is
  // traced again at the next call: code generated for this one call would cost more than it
  // saves, so the interpreter runs it.
  const CodeTarget code = codeTarget(target, options.device_);
  const bool codegen = generatesCode(tc.keptTensors) && code.generates;
  CodegenStats stats;
  Pipeline pipe = pipeline(code, codegen, kernelCompiler(code, codegen, stats));
  if (auto r = pipe.program.run(program); !r)
    throwError(r.diagnostic().kind, r.diagnostic().message);
  passesMs += since(t);
  if (probe) finishMasking(tc, *probe, program, *exe);
  if (program.backward) takeBackward(program, std::move(*bw), *exe);
  dropWritesToOwnConstants(program.graph, tc.state);
  int cached = 0;
  // Each graph's executable comes from the disk cache where an earlier compilation (this process
  // or another) built it; else from the rest of the pipeline (the graph passes, lowering with
  // code generation, memory planning), and is cached.
  auto optimizeAndLower = [&](ir::Graph& g, Executable& executable) {
    t = Clock::now();
    const std::string key = executableKey(g, code.key, codegen);
    if (std::optional<Executable> hit =
            readExecutable(key, hal::device(exe->device), exe->numKernels)) {
      executable = std::move(*hit);
      codegenMs += since(t);
      ++cached;
      return false;
    }
    stats = CodegenStats{};
    passes::Program one; // the graph alone: the executable cache holds each on its own
    one.graph = std::move(g);
    auto r = pipe.graph.run(one);
    g = std::move(one.graph);
    if (!r) throwError(r.diagnostic().kind, r.diagnostic().message);
    WEFT_INTERNAL_ASSERT(one.executables.size() == 1, "the pipeline did not lower the graph");
    executable = std::move(one.executables[0]);
    if (debugFlag("WEFT_PRINT_PLAN").value_or("0") == "1")
      std::fputs(ir::printPlan(g, executable.plan).c_str(), stderr);
    executable.loadCode(hal::device(exe->device));
    exe->numKernels += stats.kernels;
    if (stats.complete) writeExecutable(key, executable, stats.kernels);
    codegenMs += stats.ms;
    passesMs += since(t) - stats.ms;
    return true;
  };
  exe->graphOptimized = optimizeAndLower(program.graph, exe->program);
  if (exe->backward) optimizeAndLower(*exe->backward->graph, exe->backward->program);
  if (debugFlag("WEFT_TIME_PASSES").value_or("0") == "1")
    std::fprintf(stderr,
                 "[weft] compile: trace %.1f ms, passes %.1f ms, code generation %.1f ms "
                 "(%zu kernels; %d of %d executables from the disk cache)\n",
                 traced, passesMs, codegenMs, exe->numKernels, cached, exe->backward ? 2 : 1);
  bindToCalls(tc, *exe);
  exe->stateWritten.assign(tc.state.size(), false);
  for (const auto& [index, slot] : exe->program.plan.stateUpdates)
    exe->stateWritten[static_cast<size_t>(index)] = true;
  exe->outputOrigins = std::move(tc.outputOrigins);
  exe->argumentWrites = tc.argumentWrites;
  exe->keptTensors = tc.keptTensors;
  exe->flags = tc.flags;
  exe->graph = std::make_shared<ir::Graph>(std::move(program.graph));
  exe->buildMs =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return exe;
}

} // namespace

Executable compile_graph(const ir::Graph& graph, const std::string& cpuTarget,
                         std::source_location loc) {
  CallSite cs(loc);
  std::vector<ir::Diagnostic> problems = ir::verify(graph);
  WEFT_CHECK(problems.empty(), Value, "compile_graph: the graph does not verify: ",
             problems.empty() ? "" : problems[0].message);
  codegen::CpuTarget target = codegen::CpuTarget::host();
  if (cpuTarget != "host") {
    auto named = codegen::CpuTarget::named(cpuTarget);
    WEFT_CHECK(static_cast<bool>(named), Value,
               "compile_graph: cpu_target: ", named ? "" : named.diagnostic().message);
    target = named.value();
  }
  CodegenStats stats;
  const CodeTarget code = codeTarget(target, Device::cpu());
  Pipeline pipe = pipeline(code, true, kernelCompiler(code, true, stats));
  passes::Program program;
  program.graph = graph;
  for (passes::PassManager* stage : {&pipe.program, &pipe.graph})
    if (auto r = stage->run(program); !r) throwError(r.diagnostic().kind, r.diagnostic().message);
  WEFT_INTERNAL_ASSERT(program.executables.size() == 1, "the pipeline did not lower the graph");
  Executable e = std::move(program.executables[0]);
  for (size_t i = 0; i < e.arguments.size(); ++i)
    e.arguments[i].name = graph.value(graph.arguments()[i]).name;
  for (size_t i = 0; i < e.state.size(); ++i)
    e.state[i].name = graph.value(graph.state()[i]).name;
  e.ir = ir::printGraph(program.graph);
  return e;
}

bool TracedFlag::read() const {
  bool value = value_->load();
  if (TraceContext* tc = currentTrace()) tc->flags.emplace_back(value_, value);
  return value;
}

TraceResult trace(const TensorFunction& fn, const std::vector<Tensor>& example_inputs,
                  std::source_location loc) {
  TraceContext tc; // no CallSite: errors inside the function name the user's lines there
  std::vector<GradEffect> effects;
  traceInto(tc, fn, typesOf(example_inputs), example_inputs, effects, loc);
  return TraceResult{std::make_shared<ir::Graph>(std::move(tc.graph)), tc.state};
}

namespace {

/// What one call runs: an executable and the state it reads, or why none in the cache fits.
struct Lookup {
  std::shared_ptr<CompiledSignature> exe;
  std::vector<Tensor> state;
  std::string why;           ///< the one thing that changed, when no executable fits
  std::vector<size_t> stale; ///< entries whose captured tensors moved on (for the limit's hint)
  bool empty() const { return !exe; }
};

} // namespace

namespace {

/// Checks that argument `i`, which the function writes in place, is not expanded (eager code
/// refuses to write one element twice). Arguments sharing memory run eagerly (see call()).
void checkWrittenArgument(const std::vector<Tensor>& args, size_t i, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(!isExpanded(args[i]), Value, "compile: argument ", i,
             " is written in place by the function, but more than one of its elements "
             "refers to a single memory location (an expanded tensor). Pass a clone() of it");
}

} // namespace

struct CompiledFunction::State {
  std::mutex mutex;
  CompileOptions options;
  codegen::CpuTarget target; ///< options.cpu_target_, resolved
  Cache cache;
  std::shared_ptr<CompiledSignature> latest;
  size_t builds = 0; ///< compilations so far (and in flight), stale ones included: the limit
  bool warnedEager = false;
  bool warnedReads = false;               ///< warned that a function reading values runs eagerly
  std::atomic<bool> warnedOverlap{false}; ///< warned: calls whose inputs overlap writes run eagerly
  size_t eagerSignatures = 0; ///< signatures that run eagerly because the function reads values
  /// Signatures being compiled now, outside the lock: a caller of the same signature waits for
  /// that build instead of starting another; callers of other signatures are not held up.
  std::vector<std::pair<Signature, std::shared_future<void>>> building;
  /// Why the next call compiles again though its signature was compiled (see keptTensors).
  std::string retraceWhy;

  /// The executable for a call with `args` (and `dyn`'s bucket): found in the cache, or compiled
  /// (outside the lock; `site` is dropped while the function is traced); empty past the limit.
  Lookup obtain(const std::vector<Tensor>& args, const std::optional<DynamicCall>& dyn,
                const TensorFunction& fn, std::optional<CallSite>& site, std::source_location loc);

  /// The executable that can run a call with `args` (of signature `sig`) now, or why none can.
  Lookup find(const std::vector<Tensor>& args, const Signature& sig) const {
    Lookup r;
    for (size_t i = 0; i < cache.size(); ++i) {
      const auto& [s, e] = cache[i];
      if (s != sig) continue;
      std::string why;
      std::optional<std::vector<Tensor>> state = e->liveState(why);
      if (state) why = e->mismatch(args, *state);
      if (why.empty()) return {e, std::move(*state), "", {}};
      if (r.why.empty()) r.why = why;
      if (!state) r.stale.push_back(i);
    }
    if (r.why.empty()) r.why = retraceWhy;
    if (!r.why.empty() || cache.empty()) return r;
    size_t best = SIZE_MAX; // a new signature: name what differs from the closest one compiled
    for (const auto& [s, e] : cache) {
      std::string d = describeChange(s, sig);
      size_t n = static_cast<size_t>(std::count(d.begin(), d.end(), ';'));
      if (n < best) {
        best = n;
        r.why = d;
      }
    }
    return r;
  }

  /// Whether another compilation is allowed; past the limit, an error naming `found.why`, or (with
  /// RecompileLimitAction::Eager) false after one warning.
  bool mayCompile(const Lookup& found) {
    if (static_cast<int>(builds) < options.recompile_limit_) return true;
    std::string hint = found.stale.empty()
                           ? ""
                           : " (a captured tensor's handle moved on: update captured tensors in "
                             "place, w.sub_(...), instead of giving their handles new tensors)";
    WEFT_CHECK(options.on_limit_ == RecompileLimitAction::Eager, Value,
               "compile: the recompile limit (", options.recompile_limit_,
               " compilations) is reached and another is needed: ", found.why, hint,
               ". Raise CompileOptions::recompile_limit, or allow eager execution with "
               "on_recompile_limit");
    if (!warnedEager)
      std::fprintf(stderr,
                   "[weft] compile: recompile limit (%d) reached (%s); running this function "
                   "eagerly\n",
                   options.recompile_limit_, found.why.c_str());
    warnedEager = true;
    return false;
  }

  /// Keeps a new executable for `sig`, dropping the stale ones of `sig` it replaces; records how
  /// many references the user holds to what it captured.
  void keep(const Signature& sig, Lookup& found) {
    std::string why;
    std::optional<std::vector<Tensor>> state = found.exe->liveState(why);
    WEFT_INTERNAL_ASSERT(state.has_value(), "a tensor the trace just read is gone: ", why);
    found.state = std::move(*state);
    found.exe->countUserRefs(found.state);
    // Found again here: other signatures may have changed the cache while this one compiled.
    std::erase_if(cache, [&](const auto& entry) {
      std::string ignored;
      return entry.first == sig && !entry.second->liveState(ignored);
    });
    cache.emplace_back(sig, found.exe);
  }
};

CompiledFunction::CompiledFunction(CompileOptions options, std::source_location loc)
    : state_(std::make_shared<State>()) {
  CallSite cs(loc);
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
  codegen::CpuTarget target = codegen::CpuTarget::host();
  if (options.cpu_target_ != "host") {
    auto named = codegen::CpuTarget::named(options.cpu_target_);
    WEFT_CHECK(static_cast<bool>(named), Value,
               "compile: cpu_target: ", named ? "" : named.diagnostic().message);
    target = named.value();
  }
  state_->options = std::move(options);
  state_->target = std::move(target);
}

Lookup CompiledFunction::State::obtain(const std::vector<Tensor>& args,
                                       const std::optional<DynamicCall>& dyn,
                                       const TensorFunction& fn, std::optional<CallSite>& site,
                                       std::source_location loc) {
  Signature sig = signatureOf(args);
  if (dyn)
    for (size_t i : dyn->args)
      sig[i].shape[static_cast<size_t>(dyn->dim)] = dyn->bucket;
  Lookup found;
  State& st = *this;
  std::unique_lock<std::mutex> lock(st.mutex);
  for (;;) {
    found = st.find(args, sig);
    if (!found.empty()) break;
    auto inFlight = std::find_if(st.building.begin(), st.building.end(),
                                 [&](const auto& b) { return b.first == sig; });
    if (inFlight != st.building.end()) { // another caller is compiling this signature: wait
      std::shared_future<void> done = inFlight->second;
      lock.unlock();
      done.wait();
      lock.lock();
      continue;
    }
    // A function that read values for as many signatures as the limit: not traced again.
    if (static_cast<int>(st.eagerSignatures) >= st.options.recompile_limit_) break;
    if (!st.mayCompile(found)) break; // past the limit, running eagerly
    if (st.builds > 0 && debugFlag("WEFT_LOG_RECOMPILES").value_or("0") == "1")
      std::fprintf(stderr, "[weft] compile: recompiling (compilation %zu): %s\n", st.builds + 1,
                   found.why.c_str());
    // Compile without the lock: tracing runs the user's function, and LLVM takes seconds.
    ++st.builds;
    std::promise<void> built;
    st.building.emplace_back(sig, built.get_future().share());
    auto finish = [&] { // under the lock again: no longer in flight, wake the waiters
      std::erase_if(st.building, [&](const auto& b) { return b.first == sig; });
      built.set_value();
    };
    lock.unlock();
    site.reset();
    try {
      found.exe = build(fn, args, st.options, dyn, st.target, loc);
    } catch (...) {
      lock.lock();
      --st.builds;
      finish();
      throw;
    }
    lock.lock();
    if (!found.exe->eagerWhy.empty()) {
      --st.builds; // nothing compiled: later calls of this signature run eagerly without a trace
      ++st.eagerSignatures;
      if (!st.warnedReads)
        std::fprintf(stderr,
                     "[weft] compile: the function reads tensor values (%s); running it eagerly "
                     "for this input signature (CompileOptions().fullgraph() makes this an "
                     "error)\n",
                     found.exe->eagerWhy.c_str());
      st.warnedReads = true;
    }
    st.keep(sig, found);
    finish();
    break;
  }
  if (!found.empty() && found.exe->eagerWhy.empty()) st.latest = found.exe;
  if (found.exe && found.exe->keptTensors) { // runs once: see CompiledSignature::keptTensors
    std::erase_if(st.cache, [&](const auto& entry) { return entry.second == found.exe; });
    st.retraceWhy = "the function kept tensors it made while traced (such as optimizer state "
                    "made on the first step); tracing again to read them";
  } else if (found.exe) {
    st.retraceWhy.clear();
  }
  return found;
}

std::vector<Tensor> CompiledFunction::call(const std::vector<Tensor>& args,
                                           const TensorFunction& fn, std::source_location loc) {
  // Errors of compile() itself name the caller's line; while tracing, the user's own calls inside
  // the function name theirs.
  std::optional<CallSite> site(std::in_place, loc);
  WEFT_CHECK(currentTrace() == nullptr, Value,
             "calling a compiled function inside a traced function is not supported; call the "
             "function it wraps");
  checkOnDevice(args, state_->options.device_, "argument");
  std::optional<DynamicCall> dyn = dynamicCall(state_->options, args);
  State& st = *state_;
  Lookup found = st.obtain(args, dyn, fn, site, loc);
  bool eager = found.exe && !found.exe->eagerWhy.empty(); // it reads values: see fullgraph
  site.reset();
  if (std::string why;
      found.exe && !eager && found.exe->argumentsOverlapWrites(args, found.state, why)) {
    eager = true; // as eager code, the function sees its writes through the other tensor
    if (!st.warnedOverlap.exchange(true))
      std::fprintf(stderr, "[weft] compile: %s; running such calls eagerly\n", why.c_str());
  }
  if (!found.exe || eager) return fn(args); // past the limit (on_recompile_limit), or reads values
  CallSite run(loc); // what the executable's kernels raise (a bad index) names the call
  const CompiledSignature& exe = *found.exe;
  std::vector<Tensor> in = dyn ? dyn->pad(args) : args;
  for (const ArgumentWrite& w : exe.argumentWrites) {
    checkWrittenArgument(args, w.index, loc);
    // The backward reads the argument as the function did, not as written back.
    if (exe.backward) in[w.index] = in[w.index].clone();
  }
  std::vector<Tensor> all = exe.run(in, found.state);
  // The plan returns an unchanged input as it is (`x.clone()` included, once simplified): user
  // outputs eager computes get memory of their own, and what else the plan returns keeps the value
  // the function gave it, not the one an argument is written back with.
  exe.separateComputedOutputs(args, found.state, all);
  if (!exe.argumentWrites.empty()) {
    std::vector<const Storage*> written;
    for (const ArgumentWrite& w : exe.argumentWrites)
      written.push_back(args[w.index].impl()->storage.get());
    NoGradGuard guard;
    for (size_t i = exe.numOutputs; i < all.size(); ++i)
      if (all[i].defined() &&
          std::find(written.begin(), written.end(), all[i].impl()->storage.get()) != written.end())
        all[i] = all[i].clone();
  }
  auto rowsOf = [&](size_t i) { // an output, its padded rows cut off
    const passes::MaybeAxis& a = dyn ? exe.outputAxes[i] : passes::MaybeAxis();
    return a ? all[i].narrow(a->axis, 0, dyn->rows * a->factor) : all[i];
  };
  std::vector<Tensor> out;
  for (size_t i = 0; i < exe.numOutputs; ++i)
    out.push_back(rowsOf(i));
  for (const ArgumentWrite& w : exe.argumentWrites) {
    NoGradGuard guard; // the function wrote it outside autograd's record (TraceContext::assign)
    Tensor(args[w.index]).copy_(rowsOf(static_cast<size_t>(w.output)));
  }
  // Backward inside reaches the caller's tensors: the eager engine takes it on from them (a leaf's
  // accumulator adds to .grad and runs its hooks; a non-leaf passes it into its own history).
  std::vector<Tensor> reached, grads;
  for (const GradEffect& e : exe.gradEffects)
    if (e.of == GradEffect::Of::Argument) {
      reached.push_back(args[e.index]);
      grads.push_back(rowsOf(static_cast<size_t>(e.output)));
    }
  if (!reached.empty()) autograd::backward(reached, grads, std::nullopt, false, loc);
  if (exe.backward) attachBackward(found.exe, args, in, found.state, all, out, dyn);
  exe.aliasOutputs(args, found.state, out, dyn);
  return out;
}

size_t CompiledFunction::num_compiled() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->builds;
}

size_t CompiledFunction::num_kernels() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->latest ? state_->latest->numKernels : 0;
}

double CompiledFunction::compile_ms() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->latest ? state_->latest->buildMs : 0.0;
}

int64_t CompiledFunction::planned_bytes() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->latest ? state_->latest->program.plan.arenaBytes : 0;
}

std::shared_ptr<const Executable> CompiledFunction::executable() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (!state_->latest) return nullptr;
  return std::shared_ptr<const Executable>(state_->latest, &state_->latest->program);
}

std::vector<Tensor> CompiledFunction::state_tensors() const {
  std::shared_ptr<const CompiledSignature> latest;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    latest = state_->latest;
  }
  if (!latest) return {};
  std::string why;
  std::optional<std::vector<Tensor>> state = latest->liveState(why);
  WEFT_CHECK(state.has_value(), Value, "state_tensors: ", why);
  return *state;
}

namespace {

/// The optimized graph of `exe` as text.
std::string graphText(const CompiledSignature& exe, const codegen::CpuTarget& cpu) {
  if (exe.graphOptimized) return ir::printGraph(*exe.graph);
  // Its executable came from the disk cache: the pipeline runs on a copy, outside the lock (the
  // fuse pass may measure a GEMM shape no cache entry has), with today's settings.
  ir::Graph g = *exe.graph;
  const CodeTarget target = codeTarget(cpu, exe.device);
  if (auto r = pipeline(target, generatesCode(exe.keptTensors) && target.generates).graph.run(g);
      !r)
    throwError(r.diagnostic().kind, r.diagnostic().message);
  return ir::printGraph(g);
}

using NamedList = std::vector<std::pair<std::string, Tensor>>;

/// Names `state` (the live state of `exe`, in order) as CompiledFunction::named_state_tensors.
NamedList nameState(const CompiledSignature& exe, std::vector<Tensor> state,
                    const NamedList& known) {
  std::vector<bool> key(state.size(), false);
  for (const GeneratorEvent& e : exe.randomEvents)
    if (e.kind == GeneratorEvent::Kind::Draw) key[e.key] = true;
  auto nameOf = [&](const TensorImpl* impl) -> const std::string* {
    for (const auto& [name, t] : known)
      if (t.defined() && t.impl().get() == impl) return &name;
    return nullptr;
  };
  NamedList named;
  int constants = 0, keys = 0;
  for (size_t k = 0; k < state.size(); ++k) {
    std::string name;
    if (key[k]) {
      name = "rng." + std::to_string(keys++);
    } else if (auto leaf = exe.stateRefs[k].gradOf.lock()) {
      if (const std::string* n = nameOf(leaf.get())) name = *n + ".grad";
    } else if (const std::string* n = nameOf(state[k].impl().get())) {
      name = *n;
    }
    if (name.empty()) name = "constant." + std::to_string(constants++);
    named.emplace_back(std::move(name), std::move(state[k]));
  }
  return named;
}

/// Each random draw's key among `exe`'s state inputs, with how far its offset moves per call: the
/// generator's draws in one call, or 0 where the function reseeds or moves that generator (each
/// call then draws what the first did, as eager calls would).
std::vector<RandomKey> randomKeys(const CompiledSignature& exe) {
  std::vector<RandomKey> keys;
  for (const GeneratorEvent& e : exe.randomEvents) {
    if (e.kind != GeneratorEvent::Kind::Draw) continue;
    int64_t stride = 0;
    for (const GeneratorEvent& other : exe.randomEvents) {
      if (!(other.generator == e.generator)) continue;
      if (other.kind != GeneratorEvent::Kind::Draw) {
        stride = 0;
        break;
      }
      ++stride;
    }
    keys.push_back({static_cast<int32_t>(e.key), stride});
  }
  return keys;
}

} // namespace

std::string CompiledFunction::graph_text() const {
  std::shared_ptr<const CompiledSignature> latest;
  codegen::CpuTarget target;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    latest = state_->latest;
    target = state_->target;
  }
  return latest ? graphText(*latest, target) : "";
}

NamedList CompiledFunction::named_state_tensors(const NamedList& known) const {
  std::shared_ptr<const CompiledSignature> latest;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    latest = state_->latest;
  }
  if (!latest) return {};
  return nameState(*latest, state_tensors(), known);
}

CompiledFunction::Exported CompiledFunction::export_program(const std::vector<Tensor>& args,
                                                            const TensorFunction& fn,
                                                            const NamedList& known,
                                                            std::source_location loc) {
  std::optional<CallSite> site(std::in_place, loc);
  WEFT_CHECK(currentTrace() == nullptr, Value, "export: not inside a traced function");
  WEFT_CHECK(state_->options.device_.is_cpu(), Device,
             "export: programs for Vulkan are not exported yet (their SPIR-V comes with compiled "
             "GPU kernels); export for the CPU");
  checkOnDevice(args, state_->options.device_, "argument");
  std::optional<DynamicCall> dyn = dynamicCall(state_->options, args);
  Lookup found = state_->obtain(args, dyn, fn, site, loc);
  site.emplace(loc);
  WEFT_CHECK(!found.empty(), Value, "export: the recompile limit is reached");
  const CompiledSignature& exe = *found.exe;
  WEFT_CHECK(exe.eagerWhy.empty(), Value,
             "export: the function reads tensor values, so no one program computes it: ",
             exe.eagerWhy);
  WEFT_CHECK(!exe.keptTensors, Value,
             "export: the function makes tensors while traced and keeps them (such as optimizer "
             "state made on its first step), so its program would make them anew on every call; "
             "make them before exporting (Optimizer::init_state())");
  WEFT_CHECK(exe.argumentWrites.empty(), Value, "export: the function writes its argument ",
             exe.argumentWrites.empty() ? 0 : exe.argumentWrites[0].index,
             " in place; an exported program's arguments are read-only: return the new value");
  Exported out;
  out.executable = exe.program;
  // The function's own outputs: the gradients it leaves in .grad and the values eager autograd
  // would save are not the program's to return (the steps computing them stay, where needed).
  out.executable.outputs.resize(exe.numOutputs);
  out.executable.plan.outputSlots.resize(exe.numOutputs);
  planMemory(out.executable.plan);
  out.executable.randomKeys = randomKeys(exe);
  if (dyn) {
    DynamicBatch d{dyn->dim, dyn->bucket, {}, {}};
    for (size_t i : dyn->args)
      d.arguments.push_back(static_cast<int32_t>(i));
    for (size_t i = 0; i < exe.numOutputs; ++i) {
      const passes::MaybeAxis& a = exe.outputAxes[i];
      d.outputAxes.emplace_back(a ? static_cast<int32_t>(a->axis) : -1, a ? a->factor : 1);
    }
    out.executable.dynamic = std::move(d);
    out.executable.arguments.back().name = "row_mask";
  }
  out.executable.ir = graphText(exe, state_->target);
  out.state = nameState(exe, found.state, known);
  for (size_t k = 0; k < out.state.size(); ++k)
    out.executable.state[k].name = out.state[k].first;
  return out;
}

} // namespace weft
