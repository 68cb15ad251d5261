// Fusion: which elementwise nodes one generated loop nest computes.
#pragma once

#include "weft/ir/Lower.h"
#include "weft/passes/Pass.h"
#include "weft/passes/Target.h"

#include <optional>
#include <vector>

namespace weft::passes {

/// Whether `op` is one no elementwise kernel can contain (a reduction, matmul, gather...): a value
/// read across one is stored between kernels. Elementwise ops, views, constants and broadcasts
/// are not.
bool isHeavy(OpCode op);
/// Per position i in g's nodes (and one past the end): how many heavy nodes come before it. Two
/// positions with the same count have only light nodes between them. With `kernelReductions`
/// false, the reductions a kernel can contain (isRowReduction, isColumnReduction) are not counted.
std::vector<int32_t> heavyBefore(const ir::Graph& g, bool kernelReductions = true);
/// The bytes value `v` takes (its type's elements times their size).
inline int64_t valueBytes(const ir::Graph& g, ir::ValueId v) {
  const ir::TensorType& t = g.type(v);
  return numel(t.shape) * static_cast<int64_t>(elementSize(t.dtype));
}

/// A reduction a generated kernel computes row by row: sum, amax or amin of a float32/float64
/// value of rank 2 or more over its last dim (of more than one element), the dim kept.
bool isRowReduction(const ir::Graph& g, const ir::Node& n);

/// Whether `n` sums a float32/float64 value into its dtype over exactly dims [from, to) of it (in
/// any order, negative or not; the dims kept or not).
bool isSumOver(const ir::Graph& g, const ir::Node& n, int64_t from, int64_t to);

/// Rows a column kernel adds into one sum, in order in the element type: as many as the eager sum
/// adds before it switches to double.
inline constexpr int64_t kMaxColumnRows = 1024;

/// A reduction a generated kernel computes along its columns: sum of a float32/float64 value of
/// rank 3 or more over every dim but its first and last, the dims kept, 2 to kMaxColumnRows rows
/// summed ([B, T, C] -> [B, 1, C]; the split-sums pass makes a bias's or a norm weight's gradient,
/// a sum over all dims but the last, one of these and a small sum over dim 0).
bool isColumnReduction(const ir::Graph& g, const ir::Node& n);
/// What a column reduction of a value of shape `in` (rank 2 or more) keeps: [in[0], 1, ..., 1,
/// in[-1]].
Shape columnSumShape(const Shape& in);

/// Whether a group computes column reductions (a column kernel: each index of dim 0, which the
/// threads split, sums its rows into its row of each sum as it computes them).
bool isColumnKernel(const ir::Graph& g, const ir::FusionGroup& grp);

/// Whether a group computes row reductions (a row kernel: its shape is that of the rows it
/// reduces; its other nodes have that shape or the reduced one, the last dim 1, but its column
/// sums, [B, 1, C], which it adds up in its last pass).
bool isRowKernel(const ir::Graph& g, const ir::FusionGroup& grp);

/// Per node of `grp` (in the order of grp.nodes), its stage: 0 for a node reading only inputs and
/// stage-0 values, one more than its operand's for a row reduction, else its operands' latest. A
/// row kernel passes over each row once per stage: pass s computes the full-shape values of stage
/// s that are stored or reduced there; the reductions of stage s + 1 are known after it; the last
/// pass also adds up the column sums. All 0 in a group without reductions.
std::vector<int32_t> rowStages(const ir::Graph& g, const ir::FusionGroup& grp);

/// The last pass a row kernel makes over its rows (`stages` from rowStages): the latest stage of
/// its full-shape values (each reduction's operand is one of them, or an input).
int32_t lastRowPass(const ir::Graph& g, const ir::FusionGroup& grp,
                    const std::vector<int32_t>& stages);

/// Whether `n` is a view a kernel reads through (a permute, slice or flip of one value): as a
/// leaf of a group, the kernel reads the operand's row-major memory at the view's strides and
/// offset instead of a copy of the view.
bool isViewLeaf(const ir::Graph& g, const ir::Node& n);

/// Whether `n` is a matmul a generated GEMM computes: float32, [..., M, K] (its rows folded into
/// one M) by [K, N], K and the result not empty.
bool isGemm(const ir::Graph& g, const ir::Node& n);

/// Where a matmul kernel reads its B from: a group input [K, N], or a group input [N, K] through a
/// leaf of the group that transposes it (`leaf`, a permute with dims [1, 0]: x @ w.t(), as linear
/// layers multiply).
struct MatmulB {
  ir::ValueId input;
  int32_t leaf = -1;
};
std::optional<MatmulB> matmulB(const ir::Graph& g, const ir::FusionGroup& grp, ir::ValueId b);

/// The matmul a matmul kernel computes first: the group's first node, a GEMM (isGemm) of an input
/// by a B (matmulB) of the group's shape; its other nodes are elementwise over that shape (the
/// epilogue), its outputs are its nodes' values, and it writes over neither operand. Null for any
/// other group.
const ir::Node* matmulRoot(const ir::Graph& g, const ir::FusionGroup& grp);

/// Groups of elementwise nodes (unary, binary, where, cast, stop_gradient) of one result shape and
/// fusible dtypes, with scalar constants, broadcasts and views (isViewLeaf) of values computed
/// outside inlined as leaves; a row reduction joins the group of its operand's shape, which then
/// also takes elementwise nodes of the reduced shape (a row kernel: layer norm, a softmax's
/// backward). A node joins the groups of its operands' producers, merging them into one, when each
/// value any of them reads from outside is an input or computed before the earliest of them starts,
/// so the group can run as one step there (else it joins one group where that holds, or starts its
/// own), and no heavy node lies between where they start and the node (which would then be stored
/// across it: the remat pass moved it there on purpose). A group computes all its values where it
/// runs. Groups of one node are left out, unless the node reads a constant of more than one element
/// (the kernel computes it instead of reading a filled buffer).
///
/// A column reduction (isColumnReduction) joins the group computing its operand where it can run
/// there (a row kernel adds it up in its last pass over each row); nothing of the group reads its
/// result.
///
/// With `chooseMatmul`, a GEMM (isGemm) whose result a group of its shape (not a row or column
/// kernel) reads becomes that group's first node where `chooseMatmul` says so: a generated GEMM
/// with the group as its epilogue, running where the matmul stood. Only when everything else the
/// group reads is computed before the matmul, the operands are not views (they would be copied), B
/// is a value or the transpose of one that only the matmul reads (the group computes it as a leaf),
/// and where heavy nodes lie between them, the group's outputs (the matmul's value among them, if
/// anything else reads it) take no more bytes than the matmul's value they replace across them. A
/// GEMM that leads no group runs as a kernel of its own where `chooseMatmul` says so (the same
/// conditions on its operands), unless a permute is its only reader (the interpreter's GEMM
/// writes the permuted layout, so the permute is a view).
/// Everything a kernel may hold is what `target` says its code generator computes
/// (Target::computes, reducesInKernels, generatesGemm, readsViews).
std::vector<ir::FusionGroup> findElementwiseGroups(const ir::Graph& g, const Target& target,
                                                   const MatmulChooser& chooseMatmul = {});

} // namespace weft::passes
