// The Vulkan device as far as it goes today: discovery, limits, memory, and moving tensors to and
// from it (its kernels come with codegen's SPIR-V path). CI runs it on Mesa's lavapipe with the
// validation layer on (WEFT_VK_VALIDATE=1, set by the test's ctest entry); where a machine has no
// Vulkan driver at all, these tests say so and skip.
#include "TestUtil.h"
#include "TensorImpl.h" // dispatch: float64 logabsdet without slogdet's float64 exp
#include "TrainModels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <source_location>

namespace weft::test {
namespace {

class Vulkan : public ::testing::Test {
protected:
  void SetUp() override {
    if (hal::vulkanDeviceNames().empty())
      GTEST_SKIP() << "no Vulkan device on this machine (Debian: mesa-vulkan-drivers)";
  }
  const Device vk{"vulkan:0"};
};

TEST_F(Vulkan, DevicesAreListedPreferredFirstWithTheirLimits) {
  std::vector<std::string> names = hal::vulkanDeviceNames();
  // Discrete GPUs first, CPU implementations (lavapipe) last.
  bool sawCpu = false;
  for (const std::string& n : names) {
    if (sawCpu) {
      EXPECT_TRUE(has(n, "(cpu)")) << n << " listed after a CPU device";
    }
    sawCpu = sawCpu || has(n, "(cpu)");
  }
  const hal::Limits& l = hal::device(vk).limits();
  EXPECT_TRUE(has(l.name, "vulkan:0") && has(l.name, names[0])) << l.name;
  EXPECT_GE(l.maxBufferRange, size_t{1} << 27); // Vulkan guarantees 128 MiB
  EXPECT_GE(l.maxAllocation, l.maxBufferRange / 2);
  EXPECT_GE(l.sharedMemoryBytes, 16384u);     // Vulkan's minimum for compute
  EXPECT_GE(l.maxWorkgroupInvocations, 128u); // likewise
  EXPECT_GE(l.maxWorkgroupSize[0], 128u);
  EXPECT_GE(l.subgroupSize, 1u);
  for (const hal::Limits::CooperativeMatrix& c : l.cooperativeMatrix) { // none on lavapipe
    EXPECT_TRUE(c.m > 0 && c.n > 0 && c.k > 0) << c.m << "x" << c.n << "x" << c.k;
    EXPECT_FALSE(c.a.empty() || c.result.empty() || c.scope.empty());
  }
  EXPECT_EQ(&hal::device(Device("vulkan")), &hal::device(vk)); // opened once
  std::string m = messageOf([&] { (void)hal::device(Device(kVulkan, 99)); });
  EXPECT_TRUE(has(m, "vulkan:99")) << m;
}

TEST_F(Vulkan, TensorsMoveThereAndBackUnchanged) {
  manual_seed(2);
  for (DType t : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kUInt8, kBool}) {
    SCOPED_TRACE(dtypeName(t));
    Tensor x = (randn({3, 5}) * 4).to(t);
    Tensor y = x.to(vk);
    EXPECT_EQ(y.device(), vk);
    EXPECT_TRUE(sameBytes(y.cpu(), x));
    EXPECT_TRUE(sameBytes(x.t().to(vk).cpu(), x.t().contiguous())); // densed on the CPU first
    // Views of device memory come back through the bytes they span.
    EXPECT_TRUE(sameBytes(y.t().cpu(), x.t().contiguous()));
    EXPECT_TRUE(sameBytes(y.select(1, 2).cpu(), x.select(1, 2).contiguous()));
    EXPECT_TRUE(sameBytes(y.narrow(1, 1, 3).cpu(), x.narrow(1, 1, 3).contiguous()));
  }
  EXPECT_EQ(zeros({0, 4}).to(vk).cpu().sizes(), (Shape{0, 4}));
  // Larger than the staging buffer: several copies each way.
  Tensor big = arange(5'000'000, kFloat32);
  EXPECT_TRUE(sameBytes(big.to(vk).cpu(), big));
  // Between two buffers of the device, and reading values through it.
  Tensor y = arange(6, kFloat32).to(vk);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(y[3].item<float>(), 3.0f);
  EXPECT_TRUE(has(y.toString(), "device='vulkan:0'"));
}

TEST_F(Vulkan, FactoriesMakeTensorsThere) {
  auto on = TensorOptions().device(vk);
  EXPECT_EQ(zeros({2, 3}, on).cpu().to_vector<float>(), std::vector<float>(6, 0.0f));
  EXPECT_EQ(full({4}, 2.5, on).cpu().to_vector<float>(), std::vector<float>(4, 2.5f));
  manual_seed(9);
  Tensor cpu = randn({7});
  manual_seed(9);
  Tensor r = randn({7}, on); // drawn there, by the same Philox stream
  EXPECT_EQ(r.device(), vk);
  // One generator for every device: the same numbers, to the last bit of float32 (the GPU's
  // log and cos, in float32, against the CPU's in double).
  EXPECT_TRUE(allclose(r.cpu(), cpu, 1e-5, 1e-6));
  manual_seed(4);
  std::vector<float> u = rand({1000}).to_vector<float>();
  manual_seed(4);
  EXPECT_EQ(rand({1000}, on).to_vector<float>(), u); // uniform: exact in float32 too
  Tensor e = empty({3}, on);
  EXPECT_EQ(e.device(), vk);
}

TEST_F(Vulkan, WhatTheDeviceCannotComputeIsAnErrorAndTheDeviceKeepsWorking) {
  Tensor y = ones({4}).to(vk);
  std::string m = messageOf([&] { (void)(y + ones({4})); });
  EXPECT_TRUE(has(m, "cpu") && has(m, "vulkan:0")) << m; // two devices, as on any device
  if (!hal::device(vk).limits().float64) { // lavapipe and the H200 have it
    m = messageOf([&] { (void)(y.to(kFloat64) * 2); });
    EXPECT_TRUE(has(m, "float64")) << m;
  }
  EXPECT_EQ(y.cpu().to_vector<float>(), std::vector<float>(4, 1.0f));
}

/// `f` on the CPU and on the device give the same values (NaN where it is NaN, the same
/// infinities): `tol` relative to max(|cpu|, 1) (GPU transcendentals and summation orders differ from the CPU's in the last bits).
void expectSame(const std::function<Tensor(const Device&)>& f, double tol, const Device& vk,
                std::source_location loc = std::source_location::current()) {
  SCOPED_TRACE(loc.line());
  Tensor c = f(Device::cpu());
  Tensor g = f(vk);
  ASSERT_EQ(g.device(), vk);
  ASSERT_EQ(g.sizes(), c.sizes());
  ASSERT_EQ(g.dtype(), c.dtype());
  Tensor back = g.cpu().to(kFloat64), want = c.to(kFloat64);
  std::vector<double> a = back.reshape({-1}).to_vector<double>(),
                      b = want.reshape({-1}).to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(b[i])) {
      EXPECT_TRUE(std::isnan(a[i])) << i;
      continue;
    }
    if (a[i] == b[i]) continue; // infinities too
    EXPECT_LE(std::abs(a[i] - b[i]), tol * std::max(1.0, std::abs(b[i]))) << i << ": " << a[i]
                                                                         << " vs " << b[i];
  }
}

TEST_F(Vulkan, OpsMatchTheCpu) {
  manual_seed(5);
  Tensor x = randn({6, 7}), w = randn({7, 5}), b3 = randn({2, 6, 7}), y = randn({6, 7});
  Tensor idx = tensor({3, 0, 6, 6, 1, 2}, TensorOptions().dtype(kInt64)).reshape({6, 1});
  const double f32 = 1e-5, loose = 1e-4;
  auto on = [](const Tensor& t, const Device& d) { return t.to(d); };
  expectSame([&](const Device& d) { return on(x, d) + on(y, d) * 2.0; }, f32, vk);
  expectSame([&](const Device& d) { return (on(x, d).t() - on(y, d).t()).exp(); }, loose, vk);
  expectSame([&](const Device& d) { return on(x, d).relu() + on(x, d).sigmoid(); }, loose, vk);
  expectSame([&](const Device& d) { return where(on(x, d) > 0, on(x, d), on(y, d)); }, 0, vk);
  expectSame([&](const Device& d) { return on(x, d).to(kInt32) + 1; }, 0, vk);
  expectSame([&](const Device& d) { return on(x, d).to(kBFloat16) * 3; }, 0, vk);
  expectSame([&](const Device& d) { return on(x, d).matmul(on(w, d)); }, loose, vk);
  expectSame([&](const Device& d) { return on(b3, d).matmul(on(w, d)); }, loose, vk);
  expectSame([&](const Device& d) { return on(w, d).t().matmul(on(x, d).t()); }, loose, vk);
  expectSame([&](const Device& d) { return on(x, d).sum(); }, loose, vk);
  expectSame([&](const Device& d) { return on(b3, d).sum({0, 2}); }, loose, vk);
  expectSame([&](const Device& d) { return on(b3, d).mean(1, true); }, loose, vk);
  expectSame([&](const Device& d) { return on(x, d).amax(1); }, 0, vk);
  expectSame([&](const Device& d) { return on(x, d).amin(0); }, 0, vk);
  expectSame([&](const Device& d) { return on(x, d).prod(1); }, loose, vk);
  expectSame([&](const Device& d) { return on(x, d).argmax(1); }, 0, vk);
  expectSame([&](const Device& d) { return on(x, d).softmax(1); }, loose, vk);
  expectSame([&](const Device& d) { return on(x, d).log_softmax(0); }, loose, vk);
  expectSame([&](const Device& d) { return on(x, d).cumsum(1); }, loose, vk);
  expectSame([&](const Device& d) { return on(x, d).argsort(1, true); }, 0, vk);
  expectSame([&](const Device& d) { return (on(x, d) * 2).round().argsort(0); }, 0, vk); // ties
  expectSame([&](const Device& d) { return on(x, d).gather(1, on(idx, d)); }, 0, vk);
  expectSame([&](const Device& d) { return on(x, d).index_select(1, on(idx, d).reshape({-1})); },
             0, vk);
  expectSame([&](const Device& d) { return zeros({6, 7}).to(d).scatter_add(1, on(idx, d), on(y, d)); },
             f32, vk);
  expectSame([&](const Device& d) {
    return zeros({6, 7}).to(d).index_add(1, on(idx, d).reshape({-1}), on(y, d).narrow(1, 0, 6));
  }, f32, vk);
  expectSame([&](const Device& d) { return cat({on(x, d), on(y, d)}, 1); }, 0, vk);
  expectSame([&](const Device& d) { return on(x, d).flip({0}).contiguous(); }, 0, vk);
  expectSame([&](const Device& d) { return on(x, d).t().reshape({-1}); }, 0, vk);
  // Lines past a workgroup's chunk (64 Ki elements) reduce in two passes.
  Tensor longLine = randn({3, 300000});
  expectSame([&](const Device& d) { return on(longLine, d).sum(1); }, loose, vk);
  expectSame([&](const Device& d) { return on(longLine, d).amax(); }, 0, vk);
  expectSame([&](const Device& d) { return ones({1 << 22}).to(d).sum(); }, 0, vk);
  // 128 x 128 blocks where there are 128 or more of them (272 here), 64 x 64 ones where not (68
  // would be), over edges that are no multiple of either.
  Tensor wide = randn({2000, 8}), across = randn({8, 2100});
  expectSame([&](const Device& d) { return on(wide, d).matmul(on(across, d)); }, loose, vk);
  expectSame([&](const Device& d) { return on(wide, d).narrow(0, 0, 500).matmul(on(across, d)); },
             loose, vk);
  // A grid of few blocks over a long K is split (split-K): parts summed into out, float32 or
  // rounded to a 16-bit float once at the end.
  Tensor tall = randn({8, 3000}), thin = randn({3000, 5});
  expectSame([&](const Device& d) { return on(tall, d).matmul(on(thin, d)); }, loose, vk);
  expectSame([&](const Device& d) {
    return on(tall, d).to(kBFloat16).matmul(on(thin, d).to(kBFloat16));
  }, 1e-2, vk);
  Tensor images = randn({16, 3, 32, 32}), kernel = randn({4, 3, 3, 3});
  expectSame([&](const Device& d) {
    Tensor w = on(kernel, d).detach().requires_grad_();
    conv2d(on(images, d), w, {}, {1, 1}, {1, 1}).square().sum().backward();
    return w.grad(); // conv_weight_grad: 4 x 27 outputs over K = 16 * 32 * 32
  }, loose, vk);
  // An embedding's gradient: index_add of many repeated rows into few (through the index's
  // order), each row's sources added in the index's order, as the CPU adds them: the same bits.
  Tensor tokens = randint(0, 40, {300}), rows = randn({300, 16}), table = randn({40, 16});
  expectSame([&](const Device& d) {
    return on(table, d).index_add(0, on(tokens, d), on(rows, d));
  }, 0, vk);
  expectSame([&](const Device& d) {
    return zeros({16, 40}).to(d).index_add(1, on(tokens, d), on(rows, d).t());
  }, 0, vk);
  // An index out of range is an IndexError, as on the CPU, and the device keeps working.
  std::string m = messageOf([&] { (void)x.to(vk).gather(1, (idx + 10).to(vk)); });
  EXPECT_TRUE(has(m, "out of bounds")) << m;
  for (int64_t bad : {40, -1}) {
    Tensor wrong = tokens.clone();
    wrong.index_put_({Tensor(full({}, 7, kInt64))}, full({}, bad, kInt64));
    m = messageOf([&] { (void)zeros({40, 16}).to(vk).index_add(0, wrong.to(vk), rows.to(vk)); });
    EXPECT_TRUE(has(m, "out of bounds") && has(m, "index_add")) << m;
  }
  expectSame([&](const Device& d) { return on(x, d) * 2; }, 0, vk);
}

TEST_F(Vulkan, Float64KeepsItsPrecisionWhereTheDeviceHasIt) {
  if (!hal::device(vk).limits().float64) GTEST_SKIP() << "no float64 in this device's shaders";
  manual_seed(8);
  // Digits float32 would lose: 1 + 1e-12, sums and products of float64 values.
  Tensor one = full({4}, 1.0, TensorOptions().dtype(kFloat64)), tiny = one * 1e-12;
  EXPECT_EQ(((one.to(vk) + tiny.to(vk)) - one.to(vk)).cpu().to_vector<double>(),
            ((one + tiny) - one).to_vector<double>());
  Tensor a = randn({40, 300}, TensorOptions().dtype(kFloat64)),
         b = randn({300, 20}, TensorOptions().dtype(kFloat64));
  auto on = [](const Tensor& t, const Device& d) { return t.to(d); };
  // Sums in another order than the CPU's: float64 rounding, 1e-12 relative.
  expectSame([&](const Device& d) { return on(a, d).matmul(on(b, d)); }, 1e-12, vk);
  expectSame([&](const Device& d) { return on(a, d).sum(1) + on(a, d).amax(0).sum(); }, 1e-12, vk);
  expectSame([&](const Device& d) { return (on(a, d) * 3 - 1).sqrt().nan_to_num(0.0); }, 1e-12, vk);
  expectSame([&](const Device& d) { return on(a, d).cumsum(1); }, 1e-12, vk);
  // Ops whose math functions Vulkan has in 32 bits only run on the host's float64 kernels: the
  // CPU's bits, the result on the device.
  expectSame([&](const Device& d) { return on(a, d).exp() + on(a, d).sin(); }, 0, vk);
  expectSame([&](const Device& d) { return on(a, d).log_softmax(1); }, 0, vk);
  expectSame([&](const Device& d) { return on(a, d).logcumsumexp(1); }, 0, vk);
  expectSame([&](const Device& d) {
    Tensor leaf = on(a, d).detach().requires_grad_();
    leaf.tanh().sum().backward();
    return leaf.grad();
  }, 1e-15, vk);
  expectSame([&](const Device& d) {
    manual_seed(3);
    return randn({64}, TensorOptions().dtype(kFloat64).device(d));
  }, 0, vk);
}

TEST_F(Vulkan, SpecialFunctionsMatchTheCpuAtTheEdgesOfTheirDomains) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  Tensor x = tensor({-0.0, 0.0, 1e-6, 0.5, 1.0, 1.4616321, 2.0, 3.5, 9.99, 10.0, 50.0, 1e4, 3e36,
                     -0.5, -1.0, -2.5, -3.7, -1e-3, -25.25, inf, -inf, nan});
  auto on = [](const Tensor& t, const Device& d) { return t.to(d); };
  // float32 formulas against the CPU's float64 ones: 1e-5 relative to max(|value|, 1) (the sums
  // near lgamma's and digamma's roots cancel to an absolute error of a few ulp of 10).
  expectSame([&](const Device& d) { return on(x, d).lgamma(); }, 1e-5, vk);
  expectSame([&](const Device& d) { return on(x, d).digamma(); }, 1e-5, vk);
  Tensor p = tensor({-1.0, -0.999999, -0.9, -0.5, -1e-4, -0.0, 0.0, 1e-7, 0.3, 0.7, 0.9999,
                     0.99999994, 1.0, 1.5, -2.0, nan});
  // erfinv's tails: float32 ulps of a value near 1 are 6e-8 wide, which its inverse stretches.
  expectSame([&](const Device& d) { return on(p, d).erfinv(); }, 2e-5, vk);
  Tensor s = tensor({2.0, 2.0, 3.0, 1.5, 2.0, 4.0, 1.0, 0.5, 3.0, 2.5, 2.0, 2.0, 30.0, nan, 2.0});
  Tensor q = tensor({1.0, 0.3, 2.0, 7.5, -2.5, -3.5, 1.0, 1.0, -2.0, -1.5, 1e5, -40.25, 2.0, 1.0,
                     inf});
  expectSame([&](const Device& d) { return on(s, d).zeta(on(q, d)); }, 1e-5, vk);
  // Integer ops: exact, with the CPU's wrapping and signs.
  for (DType t : {kInt32, kInt64, kUInt8}) {
    SCOPED_TRACE(dtypeName(t));
    const bool u = t == kUInt8;
    Tensor a = tensor({7, -7, 7, -7, 0, 12, -12, 2147483647, u ? 255 : -2147483647 - 1, 5, -1, 3})
                   .to(t),
           b = tensor({2, 2, -2, -2, 5, 18, 8, 3, -1, 0, 31, 40}).to(t);
    Tensor nonzero = where(b == 0, ones_like(b), b);
    expectSame([&](const Device& d) { return on(a, d).pow(on(b, d)); }, 0, vk);
    expectSame([&](const Device& d) { return on(a, d).fmod(on(nonzero, d)); }, 0, vk);
    expectSame([&](const Device& d) { return on(a, d).floor_divide(on(nonzero, d)); }, 0, vk);
    expectSame([&](const Device& d) { return on(a, d).gcd(on(b, d)); }, 0, vk);
    expectSame([&](const Device& d) { return on(a, d).lcm(on(b, d)); }, 0, vk);
    // A zero divisor is the CPU's ValueError, and the device keeps working.
    for (std::string m : {messageOf([&] { (void)a.to(vk).fmod(b.to(vk)); }),
                          messageOf([&] { (void)a.to(vk).floor_divide(b.to(vk)); })})
      EXPECT_TRUE(has(m, "integer division by zero")) << m;
    expectSame([&](const Device& d) { return on(a, d) + on(b, d); }, 0, vk);
  }
}

TEST_F(Vulkan, FactorizationsRunOnTheDeviceAsTheCpuFactors) {
  manual_seed(9);
  // 70 x 70: more rows and columns than a workgroup's 64 invocations share at once.
  Tensor a = randn({3, 4, 4}), big = randn({2, 70, 70}) + eye(70) * 12;
  Tensor spd = a.matmul(a.transpose(1, 2)) + eye(4) * 4,
         bigSpd = big.matmul(big.transpose(1, 2)) / 70 + eye(70);
  Tensor tall = randn({2, 80, 70}), wide = randn({3, 5});
  auto on = [](const Tensor& t, const Device& d) { return t.to(d); };
  // float32 LU, Cholesky and Householder steps in another order than LAPACK's blocked ones:
  // relative to the larger of 1 and the value, a few hundred ulps over 70 steps.
  const double tol = 1e-4;
  for (const Tensor& x : {a, big}) {
    expectSame([&](const Device& d) { return linalg_inv(on(x, d).transpose(1, 2)); }, tol, vk);
    expectSame([&](const Device& d) { return std::get<1>(linalg_slogdet(on(x, d))); }, tol, vk);
  }
  expectSame([&](const Device& d) { return linalg_det(on(a, d)); }, tol, vk);
  expectSame([&](const Device& d) { return linalg_det(on(big, d) / 12); }, tol, vk);
  expectSame([&](const Device& d) { return linalg_cholesky(on(spd, d)); }, tol, vk);
  expectSame([&](const Device& d) { return linalg_cholesky(on(bigSpd, d)); }, tol, vk);
  // Q and R with LAPACK's signs (beta = -sign(alpha) |x|), tall and wide; a column already zero
  // below its diagonal is left as it is (tau 0: R keeps the +2 there).
  Tensor reduced = tensor({2.0, 1.0, 0.0, 3.0, 0.0, 4.0}).reshape({3, 2});
  for (const Tensor& x : {tall, wide, reduced}) {
    expectSame([&](const Device& d) { return std::get<0>(linalg_qr(on(x, d))); }, tol, vk);
    expectSame([&](const Device& d) { return std::get<1>(linalg_qr(on(x, d))); }, tol, vk);
  }
  if (hal::device(vk).limits().float64) { // float64 registers: LAPACK's double precision
    const double f64 = 1e-10;
    Tensor x = big.to(kFloat64);
    expectSame([&](const Device& d) { return linalg_inv(on(x, d)); }, f64, vk);
    expectSame([&](const Device& d) { return linalg_cholesky(on(bigSpd.to(kFloat64), d)); }, f64, vk);
    expectSame([&](const Device& d) { return std::get<1>(linalg_qr(on(tall.to(kFloat64), d))); },
               f64, vk);
    // logabsdet's log is 32-bit in Vulkan: float64 ones are the host's.
    expectSame([&](const Device& d) { return dispatch(OpCode::LogAbsDet, {on(x, d)}); }, f64, vk);
  }
  // The symmetric eigendecomposition and the SVD are the host's LAPACK's (their vectors' signs).
  expectSame([&](const Device& d) { return linalg_eigvalsh(on(spd, d)); }, tol, vk);
  expectSame([&](const Device& d) { return linalg_svdvals(on(tall, d)); }, tol, vk);
  expectSame([&](const Device& d) {
    Tensor leaf = on(a, d).detach().requires_grad_();
    linalg_inv(leaf).sum().backward();
    return leaf.grad();
  }, tol, vk);
  // A singular matrix and one not positive-definite are the CPU's errors, naming the same
  // LAPACK info (the pivot of A^T's LU, the leading minor), and the device keeps working.
  Tensor singular = tensor({1.0, 2.0, 3.0, 2.0, 4.0, 6.0, 1.0, 1.0, 1.0}).reshape({3, 3});
  Tensor indefinite = tensor({1.0, 2.0, -1.0, 4.0}).diag();
  auto sameError = [&](const std::function<void(const Device&)>& f, const std::string& says) {
    auto text = [&](const Device& d) {
      std::string m = messageOf([&] { f(d); });
      return m.substr(0, m.find(" (called from")); // the lines differ
    };
    const std::string m = text(vk);
    EXPECT_TRUE(has(m, says)) << m;
    EXPECT_EQ(m, text(Device::cpu()));
  };
  for (const Tensor& x : {singular, singular.t(), zeros({2, 2})})
    sameError([&](const Device& d) { (void)linalg_inv(on(x, d)); }, "singular");
  sameError([&](const Device& d) { (void)linalg_cholesky(on(indefinite, d)); },
            "order 3 is not positive-definite");
  expectSame([&](const Device& d) { return linalg_det(on(singular, d)); }, tol, vk);
  expectSame([&](const Device& d) { return linalg_det(on(a, d)) * 2; }, tol, vk);
}

TEST_F(Vulkan, GradientsRunOnTheDevice) {
  manual_seed(6);
  Tensor x0 = randn({8, 5}), w0 = randn({5, 3});
  Tensor target = tensor({0, 2, 1, 1, 0, 2, 2, 1}, TensorOptions().dtype(kInt64));
  auto grads = [&](const Device& d) {
    Tensor x = x0.to(d), w = w0.to(d).detach().requires_grad_(true);
    Tensor loss = nn::functional::cross_entropy(x.matmul(w).relu(), target.to(d));
    loss.backward();
    return std::vector<Tensor>{loss, w.grad()};
  };
  std::vector<Tensor> c = grads(Device::cpu()), g = grads(vk);
  for (size_t i = 0; i < c.size(); ++i) {
    EXPECT_EQ(g[i].device(), vk);
    EXPECT_TRUE(allclose(g[i].cpu(), c[i], 1e-4, 1e-5)) << i;
  }
}

/// An LSTM over a sequence and a linear head on each step's output.
class SeqImpl : public nn::Module {
public:
  SeqImpl(int64_t in, int64_t hidden, int64_t classes) {
    lstm = register_module("lstm", nn::LSTM(nn::LSTMOptions(in, hidden).batch_first(true)));
    head = register_module("head", nn::Linear(hidden, classes));
  }
  Tensor forward(const Tensor& x) { return head(std::get<0>(lstm(x))); }
  nn::LSTM lstm = nullptr;
  nn::Linear head = nullptr;
};
WEFT_MODULE(Seq);

/// `make()` trained eagerly for 20 steps on the CPU and on the device from the same initial
/// weights: the losses of every step and the final weights agree. Tolerance 2e-3 relative: the
/// GPU's transcendentals and summation orders differ from the CPU's in the last bits, and 20 steps
/// carry those differences forward. SGD with momentum, or (`adamw`) AdamW, whose weights are
/// compared within its learning rate: Adam moves a weight whose gradient is only rounding noise by
/// its whole learning rate, in the noise's direction (its losses still agree within 2e-3).
template <typename Make>
void trainsAlike(Make make, const Tensor& x, const Tensor& y, const Device& vk,
                 bool compiled = false, bool adamw = false) {
  manual_seed(11);
  auto cpuModel = make();
  manual_seed(11);
  auto devModel = make();
  devModel->to(vk);
  auto optimizer = [&](auto& model) -> std::unique_ptr<optim::Optimizer> {
    if (adamw)
      return std::make_unique<optim::AdamW>(model->parameters(), optim::AdamWOptions(1e-2));
    return std::make_unique<optim::SGD>(model->parameters(),
                                        optim::SGDOptions(0.05).momentum(0.9));
  };
  std::unique_ptr<optim::Optimizer> cpuOptimizer = optimizer(cpuModel),
                                    devOptimizer = optimizer(devModel);
  optim::Optimizer &cpuOpt = *cpuOptimizer, &devOpt = *devOptimizer;
  auto cpuStep = bench::trainStep(cpuModel, cpuOpt), devStep = bench::trainStep(devModel, devOpt);
  using Step = decltype(compile(devStep));
  std::shared_ptr<Step> step;
  if (compiled) {
    step = std::make_shared<Step>(compile(devStep, CompileOptions().device(vk)));
    devStep = [step](const Tensor& a, const Tensor& b) { return (*step)(a, b); };
  }
  const Tensor xd = x.to(vk), yd = y.to(vk);
  for (int i = 0; i < 20; ++i) {
    SCOPED_TRACE("step " + std::to_string(i));
    const float a = Tensor(cpuStep(x, y)).item<float>();
    const Tensor l = devStep(xd, yd);
    ASSERT_EQ(l.device(), vk);
    EXPECT_NEAR(l.item<float>(), a, 2e-3 * std::max(1.0f, std::abs(a)));
  }
  // The compiled step's elementwise work (the SGD update, activations, their gradients) runs as
  // generated SPIR-V kernels.
  if (step) {
    EXPECT_GT(step->compiled().num_kernels(), 0u);
  }
  std::vector<Tensor> pc = cpuModel->parameters(), pd = devModel->parameters();
  ASSERT_EQ(pc.size(), pd.size());
  const double tolerance = adamw ? 1e-2 : 2e-3;
  for (size_t i = 0; i < pc.size(); ++i) {
    EXPECT_EQ(pd[i].device(), vk);
    EXPECT_TRUE(allclose(pd[i].cpu(), pc[i], tolerance, tolerance))
        << "parameter " << i << ": largest difference "
        << (pd[i].cpu() - pc[i]).abs().max().item<float>();
  }
}

TEST_F(Vulkan, EagerTrainStepsMatchTheCpu) {
  manual_seed(3);
  {
    SCOPED_TRACE("mlp");
    trainsAlike([] { return bench::Mlp(12, 32, 5); }, randn({16, 12}), randint(0, 5, {16}), vk);
  }
  {
    SCOPED_TRACE("transformer");
    trainsAlike([] { return bench::Gpt(11, 6, 8, 2, 1, 16); }, randint(0, 11, {2, 6}),
                randint(0, 11, {2, 6}), vk);
  }
  {
    SCOPED_TRACE("lstm");
    trainsAlike([] { return Seq(3, 8, 4); }, randn({2, 5, 3}), randint(0, 4, {2, 5}), vk);
  }
  {
    SCOPED_TRACE("cnn");
    trainsAlike([] { return bench::Cnn(4, 6, 8, 16, 3); }, randn({4, 1, 8, 8}), randint(0, 3, {4}),
                vk);
  }
  {
    SCOPED_TRACE("transformer, adamw"); // its step count a float32 on the device
    trainsAlike([] { return bench::Gpt(11, 6, 8, 2, 1, 16); }, randint(0, 11, {2, 6}),
                randint(0, 11, {2, 6}), vk, false, true);
  }
}

TEST_F(Vulkan, CompiledTrainStepsMatchTheCpu) {
  manual_seed(3);
  {
    SCOPED_TRACE("mlp");
    trainsAlike([] { return bench::Mlp(12, 32, 5); }, randn({16, 12}), randint(0, 5, {16}), vk,
                true);
  }
  {
    SCOPED_TRACE("transformer");
    trainsAlike([] { return bench::Gpt(11, 6, 8, 2, 1, 16); }, randint(0, 11, {2, 6}),
                randint(0, 11, {2, 6}), vk, true);
  }
  {
    SCOPED_TRACE("lstm");
    trainsAlike([] { return Seq(3, 8, 4); }, randn({2, 5, 3}), randint(0, 4, {2, 5}), vk, true);
  }
  {
    SCOPED_TRACE("cnn");
    trainsAlike([] { return bench::Cnn(4, 6, 8, 16, 3); }, randn({4, 1, 8, 8}), randint(0, 3, {4}),
                vk, true);
  }
  {
    // AdamW, its state made inside the first compiled step (on the device: traced values are
    // where the graph runs), its step count a float32 on the device (bias corrections in float32
    // there, where the CPU's are float64: within the tolerance); the transformer makes its
    // positions with arange(n, device) inside the step.
    SCOPED_TRACE("transformer, adamw");
    trainsAlike([] { return bench::Gpt(11, 6, 8, 2, 1, 16); }, randint(0, 11, {2, 6}),
                randint(0, 11, {2, 6}), vk, true, true);
  }
}

TEST_F(Vulkan, CompiledKernelsReadStateBeforeItIsWrittenOver) {
  // A scalar read through a computation by a larger part and written over in place by the
  // scalar part: every read sees the old value, as eagerly (a horizontal kernel whose parts
  // would race on it is not built).
  manual_seed(6);
  Tensor a = randn({}).to(vk), b = a.clone();
  auto f = [](Tensor& s, const Tensor& x) {
    Tensor old = s * 2;
    s.add_(1);
    return x * old + s;
  };
  auto compiled = compile([&](const Tensor& x) { return f(a, x); }, CompileOptions().device(vk));
  for (int i = 0; i < 3; ++i) {
    const Tensor x = randn({4096}).to(vk);
    const Tensor want = f(b, x);
    EXPECT_TRUE(allclose(compiled(x).cpu(), want.cpu(), 1e-6, 1e-6)) << "call " << i;
    EXPECT_TRUE(allclose(a.cpu(), b.cpu(), 0, 0)) << "call " << i;
  }
}

TEST_F(Vulkan, AdamKeepsItsStepCountOnTheDevice) {
  // Beside a parameter on the GPU, the step count is a float32 there (PyTorch's fused Adam's);
  // a state dict saved on the CPU loads into it converted, and training goes on.
  manual_seed(5);
  nn::Linear cpuLayer(4, 3), devLayer(4, 3);
  devLayer->to(vk);
  optim::AdamW cpuOpt(cpuLayer->parameters(), optim::AdamWOptions(1e-2));
  optim::AdamW devOpt(devLayer->parameters(), optim::AdamWOptions(1e-2));
  const Tensor x = randn({5, 4});
  for (int i = 0; i < 2; ++i) {
    cpuLayer(x).square().sum().backward();
    cpuOpt.step();
    devLayer(x.to(vk)).square().sum().backward();
    devOpt.step();
  }
  const Tensor onCpu = cpuOpt.state_dict().at("state.0.step");
  EXPECT_EQ(onCpu.device(), Device::cpu());
  EXPECT_EQ(onCpu.dtype(), kFloat64);
  Tensor onDevice = devOpt.state_dict().at("state.0.step");
  EXPECT_EQ(onDevice.device(), vk);
  EXPECT_EQ(onDevice.dtype(), kFloat32);
  EXPECT_EQ(onDevice.item<float>(), 2.0f);
  cpuLayer(x).square().sum().backward();
  cpuOpt.step(); // three steps now
  devOpt.load_state_dict(cpuOpt.state_dict());
  onDevice = devOpt.state_dict().at("state.0.step");
  EXPECT_EQ(onDevice.device(), vk);
  EXPECT_EQ(onDevice.dtype(), kFloat32);
  EXPECT_EQ(onDevice.item<float>(), 3.0f);
  devLayer(x.to(vk)).square().sum().backward();
  devOpt.step();
  EXPECT_EQ(devOpt.state_dict().at("state.0.step").item<float>(), 4.0f);
  // Into an optimizer that has no state yet: every tensor of it lands beside its parameter.
  optim::AdamW fresh(devLayer->parameters(), optim::AdamWOptions(1e-2));
  fresh.load_state_dict(cpuOpt.state_dict());
  for (const auto& [name, value] : fresh.state_dict())
    if (name.rfind("state.", 0) == 0) {
      EXPECT_EQ(value.device(), vk) << name;
    }
  devLayer(x.to(vk)).square().sum().backward();
  fresh.step();
  EXPECT_EQ(fresh.state_dict().at("state.0.step").item<float>(), 4.0f);
}

TEST_F(Vulkan, CompiledFunctionsRunOnTheirDeviceAndBackwardThroughThem) {
  manual_seed(4);
  nn::Linear layer(6, 3);
  layer->to(vk);
  auto forward = [&](const Tensor& x) { return (layer(x).tanh() * 2).softmax(1); };
  auto compiled = compile(forward, CompileOptions().device(vk));
  const Tensor x = randn({5, 6}).to(vk);
  const std::vector<Tensor> params = layer->parameters();
  Tensor want = forward(x);
  std::vector<Tensor> wantGrads = autograd::grad({(want * want).sum()}, params);
  Tensor got = compiled(x);
  EXPECT_EQ(got.device(), vk);
  EXPECT_TRUE(allclose(got.cpu(), want.cpu(), 1e-5, 1e-6));
  // The compiled forward, and eager backward from its outputs, on the device.
  std::vector<Tensor> gotGrads = autograd::grad({(got * got).sum()}, params);
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(gotGrads[i].device(), vk);
    EXPECT_TRUE(allclose(gotGrads[i].cpu(), wantGrads[i].cpu(), 1e-4, 1e-6)) << "parameter " << i;
  }
  // Tensors of another device than the function's are an error naming both.
  std::string m = messageOf<DeviceError>([&] { compiled(randn({5, 6})); });
  EXPECT_TRUE(has(m, "argument 0 is on cpu") && has(m, "runs on vulkan:0")) << m;
  auto onCpu = compile(forward);
  m = messageOf<DeviceError>([&] { onCpu(x); });
  EXPECT_TRUE(has(m, "runs on cpu")) << m;
}

TEST_F(Vulkan, MemoryPastTheDeviceIsACleanErrorAndAllocationGoesOn) {
  const hal::Limits& l = hal::device(vk).limits();
  const auto past = static_cast<int64_t>(std::max(l.maxAllocation, l.maxBufferRange) / 4 + 1);
  std::string m = messageOf([&] { (void)empty({past}, TensorOptions().device(vk)); });
  EXPECT_TRUE(has(m, "vulkan:0") && has(m, "bytes")) << m;
  // Exhaust what the device gives in buffers of up to 256 MiB (bounded: at most 16 of them), then
  // free them.
  const auto floats = static_cast<int64_t>(std::min<size_t>(l.maxBufferRange, 256 << 20) / 4);
  std::vector<Tensor> held;
  bool refused = false;
  for (int i = 0; i < 16 && !refused; ++i) {
    try {
      held.push_back(empty({floats}, TensorOptions().device(vk)));
    } catch (const DeviceError& e) {
      refused = true;
      EXPECT_TRUE(has(e.what(), "memory")) << e.what();
    }
  }
  held.clear();
  EXPECT_TRUE(sameBytes(arange(1000, kFloat32).to(vk).cpu(), arange(1000, kFloat32)));
}

TEST_F(Vulkan, ManySmallTensorsShareAllocations) {
  // More live tensors than drivers allow allocations (often 4096): small ones are carved from
  // shared slabs, each keeping its own bytes.
  std::vector<Tensor> many;
  for (int i = 0; i < 6000; ++i)
    many.push_back(full({3}, i, TensorOptions().device(vk)));
  for (int i = 0; i < 6000; i += 997)
    EXPECT_EQ(many[static_cast<size_t>(i)].cpu().to_vector<float>(),
              std::vector<float>(3, static_cast<float>(i)));
  Tensor sum = many[5].add(many[7]);
  EXPECT_EQ(sum.cpu().to_vector<float>(), std::vector<float>(3, 12.0f));
}

TEST_F(Vulkan, TheValidationLayerReportedNothing) {
  // Last in this file: every Vulkan call above ran under the layer (WEFT_VK_VALIDATE=1 in CI).
  (void)ones({8}).to(vk).cpu();
  const char* asked = std::getenv("WEFT_VK_VALIDATE");
  if (asked != nullptr && std::string(asked) == "1") {
    EXPECT_TRUE(hal::vulkanValidationActive());
  }
  EXPECT_EQ(hal::vulkanValidationMessages(), 0);
}

} // namespace
} // namespace weft::test
