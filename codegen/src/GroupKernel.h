// What every fused kernel builder shares, for the CPU (Elementwise.cpp) and the GPU devices
// (SpirvKernels.cpp): the scalar computation of a group's leaves and nodes at one point, and the
// key a group's kernel is cached under. Included only by those files.
#pragma once

#include "CodegenSourceHash.h"
#include "KernelBody.h"
#include "weft/codegen/KernelCache.h"
#include "weft/ir/TextFormat.h"
#include "weft/passes/Fusion.h"

#include "llvm/Config/llvm-config.h"

#include <algorithm>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace weft::codegen {

using ir::ValueId;

/// Computes `grp`'s leaves and nodes but its column reductions into `values`, which holds the
/// inputs and view leaves they read; false where one reads a value it has not (a malformed group:
/// the kernel fails and the interpreter runs the graph, nothing throws).
inline bool computeNodes(mlir::OpBuilder& nb, mlir::Location loc, const ir::Graph& g,
                  const ir::FusionGroup& grp, std::map<ValueId, mlir::Value>& values) {
  BodyBuilder bb(nb, loc, g);
  std::vector<int32_t> order = grp.leaves; // leaves first: they read only inputs
  order.insert(order.end(), grp.nodes.begin(), grp.nodes.end());
  for (int32_t i : order) {
    const ir::Node& n = g.nodes()[static_cast<size_t>(i)];
    if (passes::isColumnReduction(g, n)) continue;
    if (passes::isViewLeaf(g, n)) {
      if (values.count(n.result) == 0) return false;
      continue;
    }
    std::vector<mlir::Value> in;
    for (ValueId o : n.operands) {
      auto it = values.find(o);
      if (it == values.end()) return false;
      in.push_back(it->second);
    }
    mlir::Value r = bb.node(n, in);
    if (!r) return false;
    values[n.result] = r;
  }
  return true;
}

/// What identifies a group's kernel without building it: the code generator (a hash of its
/// sources, CodegenSourceHash.h), LLVM's version, the target, and the group as codegen reads it:
/// its shape, its inputs' types, each leaf's and node's op, operands, attributes and result type
/// in the order codegen computes them, and its outputs with the inputs they are written over.
/// (Building and printing every group's MLIR only to key it took most of a warm compilation.)
inline std::string groupKey(const ir::Graph& g, const ir::FusionGroup& grp,
                            const std::string& target) {
  std::string key = "weft-codegen 3 " WEFT_CODEGEN_SOURCE_HASH "\nllvm " LLVM_VERSION_STRING
                    "\ntarget " +
                    target + "\nshape " + shapeString(grp.shape) + "\n";
  for (const Shape& part : grp.parts)
    key += "part " + shapeString(part) + "\n";
  auto type = [&](ValueId v) {
    return std::string(dtypeName(g.type(v).dtype)) + shapeString(g.type(v).shape);
  };
  std::map<ValueId, std::string> local; // a value's name inside the group
  auto ref = [&](ValueId v) {
    auto it = local.find(v);
    return it == local.end() ? std::string("?") : it->second; // "?": malformed, never lowers
  };
  for (size_t i = 0; i < grp.inputs.size(); ++i) {
    local[grp.inputs[i]] = "i" + std::to_string(i);
    key += "in " + type(grp.inputs[i]) + "\n";
  }
  std::vector<int32_t> order = grp.leaves;
  order.insert(order.end(), grp.nodes.begin(), grp.nodes.end());
  for (size_t j = 0; j < order.size(); ++j) {
    const ir::Node& n = g.nodes()[static_cast<size_t>(order[j])];
    key += (j < grp.leaves.size() ? "leaf " : "node ") + std::string(opName(n.op)) + "(";
    for (ValueId o : n.operands)
      key += ref(o) + ",";
    key += ")";
    for (const auto& [name, value] : n.attrs.items())
      key += " " + name + "=" + ir::printAttr(value);
    key += " : " + type(n.result) + "\n";
    local[n.result] = "v" + std::to_string(j);
  }
  for (size_t k = 0; k < grp.outputs.size(); ++k)
    key += "out " + ref(grp.outputs[k]) + " over " +
           std::to_string(k < grp.inPlace.size() ? grp.inPlace[k] : -1) + "\n";
  return key;
}

/// Each group's kernel key (groupKey for `target`) and symbol (its hash: groups computing the same
/// kernel share one), and the first group of each distinct kernel.
struct GroupKeys {
  std::vector<std::string> keys, symbols;
  std::vector<size_t> distinct;
};
inline GroupKeys keysOf(const ir::Graph& g, std::span<const ir::FusionGroup> groups,
                        const std::string& target) {
  GroupKeys k;
  for (const ir::FusionGroup& grp : groups) {
    k.keys.push_back(groupKey(g, grp, target));
    k.symbols.push_back("weft_" + hashHex(k.keys.back()));
    if (std::find(k.symbols.begin(), k.symbols.end() - 1, k.symbols.back()) == k.symbols.end() - 1)
      k.distinct.push_back(k.symbols.size() - 1);
  }
  return k;
}

/// Why a group's kernel could not be built from its nodes.
inline std::string cannotLower(const ir::Graph& g, const ir::FusionGroup& grp) {
  std::string ops;
  for (int32_t i : grp.nodes)
    ops += std::string(ops.empty() ? "" : ", ") +
           std::string(opName(g.nodes()[static_cast<size_t>(i)].op));
  return "its nodes (" + ops + ") hold an op, a value or a shape codegen cannot lower";
}

} // namespace weft::codegen
