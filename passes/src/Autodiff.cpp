// Reverse-mode autodiff: walk the nodes backwards, applying each op's vjp rule to graph values.
#include "weft/passes/Autodiff.h"

#include "weft/passes/GraphBuilder.h"
#include "weft/runtime/VjpRules.h"

#include <algorithm>
#include <unordered_map>

namespace weft::passes {

std::vector<bool> differentiablyDependsOn(const ir::Graph& g, const std::vector<ir::ValueId>& wrt,
                                          const std::vector<CustomRule>& custom) {
  std::unordered_map<ir::ValueId, const CustomRule*> regionOf;
  for (const CustomRule& r : custom)
    for (ir::ValueId o : r.outputs)
      regionOf[o] = &r;
  std::vector<bool> depends(g.values().size(), false);
  for (ir::ValueId v : wrt)
    depends[static_cast<size_t>(v)] = true;
  for (const ir::Node& n : g.nodes()) {
    if (!isFloating(g.type(n.result).dtype)) continue;
    auto it = regionOf.find(n.result);
    if (it != regionOf.end()) { // a custom function's output: through its own backward
      for (ir::ValueId v : it->second->inputs)
        if (depends[static_cast<size_t>(v)]) depends[static_cast<size_t>(n.result)] = true;
      continue;
    }
    if (!opInfo(n.op).differentiable) continue;
    for (ir::ValueId v : n.operands)
      if (depends[static_cast<size_t>(v)]) depends[static_cast<size_t>(n.result)] = true;
  }
  return depends;
}

ir::Result<std::vector<ir::ValueId>> appendGradients(ir::Graph& g, ir::ValueId loss,
                                                     const std::vector<ir::ValueId>& wrt,
                                                     ir::ValueId seed,
                                                     const std::vector<CustomRule>& custom) {
  const size_t numNodes = g.nodes().size();
  // A custom region runs its backward at its earliest output: by then (walking backwards) every
  // use of every output has contributed its gradient.
  std::unordered_map<ir::ValueId, const CustomRule*> regionAt;
  std::unordered_map<ir::ValueId, const CustomRule*> regionOf;
  for (const CustomRule& r : custom) {
    ir::ValueId first =
        *std::min_element(r.outputs.begin(), r.outputs.end(), [&](ir::ValueId a, ir::ValueId b) {
          return g.value(a).producer < g.value(b).producer;
        });
    regionAt[first] = &r;
    for (ir::ValueId o : r.outputs)
      regionOf[o] = &r;
  }
  // Values that depend on some `wrt` value: only their gradients are needed.
  std::vector<bool> depends = differentiablyDependsOn(g, wrt, custom);

  GraphBuilder b(g);
  std::unordered_map<ir::ValueId, GValue> grads;
  auto accumulate = [&](ir::ValueId v, const GValue& gv) {
    auto it = grads.find(v);
    grads[v] = it == grads.end() ? gv : it->second + gv;
  };
  const ir::TensorType lossType = g.type(loss);
  grads[loss] = seed != ir::kNoValue ? b.value(seed) : b.full(lossType.shape, lossType.dtype, 1.0);

  for (size_t i = numNodes; i-- > 0;) {
    const ir::Node n = g.nodes()[i]; // a copy: appending nodes may move the vector
    if (regionOf.count(n.result)) {
      auto at = regionAt.find(n.result);
      if (at == regionAt.end()) continue;
      const CustomRule& rule = *at->second;
      std::vector<ir::ValueId> outGrads;
      bool any = false;
      for (ir::ValueId o : rule.outputs) {
        auto it = grads.find(o);
        outGrads.push_back(it == grads.end() ? ir::kNoValue : it->second.id);
        any = any || it != grads.end();
      }
      if (!any) continue;
      std::vector<ir::ValueId> inGrads = rule.backward(outGrads);
      for (size_t k = 0; k < rule.inputs.size() && k < inGrads.size(); ++k) {
        ir::ValueId v = rule.inputs[k];
        if (inGrads[k] == ir::kNoValue || !depends[static_cast<size_t>(v)]) continue;
        const ir::TensorType type = g.type(v);
        accumulate(v, cast(rules::sum_to(b.value(inGrads[k]), type.shape), type.dtype));
      }
      continue;
    }
    auto it = grads.find(n.result);
    if (it == grads.end() || !opInfo(n.op).differentiable) continue;
    GValue gy = it->second;
    std::vector<GValue> in;
    for (ir::ValueId v : n.operands)
      in.push_back(b.value(v));
    b.setLocation(n.loc);
    for (size_t k = 0; k < n.operands.size(); ++k) {
      ir::ValueId v = n.operands[k];
      const ir::TensorType type = g.type(v);
      if (!depends[static_cast<size_t>(v)] || !isFloating(type.dtype)) continue;
      GValue r = rules::apply<GValue>(n.op, gy, in, b.value(n.result), n.attrs, k);
      if (!r.defined()) continue;
      r = cast(rules::sum_to(r, type.shape),
               type.dtype); // undo broadcasting, as eager autograd does
      if (b.error())
        return ir::diag(ErrorKind::Internal, "autodiff: the vjp rule of ", opName(n.op),
                        " failed: ", b.error()->message);
      accumulate(v, r);
    }
  }
  if (b.error()) return ir::diag(ErrorKind::Internal, "autodiff: ", b.error()->message);
  std::vector<ir::ValueId> out;
  for (ir::ValueId v : wrt) {
    auto it = grads.find(v);
    out.push_back(it == grads.end() ? ir::kNoValue : it->second.id);
  }
  return out;
}

namespace {

class Autodiff : public Pass {
public:
  std::string_view name() const override { return "autodiff"; }
  ir::Result<bool> run(ir::Graph& g) override {
    if (g.outputs().empty())
      return ir::diag(ErrorKind::Value, "autodiff: the graph has no output to differentiate");
    std::vector<ir::ValueId> wrt;
    for (ir::ValueId v : g.state())
      if (isFloating(g.type(v).dtype)) wrt.push_back(v);
    auto grads = appendGradients(g, g.outputs()[0], wrt);
    if (!grads) return grads.diagnostic();
    GraphBuilder b(g);
    for (size_t i = 0; i < wrt.size(); ++i) {
      ir::ValueId gv = grads.value()[i];
      if (gv == ir::kNoValue) gv = b.full(g.type(wrt[i]).shape, g.type(wrt[i]).dtype, 0.0).id;
      g.addOutput(gv);
    }
    return !wrt.empty();
  }
};

} // namespace

std::unique_ptr<Pass> createAutodiff() {
  return std::make_unique<Autodiff>();
}

} // namespace weft::passes
