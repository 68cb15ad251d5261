// Generated CPU code end to end: fused groups become kernels in one shared object that the
// runtime's CPU device loads and launches; the disk cache serves kernels compiled before, and
// rejects damaged entries.
#include "weft/codegen/Elementwise.h"
#include "weft/codegen/KernelCache.h"
#include "weft/ir/Lower.h"
#include "weft/ir/TextFormat.h"
#include "weft/passes/Fusion.h"
#include "weft/runtime/Device.h"
#include "weft/runtime/Error.h"
#include "weft/runtime/Interpreter.h"
#include "weft/runtime/VectorMath.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

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
  std::vector<ir::FusionGroup> groups = passes::findElementwiseGroups(g);
  EXPECT_FALSE(groups.empty());
  auto compiled = codegen::compileElementwise(g, groups);
  EXPECT_TRUE(static_cast<bool>(compiled)) << compiled.diagnostic().message;
  KernelTable& table = compiled.value().table;
  table.loaded = hal::cpu().load(table.code, table.kernels);
  std::vector<ir::FusedKernel> fused;
  for (size_t k = 0; k < groups.size(); ++k)
    fused.push_back({groups[k], compiled.value().kernelOf[k]});
  Plan plan = ir::lowerToPlan(g, fused, std::move(table));
  size_t launches = 0;
  for (const PlanStep& s : plan.steps)
    launches += s.kernel >= 0 ? 1 : 0;
  EXPECT_EQ(launches, groups.size());
  Shape shape = g.type(g.arguments()[0]).shape;
  Buffer in = allocateBuffer(shape, DType::Float32);
  std::copy(x.begin(), x.end(), in.ref.ptr<float>());
  std::vector<Buffer> out = runPlan(plan, std::span(&in, 1), {});
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

TEST(Codegen, AMalformedGroupIsADiagnosticNotACrash) {
  // Codegen is built without exceptions: a group that reads a value it is not given (or a
  // constant without its value) must come back as a diagnostic, not abort the process.
  CacheDir cache;
  ir::Graph g = expGraph(4);
  std::vector<ir::FusionGroup> groups = passes::findElementwiseGroups(g);
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
  EXPECT_NO_THROW(hal::cpu().load(mixed.value().table.code, mixed.value().table.kernels));
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

TEST(Codegen, CodeForAnotherTargetIsRefused) {
  auto g = expGraph(2);
  auto groups = passes::findElementwiseGroups(g);
  auto table = codegen::compileElementwise(g, groups);
  ASSERT_TRUE(static_cast<bool>(table));
  hal::CodeObject code = table.value().table.code;
  code.target = "aarch64 neoverse-v2 +neon";
  try {
    hal::cpu().load(code, table.value().table.kernels);
    FAIL() << "loaded code for another architecture";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("built for aarch64"), std::string::npos) << e.what();
  }
  code = table.value().table.code;
  code.bytes.resize(100); // not a loadable shared object
  EXPECT_THROW(hal::cpu().load(code, table.value().table.kernels), DeviceError);
  std::vector<hal::KernelInfo> absent = {{"weft_no_such_kernel", 1, 1}};
  try {
    hal::cpu().load(table.value().table.code, absent);
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
  auto groups = passes::findElementwiseGroups(g);
  auto v2 = codegen::CpuTarget::named("x86-64-v2");
  ASSERT_TRUE(static_cast<bool>(v2));
  auto table = codegen::compileElementwise(g, groups, v2.value());
  ASSERT_TRUE(static_cast<bool>(table)) << table.diagnostic().message;
  EXPECT_NO_THROW(hal::cpu().load(table.value().table.code, table.value().table.kernels));
}

TEST(Codegen, CpuTargetMismatchNamesMissingFeatures) {
  EXPECT_EQ(hal::cpuTargetMismatch(hal::hostArchitecture() + " generic"), "");
  EXPECT_NE(hal::cpuTargetMismatch("riscv64 generic +m").find("built for riscv64"),
            std::string::npos);
}

} // namespace
} // namespace weft
