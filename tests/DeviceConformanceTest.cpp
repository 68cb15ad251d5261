// The conformance suite every device passes (as ggml's test-backend-ops and IREE's CTS): each row
// of the op table, in every dtype its samples take, forward and backward, with non-contiguous and
// broadcast inputs, run on the device and compared with the CPU's eager kernels; and
// representative plans (whole compiled train steps with generated kernels, conv epilogues and
// interpreter steps) run by the device. The devices: the CPU itself and the null device (the CPU's
// kernels on memory the host code cannot read, counting what it runs) in weft_device_tests; the
// Vulkan device (its per-op shaders; lavapipe in CI) in weft_vulkan_tests, which builds this file
// with WEFT_CONFORMANCE_VULKAN.
#include "OpSamples.h"
#include "TestUtil.h"
#include "Trace.h"
#include "TrainModels.h"

#include "CompiledSignature.h"
#include "weft/ir/Lower.h"
#include "weft/ir/ShapeInference.h"
#include "weft/runtime/Executable.h"
#include "weft/runtime/View.h"

namespace weft::test {
namespace {

#if WEFT_CONFORMANCE_VULKAN
const std::vector<std::string> kDevices = {"vulkan:0"};
#else
const std::vector<std::string> kDevices = {"cpu", "null:0"};
#endif

bool isGpu(const Device& d) {
  return d.is_vulkan();
}

/// How far a device's result may be from the CPU's: the CPU and the null device run the same
/// kernels on the same values in the same order, so nothing may differ (NaN equals NaN). A GPU
/// computes transcendentals with its own approximations (Vulkan allows a few ulp) and sums in
/// another order: 1e-5 relative (with an absolute floor of 1e-5), 5e-4 for the elementwise math
/// (lavapipe's asin is 2.6e-4 off near 0.68: Vulkan requires asin and acos only as precise as
/// their formulas through atan and sqrt), 1e-4 for the reductions and products whose many terms
/// each add their rounding; 16-bit floats round to 3 significant
/// digits, so a last-bit difference before rounding is 1e-2.
double toleranceOn(const Device& d, OpKind kind, DType t = DType::Float32) {
  if (d.is_cpu() || d.type() == DeviceType::Null) return 0.0;
  if (t == DType::Float16 || t == DType::BFloat16) return 1e-2;
  switch (kind) {
  case OpKind::Unary: // Vulkan's asin, acos, atan and pow are looser than a few ulp
  case OpKind::Binary:
    return 5e-4;
  case OpKind::Reduce:
  case OpKind::Normalize:
  case OpKind::Scan:
  case OpKind::MatMul:
    return 1e-4;
  default:
    return 1e-5;
  }
}

::testing::AssertionResult sameOnDevice(const Tensor& got, const Tensor& want, const Device& d,
                                        OpKind kind) {
  if (got.device() != d)
    return ::testing::AssertionFailure() << "the result is on " << got.device().str();
  if (got.sizes() != want.sizes() || got.dtype() != want.dtype())
    return ::testing::AssertionFailure()
           << "result " << dtypeName(got.dtype()) << " " << shapeString(got.sizes())
           << ", the CPU's " << dtypeName(want.dtype()) << " " << shapeString(want.sizes());
  const double tol = toleranceOn(d, kind, want.dtype());
  return allClose(got.cpu().to_vector<double>(), want.to_vector<double>(), tol, tol);
}

std::vector<Tensor> onDevice(const std::vector<Tensor>& in, const Device& d) {
  std::vector<Tensor> out;
  for (const Tensor& t : in)
    out.push_back(t.to(d));
  return out;
}

/// Whether the device computes float64 (a GPU where its shaders have it).
bool computesFloat64(const Device& d) {
  return !isGpu(d) || hal::device(d).limits().float64;
}

/// Whether the sample's result is of a dtype the device offers (a cast to float64 is not, on GPUs
/// without float64).
bool offers(const Device& d, const Attrs& at) {
  const DType* t = at.tryGet<DType>("dtype");
  return !(t != nullptr && *t == kFloat64 && !computesFloat64(d));
}

/// The float64 samples run in float32 (on both sides) on GPUs without float64.
std::vector<Tensor> inDeviceDType(const std::vector<Tensor>& in, const Device& d) {
  std::vector<Tensor> out;
  for (const Tensor& t : in)
    out.push_back(!computesFloat64(d) && t.defined() && t.dtype() == kFloat64 ? t.to(kFloat32) : t);
  return out;
}

/// The sample's inputs as dtype `t` (floating inputs converted; integer-only ops' int64 samples
/// wrapped to t; the floating values of other ops made small non-negative integers for integer t),
/// or nullopt where the op does not take that dtype.
std::optional<std::vector<Tensor>> inputsAs(OpCode op, const OpSample& s, DType t) {
  std::vector<Tensor> in;
  for (const Tensor& x : s.inputs) {
    if (integralOnly(op))
      in.push_back(isFloating(t) ? x : x.to(t));
    else if (!x.is_floating_point())
      in.push_back(x);
    else
      in.push_back(isFloating(t) ? x.to(t) : (x * 3).abs().floor().to(t));
  }
  std::vector<ir::TensorType> types;
  for (const Tensor& x : s.prepared(in))
    types.push_back({x.dtype(), x.sizes()});
  if (!ir::inferType(op, types, s.attrs)) return std::nullopt;
  return in;
}

class Conformance : public ::testing::TestWithParam<std::tuple<std::string, int>> {
protected:
  Device device() const { return Device(std::get<0>(GetParam())); }
  OpCode op() const { return static_cast<OpCode>(std::get<1>(GetParam())); }
};

std::string conformanceName(const ::testing::TestParamInfo<std::tuple<std::string, int>>& info) {
  std::string d = std::get<0>(info.param);
  std::replace(d.begin(), d.end(), ':', '_');
  return d + "_" + std::string(opName(static_cast<OpCode>(std::get<1>(info.param))));
}

/// Each sample in each dtype the op takes: the device's result equals the CPU's, it stays on the
/// device, and (on the null device) the op's own kernel ran there.
TEST_P(Conformance, ForwardEqualsTheCpu) {
  const Device d = device();
  const OpKind kind = opInfo(op()).kind;
  int checked = 0;
  for (const OpSample& s : samplesFor(op())) {
    SCOPED_TRACE(s.label);
    for (DType t : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kUInt8, kBool}) {
      SCOPED_TRACE(dtypeName(t));
      if (op() == OpCode::BitwiseNot && t == kBool) continue;
      if (t == kFloat64 && !computesFloat64(d)) continue;
      if (!offers(d, s.attrs)) continue;
      std::optional<std::vector<Tensor>> in = inputsAs(op(), s, t);
      if (!in) continue;
      if (t != kFloat64) *in = inDeviceDType(*in, d);
      Attrs at = s.attrs;
      if (at.has("dtype") && kind == OpKind::Random) {
        if (!isFloating(t)) continue;
        at.set("dtype", t);
      }
      Tensor want = dispatch(op(), s.prepared(*in), at);
      const int64_t before = hal::nullDeviceCounts().kernels[static_cast<size_t>(op())];
      Tensor got = dispatch(op(), s.prepared(onDevice(*in, d)), at, d); // d: ops without inputs
      EXPECT_TRUE(sameOnDevice(got, want, d, kind));
      if (d.type() == DeviceType::Null && !isViewOp(op()) && want.numel() > 0) {
        EXPECT_GT(hal::nullDeviceCounts().kernels[static_cast<size_t>(op())], before)
            << "the op did not run on the null device";
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

/// Gradients computed on the device (backward runs there) equal the CPU's, in float64, and stay
/// on the device.
TEST_P(Conformance, BackwardEqualsTheCpu) {
  if (!opInfo(op()).differentiable) GTEST_SKIP() << opName(op()) << " is not differentiable";
  const Device d = device();
  for (const OpSample& s : samplesFor(op())) {
    if (!s.gradcheck || !offers(d, s.attrs)) continue;
    SCOPED_TRACE(s.label);
    auto leaves = [&](const Device& on) {
      std::vector<Tensor> in;
      for (const Tensor& t : inDeviceDType(s.inputs, d))
        in.push_back(t.is_floating_point() ? t.to(on).detach().requires_grad_() : t.to(on));
      return in;
    };
    std::vector<Tensor> cpuIn = leaves(Device::cpu()), devIn = leaves(d);
    Tensor y = dispatch(op(), s.prepared(cpuIn), s.attrs);
    Tensor w = randn(y.sizes(), y.dtype(), Generator(5));
    (y * w).sum().backward();
    Tensor yd = dispatch(op(), s.prepared(devIn), s.attrs);
    (yd * w.to(d)).sum().backward();
    for (size_t i = 0; i < cpuIn.size(); ++i) {
      if (!cpuIn[i].is_floating_point()) continue;
      SCOPED_TRACE("input " + std::to_string(i));
      ASSERT_EQ(cpuIn[i].grad().defined(), devIn[i].grad().defined());
      if (cpuIn[i].grad().defined()) {
        EXPECT_TRUE(sameOnDevice(devIn[i].grad(), cpuIn[i].grad(), d, opInfo(op()).kind));
      }
    }
  }
}

/// The op as a one-step plan, run by the interpreter on the device with the device's buffers (the
/// sample's views made there): eager's values on the CPU.
TEST_P(Conformance, InterpretedPlanEqualsTheCpu) {
  const Device d = device();
  hal::Device& dev = hal::device(d);
  for (const OpSample& s : samplesFor(op())) {
    SCOPED_TRACE(s.label);
    if (!offers(d, s.attrs)) continue;
    const std::vector<Tensor> inputs = inDeviceDType(s.inputs, d);
    std::vector<Tensor> in = s.prepared(inputs), devIn = s.prepared(onDevice(inputs, d));
    Tensor want = dispatch(op(), in, s.attrs);
    ir::Graph g("conformance");
    std::vector<ir::ValueId> args;
    for (size_t i = 0; i < in.size(); ++i)
      args.push_back(g.addArgument({in[i].dtype(), in[i].sizes()}, "a" + std::to_string(i)));
    g.addOutput(g.addNode(op(), args, s.attrs, {want.dtype(), want.sizes()}));
    Plan plan = ir::lowerToPlan(g);
    checkKernelsOn(plan, dev);
    std::vector<Buffer> out = runPlan(dev, plan, buffersOf(devIn), {});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(&out[0].storage->device(), &dev);
    EXPECT_TRUE(sameOnDevice(tensorOf(out[0]), want, d, opInfo(op()).kind));
  }
}

INSTANTIATE_TEST_SUITE_P(AllOps, Conformance,
                         ::testing::Combine(::testing::ValuesIn(kDevices),
                                            ::testing::Range(0, kNumOps)),
                         conformanceName);

/// What a device must run of a compiled train step: the executable of a CPU compilation, loaded
/// on the device (its generated code too), run on the device's copies of the arguments and state
/// for three steps, gives the CPU executable's bits (losses and updated state).
template <typename Model>
void checkTrainStepPlan(Model model, const Tensor& x, const Tensor& y, const Device& d) {
  optim::Adam opt(model->parameters(), optim::AdamOptions(1e-2));
  auto step = compile(bench::trainStep(model, opt));
  step(x, y); // Adam's state exists from here: the second call compiles the whole step
  step(x, y);
  std::shared_ptr<const Executable> exe = step.compiled().executable();
  ASSERT_NE(exe, nullptr);
  std::vector<Tensor> cpuState = step.compiled().state_tensors();
  ASSERT_EQ(cpuState.size(), exe->state.size());
  hal::Device& dev = hal::device(d);
  Executable loaded = Executable::load(exe->save(), dev);
  std::vector<Tensor> devState;
  for (const Tensor& t : cpuState)
    devState.push_back(t.detach().clone().to(d));
  const int64_t launches = hal::nullDeviceCounts().launches;
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE("step " + std::to_string(i));
    std::vector<Buffer> want = exe->run(hal::cpu(), buffersOf({x, y}), buffersOf(cpuState));
    std::vector<Buffer> got = loaded.run(dev, buffersOf({x.to(d), y.to(d)}), buffersOf(devState));
    ASSERT_EQ(got.size(), want.size());
    for (size_t o = 0; o < got.size(); ++o)
      EXPECT_TRUE(sameOnDevice(tensorOf(got[o]), tensorOf(want[o]), d, OpKind::MatMul));
    for (size_t k = 0; k < devState.size(); ++k)
      EXPECT_TRUE(sameOnDevice(devState[k], cpuState[k], d, OpKind::MatMul)) << "state " << k;
  }
  if (d.type() == DeviceType::Null && step.compiled().num_kernels() > 0) {
    EXPECT_GT(hal::nullDeviceCounts().launches, launches);
  }
}

class ConformancePlans : public ::testing::TestWithParam<std::string> {};

TEST_P(ConformancePlans, MlpTrainStep) {
  manual_seed(1);
  checkTrainStepPlan(bench::Mlp(12, 16, 5), randn({8, 12}), randint(0, 5, {8}), Device(GetParam()));
}

TEST_P(ConformancePlans, CnnTrainStepWithConvEpilogues) {
  manual_seed(2);
  checkTrainStepPlan(bench::Cnn(4, 6, 8, 16, 3), randn({4, 1, 8, 8}), randint(0, 3, {4}),
                     Device(GetParam()));
}

TEST_P(ConformancePlans, TransformerTrainStep) {
  manual_seed(3);
  checkTrainStepPlan(bench::Gpt(11, 6, 8, 2, 1, 16), randint(0, 11, {2, 6}), randint(0, 11, {2, 6}),
                     Device(GetParam()));
}

// Whole compiled programs on Vulkan come with compile() for GPU devices (the next Vulkan issue).
#if !WEFT_CONFORMANCE_VULKAN
INSTANTIATE_TEST_SUITE_P(Devices, ConformancePlans, ::testing::ValuesIn(kDevices),
                         [](const auto& info) {
                           std::string d = info.param;
                           std::replace(d.begin(), d.end(), ':', '_');
                           return d;
                         });
#else
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ConformancePlans);
#endif

} // namespace
} // namespace weft::test
