// Devices as users meet them: names, tensors on a device, moves between devices with their
// gradients, factories and modules on a device, eager train steps there, and the errors for two
// devices in one op or a device this process lacks. The null device stands in for a GPU: its
// memory is not host memory to the code above the runtime, so nothing may read it directly.
#include "TestUtil.h"
#include "TrainModels.h"

#include "weft/runtime/Blas.h"

#include <gtest/gtest.h>

namespace weft::test {
namespace {

const Device kNull("null:0");

/// The kind of the weft::Error `fn` throws (Internal if it throws none).
template <typename Fn> ErrorKind errorKindOf(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.kind();
  }
  ADD_FAILURE() << "no error was thrown";
  return ErrorKind::Internal;
}

TEST(Device, NamesAsLibTorch) {
  EXPECT_EQ(Device("cpu"), Device::cpu());
  EXPECT_EQ(Device("cpu"), Device(kCPU));
  EXPECT_EQ(Device("vulkan"), Device(kVulkan, 0));
  EXPECT_EQ(Device("vulkan:2").index(), 2);
  EXPECT_EQ(Device("null:1").str(), "null:1");
  EXPECT_EQ(Device(kVulkan, 1).str(), "vulkan:1");
  EXPECT_EQ(Device::cpu().str(), "cpu");
  EXPECT_TRUE(Device("cpu").is_cpu());
  EXPECT_TRUE(Device("vulkan:0").is_vulkan());
  for (const char* bad : {"gpu", "cuda:0", "vulkan:", "vulkan:-1", "vulkan:1x", ""})
    EXPECT_TRUE(has(messageOf([&] { (void)Device(std::string_view(bad)); }), "Device")) << bad;
}

TEST(Device, ATensorCarriesItsDeviceAndMovesWithTo) {
  Tensor x = arange(6, kFloat32).reshape({2, 3});
  EXPECT_TRUE(x.is_cpu());
  Tensor y = x.to(kNull);
  EXPECT_EQ(y.device(), kNull);
  EXPECT_FALSE(y.is_cpu());
  EXPECT_TRUE(y.to(kNull).is_same(y)); // already there: itself
  EXPECT_EQ(y.cpu().to_vector<float>(), x.to_vector<float>());
  EXPECT_EQ(y.to_vector<float>(), x.to_vector<float>()); // reads go through the device
  EXPECT_EQ(y.sum().item<float>(), 15.0f);
  EXPECT_EQ(x.t().to(kNull).cpu().to_vector<float>(), x.t().contiguous().to_vector<float>());
  // Between two devices of one kind, and as another dtype in one call.
  EXPECT_EQ(y.to(Device("null:1")).device(), Device("null:1"));
  Tensor z = x.to(kNull, kFloat64);
  EXPECT_EQ(z.dtype(), kFloat64);
  EXPECT_EQ(z.device(), kNull);
  EXPECT_EQ(y.options().device_, kNull);
  // Printed as PyTorch prints a tensor on a GPU.
  EXPECT_EQ(z.toString(), "tensor([[0., 1., 2.],\n        [3., 4., 5.]], device='null:0', "
                          "dtype=torch.float64)");
}

TEST(Device, TheHostCannotReadADevicesMemoryDirectly) {
  Tensor y = ones({3}).to(kNull);
  std::string m = messageOf([&] { (void)y.data_ptr(); });
  EXPECT_TRUE(has(m, "null:0") && has(m, ".cpu()")) << m;
  EXPECT_EQ(errorKindOf([&] { (void)y.data_ptr<float>(); }), ErrorKind::Device);
}

TEST(Device, OpsOnTwoDevicesAreAnErrorNamingBoth) {
  Tensor a = ones({3}), b = ones({3}).to(kNull), c = ones({3}).to(Device("null:1"));
  for (auto f :
       std::vector<std::function<void()>>{[&] { (void)(a + b); }, [&] { (void)b.matmul(a); },
                                          [&] { (void)where(b > 0, a, b); }, [&] { (void)(b * c); },
                                          [&] {
                                            (void)cat({a, b});
                                          }}) {
    std::string m = messageOf(f);
    EXPECT_EQ(errorKindOf(f), ErrorKind::Device) << m;
    EXPECT_TRUE(has(m, "null:")) << m;
  }
  std::string m = messageOf([&] { (void)(a + b); });
  EXPECT_TRUE(has(m, "cpu") && has(m, "null:0") && has(m, "add")) << m;
  // In place: the result of another device is refused, copy_ moves it (as PyTorch's copy_).
  EXPECT_EQ(errorKindOf([&] { b.add_(a); }), ErrorKind::Device);
  Tensor d = zeros({3}).to(kNull);
  d.copy_(arange(3, kFloat32));
  EXPECT_EQ(d.device(), kNull);
  EXPECT_EQ(d.to_vector<float>(), (std::vector<float>{0, 1, 2}));
}

TEST(Device, CpuScalarsJoinOpsOnADeviceAsValues) {
  Tensor y = arange(4, kFloat32).to(kNull);
  EXPECT_EQ((y * 2 + 1).to_vector<float>(), (std::vector<float>{1, 3, 5, 7}));
  Tensor two = tensor({2.0}).reshape({}); // a 0-d CPU tensor, as PyTorch allows
  Tensor r = y * two;
  EXPECT_EQ(r.device(), kNull);
  EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{0, 2, 4, 6}));
  // A number stays a number in type promotion: int64 tensor * 2.5 is float32, as on the CPU.
  Tensor i = arange(3).to(kNull);
  EXPECT_EQ((i * 2.5).dtype(), (arange(3) * 2.5).dtype());
  EXPECT_EQ((y.to(kFloat16) * 3).dtype(), kFloat16);
}

TEST(Device, GradientsFlowBackAcrossAMove) {
  Tensor w = arange(3, kFloat32).requires_grad_();
  Tensor loss = (w.to(kNull) * w.to(kNull)).sum();
  EXPECT_EQ(loss.device(), kNull);
  EXPECT_EQ(loss.grad_fn()->name(), "SumBackward0");
  loss.backward();
  EXPECT_TRUE(w.grad().is_cpu());
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{0, 2, 4}));
  EXPECT_EQ(w.to(kNull).grad_fn()->name(), "ToCopyBackward0");
  // A leaf on the device gets its gradient there.
  Tensor v = ones({2, 2}).to(kNull).requires_grad_();
  (v.matmul(v) * 3).sum().backward();
  EXPECT_EQ(v.grad().device(), kNull);
  EXPECT_EQ(v.grad().to_vector<float>(), (std::vector<float>{12, 12, 12, 12}));
}

TEST(Device, FactoriesMakeTensorsOnTheDeviceTheOptionsName) {
  auto on = TensorOptions().device(kNull);
  for (const Tensor& t : {zeros({2}, on), ones({2}, on), empty({2}, on), full({2}, 3.0, on),
                          arange(4, on), eye(2, std::nullopt, on), randn({3}, on), rand({3}, on),
                          randint(0, 5, {3}, on), tensor({1.0, 2.0}, on)})
    EXPECT_EQ(t.device(), kNull) << t;
  EXPECT_EQ(zeros_like(ones({2}).to(kNull)).device(), kNull);
  EXPECT_EQ(full_like(ones({2}).to(kNull), 4).to_vector<float>(), (std::vector<float>{4, 4}));
  // The same seed draws the same numbers on every device (one counter-based generator).
  manual_seed(7);
  std::vector<float> cpu = randn({5}).to_vector<float>();
  manual_seed(7);
  EXPECT_EQ(randn({5}, on).to_vector<float>(), cpu);
  EXPECT_TRUE(ones({2}, on.requires_grad(true)).requires_grad());
  EXPECT_EQ(errorKindOf([] {
              float v[2] = {1, 2};
              (void)from_blob(v, {2}, TensorOptions().device(kNull));
            }),
            ErrorKind::Device);
}

TEST(Device, DevicesThisProcessLacksAreErrors) {
  // (Vulkan devices a machine lacks: VulkanDeviceTest.cpp, outside the sanitizer runs.)
  for (Device d : {Device("cpu:1"), Device("null:4")}) {
    auto f = [&] { (void)ones({2}).to(d); };
    EXPECT_EQ(errorKindOf(f), ErrorKind::Device) << d.str();
    EXPECT_TRUE(has(messageOf(f), d.str())) << messageOf(f);
  }
  nn::Linear lin(2, 2);
  EXPECT_EQ(errorKindOf([&] { lin->to(Device("null:9")); }), ErrorKind::Device);
  EXPECT_TRUE(lin->weight.is_cpu()); // nothing moved
}

TEST(Device, CompiledFunctionsSayTheyRunOnTheCpu) {
  auto f = compile([](const Tensor& x) { return x * 2; });
  std::string m = messageOf([&] { (void)f(ones({2}).to(kNull)); });
  EXPECT_TRUE(has(m, "null:0") && has(m, "compile")) << m;
  Tensor w = ones({2});
  auto g = compile([&](const Tensor& x) { return x * w; });
  g(ones({2}));
  w.set_data(w.to(kNull)); // the captured tensor moved
  EXPECT_EQ(errorKindOf([&] { (void)g(ones({2})); }), ErrorKind::Device);
}

TEST(Device, ModulesAndOptimizersMoveAndTrainOnTheDevice) {
  manual_seed(4);
  nn::Linear lin(3, 2);
  Tensor weight = lin->weight;
  optim::SGD opt(lin->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  lin->to(kNull);
  EXPECT_TRUE(lin->weight.is_same(weight)); // the same handle, its memory moved
  EXPECT_EQ(lin->weight.device(), kNull);
  EXPECT_EQ(lin->bias.device(), kNull);
  Tensor x = randn({4, 3}).to(kNull);
  Tensor loss = lin(x).pow(2).mean();
  loss.backward();
  EXPECT_EQ(lin->weight.grad().device(), kNull);
  opt.step();
  EXPECT_EQ(lin->weight.device(), kNull);
  lin->to(Device::cpu());
  EXPECT_TRUE(lin->weight.is_cpu());
  EXPECT_TRUE(lin->weight.grad().is_cpu());
}

/// Eager train steps of a model on the device follow the CPU's bit for bit (the null device runs
/// the CPU's kernels): losses and parameters after each of `steps` steps.
template <typename Model, typename Make>
void checkEagerTraining(Make make, const Tensor& x, const Tensor& y, int steps) {
  manual_seed(11);
  Model cpu = make();
  manual_seed(11);
  Model dev = make();
  dev->to(kNull);
  optim::Adam cpuOpt(cpu->parameters(), optim::AdamOptions(1e-2));
  optim::Adam devOpt(dev->parameters(), optim::AdamOptions(1e-2));
  auto cpuStep = bench::trainStep(cpu, cpuOpt);
  auto devStep = bench::trainStep(dev, devOpt);
  Tensor xd = x.to(kNull), yd = y.to(kNull);
  for (int i = 0; i < steps; ++i) {
    SCOPED_TRACE("step " + std::to_string(i));
    Tensor want = cpuStep(x, y), got = devStep(xd, yd);
    EXPECT_EQ(got.device(), kNull);
    EXPECT_EQ(got.item<double>(), want.item<double>());
  }
  std::vector<Tensor> p = cpu->parameters(), q = dev->parameters();
  ASSERT_EQ(p.size(), q.size());
  for (size_t i = 0; i < p.size(); ++i) {
    EXPECT_EQ(q[i].device(), kNull);
    EXPECT_EQ(q[i].to_vector<float>(), p[i].to_vector<float>()) << "parameter " << i;
  }
}

TEST(Device, EagerMlpTrainsOnTheDeviceAsOnTheCpu) {
  manual_seed(1);
  checkEagerTraining<bench::Mlp>([] { return bench::Mlp(12, 16, 5); }, randn({8, 12}),
                                 randint(0, 5, {8}), 5);
}

TEST(Device, EagerCnnTrainsOnTheDeviceAsOnTheCpu) {
  manual_seed(2);
  checkEagerTraining<bench::Cnn>([] { return bench::Cnn(4, 6, 8, 16, 3); }, randn({4, 1, 8, 8}),
                                 randint(0, 3, {4}), 5);
}

TEST(Device, EagerTransformerTrainsOnTheDeviceAsOnTheCpu) {
  manual_seed(3);
  checkEagerTraining<bench::Gpt>([] { return bench::Gpt(11, 6, 8, 2, 1, 16); },
                                 randint(0, 11, {2, 6}), randint(0, 11, {2, 6}), 5);
}

TEST(Device, EagerLstmTrainsOnTheDeviceAsOnTheCpu) {
  struct LstmImpl : nn::Module {
    LstmImpl() {
      lstm = register_module("lstm", nn::LSTM(nn::LSTMOptions(4, 8).batch_first(true)));
      head = register_module("head", nn::Linear(8, 3));
    }
    Tensor forward(const Tensor& x) { return head(std::get<0>(lstm(x))); }
    nn::LSTM lstm = nullptr;
    nn::Linear head = nullptr;
  };
  struct Lstm : nn::ModuleHolder<LstmImpl> {
    using nn::ModuleHolder<LstmImpl>::ModuleHolder;
  };
  manual_seed(5);
  checkEagerTraining<Lstm>([] { return Lstm(std::make_shared<LstmImpl>()); }, randn({2, 5, 4}),
                           randint(0, 3, {2, 5}), 5);
}

} // namespace
} // namespace weft::test

// OpenBLAS's kernels: a core type for a lesser CPU than this one is replaced by the best this CPU
// runs, and none better than the CPU's is chosen.
TEST(Blas, KernelsForALesserCpuAreReplacedByTheBestThisCpuRuns) {
  EXPECT_EQ(weft::betterBlasCore("Prescott", "SkylakeX"), "SkylakeX"); // Emerald Rapids on 0.3.21
  EXPECT_EQ(weft::betterBlasCore("Haswell", "SkylakeX"), "SkylakeX");
  EXPECT_EQ(weft::betterBlasCore("Sandybridge", "Haswell"), "Haswell");
  EXPECT_EQ(weft::betterBlasCore("SkylakeX", "SkylakeX"), "");
  EXPECT_EQ(weft::betterBlasCore("Cooperlake", "SkylakeX"), ""); // bfloat16 kernels besides: kept
  EXPECT_EQ(weft::betterBlasCore("Zen", "Haswell"), ""); // Zen runs Haswell's kernels
  EXPECT_EQ(weft::betterBlasCore("Core2", ""), "");       // a CPU without AVX: nothing better
  // This process: OpenBLAS runs kernels at least as good as this CPU's best (unless a user chose).
  const weft::BlasInfo& blas = weft::blasInfo();
  EXPECT_FALSE(blas.core.empty());
  if (std::getenv("OPENBLAS_CORETYPE") == nullptr || blas.chosen.starts_with("weft")) {
    EXPECT_EQ(weft::betterBlasCore(blas.core, weft::bestBlasCore()), "")
        << blas.core << ": " << blas.chosen;
  }
}

