// The MLIR toolchain works end to end: a kernel built with OpBuilder is JIT-compiled and runs.
#include "weft/codegen/Jit.h"

#include <gtest/gtest.h>

#include <vector>

TEST(Codegen, JitCompiledAddKernelComputesElementwiseSum) {
  auto kernel = weft::codegen::jitAddKernel();
  ASSERT_TRUE(static_cast<bool>(kernel)) << kernel.diagnostic().message;
  std::vector<float> a(1000), b(1000), out(1000, -1.0f);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<float>(i) * 0.5f;
    b[i] = 3.0f - static_cast<float>(i);
  }
  kernel.value()(a.data(), b.data(), out.data(), 1000);
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_EQ(out[i], a[i] + b[i]) << "at " << i; // one float add: bit-exact
}

TEST(Codegen, JitKernelRespectsLength) {
  auto kernel = weft::codegen::jitAddKernel();
  ASSERT_TRUE(static_cast<bool>(kernel));
  std::vector<float> a{1, 2, 3, 4}, b{10, 20, 30, 40}, out{0, 0, 0, 0};
  kernel.value()(a.data(), b.data(), out.data(), 2);
  EXPECT_EQ(out, (std::vector<float>{11, 22, 0, 0}));
}
