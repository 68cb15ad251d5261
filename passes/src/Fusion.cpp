// Elementwise fusion groups, grown greedily in topological order, and the fuse pass that records
// them in the graph for lowering.
#include "weft/passes/Fusion.h"

#include "weft/passes/Pass.h"
#include "weft/runtime/View.h"

#include <algorithm>
#include <climits>
#include <functional>
#include <map>
#include <optional>

namespace weft::passes {
namespace {

using ir::ValueId;

/// `shape` with its last dim 1: what a row reduction of it keeps.
Shape reducedShape(Shape shape) {
  if (!shape.empty()) shape.back() = 1;
  return shape;
}

/// The value whose memory `v` is: itself, or for a view what it views (transitively).
std::vector<ValueId> memoryRoots(const ir::Graph& g) {
  std::vector<ValueId> root(g.values().size());
  for (size_t v = 0; v < root.size(); ++v)
    root[v] = static_cast<ValueId>(v);
  for (const ir::Node& node : g.nodes())
    if (isViewOp(node.op) && !node.operands.empty())
      root[static_cast<size_t>(node.result)] = root[static_cast<size_t>(node.operands[0])];
  return root;
}

/// Per output of `grp`: whether it may be written over an input. In a row kernel only a full-shape
/// output of its last pass may: an earlier pass would write it before a later one reads the input
/// again (the last pass reads everything it needs at an element, its column sums' operands too,
/// before it stores there); in a column kernel only a full-shape output (reduced outputs are left
/// alone: they are small).
std::vector<bool> mayWriteOver(const ir::Graph& g, const ir::FusionGroup& grp) {
  std::vector<bool> may(grp.outputs.size(), true);
  if (isColumnKernel(g, grp)) // a column sum is stored after its column's rows are read
    for (size_t k = 0; k < grp.outputs.size(); ++k)
      may[k] = g.type(grp.outputs[k]).shape == grp.shape;
  if (!isRowKernel(g, grp)) return may;
  const std::vector<int32_t> stages = rowStages(g, grp);
  const int32_t last = lastRowPass(g, grp, stages);
  std::map<ValueId, int32_t> stageOf;
  for (size_t j = 0; j < grp.nodes.size(); ++j)
    stageOf[g.nodes()[static_cast<size_t>(grp.nodes[j])].result] = stages[j];
  for (size_t k = 0; k < grp.outputs.size(); ++k) {
    auto it = stageOf.find(grp.outputs[k]);
    may[k] = it != stageOf.end() && it->second == last && g.type(grp.outputs[k]).shape == grp.shape;
  }
  return may;
}

/// Whether, in a horizontal kernel, only nodes of the part of `shape` read `v` (always in a kernel
/// of one part). Its other parts run over other elements, maybe on another thread: none may see
/// `v` written over.
bool onlyPartReads(const ir::Graph& g, const ir::FusionGroup& grp, ValueId v, const Shape& shape) {
  if (grp.parts.empty()) return true;
  auto other = [&](int32_t i) {
    const ir::Node& node = g.nodes()[static_cast<size_t>(i)];
    return g.type(node.result).shape != shape &&
           std::find(node.operands.begin(), node.operands.end(), v) != node.operands.end();
  };
  return std::none_of(grp.nodes.begin(), grp.nodes.end(), other) &&
         std::none_of(grp.leaves.begin(), grp.leaves.end(), other);
}

/// Whether `grp` reads `v` at other elements than the one it writes: an operand of its matmul
/// root (each output element reads a row of A and a column of B).
bool readsAcross(const ir::Graph& g, const ir::FusionGroup& grp, ValueId v) {
  if (grp.nodes.empty()) return false;
  for (int32_t i : grp.leaves) // through a view: element i of the view is another of v
    if (const ir::Node& leaf = g.nodes()[static_cast<size_t>(i)];
        isViewLeaf(g, leaf) && leaf.operands[0] == v)
      return true;
  const ir::Node& first = g.nodes()[static_cast<size_t>(grp.nodes.front())];
  if (first.op != OpCode::MatMul) return false;
  if (std::find(first.operands.begin(), first.operands.end(), v) != first.operands.end())
    return true;
  std::optional<MatmulB> b = matmulB(g, grp, first.operands[1]);
  return b && b->input == v;
}

/// Outputs not written over state go over an input the group reads for the last time, where one
/// fits: computed by a node (not an argument, state or view), of the output's dtype and shape,
/// its memory read by nothing after the group runs, not an output of the graph or a state's new
/// value, and read by the group through no other input (a view of it). The kernel reads element i
/// of it where it writes element i of the output, so its memory serves both.
void markOverDeadInputs(const ir::Graph& g, ir::FusionGroup& grp, const std::vector<ValueId>& root,
                        const std::vector<int32_t>& lastReadAt, const std::vector<bool>& may) {
  const int32_t start = grp.nodes.front();
  std::vector<bool> taken(grp.inputs.size(), false);
  for (size_t j = 0; j < grp.inputs.size(); ++j)
    taken[j] = readsAcross(g, grp, grp.inputs[j]);
  for (int32_t over : grp.inPlace)
    if (over >= 0) taken[static_cast<size_t>(over)] = true;
  for (size_t k = 0; k < grp.outputs.size(); ++k) {
    if (grp.inPlace[k] >= 0 || !may[k]) continue;
    const ir::TensorType& type = g.type(grp.outputs[k]);
    for (size_t j = 0; j < grp.inputs.size(); ++j) {
      const ValueId v = grp.inputs[j];
      const int32_t p = g.value(v).producer;
      if (taken[j] || p < 0 || isViewOp(g.nodes()[static_cast<size_t>(p)].op) ||
          g.type(v) != type || lastReadAt[static_cast<size_t>(v)] > start ||
          !onlyPartReads(g, grp, v, type.shape))
        continue;
      bool ok = true;
      for (size_t i = 0; ok && i < grp.inputs.size(); ++i)
        ok = i == j || root[static_cast<size_t>(grp.inputs[i])] != v;
      if (!ok) continue;
      grp.inPlace[k] = static_cast<int32_t>(j);
      taken[j] = true;
      break;
    }
  }
}

/// Sets FusionGroup::inPlace: a group's output that is the new value of a state input the group
/// reads is written over it, when nothing reads the old value (or a view of it) after the group
/// runs and no output of the graph is a view of it; then the other outputs go over dead inputs
/// where one fits (markOverDeadInputs). `runsAt` gives where a node runs.
template <typename RunsAt>
void markInPlace(const ir::Graph& g, std::vector<ir::FusionGroup>& groups, RunsAt runsAt) {
  // Per memory (the value a view's chain starts from): where its last reader runs; outputs and
  // state updates read it after everything.
  const std::vector<ValueId> root = memoryRoots(g);
  std::vector<int32_t> lastReadAt(g.values().size(), -1);
  for (size_t n = 0; n < g.nodes().size(); ++n)
    for (ValueId o : g.nodes()[n].operands) {
      int32_t& at = lastReadAt[static_cast<size_t>(root[static_cast<size_t>(o)])];
      at = std::max(at, runsAt(static_cast<int32_t>(n)));
    }
  // A leaf reads its operands where each group inlining it runs (a view leaf read by a later
  // kernel keeps its operand's memory alive until then).
  for (const ir::FusionGroup& grp : groups)
    for (int32_t i : grp.leaves)
      for (ValueId o : g.nodes()[static_cast<size_t>(i)].operands) {
        int32_t& at = lastReadAt[static_cast<size_t>(root[static_cast<size_t>(o)])];
        at = std::max(at, runsAt(grp.nodes.front()));
      }
  for (ValueId o : g.outputs())
    lastReadAt[static_cast<size_t>(root[static_cast<size_t>(o)])] = INT32_MAX;
  for (const ir::StateUpdate& u : g.stateUpdates())
    lastReadAt[static_cast<size_t>(root[static_cast<size_t>(u.newValue)])] = INT32_MAX;
  std::vector<std::vector<bool>> may;
  for (ir::FusionGroup& grp : groups) {
    grp.inPlace.assign(grp.outputs.size(), -1);
    may.push_back(mayWriteOver(g, grp));
    const int32_t start = grp.nodes.front();
    for (const ir::StateUpdate& u : g.stateUpdates()) {
      auto out = std::find(grp.outputs.begin(), grp.outputs.end(), u.newValue);
      auto in = std::find(grp.inputs.begin(), grp.inputs.end(), u.state);
      if (out == grp.outputs.end() || in == grp.inputs.end() ||
          g.type(u.state) != g.type(u.newValue) ||
          !may.back()[static_cast<size_t>(out - grp.outputs.begin())])
        continue;
      // Nothing reads the state's memory after the group (the group's own nodes run at its
      // start), no output or new state value is a view of it, and the group reads it through no
      // other input.
      bool ok = lastReadAt[static_cast<size_t>(u.state)] <= start &&
                !readsAcross(g, grp, u.state) &&
                onlyPartReads(g, grp, u.state, g.type(u.state).shape) &&
                std::none_of(grp.inputs.begin(), grp.inputs.end(), [&](ValueId v) {
                  return v != u.state && root[static_cast<size_t>(v)] == u.state;
                });
      if (ok)
        grp.inPlace[static_cast<size_t>(out - grp.outputs.begin())] =
            static_cast<int32_t>(in - grp.inputs.begin());
    }
  }
  for (size_t k = 0; k < groups.size(); ++k)
    markOverDeadInputs(g, groups[k], root, lastReadAt, may[k]);
}

/// Bytes up to which a value may be computed earlier than where its kernel stood (it then lives
/// longer): scalars and small vectors.
constexpr int64_t kSmallValueBytes = 4096;

/// Elements up to which a group joins a horizontal kernel: below, its launch costs about as much
/// as its work (one parameter's step scalars, a bias's update); above, the work dominates, and
/// the group's kernel is shared with every other group computing the same at that shape (all of
/// a model's [128, 128] weight updates are one compiled kernel, a horizontal kernel is compiled
/// for itself). Measured on the GPT-like benchmark: merging every update cost 0.3 s more cold
/// compilation and no measurable step time.
constexpr int64_t kHorizontalElements = 4096;
/// Nodes up to which a horizontal kernel grows (kernels compile in parallel, one by one).
constexpr size_t kHorizontalNodes = 256;

/// Whether each node and leaf of `grp` reads only values of its result's element count or of one
/// element, so the group can be a part of a horizontal kernel (computed over its elements flat).
bool isFlat(const ir::Graph& g, const ir::FusionGroup& grp) {
  if (isRowKernel(g, grp) || isColumnKernel(g, grp) ||
      g.nodes()[static_cast<size_t>(grp.nodes.front())].op == OpCode::MatMul)
    return false;
  auto fits = [&](int32_t i) {
    const ir::Node& node = g.nodes()[static_cast<size_t>(i)];
    const int64_t n = numel(g.type(node.result).shape);
    return std::all_of(node.operands.begin(), node.operands.end(), [&](ValueId o) {
      const int64_t m = numel(g.type(o).shape);
      return m == n || m == 1;
    });
  };
  auto flatLeaf = [&](int32_t i) { // a view reads its operand at other indices than its own
    return fits(i) && !isViewLeaf(g, g.nodes()[static_cast<size_t>(i)]);
  };
  return std::all_of(grp.nodes.begin(), grp.nodes.end(), fits) &&
         std::all_of(grp.leaves.begin(), grp.leaves.end(), flatLeaf);
}

/// Adds group `from` to `into` (both flat, independent): one part per shape.
void absorb(ir::FusionGroup& into, const ir::FusionGroup& from) {
  auto partsOf = [](const ir::FusionGroup& grp) {
    return grp.parts.empty() ? std::vector<Shape>{grp.shape} : grp.parts;
  };
  std::vector<Shape> parts = partsOf(into);
  for (const Shape& s : partsOf(from))
    if (std::find(parts.begin(), parts.end(), s) == parts.end()) parts.push_back(s);
  into.nodes.insert(into.nodes.end(), from.nodes.begin(), from.nodes.end());
  std::sort(into.nodes.begin(), into.nodes.end());
  for (int32_t i : from.leaves)
    if (std::find(into.leaves.begin(), into.leaves.end(), i) == into.leaves.end())
      into.leaves.push_back(i);
  std::sort(into.leaves.begin(), into.leaves.end());
  for (ValueId v : from.inputs)
    if (std::find(into.inputs.begin(), into.inputs.end(), v) == into.inputs.end())
      into.inputs.push_back(v);
  into.outputs.insert(into.outputs.end(), from.outputs.begin(), from.outputs.end());
  if (parts.size() == 1) {
    into.parts.clear();
    into.shape = parts[0];
    return;
  }
  int64_t total = 0;
  for (const Shape& s : parts)
    total += numel(s);
  into.parts = std::move(parts);
  into.shape = Shape{total};
}

/// Merges independent flat groups (isFlat) of up to kHorizontalElements elements into horizontal
/// kernels, one launch instead of many (an optimizer's step scalars of every parameter, the updates
/// of every bias and norm weight, all of a small model's updates). A group joins the
/// first earlier one where everything it reads is computed before that one starts and no heavy
/// node lies between their starts; it then runs there. Only a group whose
/// outputs live to the end anyway (outputs of the graph, new state values) or are small moves, so
/// no large buffer is held longer, and whose inputs and outputs together stay within the
/// target's `maxOperands`. `heavy` is heavyBefore(g). Returns per group its index after
/// (a merged group's: the group it joined).
std::vector<int32_t> mergeHorizontally(const ir::Graph& g, std::vector<ir::FusionGroup>& groups,
                                       const std::vector<int32_t>& heavy, size_t maxOperands) {
  std::vector<int32_t> owner(g.nodes().size(), -1);
  for (size_t k = 0; k < groups.size(); ++k)
    for (int32_t i : groups[k].nodes)
      owner[static_cast<size_t>(i)] = static_cast<int32_t>(k);
  const std::vector<bool> kept = g.returnedValues();
  auto start = [&](size_t k) { return groups[k].nodes.front(); };
  // Where `v` is computed now: its group's start, or its node (-1: an input).
  auto computedAt = [&](ValueId v) {
    const int32_t p = g.value(v).producer;
    const int32_t k = p < 0 ? -1 : owner[static_cast<size_t>(p)];
    return k < 0 ? p : start(static_cast<size_t>(k));
  };
  std::vector<bool> flat(groups.size());
  for (size_t k = 0; k < groups.size(); ++k)
    flat[k] = numel(groups[k].shape) <= kHorizontalElements && isFlat(g, groups[k]);
  std::vector<int32_t> into(groups.size());
  for (size_t b = 0; b < groups.size(); ++b) {
    into[b] = static_cast<int32_t>(b);
    const ir::FusionGroup& from = groups[b];
    if (!flat[b] || !std::all_of(from.outputs.begin(), from.outputs.end(), [&](ValueId v) {
          return kept[static_cast<size_t>(v)] || valueBytes(g, v) <= kSmallValueBytes;
        }))
      continue;
    for (size_t h = 0; h < b; ++h) {
      if (!flat[h] || groups[h].nodes.empty() ||
          groups[h].nodes.size() + from.nodes.size() > kHorizontalNodes)
        continue;
      size_t operands = groups[h].inputs.size() + groups[h].outputs.size() + from.outputs.size();
      for (ValueId v : from.inputs)
        if (std::find(groups[h].inputs.begin(), groups[h].inputs.end(), v) ==
            groups[h].inputs.end())
          ++operands;
      if (operands > maxOperands) continue;
      const int32_t at = start(h);
      if (at >= start(b) || heavy[static_cast<size_t>(at)] != heavy[static_cast<size_t>(start(b))])
        continue;
      // Neither then reads the other: `from` reads nothing computed at `at` or later, and a group
      // reads nothing computed after it starts.
      if (!std::all_of(from.inputs.begin(), from.inputs.end(),
                       [&](ValueId v) { return computedAt(v) < at; }))
        continue;
      for (int32_t i : from.nodes)
        owner[static_cast<size_t>(i)] = static_cast<int32_t>(h);
      absorb(groups[h], from);
      groups[b].nodes.clear();
      into[b] = static_cast<int32_t>(h);
      break;
    }
  }
  // Drop the merged groups; renumber.
  std::vector<int32_t> index(groups.size(), -1);
  std::vector<ir::FusionGroup> merged;
  for (size_t k = 0; k < groups.size(); ++k) {
    if (groups[k].nodes.empty()) continue;
    index[k] = static_cast<int32_t>(merged.size());
    merged.push_back(std::move(groups[k]));
  }
  groups = std::move(merged);
  for (int32_t& k : into)
    k = index[static_cast<size_t>(k)];
  return into;
}

} // namespace

bool isHeavy(OpCode op) {
  return !isElementwise(op) && !isViewOp(op) && op != OpCode::Full && op != OpCode::Expand;
}

std::vector<int32_t> heavyBefore(const ir::Graph& g, bool kernelReductions) {
  std::vector<int32_t> count(g.nodes().size() + 1, 0);
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const ir::Node& node = g.nodes()[i];
    bool heavy = isHeavy(node.op) &&
                 (kernelReductions || (!isRowReduction(g, node) && !isColumnReduction(g, node)));
    count[i + 1] = count[i] + (heavy ? 1 : 0);
  }
  return count;
}

bool isRowReduction(const ir::Graph& g, const ir::Node& n) {
  if (n.op != OpCode::Sum && n.op != OpCode::AMax && n.op != OpCode::AMin) return false;
  if (n.operands.size() != 1) return false;
  const ir::TensorType& in = g.type(n.operands[0]);
  const ir::TensorType& out = g.type(n.result);
  if ((in.dtype != DType::Float32 && in.dtype != DType::Float64) || out.dtype != in.dtype)
    return false;
  const auto rank = static_cast<int64_t>(in.shape.size());
  const auto* dims = n.attrs.tryGet<Shape>("dims");
  const bool* keepdim = n.attrs.tryGet<bool>("keepdim");
  if (rank < 2 || in.shape.back() < 2 || dims == nullptr || dims->size() != 1 ||
      keepdim == nullptr || !*keepdim)
    return false;
  const int64_t d = (*dims)[0];
  return (d == rank - 1 || d == -1) && out.shape == reducedShape(in.shape);
}

bool isRowKernel(const ir::Graph& g, const ir::FusionGroup& grp) {
  return std::any_of(grp.nodes.begin(), grp.nodes.end(), [&](int32_t i) {
    return isRowReduction(g, g.nodes()[static_cast<size_t>(i)]);
  });
}

bool isSumOver(const ir::Graph& g, const ir::Node& n, int64_t from, int64_t to) {
  if (n.op != OpCode::Sum || n.operands.size() != 1) return false;
  const ir::TensorType& in = g.type(n.operands[0]);
  const auto rank = static_cast<int64_t>(in.shape.size());
  const auto* dims = n.attrs.tryGet<Shape>("dims");
  if ((in.dtype != DType::Float32 && in.dtype != DType::Float64) ||
      g.type(n.result).dtype != in.dtype || dims == nullptr ||
      n.attrs.tryGet<bool>("keepdim") == nullptr || from < 0 || to > rank ||
      static_cast<int64_t>(dims->size()) != to - from)
    return false;
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t d : *dims) {
    if (d < 0) d += rank;
    if (d < from || d >= to || seen[static_cast<size_t>(d)]) return false;
    seen[static_cast<size_t>(d)] = true;
  }
  return true;
}

bool isColumnReduction(const ir::Graph& g, const ir::Node& n) {
  if (n.operands.size() != 1) return false;
  const Shape& in = g.type(n.operands[0]).shape;
  const auto rank = static_cast<int64_t>(in.size());
  const bool* keepdim = n.attrs.tryGet<bool>("keepdim");
  if (rank < 3 || !isSumOver(g, n, 1, rank - 1) || keepdim == nullptr || !*keepdim) return false;
  const Shape kept = columnSumShape(in);
  const int64_t rows = numel(kept) == 0 ? 0 : numel(in) / numel(kept);
  return g.type(n.result).shape == kept && rows >= 2 && rows <= kMaxColumnRows;
}

Shape columnSumShape(const Shape& in) {
  Shape kept(in.size(), 1);
  kept.front() = in.front();
  kept.back() = in.back();
  return kept;
}

bool isColumnKernel(const ir::Graph& g, const ir::FusionGroup& grp) {
  return std::any_of(grp.nodes.begin(), grp.nodes.end(), [&](int32_t i) {
    return isColumnReduction(g, g.nodes()[static_cast<size_t>(i)]);
  });
}

int32_t lastRowPass(const ir::Graph& g, const ir::FusionGroup& grp,
                    const std::vector<int32_t>& stages) {
  int32_t last = 0;
  for (size_t j = 0; j < grp.nodes.size(); ++j)
    if (g.type(g.nodes()[static_cast<size_t>(grp.nodes[j])].result).shape == grp.shape)
      last = std::max(last, stages[j]);
  return last;
}

std::vector<int32_t> rowStages(const ir::Graph& g, const ir::FusionGroup& grp) {
  std::map<ValueId, int32_t> stageOf;
  std::vector<int32_t> stages;
  for (int32_t i : grp.nodes) {
    const ir::Node& node = g.nodes()[static_cast<size_t>(i)];
    int32_t s = 0;
    for (ValueId o : node.operands)
      if (auto it = stageOf.find(o); it != stageOf.end()) s = std::max(s, it->second);
    if (isRowReduction(g, node)) ++s;
    stageOf[node.result] = s;
    stages.push_back(s);
  }
  return stages;
}

bool isViewLeaf(const ir::Graph& g, const ir::Node& n) {
  if ((n.op != OpCode::Permute && n.op != OpCode::Slice && n.op != OpCode::Flip) ||
      n.operands.size() != 1)
    return false;
  const Shape& in = g.type(n.operands[0]).shape;
  return computeView(n.op, in, contiguousStrides(in), n.attrs).has_value();
}

bool isGemm(const ir::Graph& g, const ir::Node& n) {
  if (n.op != OpCode::MatMul || n.operands.size() != 2) return false;
  const ir::TensorType &a = g.type(n.operands[0]), &b = g.type(n.operands[1]),
                       &r = g.type(n.result);
  return r.dtype == DType::Float32 && a.dtype == DType::Float32 && b.dtype == DType::Float32 &&
         a.shape.size() >= 2 && b.shape.size() == 2 && a.shape.back() == b.shape[0] &&
         a.shape.back() > 0 && numel(r.shape) > 0 && r.shape.back() == b.shape[1];
}

std::optional<MatmulB> matmulB(const ir::Graph& g, const ir::FusionGroup& grp, ValueId b) {
  auto isInput = [&](ValueId v) {
    return std::find(grp.inputs.begin(), grp.inputs.end(), v) != grp.inputs.end();
  };
  if (isInput(b)) return MatmulB{b};
  for (int32_t i : grp.leaves) {
    const ir::Node& n = g.nodes()[static_cast<size_t>(i)];
    if (n.result != b) continue;
    const Shape* dims = n.attrs.tryGet<Shape>("dims");
    if (n.op == OpCode::Permute && n.operands.size() == 1 && dims != nullptr &&
        *dims == Shape{1, 0} && isInput(n.operands[0]))
      return MatmulB{n.operands[0], i};
  }
  return std::nullopt;
}

const ir::Node* matmulRoot(const ir::Graph& g, const ir::FusionGroup& grp) {
  if (grp.nodes.empty() || !grp.parts.empty()) return nullptr;
  const ir::Node& n = g.nodes()[static_cast<size_t>(grp.nodes[0])];
  if (!isGemm(g, n) || g.type(n.result).shape != grp.shape) return nullptr;
  auto input = [&](ValueId v) {
    return std::find(grp.inputs.begin(), grp.inputs.end(), v) - grp.inputs.begin();
  };
  const std::optional<MatmulB> b = matmulB(g, grp, n.operands[1]);
  const auto ia = input(n.operands[0]);
  if (ia == static_cast<std::ptrdiff_t>(grp.inputs.size()) || !b) return nullptr;
  const auto ib = input(b->input);
  for (int32_t over : grp.inPlace)
    if (over == ia || over == ib) return nullptr;
  for (size_t i = 1; i < grp.nodes.size(); ++i) {
    const ir::Node& e = g.nodes()[static_cast<size_t>(grp.nodes[i])];
    if (!isElementwise(e.op) || g.type(e.result).shape != grp.shape) return nullptr;
  }
  // Each output is a node's value (all of the group's shape), stored at the tile's positions.
  for (ValueId out : grp.outputs)
    if (std::none_of(grp.nodes.begin(), grp.nodes.end(),
                     [&](int32_t i) { return g.nodes()[static_cast<size_t>(i)].result == out; }))
      return nullptr;
  return &n;
}

std::vector<ir::FusionGroup> findElementwiseGroups(const ir::Graph& g, const Target& target,
                                                   const MatmulChooser& chooseMatmul) {
  size_t n = g.nodes().size();
  std::vector<int32_t> groupOf(n, -1);
  std::vector<ir::FusionGroup> groups;
  auto producer = [&](ValueId v) { return g.value(v).producer; };
  // Where `v` is computed: a group computes all its values where it runs, at its first node
  // (merging only ever moves that earlier); -1 for inputs.
  auto computedAt = [&](ValueId v) {
    int32_t p = producer(v);
    int32_t k = p < 0 ? -1 : groupOf[static_cast<size_t>(p)];
    return k < 0 ? p : groups[static_cast<size_t>(k)].nodes.front();
  };
  // A constant (one value at every index, whatever its shape: the kernel computes it instead of
  // reading a filled buffer), or a broadcast or view (isViewLeaf) of `shape`: the kernel reads
  // its operand (no copy of the view).
  auto isLeaf = [&](ValueId v, const Shape& shape) {
    int32_t p = producer(v);
    if (p < 0) return false;
    const ir::Node& node = g.nodes()[static_cast<size_t>(p)];
    return target.computes(g, node) &&
           (node.op == OpCode::Full ||
            ((node.op == OpCode::Expand || (target.readsViews() && isViewLeaf(g, node))) &&
             g.type(v).shape == shape));
  };
  // Where what a group reads as `v` from outside is computed: for a broadcast or view leaf, its
  // operand;
  // a constant needs nothing.
  auto needs = [&](ValueId v, const Shape& shape) -> int32_t {
    if (!isLeaf(v, shape)) return computedAt(v);
    const ir::Node& node = g.nodes()[static_cast<size_t>(producer(v))];
    return node.op == OpCode::Full ? -1 : computedAt(node.operands[0]);
  };
  // A leaf of a group read at `shape` (a node's result shape, a reduction's operand shape).
  auto leafFor = [&](ValueId v, const Shape& shape, const ir::FusionGroup& grp) {
    return isLeaf(v, shape) && needs(v, shape) < grp.nodes.front();
  };
  std::vector<int32_t> readyAfter; // per group: the latest of its needs
  std::vector<bool> rows;          // per group: whether it holds a row reduction
  std::vector<bool> cols;          // per group: whether it holds a column reduction
  // Row and column reductions do not count: they join the kernels around them.
  const std::vector<int32_t> heavy = heavyBefore(g, false);
  for (size_t i = 0; i < n; ++i) {
    const ir::Node& node = g.nodes()[i];
    const bool reduction = target.reducesInKernels() && isRowReduction(g, node);
    const bool column = target.reducesInKernels() && !reduction && isColumnReduction(g, node);
    if (!reduction && !column && (!isElementwise(node.op) || !target.computes(g, node))) continue;
    // The shape the node is computed at: its result's, or a reduction's operand's.
    const Shape& shape =
        reduction || column ? g.type(node.operands[0]).shape : g.type(node.result).shape;
    // A group computing at `shape`, or a row kernel whose reduced values have that shape (a
    // column sum only of values of the group's shape).
    auto fits = [&](int32_t k) {
      const ir::FusionGroup& grp = groups[static_cast<size_t>(k)];
      return grp.shape == shape ||
             (!column && rows[static_cast<size_t>(k)] && reducedShape(grp.shape) == shape);
    };
    // The groups that compute its operands: the node joins them, and they merge into one group
    // running where the earliest starts, if everything any of them reads from outside is
    // computed before that.
    std::vector<int32_t> joined;
    for (ValueId v : node.operands) {
      int32_t p = producer(v);
      int32_t k = p < 0 ? -1 : groupOf[static_cast<size_t>(p)];
      if (k >= 0 && fits(k) && std::find(joined.begin(), joined.end(), k) == joined.end())
        joined.push_back(k);
    }
    auto canJoin = [&](const std::vector<int32_t>& ks) {
      int32_t start = INT32_MAX;
      const Shape* full = nullptr; // row kernels merge only if they reduce rows of one shape
      for (int32_t k : ks) {
        start = std::min(start, groups[static_cast<size_t>(k)].nodes.front());
        if (!rows[static_cast<size_t>(k)]) continue;
        if (full != nullptr && *full != groups[static_cast<size_t>(k)].shape) return false;
        full = &groups[static_cast<size_t>(k)].shape;
      }
      // A group with column sums joins a row kernel only if it computes the row kernel's full
      // shape (the sums add up values of it).
      for (int32_t k : ks)
        if (full != nullptr && cols[static_cast<size_t>(k)] &&
            groups[static_cast<size_t>(k)].shape != *full)
          return false;
      for (int32_t k : ks)
        if (readyAfter[static_cast<size_t>(k)] >= start) return false;
      if (heavy[static_cast<size_t>(start)] != heavy[i]) return false;
      return std::all_of(node.operands.begin(), node.operands.end(), [&](ValueId o) {
        int32_t q = producer(o);
        int32_t k = q < 0 ? -1 : groupOf[static_cast<size_t>(q)];
        // In the group: anything but a column sum, which is known only after the kernel ends.
        if (std::find(ks.begin(), ks.end(), k) != ks.end())
          return !isColumnReduction(g, g.nodes()[static_cast<size_t>(q)]);
        return needs(o, shape) < start;
      });
    };
    int32_t chosen = -1;
    if (joined.size() > 1 && canJoin(joined)) {
      chosen = *std::min_element(joined.begin(), joined.end());
      ir::FusionGroup& into = groups[static_cast<size_t>(chosen)];
      for (int32_t k : joined) {
        if (k == chosen) continue;
        ir::FusionGroup& from = groups[static_cast<size_t>(k)];
        for (int32_t j : from.nodes)
          groupOf[static_cast<size_t>(j)] = chosen;
        into.nodes.insert(into.nodes.end(), from.nodes.begin(), from.nodes.end());
        readyAfter[static_cast<size_t>(chosen)] =
            std::max(readyAfter[static_cast<size_t>(chosen)], readyAfter[static_cast<size_t>(k)]);
        if (rows[static_cast<size_t>(k)]) { // a row kernel takes in a group of its reduced shape
          into.shape = from.shape;
          rows[static_cast<size_t>(chosen)] = true;
        }
        if (cols[static_cast<size_t>(k)]) cols[static_cast<size_t>(chosen)] = true;
        from.nodes.clear();
      }
      std::sort(into.nodes.begin(), into.nodes.end());
    } else {
      for (int32_t k : joined)
        if (canJoin({k})) {
          chosen = k;
          break;
        }
    }
    if (chosen < 0 && column) continue; // it sums a value no kernel computes
    if (chosen < 0) {
      chosen = static_cast<int32_t>(groups.size());
      groups.push_back(ir::FusionGroup{{}, {}, {}, {}, shape, {}, {}});
      readyAfter.push_back(-1);
      rows.push_back(false);
      cols.push_back(false);
    }
    if (reduction) rows[static_cast<size_t>(chosen)] = true;
    if (column) cols[static_cast<size_t>(chosen)] = true;
    groups[static_cast<size_t>(chosen)].nodes.push_back(static_cast<int32_t>(i));
    groupOf[i] = chosen;
    for (ValueId o : node.operands) {
      int32_t q = producer(o);
      if (q < 0 || groupOf[static_cast<size_t>(q)] != chosen)
        readyAfter[static_cast<size_t>(chosen)] =
            std::max(readyAfter[static_cast<size_t>(chosen)], needs(o, shape));
    }
  }
  // Leaves, inputs and outputs of each group.
  std::vector<ir::FusionGroup> result;
  std::vector<int32_t> keptAs(groups.size(), -1); // index in `result`
  for (size_t k = 0; k < groups.size(); ++k) {
    ir::FusionGroup& grp = groups[k];
    if (grp.nodes.empty()) continue; // merged into another
    // One node is worth a kernel only where that spares filling a constant tensor it reads
    // (relu's backward: where(mask, zeros, g)).
    auto readShape = [&](const ir::Node& node) -> const Shape& {
      const bool reduces = isRowReduction(g, node) || isColumnReduction(g, node);
      return g.type(reduces ? node.operands[0] : node.result).shape;
    };
    auto readsFilledConstant = [&](int32_t i) {
      const ir::Node& node = g.nodes()[static_cast<size_t>(i)];
      return std::any_of(node.operands.begin(), node.operands.end(), [&](ValueId v) {
        int32_t p = producer(v);
        return p >= 0 && g.nodes()[static_cast<size_t>(p)].op == OpCode::Full &&
               numel(g.type(v).shape) > 1 && leafFor(v, readShape(node), grp);
      });
    };
    if (grp.nodes.size() < 2 && !readsFilledConstant(grp.nodes[0])) {
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
        if (p >= 0 && groupOf[static_cast<size_t>(p)] < 0 &&
            leafFor(v, readShape(g.nodes()[static_cast<size_t>(i)]), grp)) {
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
  if (chooseMatmul) {
    // How many nodes, outputs and state updates read each value.
    std::vector<int32_t> uses(g.values().size(), 0);
    for (const ir::Node& node : g.nodes())
      for (ValueId o : node.operands)
        ++uses[static_cast<size_t>(o)];
    for (ValueId o : g.outputs())
      ++uses[static_cast<size_t>(o)];
    for (const ir::StateUpdate& u : g.stateUpdates())
      ++uses[static_cast<size_t>(u.newValue)];
    auto isView = [&](ValueId v) {
      int32_t p = producer(v);
      return p >= 0 && isViewOp(g.nodes()[static_cast<size_t>(p)].op);
    };
    // Whether a permute is the only reader of `v` (no output or state update either).
    auto onlyPermuted = [&](ValueId v) {
      if (uses[static_cast<size_t>(v)] != 1) return false;
      return std::any_of(g.nodes().begin(), g.nodes().end(), [&](const ir::Node& r) {
        return r.op == OpCode::Permute && r.operands[0] == v;
      });
    };
    // Lets each matmul `take` accepts lead the first group it fits, or run alone.
    auto attach = [&](const std::function<bool(const ir::Node&)>& take) {
      for (size_t i = 0; i < n; ++i) {
        const ir::Node& mm = g.nodes()[i];
        if (!target.generatesGemm(g, mm) || isView(mm.operands[0])) continue;
        // B: a value, or the transpose of one that only the matmul reads (a leaf of the group).
        ValueId b = mm.operands[1];
        int32_t leaf = -1;
        if (isView(b)) {
          leaf = producer(b);
          const ir::Node& t = g.nodes()[static_cast<size_t>(leaf)];
          const Shape* dims = t.attrs.tryGet<Shape>("dims");
          if (t.op != OpCode::Permute || dims == nullptr || *dims != Shape{1, 0} ||
              uses[static_cast<size_t>(b)] != 1 || isView(t.operands[0]))
            continue;
          b = t.operands[0];
        }
        const auto at = static_cast<int32_t>(i);
        // Whether anything but `grp` reads the matmul's value (it is then an output of the kernel).
        auto readElsewhere = [&](const ir::FusionGroup& grp) {
          if (std::find(g.outputs().begin(), g.outputs().end(), mm.result) != g.outputs().end() ||
              std::any_of(g.stateUpdates().begin(), g.stateUpdates().end(),
                          [&](const ir::StateUpdate& u) { return u.newValue == mm.result; }))
            return true;
          for (size_t j = i + 1; j < n; ++j) {
            const ir::Node& reader = g.nodes()[j];
            if (std::find(reader.operands.begin(), reader.operands.end(), mm.result) !=
                    reader.operands.end() &&
                !std::binary_search(grp.nodes.begin(), grp.nodes.end(), static_cast<int32_t>(j)))
              return true;
          }
          return false;
        };
        // Across heavy nodes between the matmul and the group (a weight's gradient between a
        // hidden gradient and the activation's backward), the group's outputs are held instead of
        // the matmul's result: only where they take no more bytes.
        auto holdsLess = [&](const ir::FusionGroup& grp) {
          int64_t bytes = readElsewhere(grp) ? valueBytes(g, mm.result) : 0;
          for (ValueId v : grp.outputs)
            bytes += valueBytes(g, v);
          return bytes <= valueBytes(g, mm.result);
        };
        auto fits = [&](const ir::FusionGroup& grp) {
          const int32_t start = grp.nodes.front();
          if (start <= at || grp.shape != g.type(mm.result).shape || isRowKernel(g, grp) ||
              isColumnKernel(g, grp) ||
              g.nodes()[static_cast<size_t>(start)].op == OpCode::MatMul ||
              (heavy[static_cast<size_t>(start)] != heavy[i + 1] && !holdsLess(grp)) ||
              std::find(grp.inputs.begin(), grp.inputs.end(), mm.result) == grp.inputs.end())
            return false;
          // Through a view the epilogue would read other tiles' results than its own.
          for (int32_t l : grp.leaves)
            if (const ir::Node& leaf = g.nodes()[static_cast<size_t>(l)];
                isViewLeaf(g, leaf) && leaf.operands[0] == mm.result)
              return false;
          return std::all_of(grp.inputs.begin(), grp.inputs.end(),
                             [&](ValueId v) { return v == mm.result || computedAt(v) < at; });
        };
        for (size_t k = 0; k < groups.size(); ++k) {
          if (keptAs[k] < 0) continue;
          ir::FusionGroup& grp = result[static_cast<size_t>(keptAs[k])];
          if (!fits(grp)) continue;
          if (!take(mm)) break;
          const bool alsoOutput = readElsewhere(grp);
          grp.nodes.insert(grp.nodes.begin(), at);
          std::erase(grp.inputs, mm.result);
          if (alsoOutput) grp.outputs.insert(grp.outputs.begin(), mm.result);
          for (ValueId v : {mm.operands[0], b})
            if (std::find(grp.inputs.begin(), grp.inputs.end(), v) == grp.inputs.end())
              grp.inputs.push_back(v);
          if (leaf >= 0) {
            grp.leaves.push_back(leaf);
            std::sort(grp.leaves.begin(), grp.leaves.end());
          }
          groups[k].nodes.insert(groups[k].nodes.begin(), at); // where the group now runs
          groupOf[i] = static_cast<int32_t>(k);
          break;
        }
        // Led by no group: a kernel of its own where generated code beats OpenBLAS, unless its
        // only reader is a permute (the interpreter's GEMM then writes the permuted layout).
        if (groupOf[i] >= 0 || onlyPermuted(mm.result) || !take(mm)) continue;
        ir::FusionGroup alone;
        alone.nodes = {at};
        if (leaf >= 0) alone.leaves = {leaf};
        alone.inputs = {mm.operands[0]};
        if (b != mm.operands[0]) alone.inputs.push_back(b);
        alone.outputs = {mm.result};
        alone.shape = g.type(mm.result).shape;
        groupOf[i] = static_cast<int32_t>(groups.size());
        groups.push_back(ir::FusionGroup{{at}, {}, {}, {}, alone.shape, {}, {}});
        keptAs.push_back(static_cast<int32_t>(result.size()));
        result.push_back(std::move(alone));
      }
    };
    // The chooser answers for every matmul that could lead at once (one measurement for all of a
    // graph's new shapes): which could comes from a dry run taking each, on copies.
    std::vector<const ir::Node*> candidates;
    {
      const auto savedResult = result;
      const auto savedGroups = groups;
      const auto savedGroupOf = groupOf;
      const auto savedKeptAs = keptAs;
      attach([&](const ir::Node& mm) {
        candidates.push_back(&mm);
        return true;
      });
      result = savedResult;
      groups = savedGroups;
      groupOf = savedGroupOf;
      keptAs = savedKeptAs;
    }
    const std::vector<bool> chosen =
        candidates.empty() ? std::vector<bool>{} : chooseMatmul(g, candidates);
    attach([&](const ir::Node& mm) {
      auto it = std::find(candidates.begin(), candidates.end(), &mm);
      return it != candidates.end() && chosen.size() == candidates.size() &&
             chosen[static_cast<size_t>(it - candidates.begin())];
    });
  }
  // Independent flat groups run as one horizontal kernel.
  const std::vector<int32_t> movedTo = mergeHorizontally(g, result, heavy, target.maxOperands());
  for (int32_t& k : keptAs)
    if (k >= 0) k = movedTo[static_cast<size_t>(k)];
  markInPlace(g, result, [&](int32_t node) {
    int32_t k = ownerOf(node);
    return k < 0 ? node : result[static_cast<size_t>(k)].nodes.front();
  });
  return result;
}

namespace {

class Fuse : public Pass {
public:
  Fuse(std::shared_ptr<const Target> target, MatmulChooser chooseMatmul)
      : target_(std::move(target)), chooseMatmul_(std::move(chooseMatmul)) {}
  std::string_view name() const override { return "fuse"; }
  ir::Result<bool> run(ir::Graph& g) override {
    if (target_ == nullptr)
      return ir::Diagnostic{ErrorKind::Value,
                            "fuse: no code generator's target to ask what a kernel may hold"};
    std::vector<ir::FusionGroup> groups = findElementwiseGroups(g, *target_, chooseMatmul_);
    if (groups == g.kernels()) return false;
    g.setKernels(std::move(groups));
    return true;
  }

private:
  std::shared_ptr<const Target> target_;
  MatmulChooser chooseMatmul_;
};

} // namespace

std::unique_ptr<Pass> createFuse(std::shared_ptr<const Target> target, MatmulChooser chooseMatmul) {
  return std::make_unique<Fuse>(std::move(target), std::move(chooseMatmul));
}

} // namespace weft::passes
