// Rematerialization: an elementwise value that a later kernel reads across a heavy op (typically
// a value the forward computes and the backward reads, like GELU's intermediates) is recomputed
// inside that kernel from what is alive there anyway, where that keeps fewer bytes alive across
// the heavy ops than storing it. Runs after CSE (which would merge the copies again) and before
// fusion (which puts each copy into the kernel of its reader).
#include "weft/passes/Fusion.h"
#include "weft/passes/Pass.h"

#include <algorithm>
#include <climits>
#include <map>
#include <optional>

namespace weft::passes {
namespace {

using ir::ValueId;

/// At most this many nodes are recomputed for one value.
constexpr size_t kMaxCone = 16;

class Rematerialize : public Pass {
public:
  explicit Rematerialize(std::shared_ptr<const Target> target) : target_(std::move(target)) {}
  std::string_view name() const override { return "remat"; }
  ir::Result<bool> run(ir::Graph& g) override;

private:
  std::shared_ptr<const Target> target_;
};

/// What one value recomputed at its far readers needs: the nodes to copy (ascending) and the
/// values they read from outside.
struct Cone {
  std::vector<int32_t> nodes;
  std::vector<ValueId> anchors;
};

ir::Result<bool> Rematerialize::run(ir::Graph& g) {
  if (target_ == nullptr)
    return ir::Diagnostic{ErrorKind::Value,
                          "remat: no code generator's target to ask what a kernel computes"};
  const Target& target = *target_;
  const std::vector<ir::Node>& nodes = g.nodes();
  const size_t n = nodes.size();
  const size_t numValues = g.values().size();
  auto producer = [&](ValueId v) { return g.value(v).producer; };
  auto bytes = [&](ValueId v) { return valueBytes(g, v); };
  const std::vector<int32_t> heavy = heavyBefore(g);
  // Every position a value is read at; INT_MAX for outputs and state updates.
  std::vector<std::vector<int32_t>> usesOf(numValues);
  for (size_t i = 0; i < n; ++i)
    for (ValueId v : nodes[i].operands)
      if (usesOf[static_cast<size_t>(v)].empty() ||
          usesOf[static_cast<size_t>(v)].back() != static_cast<int32_t>(i))
        usesOf[static_cast<size_t>(v)].push_back(static_cast<int32_t>(i));
  for (ValueId v : g.outputs())
    usesOf[static_cast<size_t>(v)].push_back(INT_MAX);
  for (const ir::StateUpdate& u : g.stateUpdates())
    usesOf[static_cast<size_t>(u.newValue)].push_back(INT_MAX);

  // A far reader of v: an elementwise node of v's shape (so the copy fuses into its kernel) with
  // a heavy node between v's producer and it.
  auto isFarReader = [&](ValueId v, int32_t at) {
    int32_t p = producer(v);
    if (at == INT_MAX || p < 0) return false;
    const ir::Node& u = nodes[static_cast<size_t>(at)];
    return isElementwise(u.op) && target.computes(g, u) &&
           g.type(u.result).shape == g.type(v).shape &&
           heavy[static_cast<size_t>(at)] > heavy[static_cast<size_t>(p) + 1];
  };
  // Candidates: values of elementwise nodes with far readers and no other reader after the first
  // far one (or keeping the value stored would still be needed). `keptUntil` is where a
  // candidate's last remaining reader is; other values keep their last reader.
  std::vector<int32_t> keptUntil(numValues, -1);
  std::vector<std::vector<int32_t>> farUses(numValues);
  for (size_t v = 0; v < numValues; ++v) {
    const std::vector<int32_t>& uses = usesOf[v];
    keptUntil[v] = g.isInput(static_cast<ValueId>(v)) ? INT_MAX : (uses.empty() ? -1 : uses.back());
    int32_t p = producer(static_cast<ValueId>(v));
    if (p < 0 || !isElementwise(nodes[static_cast<size_t>(p)].op) ||
        !target.computes(g, nodes[static_cast<size_t>(p)]))
      continue;
    auto firstFar = std::find_if(uses.begin(), uses.end(), [&](int32_t at) {
      return isFarReader(static_cast<ValueId>(v), at);
    });
    if (firstFar == uses.end() || !std::all_of(firstFar, uses.end(), [&](int32_t at) {
          return isFarReader(static_cast<ValueId>(v), at);
        }))
      continue;
    farUses[v].assign(firstFar, uses.end());
    keptUntil[v] = firstFar == uses.begin() ? p : *(firstFar - 1);
  }

  // The cone of a candidate: its producer and the producers of what that reads, back to values
  // that are alive at the last far reader anyway, of another shape, or not elementwise. Scalar
  // constants and broadcasts are copied too (the kernel computes them inline). None if too big.
  auto coneOf = [&](size_t v) -> std::optional<Cone> {
    const int32_t last = farUses[v].back();
    const Shape& shape = g.type(static_cast<ValueId>(v)).shape;
    Cone cone;
    std::vector<bool> seen(numValues, false);
    std::vector<ValueId> stack{static_cast<ValueId>(v)};
    seen[v] = true;
    while (!stack.empty()) {
      ValueId x = stack.back();
      stack.pop_back();
      const int32_t p = producer(x);
      cone.nodes.push_back(p);
      if (cone.nodes.size() > kMaxCone) return std::nullopt;
      for (ValueId o : nodes[static_cast<size_t>(p)].operands) {
        if (seen[static_cast<size_t>(o)]) continue;
        seen[static_cast<size_t>(o)] = true;
        const int32_t q = producer(o);
        const ir::Node* def = q < 0 ? nullptr : &nodes[static_cast<size_t>(q)];
        bool copy = def != nullptr && target.computes(g, *def) &&
                    (def->op == OpCode::Full ||
                     (g.type(o).shape == shape && keptUntil[static_cast<size_t>(o)] < last &&
                      (isElementwise(def->op) || def->op == OpCode::Expand)));
        if (copy)
          stack.push_back(o);
        else
          cone.anchors.push_back(o);
      }
    }
    std::sort(cone.nodes.begin(), cone.nodes.end());
    return cone;
  };

  // Which candidates to recompute: a value whose copies read only what is alive there anyway
  // costs nothing; otherwise the copies keep some anchors alive longer (`ext`), worth it for a
  // set of anchors when the candidates needing no more than those stop keeping more bytes than
  // the anchors hold (GELU's three intermediates against its one input). Sets are tried largest
  // gain first; anchors kept for one set are free for the next. A candidate not chosen stays
  // stored until its last reader, which can make recomputing others free: a second round decides
  // the rest knowing that (layer norm's x - mean, from an x that stays anyway).
  std::map<ValueId, Cone> cones;
  std::vector<bool> kept(numValues, false); // anchors whose life the chosen copies extend
  std::vector<ValueId> chosenValues;
  std::vector<ValueId> open;
  for (size_t v = 0; v < numValues; ++v)
    if (!farUses[v].empty()) open.push_back(static_cast<ValueId>(v));
  for (int round = 0; round < 2 && !open.empty(); ++round) {
    std::vector<ValueId> ids;
    for (ValueId v : open)
      if (auto cone = coneOf(static_cast<size_t>(v))) {
        cones[v] = std::move(*cone);
        ids.push_back(v);
      }
    std::vector<std::vector<ValueId>> ext(ids.size());
    std::map<ValueId, std::vector<size_t>> withAnchor;
    for (size_t i = 0; i < ids.size(); ++i) {
      for (ValueId a : cones[ids[i]].anchors)
        if (keptUntil[static_cast<size_t>(a)] < farUses[static_cast<size_t>(ids[i])].back() &&
            !kept[static_cast<size_t>(a)])
          ext[i].push_back(a);
      std::sort(ext[i].begin(), ext[i].end());
      for (ValueId a : ext[i])
        withAnchor[a].push_back(i);
    }
    std::vector<bool> chosen(ids.size(), false);
    auto covered = [&](size_t i, const std::vector<ValueId>& set) {
      return std::all_of(ext[i].begin(), ext[i].end(), [&](ValueId a) {
        return kept[static_cast<size_t>(a)] || std::binary_search(set.begin(), set.end(), a);
      });
    };
    // The candidates a set of anchors would let go, and the bytes that saves.
    auto evaluate = [&](const std::vector<ValueId>& set, std::vector<size_t>* members) {
      int64_t gain = 0;
      for (ValueId a : set)
        if (!kept[static_cast<size_t>(a)]) gain -= bytes(a);
      std::vector<size_t> found;
      for (ValueId a : set)
        for (size_t i : withAnchor[a])
          if (!chosen[i] && covered(i, set) &&
              std::find(found.begin(), found.end(), i) == found.end()) {
            found.push_back(i);
            gain += bytes(ids[i]);
          }
      if (members != nullptr) *members = std::move(found);
      return gain;
    };
    for (size_t i = 0; i < ids.size(); ++i)
      chosen[i] = ext[i].empty();
    std::vector<std::vector<ValueId>> sets;
    for (size_t i = 0; i < ids.size(); ++i)
      if (!ext[i].empty() && std::find(sets.begin(), sets.end(), ext[i]) == sets.end())
        sets.push_back(ext[i]);
    std::vector<std::pair<int64_t, size_t>> byGain;
    for (size_t k = 0; k < sets.size(); ++k)
      byGain.emplace_back(-evaluate(sets[k], nullptr), k);
    std::sort(byGain.begin(), byGain.end());
    for (const auto& [negGain, k] : byGain) {
      std::vector<size_t> members;
      if (evaluate(sets[k], &members) <= 0) continue;
      for (size_t i : members)
        chosen[i] = true;
      for (ValueId a : sets[k])
        kept[static_cast<size_t>(a)] = true;
    }
    open.clear();
    for (size_t i = 0; i < ids.size(); ++i) {
      if (chosen[i]) {
        chosenValues.push_back(ids[i]);
        continue;
      }
      // Stays stored to its last reader; decided again next round.
      keptUntil[static_cast<size_t>(ids[i])] = usesOf[static_cast<size_t>(ids[i])].back();
      open.push_back(ids[i]);
    }
  }

  // Copy each chosen cone before its far readers, in the order they run; readers with no heavy
  // node between them share one copy (they end up in one kernel).
  std::vector<std::pair<int32_t, ValueId>> readers; // (position, value read)
  for (ValueId v : chosenValues)
    for (int32_t at : farUses[static_cast<size_t>(v)])
      readers.emplace_back(at, v);
  std::sort(readers.begin(), readers.end());
  // Copies are made of the nodes as they were: readers are rewritten to read copies as we go,
  // and a cone node can itself be such a reader (x - mean reads x, copied before it).
  const std::vector<ir::Node> original = g.nodes();
  std::vector<std::vector<int32_t>> insertBefore(n);
  std::map<std::pair<ValueId, int32_t>, ValueId> copies; // (value, heavyBefore) -> copy
  for (const auto& [at, v] : readers) {
    const int32_t stretch = heavy[static_cast<size_t>(at)];
    for (int32_t p : cones[v].nodes) {
      const ir::Node& node = original[static_cast<size_t>(p)];
      if (copies.count({node.result, stretch})) continue;
      std::vector<ValueId> operands = node.operands;
      for (ValueId& o : operands)
        if (auto it = copies.find({o, stretch}); it != copies.end()) o = it->second;
      ValueId copy =
          g.addNode(node.op, std::move(operands), node.attrs, g.type(node.result), node.loc);
      insertBefore[static_cast<size_t>(at)].push_back(producer(copy));
      copies[{node.result, stretch}] = copy;
    }
    for (ValueId& o : g.mutableNodes()[static_cast<size_t>(at)].operands)
      if (o == v) o = copies.at({v, stretch});
  }
  if (readers.empty()) return false;
  std::vector<int32_t> order;
  for (size_t i = 0; i < n; ++i) {
    order.insert(order.end(), insertBefore[i].begin(), insertBefore[i].end());
    order.push_back(static_cast<int32_t>(i));
  }
  g.reorderNodes(order);
  return true;
}

} // namespace

std::unique_ptr<Pass> createRematerialize(std::shared_ptr<const Target> target) {
  return std::make_unique<Rematerialize>(std::move(target));
}

} // namespace weft::passes
