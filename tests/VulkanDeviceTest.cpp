// The Vulkan device as far as it goes today: discovery, limits, memory, and moving tensors to and
// from it (its kernels come with codegen's SPIR-V path). CI runs it on Mesa's lavapipe with the
// validation layer on (WEFT_VK_VALIDATE=1, set by the test's ctest entry); where a machine has no
// Vulkan driver at all, these tests say so and skip.
#include "TestUtil.h"

#include <gtest/gtest.h>

#include <cstdlib>

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
  std::vector<float> cpu = randn({7}).to_vector<float>();
  manual_seed(9);
  Tensor r = randn({7}, on);
  EXPECT_EQ(r.device(), vk);
  EXPECT_EQ(r.to_vector<float>(), cpu); // one generator for every device
  Tensor e = empty({3}, on);
  EXPECT_EQ(e.device(), vk);
}

TEST_F(Vulkan, AnOpWithoutItsKernelIsAnErrorAndTheDeviceKeepsWorking) {
  Tensor y = ones({4}).to(vk);
  std::string m = messageOf([&] { (void)(y + y); });
  EXPECT_TRUE(has(m, "vulkan:0") && has(m, "add")) << m;
  m = messageOf([&] { (void)(y + ones({4})); });
  EXPECT_TRUE(has(m, "cpu") && has(m, "vulkan:0")) << m; // two devices, as on any device
  EXPECT_EQ(y.cpu().to_vector<float>(), std::vector<float>(4, 1.0f));
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
