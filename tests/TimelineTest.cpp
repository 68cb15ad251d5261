// WEFT_PROFILE=file.json writes a Chrome trace: eager ops at the caller's line, compiled plans'
// steps, and (where there is a Vulkan device) its dispatches timed by timestamp queries. The test's
// ctest entry sets WEFT_PROFILE to a file in the build tree.
#include "TestUtil.h"

#include "weft/runtime/Timeline.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace weft::test {
namespace {

std::string traceText() {
  timeline::write();
  std::ifstream f(std::getenv("WEFT_PROFILE"));
  std::stringstream text;
  text << f.rdbuf();
  return text.str();
}

TEST(Timeline, RecordsOpsStepsAndDispatches) {
  ASSERT_TRUE(timeline::enabled()) << "run with WEFT_PROFILE=<file>.json";
  Tensor x = ones({4, 4});
  Tensor y = (x + x).exp(); // eager: "add" and "exp" at this line
  const int line = __LINE__ - 1;
  auto f = compile([](const Tensor& a) { return (a.matmul(a) + 1).relu(); });
  (void)f(y);
  (void)f(y); // a plan's steps
  const bool gpu = !hal::vulkanDeviceNames().empty();
  if (gpu) (void)(x.to(Device("vulkan:0")) * 3).sum().cpu();
  const std::string text = traceText();
  EXPECT_TRUE(has(text, "\"traceEvents\""));
  EXPECT_TRUE(has(text, "\"name\":\"add\"")) << text.substr(0, 400);
  EXPECT_TRUE(has(text, "TimelineTest.cpp:" + std::to_string(line)));
  EXPECT_TRUE(has(text, "\"cat\":\"step\""));
  if (gpu) {
    EXPECT_TRUE(has(text, "\"cat\":\"gpu\""));
    EXPECT_TRUE(has(text, "vulkan:0 queue (device time)"));
    EXPECT_TRUE(has(text, "reduce sum"));
  }
}

} // namespace
} // namespace weft::test
