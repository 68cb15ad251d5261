// Eager autograd through compiled outputs: the program asks the pipeline for the outputs'
// gradients (its output-grads and split passes make the forward and backward graphs, as
// AOTAutograd does), and the autograd node that runs the backward plan.
#include "CompiledSignature.h"
#include "weft/Autograd.h"
#include "weft/Functions.h"

#include <algorithm>

namespace weft {
namespace {

/// The autograd node of a compiled function's differentiable outputs: runs the backward plan on
/// what the forward saved and the outputs' gradients.
class CompiledBackward : public autograd::Node {
public:
  CompiledBackward(std::shared_ptr<const CompiledSignature> exe,
                   std::vector<autograd::SavedTensor> saved,
                   std::vector<std::shared_ptr<TensorImpl>> outputs, std::optional<DynamicCall> dyn)
      : exe_(std::move(exe)), saved_(std::move(saved)), outputs_(std::move(outputs)),
        dyn_(std::move(dyn)) {
    num_outputs = static_cast<uint32_t>(outputs_.size());
    saves_tensors = !saved_.empty();
  }
  std::string name() const override { return "CompiledFunctionBackward"; }

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    WEFT_CHECK(
        !is_grad_enabled(), Value,
        "backward with create_graph=true through a compiled function is not supported: its "
        "backward runs compiled and is not recorded. Differentiate twice inside the compiled "
        "function (autograd::grad with create_graph), or run it eagerly");
    std::vector<Tensor> in;
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (released_) autograd::failSecondBackward(name());
      for (const autograd::SavedTensor& s : saved_)
        in.push_back(s.unpack("CompiledFunctionBackward"));
    }
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
    std::vector<Buffer> out =
        runPlan(hal::device(exe_->device), exe_->backward->program.plan, buffersOf(in), {});
    const CompiledSignature::Backward& bw = *exe_->backward;
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
    std::lock_guard<std::mutex> lock(mutex);
    for (autograd::SavedTensor& s : saved_)
      s.reset();
    released_ = true;
  }

private:
  std::shared_ptr<const CompiledSignature> exe_;
  std::vector<autograd::SavedTensor> saved_;
  std::vector<std::shared_ptr<TensorImpl>> outputs_; // shape and dtype only
  std::optional<DynamicCall> dyn_;                   // the call's rows and bucket
  bool released_ = false;
};

} // namespace

std::optional<CompiledSignature::Backward> askOutputGradients(TraceContext& tc,
                                                              passes::Program& program,
                                                              const std::vector<Tensor>& args,
                                                              size_t numOutputs) {
  const ir::Graph& g = program.graph;
  CompiledSignature::Backward bw;
  program.wrt.clear();
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].requires_grad()) {
      bw.wrtArgs.push_back(i);
      program.wrt.push_back(g.arguments()[i]);
    }
  for (size_t k = 0; k < tc.state.size(); ++k)
    if (tc.state[k].requires_grad()) {
      bw.wrtState.push_back(k);
      program.wrt.push_back(g.state()[k]);
    }
  if (program.wrt.empty()) return std::nullopt;
  program.differentiableOutputs = numOutputs;
  // A user-defined backward is traced: into the trace context's graph, so it is lent the
  // program's graph (which output-grads is appending to) while the user's code runs.
  program.customRules = tc.customRules();
  for (passes::CustomRule& rule : program.customRules)
    rule.backward = [&tc, &program,
                     user = std::move(rule.backward)](const std::vector<ir::ValueId>& grads) {
      struct Lend {
        ir::Graph &a, &b;
        Lend(ir::Graph& x, ir::Graph& y) : a(x), b(y) { std::swap(a, b); }
        ~Lend() { std::swap(a, b); }
      } lend(tc.graph, program.graph);
      TraceScope scope(&tc);
      return user(grads);
    };
  return bw;
}

void takeBackward(passes::Program& program, CompiledSignature::Backward bw,
                  CompiledSignature& exe) {
  for (ir::ValueId v : program.grads)
    bw.computed.push_back(v != ir::kNoValue);
  bw.outputs = program.seededOutputs;
  bw.saved = program.saved;
  bw.graph = std::make_shared<ir::Graph>(std::move(*program.backward));
  program.backward.reset();
  exe.backward = std::move(bw);
}

void attachBackward(const std::shared_ptr<CompiledSignature>& exe, const std::vector<Tensor>& args,
                    const std::vector<Tensor>& in, const std::vector<Tensor>& state,
                    const std::vector<Tensor>& all, std::vector<Tensor>& out,
                    const std::optional<DynamicCall>& dyn) {
  const CompiledSignature::Backward& bw = *exe->backward;
  using From = passes::Program::Saved::From;
  std::vector<autograd::SavedTensor> saved;
  for (const auto& [from, i] : bw.saved)
    saved.emplace_back(from == From::Argument ? in[i]
                       : from == From::State  ? state[i]
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
    node->next_edges.push_back(autograd::gradient_edge(state[k]));
  for (size_t j = 0; j < bw.outputs.size(); ++j) {
    Tensor& o = out[bw.outputs[j]];
    o.impl()->gradFn = node;
    o.impl()->outputNr = static_cast<uint32_t>(j);
  }
}

} // namespace weft
