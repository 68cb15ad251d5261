// Tests generated from the op table: every primitive's forward against a double-precision
// reference, in every dtype it accepts; gradients against central differences; double backward.
#include "OpSamples.h"
#include "TestUtil.h"

#include "weft/ir/Lower.h"
#include "weft/passes/Autodiff.h"
#include "weft/ir/ShapeInference.h"
#include "weft/ir/TextFormat.h"
#include "weft/ir/Verifier.h"
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

bool isExactOp(OpKind k) { return k == OpKind::ArgReduce || k == OpKind::Sort || k == OpKind::Pool; }

/// Float32 tolerance: elementwise results are within a few ulps (1e-6 relative); reductions,
/// contractions and convolutions sum up to ~100 terms of O(1), so allow 1e-4 absolute.
double float32Tolerance(OpKind k) {
  switch (k) {
  case OpKind::Reduce: case OpKind::Scan: case OpKind::MatMul: case OpKind::Conv: case OpKind::ConvInputGrad:
  case OpKind::ConvWeightGrad: case OpKind::Scatter: case OpKind::IndexAdd:
    return 1e-4;
  default:
    return 1e-5;
  }
}

TEST(OpTableCoverage, EveryOpHasSamples) {
  for (int i = 0; i < kNumOps; ++i)
    EXPECT_FALSE(samplesFor(static_cast<OpCode>(i)).empty()) << opName(static_cast<OpCode>(i)) << " has no test sample";
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
      if (at.has("dtype") && opInfo(op()).kind == OpKind::Random)
        at.set("dtype", t);
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
  if (kind == OpKind::Random || op() == OpCode::Prod)
    GTEST_SKIP() << "covered by the float tests (random moments; integer products overflow)";
  for (const OpSample& s : samplesFor(op())) {
    SCOPED_TRACE(s.label);
    for (DType t : {kFloat16, kBFloat16, kInt32, kInt64, kUInt8, kBool}) {
      SCOPED_TRACE(dtypeName(t));
      std::vector<Tensor> in;
      for (const Tensor& x : s.inputs) {
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
      Tensor wantT = from_vector(want.v, want.shape).to(out.dtype()); // the reference rounded like the output
      double tol = (t == kFloat16 || t == kBFloat16) && !isExactOp(kind) ? 2e-2 : 0;
      EXPECT_TRUE(allClose(out.to_vector<double>(), wantT.to_vector<double>(), tol, tol));
    }
  }
}

TEST_P(OpTable, GradientMatchesFiniteDifferences) {
  if (!opInfo(op()).differentiable)
    GTEST_SKIP() << opName(op()) << " is not differentiable";
  for (const OpSample& s : samplesFor(op())) {
    if (!s.gradcheck)
      continue;
    SCOPED_TRACE(s.label);
    OpCode o = op();
    Fn f = [&s, o](const std::vector<Tensor>& in) { return dispatch(o, s.prepared(in), s.attrs); };
    EXPECT_TRUE(gradcheck(f, s.inputs));
  }
}

TEST_P(OpTable, DoubleBackwardMatchesFiniteDifferences) {
  const OpKind kind = opInfo(op()).kind;
  if (!opInfo(op()).differentiable || (kind != OpKind::Unary && kind != OpKind::Binary && kind != OpKind::MatMul))
    GTEST_SKIP() << "double backward is checked for elementwise ops and matmul";
  for (const OpSample& s : samplesFor(op())) {
    if (!s.gradcheck)
      continue;
    SCOPED_TRACE(s.label);
    OpCode o = op();
    Fn f = [&s, o](const std::vector<Tensor>& in) { return dispatch(o, s.prepared(in), s.attrs); };
    EXPECT_TRUE(gradgradcheck(f, s.inputs));
  }
}

/// A one-node graph of the op, lowered and run by the interpreter, gives exactly what eager gives
/// (the same kernels run on the same values).
TEST_P(OpTable, InterpretedGraphEqualsEager) {
  for (const OpSample& s : samplesFor(op())) {
    SCOPED_TRACE(s.label);
    std::vector<Tensor> in = s.prepared(convertFloating(s.inputs, kFloat32));
    Tensor eager = dispatch(op(), in, s.attrs);
    ir::Graph g("one_op");
    std::vector<ir::ValueId> args;
    std::vector<Buffer> buffers;
    for (size_t i = 0; i < in.size(); ++i) {
      args.push_back(g.addArgument({in[i].dtype(), in[i].sizes()}, "a" + std::to_string(i)));
      buffers.push_back(Buffer{in[i].impl()->storage, in[i].ref()}); // strided inputs as they are
    }
    g.addOutput(g.addNode(op(), args, s.attrs, {eager.dtype(), eager.sizes()}));
    ASSERT_TRUE(ir::verify(g).empty()) << ir::printGraph(g);
    std::vector<Buffer> out = runPlan(ir::lowerToPlan(g), buffers, {});
    ASSERT_EQ(out.size(), 1u);
    Buffer c = allocateBuffer(out[0].ref.shape, out[0].ref.dtype); // outputs may be strided views
    copyCast(out[0].ref, c.ref);
    Tensor got = from_blob(c.ref.data, c.ref.shape, eager.dtype());
    EXPECT_EQ(got.to_vector<double>(), eager.to_vector<double>()); // bit-identical
  }
}

/// Graph autodiff (the autodiff pass, run by the interpreter) gives the gradients eager autograd
/// gives: both apply the same rules with the same kernels, in float64.
TEST_P(OpTable, GraphAutodiffEqualsEagerAutograd) {
  if (!opInfo(op()).differentiable)
    GTEST_SKIP() << opName(op()) << " is not differentiable";
  for (const OpSample& s : samplesFor(op())) {
    if (!s.gradcheck)
      continue;
    SCOPED_TRACE(s.label);
    // The op's inputs as contiguous float64 leaves; weights w make the loss sum(y * w).
    std::vector<Tensor> in;
    for (const Tensor& t : s.prepared(s.inputs))
      in.push_back(t.is_floating_point() ? t.contiguous().detach().clone().requires_grad_() : t.contiguous());
    Tensor y = dispatch(op(), in, s.attrs);
    Tensor w = randn(y.sizes(), y.dtype(), Generator(5));
    (y * w).sum().backward();

    ir::Graph g("grad");
    std::vector<ir::ValueId> args, wrt;
    std::vector<Buffer> buffers;
    for (size_t i = 0; i < in.size(); ++i) {
      args.push_back(g.addArgument({in[i].dtype(), in[i].sizes()}, "a" + std::to_string(i)));
      buffers.push_back(Buffer{in[i].impl()->storage, in[i].ref()});
      if (in[i].is_floating_point())
        wrt.push_back(args.back());
    }
    ir::ValueId wv = g.addArgument({w.dtype(), w.sizes()}, "w");
    buffers.push_back(Buffer{w.impl()->storage, w.ref()});
    ir::ValueId yv = g.addNode(op(), args, s.attrs, {y.dtype(), y.sizes()});
    ir::ValueId prod = g.addNode(OpCode::Mul, {yv, wv}, {}, {y.dtype(), y.sizes()});
    ir::ValueId loss = g.addNode(OpCode::Sum, {prod}, Attrs{{"dims", Shape{}}, {"keepdim", false}}, {y.dtype(), {}});
    auto grads = passes::appendGradients(g, loss, wrt);
    ASSERT_TRUE(static_cast<bool>(grads)) << grads.diagnostic().message;
    for (ir::ValueId v : grads.value())
      g.addOutput(v == ir::kNoValue ? loss : v);
    auto problems = ir::verify(g);
    ASSERT_TRUE(problems.empty()) << problems[0].message << "\n" << ir::printGraph(g);
    std::vector<Buffer> out = runPlan(ir::lowerToPlan(g), buffers, {});
    size_t k = 0;
    for (const Tensor& t : in) {
      if (!t.is_floating_point())
        continue;
      SCOPED_TRACE("input " + std::to_string(k));
      ASSERT_NE(grads.value()[k], ir::kNoValue);
      Buffer c = allocateBuffer(out[k].ref.shape, out[k].ref.dtype);
      copyCast(out[k].ref, c.ref);
      std::vector<double> got = from_blob(c.ref.data, c.ref.shape, c.ref.dtype).to_vector<double>();
      EXPECT_TRUE(allClose(got, t.grad().to_vector<double>(), 1e-12, 1e-12));
      ++k;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllOps, OpTable, ::testing::Range(0, kNumOps), opParamName);

} // namespace
} // namespace weft::test
