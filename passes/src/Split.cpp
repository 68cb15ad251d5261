// Forward/backward split: seed-dependent nodes go to the backward, their other operands are saved.
#include "weft/passes/Split.h"

#include "weft/passes/Pass.h"
#include "weft/passes/Program.h"

#include <algorithm>

namespace weft::passes {
namespace {

using ir::ValueId;

/// Marks the nodes `roots` need, stopping at values in `stop` (and at inputs).
std::vector<bool> needed(const ir::Graph& g, const std::vector<ValueId>& roots,
                         const std::vector<bool>& stop) {
  std::vector<bool> node(g.nodes().size(), false);
  std::vector<ValueId> work(roots.begin(), roots.end());
  while (!work.empty()) {
    ValueId v = work.back();
    work.pop_back();
    int32_t p = g.value(v).producer;
    if (p < 0 || stop[static_cast<size_t>(v)] || node[static_cast<size_t>(p)]) continue;
    node[static_cast<size_t>(p)] = true;
    for (ValueId o : g.nodes()[static_cast<size_t>(p)].operands)
      work.push_back(o);
  }
  return node;
}

/// Copies into `out` the nodes marked in `keep`, in order; `map` holds the ids of the values
/// `out` already has and receives the new ones.
std::optional<ir::Diagnostic> copyNodes(const ir::Graph& g, const std::vector<bool>& keep,
                                        ir::Graph& out, std::vector<ValueId>& map) {
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (!keep[i]) continue;
    const ir::Node& n = g.nodes()[i];
    std::vector<ValueId> operands;
    for (ValueId o : n.operands) {
      if (map[static_cast<size_t>(o)] == ir::kNoValue)
        return ir::diag(ErrorKind::Internal, "split: ", opName(n.op),
                        " reads a value that is neither computed nor passed in");
      operands.push_back(map[static_cast<size_t>(o)]);
    }
    map[static_cast<size_t>(n.result)] =
        out.addNode(n.op, std::move(operands), n.attrs, g.type(n.result), n.loc);
  }
  return std::nullopt;
}

} // namespace

ir::Result<ForwardBackward> splitForwardBackward(const ir::Graph& g,
                                                 const std::vector<ValueId>& seeds,
                                                 const std::vector<ValueId>& grads) {
  size_t numValues = g.values().size();
  std::vector<bool> fromSeed(numValues, false);
  for (ValueId s : seeds)
    fromSeed[static_cast<size_t>(s)] = true;
  for (const ir::Node& n : g.nodes())
    for (ValueId o : n.operands)
      if (fromSeed[static_cast<size_t>(o)]) fromSeed[static_cast<size_t>(n.result)] = true;

  // The backward: seed-dependent nodes the gradients need; what they read otherwise is saved.
  std::vector<ValueId> roots;
  for (ValueId v : grads)
    if (v != ir::kNoValue) roots.push_back(v);
  // Constants (values computed from no input: fills, aranges, a causal mask) are computed again
  // where the backward reads them rather than saved: that costs less than keeping them alive
  // between the two, and lets the backward's passes see the values (a multiplication by ones).
  std::vector<bool> constant(numValues, false);
  for (const ir::Node& n : g.nodes())
    constant[static_cast<size_t>(n.result)] =
        std::all_of(n.operands.begin(), n.operands.end(),
                    [&](ValueId o) { return constant[static_cast<size_t>(o)]; });
  std::vector<bool> stop(numValues);
  for (size_t v = 0; v < numValues; ++v)
    stop[v] = !fromSeed[v] && !constant[v];
  std::vector<bool> backwardNodes = needed(g, roots, stop);
  ForwardBackward fb;
  std::vector<bool> isSaved(numValues, false);
  auto save = [&](ValueId v) {
    if (!fromSeed[static_cast<size_t>(v)] && !constant[static_cast<size_t>(v)] &&
        !isSaved[static_cast<size_t>(v)]) {
      isSaved[static_cast<size_t>(v)] = true;
      fb.saved.push_back(v);
    }
  };
  for (size_t i = 0; i < g.nodes().size(); ++i)
    if (backwardNodes[i])
      for (ValueId o : g.nodes()[i].operands)
        save(o);
  for (ValueId v : roots)
    save(v);
  std::sort(fb.saved.begin(), fb.saved.end()); // in value order

  // The forward: what the joint graph's outputs and state updates need, and the saved values.
  std::vector<ValueId> forwardRoots = g.outputs();
  for (const ir::StateUpdate& u : g.stateUpdates())
    forwardRoots.push_back(u.newValue);
  forwardRoots.insert(forwardRoots.end(), fb.saved.begin(), fb.saved.end());
  std::vector<bool> forwardNodes = needed(g, forwardRoots, std::vector<bool>(numValues, false));

  fb.forward = ir::Graph(g.name());
  fb.forwardMap.assign(numValues, ir::kNoValue);
  for (ValueId a : g.arguments())
    if (!fromSeed[static_cast<size_t>(a)])
      fb.forwardMap[static_cast<size_t>(a)] = fb.forward.addArgument(g.type(a), g.value(a).name);
  for (ValueId s : g.state())
    fb.forwardMap[static_cast<size_t>(s)] = fb.forward.addState(g.type(s), g.value(s).name);
  if (auto d = copyNodes(g, forwardNodes, fb.forward, fb.forwardMap)) return *d;
  for (ValueId o : g.outputs())
    fb.forward.addOutput(fb.forwardMap[static_cast<size_t>(o)]);
  for (ValueId v : fb.saved)
    if (!g.isInput(v)) fb.forward.addOutput(fb.forwardMap[static_cast<size_t>(v)]);
  for (const ir::StateUpdate& u : g.stateUpdates())
    fb.forward.addStateUpdate(fb.forwardMap[static_cast<size_t>(u.state)],
                              fb.forwardMap[static_cast<size_t>(u.newValue)]);

  fb.backward = ir::Graph(g.name() + "_backward");
  std::vector<ValueId> map(numValues, ir::kNoValue);
  for (size_t i = 0; i < fb.saved.size(); ++i) {
    ValueId v = fb.saved[i];
    map[static_cast<size_t>(v)] = fb.backward.addArgument(g.type(v), "v" + std::to_string(i));
  }
  for (ValueId s : seeds)
    map[static_cast<size_t>(s)] = fb.backward.addArgument(g.type(s), g.value(s).name);
  if (auto d = copyNodes(g, backwardNodes, fb.backward, map)) return *d;
  for (ValueId v : roots)
    fb.backward.addOutput(map[static_cast<size_t>(v)]);
  return fb;
}

namespace {

/// Where the forward of `fb` has each saved value: an argument or state of its own (numbered as
/// the forward numbers them), or an output after the joint graph's.
std::vector<Program::Saved> savedPlaces(const ir::Graph& joint, const ForwardBackward& fb) {
  const ir::Graph& f = fb.forward;
  std::vector<Program::Saved> places;
  size_t next = joint.outputs().size();
  for (ValueId v : fb.saved) {
    if (!joint.isInput(v)) {
      places.push_back({Program::Saved::From::Output, next++});
      continue;
    }
    ValueId mine = fb.forwardMap[static_cast<size_t>(v)];
    auto a = std::find(f.arguments().begin(), f.arguments().end(), mine);
    if (a != f.arguments().end()) {
      places.push_back(
          {Program::Saved::From::Argument, static_cast<size_t>(a - f.arguments().begin())});
      continue;
    }
    auto s = std::find(f.state().begin(), f.state().end(), mine);
    places.push_back({Program::Saved::From::State, static_cast<size_t>(s - f.state().begin())});
  }
  return places;
}

class Split : public ProgramPass {
public:
  std::string_view name() const override { return "split"; }
  ir::Result<bool> run(Program& p) override {
    if (p.seeds.empty() || p.backward) return false; // no gradients, or split already
    if (!p.executables.empty()) return ir::diag(ErrorKind::Value, "split runs before lower");
    auto fb = splitForwardBackward(p.graph, p.seeds, p.grads);
    if (!fb) return fb.diagnostic();
    p.saved = savedPlaces(p.graph, fb.value());
    p.graph = std::move(fb.value().forward);
    p.backward = std::move(fb.value().backward);
    return true;
  }
};

} // namespace

std::unique_ptr<Pass> createSplit() {
  return std::make_unique<Split>();
}

} // namespace weft::passes
