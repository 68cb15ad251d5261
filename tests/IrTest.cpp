// The graph IR through its C++ API: building, printing and parsing back, verifying, passes.
#include "weft/codegen/Jit.h"
#include "weft/ir/Lower.h"
#include "weft/ir/ShapeInference.h"
#include "weft/ir/TextFormat.h"
#include "weft/ir/Verifier.h"
#include "weft/passes/Fusion.h"
#include "weft/passes/Pass.h"
#include "weft/passes/Program.h"
#include "weft/passes/Split.h"
#include "weft/runtime/Interpreter.h"
#include "weft/runtime/Kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

namespace weft::ir {
namespace {

/// x -> matmul -> add -> relu-like where -> sum, with a state update.
Graph smallGraph() {
  Graph g("small");
  ValueId x = g.addArgument({DType::Float32, {2, 3}}, "x");
  ValueId w = g.addState({DType::Float32, {3, 4}}, "w");
  ValueId mm = g.addNode(OpCode::MatMul, {x, w}, {}, {DType::Float32, {2, 4}}, {"net.cpp", 7});
  ValueId e = g.addNode(OpCode::Exp, {mm}, {}, {DType::Float32, {2, 4}});
  ValueId s = g.addNode(OpCode::Sum, {e}, Attrs{{"dims", Shape{}}, {"keepdim", false}},
                        {DType::Float32, {}});
  ValueId nw = g.addNode(OpCode::Mul, {w, w}, {}, {DType::Float32, {3, 4}});
  g.addOutput(s);
  g.addStateUpdate(w, nw);
  return g;
}

TEST(Ir, BuiltGraphVerifiesAndRoundTrips) {
  Graph g = smallGraph();
  EXPECT_TRUE(verify(g).empty());
  std::string text = printGraph(g);
  auto parsed = parseGraph(text);
  ASSERT_TRUE(static_cast<bool>(parsed)) << parsed.diagnostic().message;
  EXPECT_EQ(printGraph(parsed.value()), text);
  EXPECT_NE(text.find("loc(\"net.cpp\":7)"), std::string::npos) << text;
}

TEST(Ir, EveryAttributeTypeRoundTrips) {
  for (const AttrValue& v :
       {AttrValue(int64_t{-3}), AttrValue(2.5), AttrValue(1e-300), AttrValue(-0.0), AttrValue(true),
        AttrValue(std::vector<int64_t>{}), AttrValue(std::vector<int64_t>{1, -2}),
        AttrValue(DType::BFloat16), AttrValue(0.1)}) {
    Graph g;
    ValueId x = g.addArgument({DType::Float32, {2}}, "x");
    Attrs at;
    at.set("a", v);
    // Not a valid op attribute (the verifier would say so), but the text form must carry it.
    g.addOutput(g.addNode(OpCode::Neg, {x}, at, {DType::Float32, {2}}));
    auto parsed = parseGraph(printGraph(g));
    ASSERT_TRUE(static_cast<bool>(parsed)) << parsed.diagnostic().message;
    EXPECT_EQ(parsed.value().nodes()[0].attrs.items()[0].second, v) << printAttr(v);
  }
}

/// Cache keys hold keyBytes: equal for a graph and its text form parsed back, different after
/// any change an executable could depend on (an attribute's last bit, a dtype, a location, the
/// outputs, a state update).
TEST(Ir, KeyBytesTellEveryChangeApart) {
  const Graph g = smallGraph();
  auto parsed = parseGraph(printGraph(g));
  ASSERT_TRUE(static_cast<bool>(parsed)) << parsed.diagnostic().message;
  EXPECT_EQ(keyBytes(parsed.value()), keyBytes(g));
  std::vector<std::function<void(Graph&)>> changes = {
      [](Graph& c) { c.mutableNodes()[2].attrs.set("keepdim", true); },
      [](Graph& c) { c.mutableNodes()[0].loc.line = 8; },
      [](Graph& c) { c.mutableNodes()[1].op = OpCode::Log; },
      [](Graph& c) { c.mutableOutputs().push_back(c.nodes()[1].result); },
      [](Graph& c) { c.mutableStateUpdates().clear(); },
      [](Graph& c) {
        ValueId x = c.arguments()[0];
        c.addNode(OpCode::Mul, {x, x}, Attrs{{"alpha", std::nextafter(1.0, 2.0)}},
                  {DType::Float32, {2, 3}});
      },
      [](Graph& c) {
        ValueId x = c.arguments()[0];
        c.addNode(OpCode::Mul, {x, x}, Attrs{{"alpha", std::nextafter(1.0, 2.0)}},
                  {DType::Float64, {2, 3}}); // the one before in another dtype
      }};
  Graph moved = g; // another line: another key, unless locations are left out
  moved.mutableNodes()[0].loc.line = 9;
  EXPECT_EQ(keyBytes(moved, false), keyBytes(g, false));
  std::vector<std::vector<uint8_t>> seen = {keyBytes(g)};
  for (size_t i = 0; i < changes.size(); ++i) {
    Graph c = g;
    changes[i](c);
    std::vector<uint8_t> key = keyBytes(c);
    for (const auto& other : seen)
      EXPECT_NE(key, other) << "change " << i;
    seen.push_back(key);
  }
}

TEST(Ir, VerifierRejectsBrokenGraphs) {
  Graph g = smallGraph();
  g.mutableNodes()[1].operands[0] = 99; // out of range
  auto problems = verify(g);
  ASSERT_FALSE(problems.empty());
  EXPECT_NE(problems[0].message.find("%1 = exp: operand 0 is used before it is defined"),
            std::string::npos)
      << problems[0].message;

  Graph h = smallGraph();
  std::swap(h.mutableNodes()[0], h.mutableNodes()[1]); // exp before the matmul it reads
  EXPECT_FALSE(verify(h).empty());
}

TEST(Ir, InferTypeChecksAttributesInsteadOfCrashing) {
  std::vector<TensorType> in{{DType::Float32, {2, 3}}};
  auto missing = inferType(OpCode::Sum, in, Attrs{{"dims", Shape{0}}});
  ASSERT_FALSE(static_cast<bool>(missing));
  EXPECT_NE(missing.diagnostic().message.find("missing attribute 'keepdim'"), std::string::npos);
  auto wrongType = inferType(OpCode::Sum, in, Attrs{{"dims", int64_t{0}}, {"keepdim", false}});
  ASSERT_FALSE(static_cast<bool>(wrongType));
  EXPECT_NE(wrongType.diagnostic().message.find("'dims' must be a list of integers"),
            std::string::npos);
  auto unknown = inferType(OpCode::Exp, in, Attrs{{"alpha", 1.0}});
  ASSERT_FALSE(static_cast<bool>(unknown));
  EXPECT_NE(unknown.diagnostic().message.find("unknown attribute 'alpha'"), std::string::npos);
}

TEST(Ir, PassesReportWhetherTheyChangedTheGraph) {
  Graph g = smallGraph();
  ValueId x = g.arguments()[0];
  g.addNode(OpCode::Neg, {x}, {}, {DType::Float32, {2, 3}}); // dead
  auto dce = passes::createPass("dce");
  auto first = dce->run(g);
  ASSERT_TRUE(static_cast<bool>(first));
  EXPECT_TRUE(first.value());
  auto second = dce->run(g);
  EXPECT_FALSE(second.value());
  EXPECT_TRUE(verify(g).empty());
  EXPECT_EQ(g.nodes().size(), 4u);
  EXPECT_EQ(passes::createPass("no-such-pass"), nullptr);
}

TEST(Ir, PassManagerVerifiesAfterEachPass) {
  Graph g = smallGraph();
  passes::PassManager pm;
  pm.add(passes::createPass("cse")).add(passes::createPass("dce"));
  auto r = pm.run(g);
  ASSERT_TRUE(static_cast<bool>(r)) << r.diagnostic().message;
  EXPECT_FALSE(r.value()); // nothing to do in this graph
}

/// WEFT_SKIP_PASSES leaves out graph passes, never the program passes compile() needs: a program
/// asking for output gradients still gets them and is split, while dce leaves a dead node alone.
TEST(Ir, SkippedPassesAreGraphPassesOnly) {
  const char* outside = std::getenv("WEFT_SKIP_PASSES");
  const std::string before = outside != nullptr ? outside : "";
  ::setenv("WEFT_SKIP_PASSES", "output-grads,split,dce", 1);
  passes::PassManager program, graph;
  program.add(passes::createPass("output-grads")).add(passes::createPass("split"));
  graph.add(passes::createPass("dce"));
  if (outside != nullptr)
    ::setenv("WEFT_SKIP_PASSES", before.c_str(), 1);
  else
    ::unsetenv("WEFT_SKIP_PASSES");
  passes::Program p;
  p.graph = smallGraph();
  p.wrt = {p.graph.arguments()[0]};
  p.differentiableOutputs = p.graph.outputs().size();
  auto r = program.run(p);
  ASSERT_TRUE(static_cast<bool>(r)) << r.diagnostic().message;
  EXPECT_EQ(p.seeds.size(), 1u);       // output-grads ran
  EXPECT_TRUE(p.backward.has_value()); // and split
  Graph g = smallGraph();
  g.addNode(OpCode::Neg, {g.arguments()[0]}, {}, {DType::Float32, {2, 3}}); // dead
  const size_t nodes = g.nodes().size();
  r = graph.run(g);
  ASSERT_TRUE(static_cast<bool>(r)) << r.diagnostic().message;
  EXPECT_EQ(g.nodes().size(), nodes); // dce was left out
}

TEST(Ir, PassesRunOnlyOnGraphsThatVerify) {
  // A constant without its value: simplify would read the value to see whether `x * c` is `x`,
  // and the attribute accessor would throw. The pipeline reports it before any pass runs.
  Graph g;
  ValueId x = g.addArgument({DType::Float32, {2, 3}}, "x");
  ValueId c = g.addNode(OpCode::Full, {}, Attrs{{"shape", Shape{}}, {"dtype", DType::Float32}},
                        {DType::Float32, {}});
  g.addOutput(g.addNode(OpCode::Mul, {x, c}, {}, {DType::Float32, {2, 3}}));
  passes::PassManager pm;
  for (const std::string& name : passes::compilePipeline())
    pm.add(passes::createPass(name));
  ir::Result<bool> r = false;
  ASSERT_NO_THROW(r = pm.run(g));
  ASSERT_FALSE(static_cast<bool>(r));
  EXPECT_NE(r.diagnostic().message.find("the graph does not verify: "), std::string::npos)
      << r.diagnostic().message;
}

std::vector<float> read(const Buffer& b) {
  std::vector<float> v(static_cast<size_t>(b.ref.numel()));
  copyCast(b.ref, TensorRef{v.data(), DType::Float32, b.ref.shape, contiguousStrides(b.ref.shape)});
  return v;
}

TEST(Passes, SplitForwardBackwardSavesWhatTheGradientReads) {
  // y = exp(x) * w; gradients seeded by g: dx = g * w * y, dw = sum(g * exp(x)).
  Graph g("joint");
  TensorType t{DType::Float64, {3}};
  ValueId x = g.addArgument(t, "x");
  ValueId w = g.addState(t, "w");
  ValueId e = g.addNode(OpCode::Exp, {x}, {}, t);
  ValueId y = g.addNode(OpCode::Mul, {e, w}, {}, t);
  ValueId unused = g.addNode(OpCode::Sin, {x}, {}, t); // needed by neither half
  (void)unused;
  g.addOutput(y);
  ValueId seed = g.addArgument(t, "g0");
  ValueId gy = g.addNode(OpCode::Mul, {seed, w}, {}, t);
  ValueId dx = g.addNode(OpCode::Mul, {gy, e}, {}, t);
  ValueId ge = g.addNode(OpCode::Mul, {seed, e}, {}, t);
  ValueId dw = g.addNode(OpCode::Sum, {ge}, Attrs{{"dims", Shape{}}, {"keepdim", false}},
                         {DType::Float64, {}});
  auto split = passes::splitForwardBackward(g, {seed}, {dx, kNoValue, dw});
  ASSERT_TRUE(static_cast<bool>(split)) << split.diagnostic().message;
  const passes::ForwardBackward& fb = split.value();
  EXPECT_EQ(fb.saved, (std::vector<ValueId>{w, e})); // the state read, and exp(x); not y or x
  EXPECT_TRUE(verify(fb.forward).empty());
  EXPECT_TRUE(verify(fb.backward).empty());
  EXPECT_EQ(fb.forward.arguments().size(), 1u);  // x: the seed is the backward's
  EXPECT_EQ(fb.forward.nodes().size(), 2u);      // exp, mul
  EXPECT_EQ(fb.forward.outputs().size(), 2u);    // y, then exp(x) saved
  EXPECT_EQ(fb.backward.arguments().size(), 3u); // w, exp(x), g0
  EXPECT_EQ(fb.backward.nodes().size(), 4u);
  EXPECT_EQ(fb.backward.outputs().size(), 2u);
  EXPECT_TRUE(fb.backward.state().empty());
}

/// A code generator that computes every elementwise node but exp, with no reductions, GEMMs or
/// view leaves in its kernels.
struct NoExpTarget : passes::Target {
  std::string name() const override { return "no-exp"; }
  bool computes(const Graph&, const ir::Node& n) const override { return n.op != OpCode::Exp; }
  bool reducesInKernels() const override { return false; }
  bool generatesGemm(const Graph&, const ir::Node&) const override { return false; }
  bool readsViews() const override { return false; }
};

TEST(Passes, FusionAsksTheTargetWhatAKernelMayHold) {
  // exp(x * y) * 3 and a row softmax's sum: the CPU's code generator takes it all in kernels;
  // one that computes no exp and no reductions gets kernels without them.
  Graph g("ask");
  TensorType t{DType::Float32, {4, 8}}, rows{DType::Float32, {4, 1}};
  ValueId x = g.addArgument(t, "x"), y = g.addArgument(t, "y");
  ValueId m = g.addNode(OpCode::Mul, {x, y}, {}, t);
  ValueId e = g.addNode(OpCode::Exp, {m}, {}, t);
  ValueId n = g.addNode(OpCode::Neg, {e}, {}, t);
  ValueId s = g.addNode(OpCode::Sum, {n}, Attrs{{"dims", Shape{1}}, {"keepdim", true}}, rows);
  ValueId d = g.addNode(OpCode::Div, {n, s}, {}, t);
  g.addOutput(g.addNode(OpCode::Abs, {d}, {}, t));
  ASSERT_TRUE(verify(g).empty());
  auto holds = [&](const std::vector<FusionGroup>& groups, OpCode op) {
    for (const FusionGroup& grp : groups)
      for (int32_t i : grp.nodes)
        if (g.nodes()[static_cast<size_t>(i)].op == op) return true;
    return false;
  };
  std::vector<FusionGroup> cpu = passes::findElementwiseGroups(g, codegen::CpuTarget());
  EXPECT_TRUE(holds(cpu, OpCode::Exp));
  EXPECT_TRUE(holds(cpu, OpCode::Sum));
  std::vector<FusionGroup> narrow = passes::findElementwiseGroups(g, NoExpTarget());
  EXPECT_FALSE(holds(narrow, OpCode::Exp));
  EXPECT_FALSE(holds(narrow, OpCode::Sum));
  EXPECT_TRUE(holds(narrow, OpCode::Div)); // what it can compute still fuses
  // The passes that ask need a target to ask: without one they say so.
  Graph copy = g;
  auto r = passes::createPass("fuse")->run(copy);
  ASSERT_FALSE(static_cast<bool>(r));
  EXPECT_NE(r.diagnostic().message.find("target"), std::string::npos);
  EXPECT_FALSE(static_cast<bool>(passes::createPass("remat")->run(copy)));
}

TEST(Passes, ElementwiseGroupsNeverWaitOnTheirOwnConsumers) {
  // d = exp(mul(a + y, sum(a + y))) * 2 with a = exp(x): the sum reads the first group's value,
  // so the mul that reads the sum cannot join that group; it starts a second one.
  Graph g("fuse");
  TensorType t{DType::Float32, {4}}, scalar{DType::Float32, {}};
  ValueId x = g.addArgument(t, "x"), y = g.addArgument(t, "y");
  ValueId a = g.addNode(OpCode::Exp, {x}, {}, t);
  ValueId b = g.addNode(OpCode::Add, {a, y}, {}, t);
  ValueId s = g.addNode(OpCode::Sum, {b}, Attrs{{"dims", Shape{}}, {"keepdim", false}}, scalar);
  ValueId c = g.addNode(OpCode::Mul, {b, s}, {}, t);
  ValueId d = g.addNode(OpCode::Exp, {c}, {}, t);
  ValueId two =
      g.addNode(OpCode::Full, {},
                Attrs{{"shape", Shape{}}, {"dtype", DType::Float32}, {"value", 2.0}}, scalar);
  ValueId e = g.addNode(OpCode::Mul, {d, two}, {}, t);
  g.addOutput(e);
  g.addOutput(a);
  ASSERT_TRUE(verify(g).empty());
  std::vector<FusionGroup> groups = passes::findElementwiseGroups(g, codegen::CpuTarget());
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].nodes, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(groups[0].inputs, (std::vector<ValueId>{x, y}));
  EXPECT_EQ(groups[0].outputs, (std::vector<ValueId>{b, a})); // read by sum and mul; an output
  EXPECT_EQ(groups[1].nodes, (std::vector<int32_t>{3, 4, 6}));
  EXPECT_EQ(groups[1].leaves, (std::vector<int32_t>{5})); // the constant, computed inline
  EXPECT_EQ(groups[1].inputs, (std::vector<ValueId>{b, s}));
  EXPECT_EQ(groups[1].outputs, (std::vector<ValueId>{e}));
  // Lowered: kernel, sum, kernel; the constant needs no step of its own.
  std::vector<FusedKernel> fused;
  for (size_t k = 0; k < groups.size(); ++k)
    fused.push_back({groups[k], static_cast<int32_t>(k)});
  Plan plan = lowerToPlan(g, fused);
  ASSERT_EQ(plan.steps.size(), 3u);
  EXPECT_EQ(plan.steps[0].kernelOutputs, (std::vector<int32_t>{b, a}));
  EXPECT_EQ(plan.steps[1].op, OpCode::Sum);
  EXPECT_EQ(plan.steps[2].kernelOutputs, (std::vector<int32_t>{e}));
  EXPECT_EQ(plan.steps[2].release, (std::vector<int32_t>{b, s})); // their last reader
}

TEST(Interpreter, RunsAGraphAndWritesStateBack) {
  Graph g = smallGraph(); // out = sum(exp(x @ w)), w <- w * w
  Buffer x = allocateBuffer(hal::cpu(), {2, 3}, DType::Float32),
         w = allocateBuffer(hal::cpu(), {3, 4}, DType::Float32);
  fill(x.ref, 0.5);
  fill(w.ref, 2.0);
  Plan plan = lowerToPlan(g);
  std::vector<Buffer> out =
      runPlan(hal::cpu(), plan, std::vector<Buffer>{x}, std::vector<Buffer>{w});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FLOAT_EQ(read(out[0])[0], 8.0f * std::exp(3.0f)); // each of 8 entries is exp(0.5*2*3)
  EXPECT_EQ(read(w), std::vector<float>(12, 4.0f));        // updated in place
  EXPECT_EQ(w.storage->version(), 1u);
  out = runPlan(hal::cpu(), plan, std::vector<Buffer>{x}, std::vector<Buffer>{w});
  EXPECT_EQ(read(w), std::vector<float>(12, 16.0f));
}

TEST(Interpreter, FreesEachBufferAfterItsLastUse) {
  // A chain of 12 elementwise ops on 4 MiB values: at most input, one live value and the one being
  // written exist at once, however long the chain.
  Graph g("chain");
  TensorType t{DType::Float32, {1 << 20}};
  ValueId v = g.addArgument(t, "x");
  for (int i = 0; i < 12; ++i)
    v = g.addNode(i % 2 ? OpCode::Neg : OpCode::Exp, {v}, {}, t);
  g.addOutput(v);
  Buffer x = allocateBuffer(hal::cpu(), t.shape, t.dtype);
  fill(x.ref, 0.0);
  int64_t before = memoryStats().currentBytes;
  resetPeakMemory();
  std::vector<Buffer> out = runPlan(hal::cpu(), lowerToPlan(g), std::vector<Buffer>{x}, {});
  int64_t peakExtra = memoryStats().peakBytes - before;
  EXPECT_LE(peakExtra, 2 * (int64_t{4} << 20) + 4096) << "peak " << peakExtra << " bytes";
  double want = 0.0;
  for (int i = 0; i < 12; ++i)
    want = i % 2 ? -want : std::exp(want);
  EXPECT_NEAR(read(out[0])[0], want, 1e-6);
}

} // namespace
} // namespace weft::ir
