// Constant folding: ops whose operands are all `full` constants become `full` constants, computed
// by the same CPU kernels the program would run (so folding never changes a result).
#include "weft/passes/Pass.h"

#include "weft/runtime/Kernels.h"
#include "weft/runtime/View.h"

#include <variant>

namespace weft::passes {
namespace {

/// Ops whose result is uniform when every input is: elementwise ops and movement ops.
bool foldable(OpCode op) {
  return isElementwise(op) || isViewOp(op) || opInfo(op).kind == OpKind::Flip;
}

/// One element holding `value` in `dtype`, as a Full kernel would write it.
struct Scalar1 {
  alignas(8) unsigned char bytes[8] = {};
  TensorRef ref(DType t) { return TensorRef{bytes, t, {}, {}}; }
};

class ConstantFolding : public Pass {
public:
  std::string_view name() const override { return "fold"; }
  ir::Result<bool> run(ir::Graph& g) override {
    bool changed = false;
    for (ir::Node& n : g.mutableNodes()) {
      if (!foldable(n.op) || n.operands.empty()) continue;
      std::vector<Scalar1> in(n.operands.size());
      std::vector<TensorRef> refs;
      bool allConstant = true;
      for (size_t k = 0; k < n.operands.size() && allConstant; ++k) {
        const ir::Value& v = g.value(n.operands[k]);
        if (v.producer < 0 || g.nodes()[static_cast<size_t>(v.producer)].op != OpCode::Full) {
          allConstant = false;
          break;
        }
        const Attrs& at = g.nodes()[static_cast<size_t>(v.producer)].attrs;
        refs.push_back(in[k].ref(v.type.dtype));
        runKernel(OpCode::Full, {}, refs.back(), at);
      }
      if (!allConstant) continue;
      const ir::TensorType& type = g.type(n.result);
      Scalar1 out;
      TensorRef o = out.ref(type.dtype);
      if (opInfo(n.op).kind == OpKind::Unary || opInfo(n.op).kind == OpKind::Binary ||
          n.op == OpCode::Where || n.op == OpCode::Cast) {
        try { // a kernel that rejects its values (an integer fmod by 0) raises when the graph runs
          runKernel(n.op, refs, o, n.op == OpCode::Cast ? n.attrs : Attrs{});
        } catch (const Error&) {
          continue;
        }
      } else {
        copyCast(refs[0], o); // movement ops and stop_gradient move the one value around
      }
      // The folded value, kept exactly: integers as int64, everything else as double.
      AttrValue value;
      if (isFloating(type.dtype) || type.dtype == DType::Bool) {
        double d = 0;
        copyCast(o, TensorRef{&d, DType::Float64, {}, {}});
        value = d;
      } else {
        int64_t i = 0;
        copyCast(o, TensorRef{&i, DType::Int64, {}, {}});
        value = i;
      }
      n.op = OpCode::Full;
      n.operands.clear();
      n.attrs = Attrs{{"shape", type.shape}, {"dtype", type.dtype}, {"value", value}};
      changed = true;
    }
    return changed;
  }
};

} // namespace

std::unique_ptr<Pass> createConstantFolding() {
  return std::make_unique<ConstantFolding>();
}

} // namespace weft::passes
