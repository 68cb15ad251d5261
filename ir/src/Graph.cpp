// Building and editing graphs.
#include "weft/ir/Graph.h"

#include "weft/runtime/ByteWriter.h"

namespace weft::ir {

ValueId Graph::addArgument(const TensorType& type, std::string name) {
  values_.push_back({type, -1, std::move(name)});
  auto id = static_cast<ValueId>(values_.size() - 1);
  arguments_.push_back(id);
  return id;
}

ValueId Graph::addState(const TensorType& type, std::string name) {
  values_.push_back({type, -1, std::move(name)});
  auto id = static_cast<ValueId>(values_.size() - 1);
  state_.push_back(id);
  return id;
}

ValueId Graph::addNode(OpCode op, std::vector<ValueId> operands, Attrs attrs,
                       const TensorType& type, Location loc) {
  kernels_.clear();
  values_.push_back({type, static_cast<int32_t>(nodes_.size()), {}});
  auto id = static_cast<ValueId>(values_.size() - 1);
  nodes_.push_back({op, std::move(operands), std::move(attrs), id, std::move(loc)});
  return id;
}

std::vector<bool> Graph::returnedValues() const {
  std::vector<bool> returned(values_.size(), false);
  for (ValueId v : outputs_)
    returned[static_cast<size_t>(v)] = true;
  for (const StateUpdate& u : updates_)
    returned[static_cast<size_t>(u.newValue)] = true;
  return returned;
}

void Graph::replaceAllUses(ValueId from, ValueId to) {
  kernels_.clear();
  for (Node& n : nodes_)
    for (ValueId& v : n.operands)
      if (v == from) v = to;
  for (ValueId& v : outputs_)
    if (v == from) v = to;
  for (StateUpdate& u : updates_)
    if (u.newValue == from) u.newValue = to;
}

void Graph::eraseNodes(const std::vector<bool>& dead) {
  std::vector<int32_t> kept;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (dead[i])
      values_[static_cast<size_t>(nodes_[i].result)].producer = -2; // erased
    else
      kept.push_back(static_cast<int32_t>(i));
  }
  placeNodes(kept);
}

void Graph::reorderNodes(const std::vector<int32_t>& order) {
  placeNodes(order);
}

void Graph::placeNodes(const std::vector<int32_t>& order) {
  kernels_.clear();
  std::vector<Node> reordered;
  reordered.reserve(order.size());
  for (int32_t i : order)
    reordered.push_back(std::move(nodes_[static_cast<size_t>(i)]));
  nodes_ = std::move(reordered);
  for (size_t i = 0; i < nodes_.size(); ++i)
    values_[static_cast<size_t>(nodes_[i].result)].producer = static_cast<int32_t>(i);
}

std::vector<uint8_t> keyBytes(const Graph& g, bool locations) {
  ByteWriter w;
  w.bytes.reserve(64 * g.nodes().size() + 32 * g.values().size() + 256);
  w.str(g.name());
  auto type = [&](const TensorType& t) {
    w.pod(static_cast<uint8_t>(t.dtype));
    w.ints(t.shape);
  };
  w.u64(g.values().size());
  for (const Value& v : g.values()) {
    type(v.type);
    w.pod(v.producer);
    w.str(v.name);
  }
  w.u64(g.nodes().size());
  for (const Node& n : g.nodes()) {
    w.pod(static_cast<uint16_t>(n.op));
    w.slots(n.operands);
    w.attrs(n.attrs);
    w.pod(n.result);
    if (locations) {
      w.str(n.loc.file);
      w.pod(n.loc.line);
    }
  }
  w.slots(g.arguments());
  w.slots(g.state());
  w.slots(g.outputs());
  w.u64(g.stateUpdates().size());
  for (const StateUpdate& u : g.stateUpdates()) {
    w.pod(u.state);
    w.pod(u.newValue);
  }
  w.u64(g.kernels().size());
  for (const FusionGroup& k : g.kernels()) {
    w.slots(k.nodes);
    w.slots(k.leaves);
    w.slots(k.inputs);
    w.slots(k.outputs);
    w.ints(k.shape);
    w.slots(k.inPlace);
    w.u64(k.parts.size());
    for (const Shape& p : k.parts)
      w.ints(p);
  }
  return std::move(w.bytes);
}

} // namespace weft::ir
