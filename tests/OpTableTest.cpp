// Tests generated from the op table: every primitive's forward against a double-precision
// reference, in every dtype it accepts; gradients against central differences; double backward.
#include "OpSamples.h"
#include "TestUtil.h"

#include "weft/ir/Lower.h"
#include "weft/ir/ShapeInference.h"
#include "weft/ir/TextFormat.h"
#include "weft/ir/Verifier.h"
#include "weft/passes/Autodiff.h"
#include "weft/runtime/Interpreter.h"
#include "weft/runtime/Kernels.h"

namespace weft::test {
namespace {

class OpTable : public ::testing::TestWithParam<int> {
protected:
  OpCode op() const { return static_cast<OpCode>(GetParam()); }
};

std::string opParamName(const ::testing::TestParamInfo<int>& info) {
  return std::string(opName(static_cast<OpCode>(info.param)));
}

std::vector<Tensor> convertFloating(const std::vector<Tensor>& in, DType t) {
  std::vector<Tensor> out;
  for (const Tensor& x : in)
    out.push_back(x.is_floating_point() ? x.to(t) : x);
  return out;
}

bool isExactOp(OpKind k) {
  return k == OpKind::ArgReduce || k == OpKind::ArgScan || k == OpKind::Sort || k == OpKind::Pool;
}

/// Float32 tolerance: elementwise results are within a few ulps (1e-6 relative); reductions,
/// contractions and convolutions sum up to ~100 terms of O(1), so allow 1e-4 absolute.
double float32Tolerance(OpKind k) {
  switch (k) {
  case OpKind::Reduce:
  case OpKind::Scan:
  case OpKind::Normalize:
  case OpKind::MatMul:
  case OpKind::Conv:
  case OpKind::ConvInputGrad:
  case OpKind::ConvWeightGrad:
  case OpKind::Scatter:
  case OpKind::IndexAdd:
    return 1e-4;
  default:
    return 1e-5;
  }
}

TEST(OpTableCoverage, EveryOpHasSamples) {
  for (int i = 0; i < kNumOps; ++i)
    EXPECT_FALSE(samplesFor(static_cast<OpCode>(i)).empty())
        << opName(static_cast<OpCode>(i)) << " has no test sample";
}

TEST(OpTableCoverage, NamesRoundTrip) {
  for (int i = 0; i < kNumOps; ++i) {
    auto op = static_cast<OpCode>(i);
    ASSERT_TRUE(opFromName(opName(op)).has_value());
    EXPECT_EQ(*opFromName(opName(op)), op);
  }
  EXPECT_FALSE(opFromName("no_such_op").has_value());
}

TEST_P(OpTable, ForwardMatchesDoubleReference) {
  const OpKind kind = opInfo(op()).kind;
  for (const OpSample& s : samplesFor(op())) {
    SCOPED_TRACE(s.label);
    for (DType t : {kFloat32, kFloat64}) {
      SCOPED_TRACE(dtypeName(t));
      Attrs at = s.attrs;
      if (at.has("dtype") && opInfo(op()).kind == OpKind::Random) at.set("dtype", t);
      Tensor out = dispatch(op(), s.prepared(convertFloating(s.inputs, t)), at);
      if (s.check) {
        EXPECT_TRUE(s.check(out));
        continue;
      }
      std::vector<NdArray> ref;
      for (const Tensor& x : s.prepared(s.inputs))
        ref.push_back(toNd(x.contiguous()));
      NdArray want = s.reference(ref, s.attrs);
      EXPECT_EQ(out.sizes(), want.shape);
      double tol = isExactOp(kind) ? 0 : t == kFloat64 ? 1e-10 : float32Tolerance(kind);
      EXPECT_TRUE(allClose(out.to_vector<double>(), want.v, tol, tol));
    }
  }
}

/// Every dtype the op's shape inference accepts must run and agree with the reference computed on
/// the same (converted) values. 16-bit floats round to ~3 significant digits: 2e-2 relative.
TEST_P(OpTable, EveryAcceptedDtypeMatchesReference) {
  const OpKind kind = opInfo(op()).kind;
  if (kind == OpKind::Random || op() == OpCode::Prod || op() == OpCode::CumProd)
    GTEST_SKIP() << "covered by the float tests (random moments; integer products overflow)";
  for (const OpSample& s : samplesFor(op())) {
    SCOPED_TRACE(s.label);
    for (DType t : {kFloat16, kBFloat16, kInt32, kInt64, kUInt8, kBool}) {
      SCOPED_TRACE(dtypeName(t));
      // ~ on bool is logical not, which an int64 reference cannot tell (MethodTest checks it).
      if (op() == OpCode::BitwiseNot && t == kBool) continue;
      std::vector<Tensor> in;
      for (const Tensor& x : s.inputs) {
        if (integralOnly(op()) && !isFloating(t)) { // the int64 samples, wrapped to t
          in.push_back(x.to(t));
          continue;
        }
        if (!x.is_floating_point()) {
          in.push_back(x);
          continue;
        }
        // Integers get small non-negative values, so uint8 and sums stay exact.
        in.push_back(isFloating(t) ? x.to(t) : (x * 3).abs().floor().to(t));
      }
      std::vector<Tensor> prepared = s.prepared(in);
      std::vector<ir::TensorType> types;
      for (const Tensor& x : prepared)
        types.push_back({x.dtype(), x.sizes()});
      if (!ir::inferType(op(), types, s.attrs))
        continue; // the op does not take this dtype; the error tests cover the message
      Tensor out = dispatch(op(), prepared, s.attrs);
      std::vector<NdArray> ref;
      for (const Tensor& x : prepared)
        ref.push_back(toNd(x.contiguous()));
      NdArray want = s.reference(ref, s.attrs);
      Tensor wantT =
          from_vector(want.v, want.shape).to(out.dtype()); // the reference rounded like the output
      double tol = (t == kFloat16 || t == kBFloat16) && !isExactOp(kind) ? 2e-2 : 0;
      EXPECT_TRUE(allClose(out.to_vector<double>(), wantT.to_vector<double>(), tol, tol));
    }
  }
}

/// Runs `check` on a function calling the op, for every sample finite differences make sense for.
template <typename Check> void forDifferentiableSamples(OpCode o, Check check) {
  for (const OpSample& s : samplesFor(o)) {
    if (!s.gradcheck) continue;
    SCOPED_TRACE(s.label);
    Fn f = [&s, o](const std::vector<Tensor>& in) { return dispatch(o, s.prepared(in), s.attrs); };
    EXPECT_TRUE(check(f, s.inputs));
  }
}

TEST_P(OpTable, GradientMatchesFiniteDifferences) {
  if (!opInfo(op()).differentiable) GTEST_SKIP() << opName(op()) << " is not differentiable";
  forDifferentiableSamples(
      op(), [](const Fn& f, const std::vector<Tensor>& in) { return gradcheck(f, in); });
}

TEST_P(OpTable, DoubleBackwardMatchesFiniteDifferences) {
  const OpKind kind = opInfo(op()).kind;
  if (!opInfo(op()).differentiable ||
      (kind != OpKind::Unary && kind != OpKind::Binary && kind != OpKind::MatMul))
    GTEST_SKIP() << "double backward is checked for elementwise ops and matmul";
  forDifferentiableSamples(
      op(), [](const Fn& f, const std::vector<Tensor>& in) { return gradgradcheck(f, in); });
}

/// A graph whose arguments are `in` (passed to the interpreter as they are, strides included).
struct ArgGraph {
  ir::Graph graph{"test"};
  std::vector<ir::ValueId> args;
  std::vector<Buffer> buffers;
  explicit ArgGraph(const std::vector<Tensor>& in) {
    for (size_t i = 0; i < in.size(); ++i)
      add(in[i], "a" + std::to_string(i));
  }
  ir::ValueId add(const Tensor& t, const std::string& name) {
    args.push_back(graph.addArgument({t.dtype(), t.sizes()}, name));
    buffers.push_back(Buffer{t.impl()->storage, t.ref()});
    return args.back();
  }
  /// Runs the graph; returns its outputs as contiguous tensors.
  std::vector<Tensor> run() {
    std::vector<Tensor> results;
    for (const Buffer& b : runPlan(hal::cpu(), ir::lowerToPlan(graph), buffers, {})) {
      Buffer c =
          allocateBuffer(hal::cpu(), b.ref.shape, b.ref.dtype); // outputs may be strided views
      copyCast(b.ref, c.ref);
      results.push_back(from_blob(c.ref.data, c.ref.shape, c.ref.dtype).clone());
    }
    return results;
  }
};

/// A one-node graph of the op, lowered and run by the interpreter, gives exactly what eager gives
/// (the same kernels run on the same values).
TEST_P(OpTable, InterpretedGraphEqualsEager) {
  for (const OpSample& s : samplesFor(op())) {
    SCOPED_TRACE(s.label);
    std::vector<Tensor> in = s.prepared(convertFloating(s.inputs, kFloat32));
    Tensor eager = dispatch(op(), in, s.attrs);
    ArgGraph g(in);
    g.graph.addOutput(g.graph.addNode(op(), g.args, s.attrs, {eager.dtype(), eager.sizes()}));
    ASSERT_TRUE(ir::verify(g.graph).empty()) << ir::printGraph(g.graph);
    std::vector<Tensor> out = g.run();
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].to_vector<double>(), eager.to_vector<double>()); // bit-identical
  }
}

/// Graph autodiff (the autodiff pass, run by the interpreter) gives the gradients eager autograd
/// gives: both apply the same rules with the same kernels, in float64.
TEST_P(OpTable, GraphAutodiffEqualsEagerAutograd) {
  if (!opInfo(op()).differentiable) GTEST_SKIP() << opName(op()) << " is not differentiable";
  for (const OpSample& s : samplesFor(op())) {
    if (!s.gradcheck) continue;
    SCOPED_TRACE(s.label);
    // The op's inputs as contiguous float64 leaves; weights w make the loss sum(y * w).
    std::vector<Tensor> in;
    for (const Tensor& t : s.prepared(s.inputs))
      in.push_back(t.is_floating_point() ? t.contiguous().detach().clone().requires_grad_()
                                         : t.contiguous());
    Tensor y = dispatch(op(), in, s.attrs);
    Tensor w = randn(y.sizes(), y.dtype(), Generator(5));
    (y * w).sum().backward();

    ArgGraph g(in);
    std::vector<ir::ValueId> wrt;
    for (size_t i = 0; i < in.size(); ++i)
      if (in[i].is_floating_point()) wrt.push_back(g.args[i]);
    ir::ValueId wv = g.add(w, "w");
    ir::ValueId yv =
        g.graph.addNode(op(), std::vector<ir::ValueId>(g.args.begin(), g.args.end() - 1), s.attrs,
                        {y.dtype(), y.sizes()});
    ir::ValueId prod = g.graph.addNode(OpCode::Mul, {yv, wv}, {}, {y.dtype(), y.sizes()});
    ir::ValueId loss = g.graph.addNode(
        OpCode::Sum, {prod}, Attrs{{"dims", Shape{}}, {"keepdim", false}}, {y.dtype(), {}});
    auto grads = passes::appendGradients(g.graph, loss, wrt);
    ASSERT_TRUE(static_cast<bool>(grads)) << grads.diagnostic().message;
    for (ir::ValueId v : grads.value()) {
      ASSERT_NE(v, ir::kNoValue);
      g.graph.addOutput(v);
    }
    auto problems = ir::verify(g.graph);
    ASSERT_TRUE(problems.empty()) << problems[0].message << "\n" << ir::printGraph(g.graph);
    std::vector<Tensor> out = g.run();
    size_t k = 0;
    for (const Tensor& t : in)
      if (t.is_floating_point()) {
        SCOPED_TRACE("input " + std::to_string(k));
        EXPECT_TRUE(
            allClose(out[k++].to_vector<double>(), t.grad().to_vector<double>(), 1e-12, 1e-12));
      }
  }
}

INSTANTIATE_TEST_SUITE_P(AllOps, OpTable, ::testing::Range(0, kNumOps), opParamName);

} // namespace
} // namespace weft::test
