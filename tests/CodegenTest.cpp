// Generated CPU code end to end: fused groups become kernels in one shared object that the
// runtime's CPU device loads and launches; the disk cache serves kernels compiled before, and
// rejects damaged entries.
#include "weft/codegen/Elementwise.h"
#include "weft/codegen/KernelCache.h"
#include "weft/ir/Lower.h"
#include "weft/ir/ShapeInference.h"
#include "weft/ir/TextFormat.h"
#include "weft/ir/Verifier.h"
#include "weft/passes/Fusion.h"
#include "weft/runtime/Device.h"
#include "weft/runtime/Error.h"
#include "weft/runtime/Interpreter.h"
#include "weft/runtime/VectorMath.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>

namespace weft {
namespace {

namespace fs = std::filesystem;

/// A private cache directory for one test, removed afterwards.
class CacheDir {
public:
  CacheDir() {
    path_ = fs::temp_directory_path() /
            ("weft-cache-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    fs::remove_all(path_);
    ::setenv("WEFT_CACHE_DIR", path_.c_str(), 1);
    codegen::resetKernelCacheStats();
  }
  ~CacheDir() {
    ::unsetenv("WEFT_CACHE_DIR");
    fs::remove_all(path_);
  }
  std::vector<fs::path> entries(const char* kind = "kernels") const {
    std::vector<fs::path> r;
    for (const auto& e : fs::directory_iterator(path_ / kind))
      r.push_back(e.path());
    return r;
  }
  /// Forgets the linked sets, so the next compilation reads (or compiles) each kernel.
  void dropLinked() const { fs::remove_all(path_ / "linked"); }

private:
  fs::path path_;
  static inline int counter_ = 0;
};

/// y = exp(x) * 2 + x over float32[rows, 3]: one fused group.
ir::Graph expGraph(int rows) {
  std::string n = std::to_string(rows);
  auto parsed =
      ir::parseGraph("graph @g(%x: float32[" + n +
                     ", 3]) {\n"
                     "  %e = exp(%x) : float32[" +
                     n +
                     ", 3]\n"
                     "  %two = full() {shape = [], dtype = float32, value = 2} : float32[]\n"
                     "  %t = expand(%two) {shape = [" +
                     n + ", 3]} : float32[" + n +
                     ", 3]\n"
                     "  %m = mul(%e, %t) : float32[" +
                     n +
                     ", 3]\n"
                     "  %y = add(%m, %x) : float32[" +
                     n +
                     ", 3]\n"
                     "  return(%y)\n}\n");
  EXPECT_TRUE(static_cast<bool>(parsed)) << parsed.diagnostic().message;
  return std::move(parsed.value());
}

/// Compiles `g`'s groups, loads them on the CPU and runs the graph's plan (its groups as kernel
/// launches) on `x`.
std::vector<float> runKernel(const ir::Graph& g, std::vector<float> x) {
  std::vector<ir::FusionGroup> groups = passes::findElementwiseGroups(g, codegen::CpuTarget());
  EXPECT_FALSE(groups.empty());
  auto compiled = codegen::compileElementwise(g, groups);
  EXPECT_TRUE(static_cast<bool>(compiled)) << compiled.diagnostic().message;
  KernelTable& table = compiled.value().table;
  table.load(hal::cpu());
  std::vector<ir::FusedKernel> fused;
  for (size_t k = 0; k < groups.size(); ++k)
    fused.push_back({groups[k], compiled.value().kernelOf[k]});
  Plan plan = ir::lowerToPlan(g, fused, std::move(table));
  size_t launches = 0;
  for (const PlanStep& s : plan.steps)
    launches += s.kernel >= 0 ? 1 : 0;
  EXPECT_EQ(launches, groups.size());
  Shape shape = g.type(g.arguments()[0]).shape;
  Buffer in = allocateBuffer(hal::cpu(), shape, DType::Float32);
  std::copy(x.begin(), x.end(), in.ref.ptr<float>());
  std::vector<Buffer> out = runPlan(hal::cpu(), plan, std::span(&in, 1), {});
  const float* y = out.at(0).ref.ptr<float>();
  return std::vector<float>(y, y + x.size());
}

std::vector<float> input(size_t n) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i)
    x[i] = static_cast<float>(i) * 0.25f - 3.0f;
  return x;
}

TEST(Codegen, FusedKernelRunsThroughTheCpuDevice) {
  CacheDir cache;
  std::vector<float> x = input(3000);
  std::vector<float> y = runKernel(expGraph(1000), x);
  std::vector<float> e(x.size()); // the eager kernels' exp: libmvec, as the kernel calls it
  kernels::vectorMath(OpCode::Exp, x.data(), e.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) // bit-exact, the scalar tail of the vector loop included
    ASSERT_EQ(y[i], e[i] * 2.0f + x[i]) << "at " << i;
}

TEST(Codegen, SecondCompilationReadsTheDiskCache) {
  CacheDir cache;
  std::vector<float> x = input(30);
  std::vector<float> first = runKernel(expGraph(10), x);
  EXPECT_EQ(codegen::kernelCacheStats().misses, 1);
  EXPECT_EQ(codegen::kernelCacheStats().hits, 0);
  ASSERT_EQ(cache.entries().size(), 1u);
  std::vector<float> second = runKernel(expGraph(10), x);
  EXPECT_EQ(codegen::kernelCacheStats().hits, 1);
  EXPECT_EQ(codegen::kernelCacheStats().misses, 1);     // nothing compiled the second time
  EXPECT_EQ(codegen::kernelCacheStats().linkedHits, 1); // nor linked: the set was cached whole
  EXPECT_EQ(first, second);
  runKernel(expGraph(11), input(33)); // another shape is another kernel
  EXPECT_EQ(codegen::kernelCacheStats().misses, 2);
}

TEST(Codegen, DamagedCacheEntryIsRejectedAndRebuilt) {
  CacheDir cache;
  std::vector<float> x = input(30);
  std::vector<float> good = runKernel(expGraph(10), x);
  cache.dropLinked(); // each run below reads the kernel's own entry
  fs::path entry = cache.entries().at(0);
  { // flip one byte in the middle of the object
    std::fstream f(entry, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(entry) / 2));
    f.put('\x5a');
  }
  EXPECT_EQ(runKernel(expGraph(10), x), good);
  EXPECT_EQ(codegen::kernelCacheStats().rejected, 1);
  EXPECT_EQ(codegen::kernelCacheStats().misses, 2);
  cache.dropLinked();
  fs::resize_file(entry, 20); // truncated
  EXPECT_EQ(runKernel(expGraph(10), x), good);
  EXPECT_EQ(codegen::kernelCacheStats().rejected, 2);
  cache.dropLinked();
  EXPECT_EQ(runKernel(expGraph(10), x), good); // rebuilt entries are good again
  EXPECT_EQ(codegen::kernelCacheStats().hits, 1);
}

TEST(Codegen, DamagedLinkedSetIsRejectedAndRebuilt) {
  CacheDir cache;
  std::vector<float> x = input(30);
  std::vector<float> good = runKernel(expGraph(10), x);
  ASSERT_EQ(cache.entries("linked").size(), 1u);
  fs::path entry = cache.entries("linked").at(0);
  { // flip one byte in the middle of the shared object
    std::fstream f(entry, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(entry) / 2));
    f.put('\x5a');
  }
  EXPECT_EQ(runKernel(expGraph(10), x), good); // linked again from the kernel's entry
  EXPECT_EQ(codegen::kernelCacheStats().rejected, 1);
  EXPECT_EQ(codegen::kernelCacheStats().linkedHits, 0);
  EXPECT_EQ(codegen::kernelCacheStats().misses, 1); // the kernel itself was not compiled again
  EXPECT_EQ(runKernel(expGraph(10), x), good);
  EXPECT_EQ(codegen::kernelCacheStats().linkedHits, 1); // the rebuilt entry is good
}

/// The modules WEFT_DUMP_DIR received while `run` ran: the kernels as built (".input.mlir"),
/// after the GEMM schedule (".scheduled.mlir") and lowered to the LLVM dialect (".llvm.mlir").
struct DumpedModules {
  std::string input, scheduled, lowered;
};
DumpedModules dumpWhile(const std::function<void()>& run) {
  fs::path dump = fs::temp_directory_path() / ("weft-dump-test-" + std::to_string(::getpid()));
  fs::remove_all(dump);
  fs::create_directories(dump);
  ::setenv("WEFT_DUMP_DIR", dump.c_str(), 1);
  run();
  ::unsetenv("WEFT_DUMP_DIR");
  auto read = [](const fs::path& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  DumpedModules r;
  for (const auto& e : fs::directory_iterator(dump)) {
    const std::string name = e.path().filename().string();
    if (name.ends_with(".input.mlir")) r.input += read(e.path());
    if (name.ends_with(".scheduled.mlir")) r.scheduled += read(e.path());
    if (name.ends_with(".llvm.mlir")) r.lowered += read(e.path());
  }
  fs::remove_all(dump);
  return r;
}

/// A plain kernel is one linalg.generic on tensors inside a destination-passing function: its
/// inputs and output are strided views of the memref arguments, read as tensors and written back
/// in place (the dumped module holds no copy). The loops lowered from it compute expGraph's values
/// bit for bit (SecondCompilationReadsTheDiskCache checks them).
TEST(Codegen, PlainKernelsAreLinalgGenericsOnTensors) {
  CacheDir cache; // empty: the kernel is built
  std::vector<float> x = input(300), y;
  DumpedModules dumped = dumpWhile([&] { y = runKernel(expGraph(100), x); });
  EXPECT_NE(dumped.input.find("linalg.generic"), std::string::npos) << dumped.input;
  EXPECT_NE(dumped.input.find("bufferization.to_tensor"), std::string::npos);
  EXPECT_NE(dumped.input.find("bufferization.materialize_in_destination"), std::string::npos);
  EXPECT_EQ(dumped.input.find("scf.for"), std::string::npos) << "loops are linalg's to make";
  EXPECT_FALSE(dumped.lowered.empty());
  EXPECT_EQ(dumped.lowered.find("memrefCopy"), std::string::npos) << "bufferized with a copy";
  EXPECT_EQ(dumped.lowered.find("malloc"), std::string::npos) << "bufferized with a new buffer";
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_FLOAT_EQ(y[i], std::exp(x[i]) * 2.0f + x[i]) << "at " << i;
}

/// A row kernel (softmax along rows of 2500, more than one block of its sums) is a loop over the
/// rows with one linalg.generic per pass along each row: the max and the sum as reductions into
/// 0-d tensors (stack slots after bufferization, no heap buffer, no copy), the quotient as a
/// parallel generic. Its values match a softmax computed here in double within 1e-6 relative
/// (float32 sums of 2500 terms, reassociated in blocks of 1024 added in double: about 1e-7).
TEST(Codegen, RowKernelsAreLinalgGenericsAlongEachRow) {
  CacheDir cache; // empty: the kernel is built
  const int rows = 3, len = 2500;
  auto parsed = ir::parseGraph(R"(graph @g(%x: float32[3, 2500]) {
  %m = amax(%x) {dims = [1], keepdim = true} : float32[3, 1]
  %d = sub(%x, %m) : float32[3, 2500]
  %e = exp(%d) : float32[3, 2500]
  %s = sum(%e) {dims = [1], keepdim = true} : float32[3, 1]
  %y = div(%e, %s) : float32[3, 2500]
  return(%y)
}
)");
  ASSERT_TRUE(static_cast<bool>(parsed)) << parsed.diagnostic().message;
  std::vector<float> x(static_cast<size_t>(rows * len));
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>((i * 37) % 101) * 0.05f - 2.0f;
  std::vector<float> y;
  DumpedModules dumped = dumpWhile([&] { y = runKernel(parsed.value(), x); });
  EXPECT_NE(dumped.input.find("iterator_types = [\"reduction\"]"), std::string::npos)
      << dumped.input;
  EXPECT_NE(dumped.input.find("iterator_types = [\"parallel\"]"), std::string::npos);
  EXPECT_FALSE(dumped.lowered.empty());
  EXPECT_EQ(dumped.lowered.find("memrefCopy"), std::string::npos) << "bufferized with a copy";
  EXPECT_EQ(dumped.lowered.find("malloc"), std::string::npos) << "bufferized with a new buffer";
  for (int r = 0; r < rows; ++r) {
    const float* row = x.data() + r * len;
    const double max = *std::max_element(row, row + len);
    double sum = 0;
    for (int j = 0; j < len; ++j)
      sum += std::exp(static_cast<double>(row[j]) - max);
    for (int j = 0; j < len; ++j) {
      const double want = std::exp(static_cast<double>(row[j]) - max) / sum;
      ASSERT_NEAR(y[static_cast<size_t>(r * len + j)], want, want * 1e-6) << r << ", " << j;
    }
  }
}

TEST(Codegen, AMalformedGroupIsADiagnosticNotACrash) {
  // Codegen is built without exceptions: a group that reads a value it is not given (or a
  // constant without its value) must come back as a diagnostic, not abort the process.
  CacheDir cache;
  ir::Graph g = expGraph(4);
  std::vector<ir::FusionGroup> groups = passes::findElementwiseGroups(g, codegen::CpuTarget());
  ASSERT_EQ(groups.size(), 1u);
  std::vector<ir::FusionGroup> noInputs = groups;
  noInputs[0].inputs.clear();
  auto r = codegen::compileElementwise(g, noInputs);
  ASSERT_TRUE(static_cast<bool>(r)) << r.diagnostic().message;
  EXPECT_EQ(r.value().kernelOf, std::vector<int32_t>{-1});
  EXPECT_TRUE(r.value().table.kernels.empty());
  EXPECT_NE(r.value().failures[0].find("cannot lower"), std::string::npos) << r.value().failures[0];
  // A constant leaf whose value attribute is missing.
  ir::ValueId x = g.arguments()[0];
  ir::ValueId c = g.addNode(OpCode::Full, {}, Attrs{{"shape", Shape{}}}, {DType::Float32, {}});
  ir::ValueId y = g.addNode(OpCode::Mul, {x, c}, {}, g.type(x));
  ir::ValueId z = g.addNode(OpCode::Exp, {y}, {}, g.type(x));
  g.addOutput(z);
  ir::FusionGroup bad;
  bad.nodes = {g.value(y).producer, g.value(z).producer};
  bad.leaves = {g.value(c).producer};
  bad.inputs = {x};
  bad.outputs = {z};
  bad.shape = g.type(x).shape;
  bad.inPlace = {-1};
  // Beside a good group, the bad one alone is left out: the good one still gets its kernel.
  auto mixed = codegen::compileElementwise(g, std::vector{bad, groups[0]});
  ASSERT_TRUE(static_cast<bool>(mixed)) << mixed.diagnostic().message;
  EXPECT_EQ(mixed.value().kernelOf, (std::vector<int32_t>{-1, 0}));
  EXPECT_EQ(mixed.value().table.kernels.size(), 1u);
  EXPECT_FALSE(mixed.value().failures[0].empty());
  EXPECT_TRUE(mixed.value().failures[1].empty());
  EXPECT_NO_THROW(hal::cpu().load(mixed.value().table.code.at(0), mixed.value().table.kernels));
}

/// A random graph of elementwise ops and reductions along the last dim over x: float32[rows,
/// cols], w: float32[cols] and r: float32[rows, 1]; its outputs are a few of its values. Every
/// value stays finite: inputs lie in [-1, 1] and the ops are bounded or kept small (tanh, sin,
/// x / (1 + |y|), ...).
ir::Graph randomRowGraph(uint32_t seed, int64_t rows, int64_t cols) {
  std::mt19937 rng(seed);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  ir::Graph g("rows");
  Shape full{rows, cols}, reduced{rows, 1};
  std::vector<ir::ValueId> fulls{g.addArgument({DType::Float32, full}, "x")};
  std::vector<ir::ValueId> rowsOnly{g.addArgument({DType::Float32, reduced}, "r")};
  ir::ValueId w = g.addArgument({DType::Float32, {cols}}, "w");
  auto add = [&](OpCode op, std::vector<ir::ValueId> in, Attrs at = {}) {
    std::vector<ir::TensorType> types;
    for (ir::ValueId v : in)
      types.push_back(g.type(v));
    auto t = ir::inferType(op, types, at);
    EXPECT_TRUE(static_cast<bool>(t)) << t.diagnostic().message;
    return g.addNode(op, std::move(in), at, t.value());
  };
  auto bounded = [&](ir::ValueId v) { // v / (1 + |v|): in (-1, 1)
    ir::ValueId one =
        add(OpCode::Full, {}, Attrs{{"shape", Shape{}}, {"dtype", DType::Float32}, {"value", 1.0}});
    return add(OpCode::Div, {v, add(OpCode::Add, {add(OpCode::Abs, {v}), one})});
  };
  const int nodes = 6 + static_cast<int>(pick(10));
  for (int i = 0; i < nodes; ++i) {
    const bool onFull = pick(3) != 0;
    std::vector<ir::ValueId>& pool = onFull ? fulls : rowsOnly;
    ir::ValueId a = pool[pick(pool.size())];
    switch (pick(6)) {
    case 0: { // a reduction along the row
      ir::ValueId x = fulls[pick(fulls.size())];
      OpCode op = std::array{OpCode::Sum, OpCode::AMax, OpCode::AMin}[pick(3)];
      ir::ValueId s = add(op, {x}, Attrs{{"dims", std::vector<int64_t>{1}}, {"keepdim", true}});
      rowsOnly.push_back(bounded(s));
      break;
    }
    case 1: // unary
      pool.push_back(add(std::array{OpCode::Tanh, OpCode::Sin, OpCode::Neg}[pick(3)], {a}));
      break;
    case 2: { // full with a row value (broadcast), or two row values
      ir::ValueId b = rowsOnly[pick(rowsOnly.size())];
      OpCode op = std::array{OpCode::Add, OpCode::Sub, OpCode::Mul, OpCode::Maximum}[pick(4)];
      pool.push_back(add(op, {a, b}));
      break;
    }
    case 3: { // two of the same shape
      ir::ValueId b = pool[pick(pool.size())];
      pool.push_back(bounded(add(std::array{OpCode::Mul, OpCode::Add}[pick(2)], {a, b})));
      break;
    }
    case 4: // with the per-column weight
      if (onFull) fulls.push_back(add(OpCode::Mul, {a, w}));
      break;
    default: // x - mean: layer norm's centring
      if (onFull) {
        ir::ValueId s =
            add(OpCode::Sum, {a}, Attrs{{"dims", std::vector<int64_t>{1}}, {"keepdim", true}});
        ir::ValueId n = add(OpCode::Full, {},
                            Attrs{{"shape", Shape{}},
                                  {"dtype", DType::Float32},
                                  {"value", static_cast<double>(cols)}});
        fulls.push_back(add(OpCode::Sub, {a, add(OpCode::Div, {s, n})}));
      }
      break;
    }
  }
  // Outputs: the last values of each kind, and one earlier value at random.
  g.addOutput(fulls.back());
  g.addOutput(rowsOnly.back());
  g.addOutput(fulls[pick(fulls.size())]);
  return g;
}

/// A matmul group with an epilogue: o = (tanh(z) * z + res) * scale for z = x @ w + bias, x of
/// [batch, m, k], res = exp(res0) of the output's shape (computed before, so the kernel may write
/// over it), scale of [batch, m, 1] (one per row); its GEMM result y as a second output.
struct MatmulCase {
  int64_t batch, m, k, n;
  bool transposedW = false; // w given as [n, k], multiplied as w.t() (a linear layer)
};

ir::Graph matmulGraph(const MatmulCase& c) {
  auto dims = [](std::initializer_list<int64_t> d) {
    std::string s = "[";
    for (int64_t x : d)
      s += (s.size() > 1 ? ", " : "") + std::to_string(x);
    return s + "]";
  };
  const std::string out = "float32" + dims({c.batch, c.m, c.n});
  auto parsed = ir::parseGraph(
      "graph @mm(%x: float32" + dims({c.batch, c.m, c.k}) + ", %w: float32" +
      (c.transposedW ? dims({c.n, c.k}) : dims({c.k, c.n})) + ", %bias: float32" + dims({c.n}) +
      ", %res0: " + out + ", %scale: float32" + dims({c.batch, c.m, 1}) + ") {\n" +
      (c.transposedW ? "  %wt = permute(%w) {dims = [1, 0]} : float32" + dims({c.k, c.n}) + "\n"
                     : std::string("  %wt = expand(%w) {shape = " + dims({c.k, c.n}) +
                                   "} : float32" + dims({c.k, c.n}) + "\n")) +
      "  %res = exp(%res0) : " + out + "\n  %y = matmul(%x, %wt) : " + out +
      "\n  %b = expand(%bias) {shape = " + dims({c.batch, c.m, c.n}) + "} : " + out +
      "\n  %z = add(%y, %b) : " + out + "\n  %t = tanh(%z) : " + out + "\n  %r = mul(%t, %z) : " +
      out + "\n  %s = expand(%scale) {shape = " + dims({c.batch, c.m, c.n}) + "} : " + out +
      "\n  %r2 = add(%r, %res) : " + out + "\n  %o = mul(%r2, %s) : " + out +
      "\n  return(%o, %y)\n}\n");
  EXPECT_TRUE(static_cast<bool>(parsed)) << parsed.diagnostic().message;
  return std::move(parsed.value());
}

/// matmulGraph's kernel: the matmul leading its epilogue. Node 0 is w's transpose or a no-op
/// expand; a kernel reads the transpose as B's layout. (The no-op expand stays a node before the
/// kernel: it shows B may be any input.) Node 1 is res.
ir::FusionGroup matmulGroup(const ir::Graph& g, const MatmulCase& c) {
  ir::FusionGroup grp;
  grp.nodes = {2, 4, 5, 6, 8, 9};
  grp.leaves = {3, 7};
  if (c.transposedW) grp.leaves.push_back(0);
  grp.inputs = {g.arguments()[0], c.transposedW ? g.arguments()[1] : g.nodes()[0].result,
                g.arguments()[2], g.nodes()[1].result, g.arguments()[4]};
  grp.outputs = {g.outputs()[0], g.outputs()[1]};
  if (c.transposedW) grp.inPlace = {3, -1}; // o over res
  grp.shape = g.type(g.outputs()[0]).shape;
  return grp;
}

/// A generated GEMM computes in linalg: its register tiles are linalg.matmul ops on tensors (no
/// vector code as built), and the transform schedule keeps each tile's accumulators in registers
/// over K: the K loop carries vectors, not the tile's memory. (Without the vector subset models
/// registered, the schedule hoisted nothing and the kernels ran at half speed with every tile
/// loaded and stored each step of K.) The values are MatmulKernelWithEpilogueMatchesFloat64's.
TEST(Codegen, GemmTilesAreLinalgMatmulsHeldInRegisters) {
  CacheDir cache; // empty: the kernel is built
  const MatmulCase c{1, 37, 45, 70};
  ir::Graph g = matmulGraph(c);
  ir::FusionGroup grp = matmulGroup(g, c);
  DumpedModules dumped = dumpWhile([&] {
    auto compiled = codegen::compileElementwise(g, std::span(&grp, 1));
    ASSERT_TRUE(static_cast<bool>(compiled)) << compiled.diagnostic().message;
    EXPECT_EQ(compiled.value().kernelOf[0], 0) << compiled.value().failures[0];
  });
  EXPECT_NE(dumped.input.find("linalg.matmul"), std::string::npos) << dumped.input;
  EXPECT_EQ(dumped.input.find("vector."), std::string::npos) << "the tiles are the schedule's";
  EXPECT_NE(dumped.scheduled.find("vector.fma"), std::string::npos) << dumped.scheduled;
  EXPECT_EQ(dumped.scheduled.find("linalg.matmul"), std::string::npos) << dumped.scheduled;
  // The K loops (full tiles and single rows) carry their accumulators as vectors.
  size_t carried = 0;
  std::istringstream lines(dumped.scheduled);
  for (std::string line; std::getline(lines, line);)
    carried += line.find("iter_args(") != std::string::npos &&
               line.find(") -> (vector<") != std::string::npos;
  EXPECT_EQ(carried, 2u) << dumped.scheduled;
  EXPECT_EQ(dumped.lowered.find("memrefCopy"), std::string::npos) << "bufferized with a copy";
}

// The generated GEMM's row tiles, column panels and their tails (rows and columns not a multiple
// of the register tile, fewer rows than one tile, K = 1), column blocks (K = 1100 packs 32 columns
// of B at a time: four blocks, the last of 4), folded batch rows, B transposed, and a
// case large enough that the threads split it, an epilogue reading a full-shape and a per-row
// input, writing over the first (with B transposed), with each register tile (AVX-512's 8x32,
// AVX2's 6x16, SSE's 4x8) where this CPU runs it: each output against float64 sums of the same
// inputs.
TEST(Codegen, MatmulKernelWithEpilogueMatchesFloat64) {
  std::vector<codegen::CpuTarget> targets{codegen::CpuTarget::host()};
  for (const char* level : {"x86-64-v3", "x86-64-v2"}) {
    auto t = codegen::CpuTarget::named(level);
    ASSERT_TRUE(static_cast<bool>(t)) << t.diagnostic().message;
    const bool avx2 = std::string(level) == "x86-64-v3";
    if (!avx2 || targets[0].features.find("+avx2") != std::string::npos)
      targets.push_back(t.value());
  }
  for (const codegen::CpuTarget& target : targets)
    for (MatmulCase c : {MatmulCase{2, 37, 45, 70}, MatmulCase{1, 300, 128, 96},
                         MatmulCase{1, 5, 3, 33}, MatmulCase{1, 8, 1, 32},
                         MatmulCase{2, 37, 45, 70, true}, MatmulCase{1, 300, 128, 96, true},
                         MatmulCase{1, 20, 1100, 100}, MatmulCase{1, 20, 1100, 100, true}}) {
      SCOPED_TRACE(std::to_string(c.batch) + "x" + std::to_string(c.m) + "x" + std::to_string(c.k) +
                   "x" + std::to_string(c.n) + (c.transposedW ? " w.t() " : " ") + target.cpu);
      ir::Graph g = matmulGraph(c);
      ir::FusionGroup grp = matmulGroup(g, c);
      auto compiled = codegen::compileElementwise(g, std::span(&grp, 1), target);
      ASSERT_TRUE(static_cast<bool>(compiled)) << compiled.diagnostic().message;
      ASSERT_EQ(compiled.value().kernelOf[0], 0) << compiled.value().failures[0];
      KernelTable& table = compiled.value().table;
      table.load(hal::cpu());
      std::vector<ir::FusedKernel> fused{{grp, 0}};
      Plan plan = ir::lowerToPlan(g, fused, std::move(table));
      ASSERT_EQ(plan.steps.size(), c.transposedW ? 2u : 3u);

      std::mt19937 rng(7);
      std::normal_distribution<float> normal;
      std::vector<Buffer> args;
      for (ir::ValueId v : g.arguments()) {
        args.push_back(allocateBuffer(hal::cpu(), g.type(v).shape, DType::Float32));
        for (int64_t i = 0; i < args.back().ref.numel(); ++i)
          args.back().ref.ptr<float>()[i] = normal(rng);
      }
      std::vector<Buffer> out = runPlan(hal::cpu(), plan, args, {});
      const float *x = args[0].ref.ptr<float>(), *w = args[1].ref.ptr<float>(),
                  *bias = args[2].ref.ptr<float>(), *res0 = args[3].ref.ptr<float>(),
                  *scale = args[4].ref.ptr<float>();
      const float *r = out.at(0).ref.ptr<float>(), *y = out.at(1).ref.ptr<float>();
      const int64_t rows = c.batch * c.m;
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < c.n; ++j) {
          double exact = 0, magnitude = 0;
          for (int64_t p = 0; p < c.k; ++p) {
            const double wv = w[c.transposedW ? j * c.k + p : p * c.n + j];
            exact += double{x[i * c.k + p]} * wv;
            magnitude += std::fabs(double{x[i * c.k + p]} * wv);
          }
          // A float32 sum of K products is within K units of 2^-24 of the sum of their magnitudes
          // (the classic bound for recursive summation, each FMA rounding once).
          const double bound = static_cast<double>(c.k) * std::ldexp(1.0, -24) * magnitude + 1e-30;
          ASSERT_LE(std::fabs(y[i * c.n + j] - exact), bound) << "y at " << i << ", " << j;
          // z tanh(z) moves at most 1.2x as far as z does; then a few float32 roundings (of the
          // epilogue's ops and of exp), the sum scaled by the row's factor.
          const double z = exact + double{bias[j]}, res = std::exp(double{res0[i * c.n + j]});
          const double rowScale = scale[i];
          ASSERT_NEAR(r[i * c.n + j], (std::tanh(z) * z + res) * rowScale,
                      std::fabs(rowScale) *
                          (1.2 * (bound + 1e-7) + 1e-6 * (1 + std::fabs(z)) + 1e-6 * res))
              << "o at " << i << ", " << j;
        }
    }
}

TEST(Codegen, RandomRowKernelsMatchTheInterpreter) {
  // 40 random graphs (rows of 1 to 37 values, and of 1500 for the blocked sums) compiled into row
  // kernels against the same graphs run by the interpreter's eager kernels. The kernels sum in
  // another order (vector lanes, blocks of 1024), so they agree to rounding: relative 1e-4 after a
  // few sums of up to 1500 values of at most 1 (float32).
  CacheDir cache;
  int rowKernels = 0;
  for (uint32_t seed = 0; seed < 40; ++seed) {
    const int64_t rows = 1 + static_cast<int64_t>(seed % 5);
    const int64_t cols = seed % 8 == 7 ? 1500 : 2 + static_cast<int64_t>((seed * 7) % 36);
    SCOPED_TRACE("seed " + std::to_string(seed) + ", rows of " + std::to_string(cols));
    ir::Graph g = randomRowGraph(seed, rows, cols);
    ASSERT_TRUE(ir::verify(g).empty()) << ir::verify(g)[0].message;
    std::vector<ir::FusionGroup> groups = passes::findElementwiseGroups(g, codegen::CpuTarget());
    for (const ir::FusionGroup& grp : groups)
      rowKernels += passes::isRowKernel(g, grp) ? 1 : 0;
    auto compiled = codegen::compileElementwise(g, groups);
    ASSERT_TRUE(static_cast<bool>(compiled)) << compiled.diagnostic().message;
    std::vector<ir::FusedKernel> fused;
    for (size_t k = 0; k < groups.size(); ++k) {
      EXPECT_TRUE(compiled.value().failures[k].empty()) << compiled.value().failures[k];
      if (compiled.value().kernelOf[k] >= 0)
        fused.push_back({groups[k], compiled.value().kernelOf[k]});
    }
    KernelTable& table = compiled.value().table;
    if (!fused.empty()) table.load(hal::cpu());
    Plan withKernels = ir::lowerToPlan(g, fused, std::move(table));
    Plan interpreted = ir::lowerToPlan(g);
    std::mt19937 rng(seed + 1000);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<Buffer> args;
    for (ir::ValueId a : g.arguments()) {
      Buffer b = allocateBuffer(hal::cpu(), g.type(a).shape, DType::Float32);
      for (int64_t i = 0; i < b.ref.numel(); ++i)
        b.ref.ptr<float>()[i] = u(rng);
      args.push_back(b);
    }
    std::vector<Buffer> want = runPlan(hal::cpu(), interpreted, args, {});
    std::vector<Buffer> got = runPlan(hal::cpu(), withKernels, args, {});
    for (size_t o = 0; o < want.size(); ++o)
      for (int64_t i = 0; i < want[o].ref.numel(); ++i) {
        const float a = got[o].ref.ptr<float>()[i], b = want[o].ref.ptr<float>()[i];
        ASSERT_NEAR(a, b, 1e-4 * std::max(1.0f, std::fabs(b)))
            << "output " << o << " element " << i;
      }
  }
  EXPECT_GT(rowKernels, 20); // most graphs hold one
}

TEST(Codegen, KernelsAreKeyedByEverythingCodegenReads) {
  // A kernel's cache key describes its group (types, ops, operands, attributes, in-place outputs)
  // instead of its generated code: groups that differ in any of those get different kernels,
  // identical ones share one. Each graph computes y = exp(x * c + b), fused into one kernel.
  CacheDir cache;
  auto graph = [](const std::string& xType, const std::string& bType, const std::string& c,
                  const std::string& op) {
    auto g = ir::parseGraph("graph @g(%x: " + xType + ", %b: " + bType +
                            ") {\n"
                            "  %c = full() {shape = [], dtype = float32, value = " +
                            c + "} : float32[]\n  %m = " + op + "(%x, %c) : " + xType +
                            "\n  %a = add(%m, %b) : " + xType + "\n  %y = exp(%a) : " + xType +
                            "\n  return(%y)\n}\n");
    EXPECT_TRUE(static_cast<bool>(g)) << g.diagnostic().message;
    return std::move(g.value());
  };
  auto symbolOf = [](const ir::Graph& g) {
    std::vector<ir::FusionGroup> groups = passes::findElementwiseGroups(g, codegen::CpuTarget());
    EXPECT_EQ(groups.size(), 1u);
    auto compiled = codegen::compileElementwise(g, groups);
    EXPECT_TRUE(static_cast<bool>(compiled) && compiled.value().kernelOf[0] == 0);
    return compiled.value().table.kernels.at(0).symbol;
  };
  const std::string base = symbolOf(graph("float32[4, 3]", "float32[3]", "2.0", "mul"));
  EXPECT_EQ(symbolOf(graph("float32[4, 3]", "float32[3]", "2.0", "mul")), base);
  std::vector<std::string> others = {
      symbolOf(graph("float32[4, 3]", "float32[3]", "2.5", "mul")),    // a constant's value
      symbolOf(graph("float32[4, 3]", "float32[4, 1]", "2.0", "mul")), // a broadcast input
      symbolOf(graph("float32[3, 4]", "float32[4]", "2.0", "mul")),    // the shape
      symbolOf(graph("float64[4, 3]", "float64[3]", "2.0", "mul")),    // the dtype
      symbolOf(graph("float32[4, 3]", "float32[3]", "2.0", "div"))};   // an op
  for (size_t i = 0; i < others.size(); ++i) {
    EXPECT_NE(others[i], base) << "variant " << i;
    for (size_t j = 0; j < i; ++j)
      EXPECT_NE(others[i], others[j]) << "variants " << i << " and " << j;
  }
}

TEST(Codegen, CacheCanBeTurnedOff) {
  CacheDir cache;
  ::setenv("WEFT_KERNEL_CACHE", "0", 1);
  runKernel(expGraph(4), input(12));
  runKernel(expGraph(4), input(12));
  ::unsetenv("WEFT_KERNEL_CACHE");
  EXPECT_EQ(codegen::kernelCacheStats().misses, 2);
  EXPECT_FALSE(fs::exists(codegen::kernelCacheDir()));
}

/// Past WEFT_CACHE_MAX_MB the cache removes the entries used longest ago (a hit renews an
/// entry) until it holds three quarters of the limit. Seven entries of about 40 KB against a
/// limit of 256 KB (each write is more than an eighth of it, so each checks): after the seventh
/// write, the two oldest unused entries and the next go (280 KB down to 160 KB); the entry read a
/// moment before stays, and so do the newest, and a file the cache did not name.
TEST(Codegen, FullCacheDropsTheEntriesUsedLongestAgo) {
  CacheDir cache;
  struct Limit { // set for this test only, whatever happens in it
    Limit() { ::setenv("WEFT_CACHE_MAX_MB", "0.25", 1); }
    ~Limit() { ::unsetenv("WEFT_CACHE_MAX_MB"); }
  } limit;
  const std::vector<uint8_t> object(40000, 7);
  auto key = [](int i) { return "entry " + std::to_string(i); };
  auto path = [&](int i) {
    return fs::path(codegen::kernelCacheDir()) / (codegen::hashHex(key(i)) + ".wk");
  };
  for (int i = 0; i < 6; ++i) {
    codegen::writeCachedKernel(key(i), object);
    ASSERT_TRUE(fs::exists(path(i))) << i;
    // Used one minute apart, entry 0 first.
    const timespec used{time(nullptr) - 600 + 60 * i, 0};
    const timespec times[2] = {used, used};
    ASSERT_EQ(utimensat(AT_FDCWD, path(i).c_str(), times, 0), 0);
  }
  // A file the cache did not write, old and large: counted for nothing, and left alone.
  const fs::path foreign = fs::path(codegen::kernelCacheDir()) / "notes.wk";
  std::ofstream(foreign) << std::string(100000, 'x');
  const timespec old{time(nullptr) - 86400, 0};
  const timespec oldTimes[2] = {old, old};
  ASSERT_EQ(utimensat(AT_FDCWD, foreign.c_str(), oldTimes, 0), 0);
  EXPECT_TRUE(codegen::readCachedKernel(key(1)).has_value()); // now the entry used last
  codegen::writeCachedKernel(key(6), object);
  EXPECT_TRUE(fs::exists(foreign));
  for (int i : {0, 2, 3})
    EXPECT_FALSE(fs::exists(path(i))) << "entry " << i << " stayed";
  for (int i : {1, 4, 5, 6}) {
    auto entry = codegen::readCachedKernel(key(i));
    ASSERT_TRUE(entry.has_value()) << "entry " << i << " went";
    EXPECT_EQ(*entry, object);
  }
}

TEST(Codegen, CodeForAnotherTargetIsRefused) {
  auto g = expGraph(2);
  auto groups = passes::findElementwiseGroups(g, codegen::CpuTarget());
  auto table = codegen::compileElementwise(g, groups);
  ASSERT_TRUE(static_cast<bool>(table));
  hal::CodeObject code = table.value().table.code.at(0);
  code.target = "aarch64 neoverse-v2 +neon";
  try {
    hal::cpu().load(code, table.value().table.kernels);
    FAIL() << "loaded code for another architecture";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("built for aarch64"), std::string::npos) << e.what();
  }
  code = table.value().table.code.at(0);
  code.bytes.resize(100); // not a loadable shared object
  EXPECT_THROW(hal::cpu().load(code, table.value().table.kernels), DeviceError);
  std::vector<hal::KernelInfo> absent = {{"weft_no_such_kernel", 1, 1}};
  try {
    hal::cpu().load(table.value().table.code.at(0), absent);
    FAIL() << "loaded code lacking a kernel";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("weft_no_such_kernel"), std::string::npos) << e.what();
  }
  code.format = "spirv";
  EXPECT_THROW(hal::cpu().load(code, table.value().table.kernels), DeviceError);
}

TEST(Codegen, NamedCpuTargetsCarryTheirFeatures) {
  auto v3 = codegen::CpuTarget::named("x86-64-v3");
  ASSERT_TRUE(static_cast<bool>(v3)) << v3.diagnostic().message;
  EXPECT_NE(v3.value().features.find("+avx2"), std::string::npos);
  EXPECT_EQ(v3.value().features.find("+avx512f"), std::string::npos);
  EXPECT_EQ(v3.value().codeTarget().rfind("x86_64 x86-64-v3 ", 0), 0u);
  EXPECT_FALSE(static_cast<bool>(codegen::CpuTarget::named("no-such-cpu")));
  // Code for a level below the host's runs here, and computes the same.
  auto g = expGraph(5);
  auto groups = passes::findElementwiseGroups(g, codegen::CpuTarget());
  auto v2 = codegen::CpuTarget::named("x86-64-v2");
  ASSERT_TRUE(static_cast<bool>(v2));
  auto table = codegen::compileElementwise(g, groups, v2.value());
  ASSERT_TRUE(static_cast<bool>(table)) << table.diagnostic().message;
  EXPECT_NO_THROW(hal::cpu().load(table.value().table.code.at(0), table.value().table.kernels));
}

TEST(Codegen, CpuTargetMismatchNamesMissingFeatures) {
  EXPECT_EQ(hal::cpuTargetMismatch(hal::hostArchitecture() + " generic"), "");
  EXPECT_NE(hal::cpuTargetMismatch("riscv64 generic +m").find("built for riscv64"),
            std::string::npos);
}

} // namespace
} // namespace weft
