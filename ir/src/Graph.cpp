// Building and editing graphs.
#include "weft/ir/Graph.h"

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

} // namespace weft::ir
