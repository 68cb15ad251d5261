// Elementwise fusion groups, grown greedily in topological order, and the fuse pass that records
// them in the graph for lowering.
#include "weft/passes/Fusion.h"

#include "weft/passes/Pass.h"

#include <algorithm>

namespace weft::passes {
namespace {

using ir::ValueId;

/// A node computing fusible dtypes from fusible dtypes.
bool fusibleTypes(const ir::Graph& g, const ir::Node& n) {
  if (!fusibleDType(g.type(n.result).dtype)) return false;
  return std::all_of(n.operands.begin(), n.operands.end(),
                     [&](ValueId v) { return fusibleDType(g.type(v).dtype); });
}

} // namespace

bool fusibleDType(DType dtype) {
  return dtype == DType::Float32 || dtype == DType::Float64 || dtype == DType::Bool;
}

std::vector<ir::FusionGroup> findElementwiseGroups(const ir::Graph& g, size_t minNodes) {
  size_t n = g.nodes().size();
  std::vector<int32_t> groupOf(n, -1);
  std::vector<ir::FusionGroup> groups;
  auto producer = [&](ValueId v) { return g.value(v).producer; };
  // Computed before the group starts (or an input): the group may read it.
  auto before = [&](ValueId v, const ir::FusionGroup& grp) {
    return producer(v) < grp.nodes.front();
  };
  // A constant (one value at every index, whatever its shape: the kernel computes it instead of
  // reading a filled buffer), or a broadcast of a value computed before the group, to `shape`.
  auto leafFor = [&](ValueId v, const ir::FusionGroup& grp) {
    int32_t p = producer(v);
    if (p < 0) return false;
    const ir::Node& node = g.nodes()[static_cast<size_t>(p)];
    if (!fusibleTypes(g, node)) return false;
    if (node.op == OpCode::Full) return true;
    return node.op == OpCode::Expand && g.type(v).shape == grp.shape &&
           before(node.operands[0], grp);
  };
  for (size_t i = 0; i < n; ++i) {
    const ir::Node& node = g.nodes()[i];
    if (!isElementwise(node.op) || !fusibleTypes(g, node)) continue;
    const Shape& shape = g.type(node.result).shape;
    int32_t chosen = -1;
    for (ValueId v : node.operands) {
      int32_t p = producer(v);
      if (p < 0 || groupOf[static_cast<size_t>(p)] < 0) continue;
      const ir::FusionGroup& grp = groups[static_cast<size_t>(groupOf[static_cast<size_t>(p)])];
      if (grp.shape != shape) continue;
      bool ok = std::all_of(node.operands.begin(), node.operands.end(), [&](ValueId o) {
        int32_t q = producer(o);
        return (q >= 0 && groupOf[static_cast<size_t>(q)] == groupOf[static_cast<size_t>(p)]) ||
               before(o, grp) || leafFor(o, grp);
      });
      if (ok) {
        chosen = groupOf[static_cast<size_t>(p)];
        break;
      }
    }
    if (chosen < 0) {
      chosen = static_cast<int32_t>(groups.size());
      groups.push_back(ir::FusionGroup{{}, {}, {}, {}, shape});
    }
    groups[static_cast<size_t>(chosen)].nodes.push_back(static_cast<int32_t>(i));
    groupOf[i] = chosen;
  }
  // Leaves, inputs and outputs of each group.
  std::vector<ir::FusionGroup> result;
  std::vector<int32_t> keptAs(groups.size(), -1); // index in `result`
  for (size_t k = 0; k < groups.size(); ++k) {
    ir::FusionGroup& grp = groups[k];
    if (grp.nodes.size() < minNodes) {
      for (int32_t i : grp.nodes)
        groupOf[static_cast<size_t>(i)] = -1;
      continue;
    }
    auto addInput = [&](ValueId v) {
      if (std::find(grp.inputs.begin(), grp.inputs.end(), v) == grp.inputs.end())
        grp.inputs.push_back(v);
    };
    for (int32_t i : grp.nodes)
      for (ValueId v : g.nodes()[static_cast<size_t>(i)].operands) {
        int32_t p = producer(v);
        if (p >= 0 && groupOf[static_cast<size_t>(p)] == static_cast<int32_t>(k)) continue;
        if (p >= 0 && groupOf[static_cast<size_t>(p)] < 0 && leafFor(v, grp)) {
          if (std::find(grp.leaves.begin(), grp.leaves.end(), p) == grp.leaves.end())
            grp.leaves.push_back(p);
          for (ValueId o : g.nodes()[static_cast<size_t>(p)].operands)
            addInput(o);
          continue;
        }
        addInput(v);
      }
    std::sort(grp.leaves.begin(), grp.leaves.end());
    keptAs[k] = static_cast<int32_t>(result.size());
    result.push_back(grp);
  }
  // Outputs: values of a group that another node, an output or a state update reads.
  auto ownerOf = [&](int32_t node) {
    int32_t k = node < 0 ? -1 : groupOf[static_cast<size_t>(node)];
    return k < 0 ? -1 : keptAs[static_cast<size_t>(k)];
  };
  auto addOutput = [&](ValueId v, int32_t reader) {
    int32_t r = ownerOf(producer(v));
    if (r < 0 || r == reader) return;
    std::vector<ValueId>& outs = result[static_cast<size_t>(r)].outputs;
    if (std::find(outs.begin(), outs.end(), v) == outs.end()) outs.push_back(v);
  };
  for (size_t j = 0; j < n; ++j)
    for (ValueId v : g.nodes()[j].operands)
      addOutput(v, ownerOf(static_cast<int32_t>(j)));
  for (ValueId v : g.outputs())
    addOutput(v, -1);
  for (const ir::StateUpdate& u : g.stateUpdates())
    addOutput(u.newValue, -1);
  return result;
}

namespace {

class Fuse : public Pass {
public:
  std::string_view name() const override { return "fuse"; }
  ir::Result<bool> run(ir::Graph& g) override {
    std::vector<ir::FusionGroup> groups = findElementwiseGroups(g);
    if (groups == g.kernels()) return false;
    g.setKernels(std::move(groups));
    return true;
  }
};

} // namespace

std::unique_ptr<Pass> createFuse() {
  return std::make_unique<Fuse>();
}

} // namespace weft::passes
