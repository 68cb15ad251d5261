// The split-sums pass: a sum over every dim but the last of a value of rank 3 or more (a bias's or
// a norm weight's gradient over [B, T, C] activations) becomes a sum over the middle dims, which
// the kernel computing the value adds up as it writes it (isColumnReduction: [B, T, C] ->
// [B, 1, C]), and a small sum of those over dim 0.
#include "Rewrite.h"
#include "weft/passes/Fusion.h"
#include "weft/passes/Pass.h"

#include <map>

namespace weft::passes {
namespace {

/// Whether `n` sums a value an elementwise node computes over every dim but the last, in a way
/// the split serves: float, rank 3 or more, dim 0 and the middle dims each of 2 or more elements.
bool splits(const ir::Graph& g, const ir::Node& n) {
  if (n.operands.size() != 1) return false;
  const Shape& in = g.type(n.operands[0]).shape;
  const auto rank = static_cast<int64_t>(in.size());
  const int32_t p = g.value(n.operands[0]).producer;
  if (rank < 3 || !isSumOver(g, n, 0, rank - 1) || p < 0 ||
      !isElementwise(g.nodes()[static_cast<size_t>(p)].op))
    return false;
  // Each partial sum adds at most kMaxColumnRows rows in the element type, as the eager sum adds
  // a block; past that the sum stays whole. (The totals then add dim 0's partials in the element
  // type, where eager adds its blocks in double: the two differ in the last bits.)
  if (in.front() < 2 || in.back() < 1) return false;
  const int64_t middle = numel(in) / (in.front() * in.back());
  return middle >= 2 && middle <= kMaxColumnRows;
}

class SplitSums : public Pass {
public:
  std::string_view name() const override { return "split-sums"; }
  ir::Result<bool> run(ir::Graph& g) override {
    std::vector<size_t> todo;
    for (size_t i = 0; i < g.nodes().size(); ++i)
      if (splits(g, g.nodes()[i])) todo.push_back(i);
    if (todo.empty()) return false;
    const size_t before = g.nodes().size();
    // Per node: the sums whose partial sums go before it, and whose totals go before it (right
    // before their first reader: a total stood between the kernel's nodes would split it).
    std::vector<std::vector<int32_t>> partialsAt(before + 1), totalsAt(before + 1);
    std::map<ir::ValueId, ir::ValueId> partialOf; // per summed value: its partial sums
    for (size_t i : todo) {
      const ir::Node n = g.nodes()[i]; // addNode may move the nodes
      const ir::TensorType in = g.type(n.operands[0]);
      auto [it, added] = partialOf.try_emplace(n.operands[0], ir::ValueId{});
      if (added) {
        Shape middle;
        for (size_t d = 1; d + 1 < in.shape.size(); ++d)
          middle.push_back(static_cast<int64_t>(d));
        partialsAt[i].push_back(static_cast<int32_t>(g.nodes().size()));
        it->second = g.addNode(OpCode::Sum, {n.operands[0]},
                               Attrs().set("dims", middle).set("keepdim", true),
                               {in.dtype, columnSumShape(in.shape)}, n.loc);
      }
      size_t reader = before;
      for (size_t j = i + 1; j < before && reader == before; ++j)
        for (ir::ValueId o : g.nodes()[j].operands)
          if (o == n.result) reader = j;
      totalsAt[reader].push_back(static_cast<int32_t>(g.nodes().size()));
      g.replaceAllUses(n.result,
                       g.addNode(OpCode::Sum, {it->second}, n.attrs, g.type(n.result), n.loc));
    }
    // The sums split are dropped.
    std::vector<bool> split(before, false);
    for (size_t i : todo)
      split[i] = true;
    for (size_t i = 0; i <= before; ++i)
      partialsAt[i].insert(partialsAt[i].end(), totalsAt[i].begin(), totalsAt[i].end());
    placeAppended(g, before, partialsAt, split);
    return true;
  }
};

} // namespace

std::unique_ptr<Pass> createSplitSums() {
  return std::make_unique<SplitSums>();
}

} // namespace weft::passes
