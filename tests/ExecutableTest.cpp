// The runtime executable is complete: saved to bytes and loaded into a fresh object, it runs to
// the same bits as the compiled function it came from, state updates included; damaged bytes and
// wrong arguments are errors, never crashes.
#include "weft/runtime/Executable.h"
#include "TestUtil.h"
#include "CompiledSignature.h"
#include "Trace.h"

#include <gtest/gtest.h>

namespace weft {
namespace {

/// A tensor over one output buffer.
std::vector<float> valuesOf(const Buffer& b) {
  const float* p = b.ref.ptr<float>();
  return std::vector<float>(p, p + b.ref.numel());
}

TEST(Executable, SavedAndLoadedRunsToTheSameBits) {
  manual_seed(3);
  Tensor w = randn({8, 5}), bias = randn({5});
  auto f = compile([&](const Tensor& x) {
    Tensor h = (x.matmul(w) + bias).relu();     // interpreter matmul, fused add + relu
    return (h.tanh() * 0.5 + h.exp()).sum({1}); // fused elementwise, interpreter sum
  });
  Tensor x = randn({4, 8});
  Tensor expected = f(x);
  std::shared_ptr<const Executable> exe = f.compiled().executable();
  ASSERT_NE(exe, nullptr);
  EXPECT_GE(f.compiled().num_kernels(), 1u);
  std::vector<uint8_t> bytes = exe->save();
  Executable loaded = Executable::load(bytes);
  EXPECT_EQ(loaded.arguments, exe->arguments);
  EXPECT_EQ(loaded.state.size(), 2u); // w and bias, captured
  EXPECT_EQ(loaded.plan.kernels.code, exe->plan.kernels.code);
  EXPECT_NE(loaded.plan.kernels.loaded, exe->plan.kernels.loaded); // loaded anew
  std::vector<Buffer> out = loaded.run(hal::cpu(), buffersOf({x}), buffersOf({w, bias}));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(valuesOf(out[0]), expected.to_vector<float>()); // bit for bit
  EXPECT_EQ(loaded.save(), bytes);                          // and saves to the same bytes
}

TEST(Executable, RandomDrawsReadTheirKeysFromItsInputs) {
  // A draw's key (seed, offset) is a state input of the program, int64 [2]: the loaded executable
  // draws what eager code draws under that key, whatever the generator did since tracing.
  Generator gen(5);
  auto f = compile([&](const Tensor& x) { return x + rand({6}, kFloat32, gen); });
  Tensor x = zeros({6});
  f(x);
  Executable loaded = Executable::load(f.compiled().executable()->save());
  ASSERT_EQ(loaded.state.size(), 1u);
  EXPECT_EQ(loaded.state[0].name, "rng0");
  EXPECT_EQ(loaded.state[0].dtype, DType::Int64);
  EXPECT_EQ(loaded.state[0].shape, Shape{2});
  for (int64_t offset : {0, 1, 7}) {
    Generator eager(5);
    eager.set_offset(static_cast<uint64_t>(offset));
    std::vector<float> want = (x + rand({6}, kFloat32, eager)).to_vector<float>();
    Tensor key = tensor({5, static_cast<int>(offset)});
    std::vector<Buffer> out = loaded.run(hal::cpu(), buffersOf({x}), buffersOf({key}));
    EXPECT_EQ(valuesOf(out[0]), want) << "offset " << offset;
  }
}

TEST(Executable, EachDevicePicksItsCodeObjectFromTheTable) {
  // A kernel table holds one code object per target side by side; the device that loads the
  // plan takes the first it can run, and says why it refuses each when it can run none.
  manual_seed(6);
  Tensor w = randn({6, 3});
  auto f = compile([&](const Tensor& x) { return (x.matmul(w) * 2.0).tanh(); });
  Tensor x = randn({5, 6});
  Tensor expected = f(x);
  Executable exe = Executable::load(f.compiled().executable()->save());
  ASSERT_EQ(exe.plan.kernels.code.size(), 1u);
  const hal::CodeObject foreign{"spirv", "vulkan1.3 subgroup32", {3, 2, 35, 7}};
  exe.plan.kernels.code.insert(exe.plan.kernels.code.begin(), foreign);
  for (hal::Device* device : {&hal::cpu(), &hal::nullDevice()}) {
    Executable both = Executable::load(exe.save(), *device);
    ASSERT_EQ(both.plan.kernels.code.size(), 2u);
    std::vector<Buffer> out =
        both.run(*device, buffersOf({x.to(device->id())}), buffersOf({w.to(device->id())}));
    EXPECT_EQ(tensorOf(out[0]).cpu().to_vector<float>(), expected.to_vector<float>());
  }
  exe.plan.kernels.code.erase(exe.plan.kernels.code.begin() + 1); // the foreign one alone
  try {
    Executable::load(exe.save());
    ADD_FAILURE() << "code for another target loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Device);
    EXPECT_TRUE(test::has(e.what(), "spirv") && test::has(e.what(), "cpu")) << e.what();
  }
  // Run on a device its code is not loaded on: an error, not a launch of foreign code.
  Executable cpuOnly = Executable::load(f.compiled().executable()->save());
  EXPECT_THROW(cpuOnly.run(hal::nullDevice(), buffersOf({x.to(Device("null:0"))}),
                           buffersOf({w.to(Device("null:0"))})),
               DeviceError);
  // Arguments on another device than the one running the plan: an error naming both.
  EXPECT_THROW(cpuOnly.run(hal::cpu(), buffersOf({x.to(Device("null:0"))}), buffersOf({w})),
               DeviceError);
}

TEST(Executable, BuiltForANamedCpuLevel) {
  manual_seed(5);
  Tensor w = randn({8, 5});
  auto body = [&](const Tensor& x) { return ((x.matmul(w)).tanh() * 0.5 + 1.0).exp(); };
  auto host = compile(body);
  auto portable = compile(body, CompileOptions().cpu_target("x86-64-v2"));
  Tensor x = randn({4, 8});
  Tensor expected = host(x);
  Tensor got = portable(x);
  // Without fast-math flags LLVM neither contracts nor reassociates, but tanh and exp come from
  // libmvec's SSE2 forms at this level and its AVX-512 or AVX2 forms on such a host: for these
  // two the forms differ by at most 1 ulp (measured over 2M inputs per function), 1.2e-7 relative.
  std::vector<float> g = got.to_vector<float>(), e = expected.to_vector<float>();
  ASSERT_EQ(g.size(), e.size());
  for (size_t i = 0; i < g.size(); ++i)
    EXPECT_NEAR(g[i], e[i], 1e-6 * std::abs(e[i])) << "at " << i;
  std::shared_ptr<const Executable> exe = portable.compiled().executable();
  ASSERT_NE(exe, nullptr);
  EXPECT_EQ(exe->plan.kernels.code.at(0).target.rfind("x86_64 x86-64-v2 ", 0), 0u)
      << exe->plan.kernels.code.at(0).target;
  EXPECT_EQ(exe->plan.kernels.code.at(0).target.find("avx2"), std::string::npos);
  Executable loaded = Executable::load(exe->save());
  std::vector<Buffer> out = loaded.run(hal::cpu(), buffersOf({x}), buffersOf({w}));
  EXPECT_EQ(valuesOf(out[0]), got.to_vector<float>()); // the loaded code: the same bits
  try {
    compile(body, CompileOptions().cpu_target("pentium-9000"));
    ADD_FAILURE() << "an unknown CPU was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Value);
    EXPECT_NE(std::string(e.what()).find("pentium-9000"), std::string::npos) << e.what();
  }
}

TEST(Executable, LoadedStepUpdatesStateLikeTheCompiledOne) {
  manual_seed(4);
  Tensor w = randn({6, 3}).requires_grad_(), w2 = w.detach().clone().requires_grad_();
  auto stepOf = [](Tensor& param) {
    return [&param](const Tensor& x, const Tensor& y) {
      Tensor loss = ((x.matmul(param) - y).pow(2)).mean();
      loss.backward();
      {
        NoGradGuard ng;
        param.sub_(param.grad() * 0.1);
        param.grad().zero_();
      }
      return loss;
    };
  };
  auto step = compile(stepOf(w));
  Tensor x = randn({10, 6}), y = randn({10, 3});
  step(x, y); // traced with no .grad yet: runs once, then traced again with one
  Tensor expected = step(x, y);
  std::shared_ptr<const Executable> exe = step.compiled().executable();
  Executable loaded = Executable::load(exe->save());
  // Run the loaded program on w2 (the same values w had before the last call) and its .grad.
  auto step2 = compile(stepOf(w2));
  step2(x, y);
  Tensor wBefore = w2.detach().clone();
  std::vector<Tensor> state;
  ASSERT_EQ(loaded.state.size(), 2u); // the parameter and its .grad
  for (const ExecutableValue& v : loaded.state)
    state.push_back(v.shape == w2.sizes() && state.empty() ? w2.detach() : w2.grad());
  std::vector<Buffer> out = loaded.run(hal::cpu(), buffersOf({x, y}), buffersOf(state));
  EXPECT_EQ(valuesOf(out[0]), expected.to_vector<float>());
  EXPECT_EQ(w2.detach().to_vector<float>(), w.detach().to_vector<float>()); // updated in place
  EXPECT_NE(w2.detach().to_vector<float>(), wBefore.to_vector<float>());
}

/// A state update the fuse pass writes over its state (a = a * 2 + c, nothing reads a after) goes
/// straight into the state's memory; where that memory is shared with another state tensor the
/// runtime writes a private copy instead, so c, read after the update, still holds the old values.
TEST(Executable, StateUpdatesWrittenInPlaceUnlessTheMemoryIsShared) {
  Tensor a = full({64}, 1.0f), c = full({64}, 5.0f);
  auto f = compile([&](const Tensor& x) {
    a.mul_(2).add_(c);
    return (c.flip({0}) * x).sum(); // flip: read by a step of its own, after the update
  });
  Tensor x = ones({64});
  EXPECT_EQ(f(x).item<float>(), 320.0f);
  EXPECT_EQ(a.to_vector<float>(), std::vector<float>(64, 7.0f));
  std::shared_ptr<const Executable> exe = f.compiled().executable();
  ASSERT_NE(exe, nullptr);
  bool inPlace = false;
  for (const PlanStep& s : exe->plan.steps)
    for (int32_t j : s.kernelInPlace)
      inPlace = inPlace || j >= 0;
  EXPECT_TRUE(inPlace) << f.compiled().graph_text();
  Executable loaded = Executable::load(exe->save()); // the in-place outputs are saved too
  ASSERT_EQ(loaded.state.size(), 2u);
  Tensor shared = full({64}, 3.0f);
  std::vector<Buffer> state(2, buffersOf({shared})[0]); // a and c are one memory
  std::vector<Buffer> out = loaded.run(hal::cpu(), buffersOf({x}), state);
  EXPECT_EQ(valuesOf(out[0]), std::vector<float>{192.0f}); // c = 3, not the new a = 9
  EXPECT_EQ(shared.to_vector<float>(), std::vector<float>(64, 9.0f));
}

TEST(Executable, AStepWritesOverAnInputItReadsLast) {
  // int64 is not fused: every op is an interpreter step. z = y * 3 writes over y (read last
  // there), so the call holds x and one intermediate, never three buffers; x, the caller's, is
  // never written.
  auto f = compile([](const Tensor& x) { return ((x + 1) * 3 - 2).neg(); });
  Tensor x = arange(int64_t{1} << 16, kInt64);
  Tensor expected = ((x + 1) * 3 - 2).neg();
  f(x); // compiles
  const int64_t bytes = x.numel() * 8;
  resetPeakMemory();
  const int64_t before = memoryStats().currentBytes;
  Tensor z = f(x);
  EXPECT_LE(memoryStats().peakBytes - before, bytes + 4096) << "each step allocated its own";
  EXPECT_EQ(z.to_vector<int64_t>(), expected.to_vector<int64_t>());
  EXPECT_EQ(x.to_vector<int64_t>()[5], 5); // the argument is untouched
  // scatter_add starts from a copy of a zero tensor that nothing else reads: it adds into it.
  auto g = compile([](const Tensor& i, const Tensor& v) {
    return zeros({4, 6}).scatter_add(1, i, v) * 2.0;
  });
  Tensor i = tensor({0, 5, 5, 1}, kInt64).reshape({4, 1}),
         v = tensor({1.0f, 2.0f, 3.0f, 4.0f}).reshape({4, 1});
  Tensor want = zeros({4, 6}).scatter_add(1, i, v) * 2.0;
  EXPECT_EQ(g(i, v).to_vector<float>(), want.to_vector<float>());
  EXPECT_EQ(g(i, v).to_vector<float>(),
            want.to_vector<float>()); // the filled constant is made anew each call
}

TEST(Executable, DamagedBytesAndWrongArgumentsAreErrors) {
  auto f = compile([](const Tensor& x) { return (x * 2).exp(); });
  Tensor x = ones({3});
  f(x);
  std::vector<uint8_t> bytes = f.compiled().executable()->save();
  EXPECT_THROW(Executable::load(std::vector<uint8_t>(bytes.begin(), bytes.begin() + 30)), IOError);
  std::vector<uint8_t> flipped = bytes;
  flipped[bytes.size() / 2] ^= 0x40;
  EXPECT_THROW(Executable::load(flipped), IOError); // the checksum catches it
  std::vector<uint8_t> version = bytes;
  version[8] = 99;
  try {
    Executable::load(version);
    FAIL() << "loaded another format version";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("version 99"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Executable::load(std::vector<uint8_t>{}), IOError);
  Executable e = Executable::load(bytes);
  try {
    e.run(hal::cpu(), buffersOf({ones({4})}), {});
    FAIL() << "ran on the wrong shape";
  } catch (const ValueError& err) {
    EXPECT_NE(std::string(err.what()).find("float32 [3]"), std::string::npos) << err.what();
  }
  EXPECT_THROW(e.run(hal::cpu(), {}, {}), ValueError);
}

TEST(Executable, StepsMustComputeWhatTheyDeclare) {
  // A crafted file could declare an interpreter step's output smaller than its op writes, read a
  // slot nothing wrote yet, or promise outputs of another type: each is damaged bytes on load.
  manual_seed(5);
  Tensor w = randn({8, 5});
  auto f = compile([&](const Tensor& x) { return (x.matmul(w) + 1).relu().sum({1}); });
  f(randn({4, 8}));
  const Executable& good = *f.compiled().executable();
  Executable::load(good.save()); // as compiled, it loads
  size_t interpreted = good.plan.steps.size();
  for (size_t i = 0; i < good.plan.steps.size(); ++i)
    if (good.plan.steps[i].kernel < 0 && good.plan.steps[i].op == OpCode::MatMul) interpreted = i;
  ASSERT_LT(interpreted, good.plan.steps.size());
  auto messageOfLoading = [](const Executable& e) {
    return test::messageOf<IOError>([&] { Executable::load(e.save()); });
  };
  Executable bad = good;
  bad.plan.steps[interpreted].shape = Shape{2, 5}; // the matmul gives [4, 5]
  std::string msg = messageOfLoading(bad);
  EXPECT_TRUE(test::has(msg, "declares float32[2, 5] where its inputs give float32[4, 5]")) << msg;
  bad = good;
  bad.plan.steps[interpreted].attrs.set("bogus", int64_t{1});
  EXPECT_TRUE(test::has(messageOfLoading(bad), "unknown attribute 'bogus'"));
  bad = good;
  bad.plan.steps[0].inputs[0] = bad.plan.steps.back().output >= 0 ? bad.plan.steps.back().output
                                                                  : bad.plan.steps.back().kernelOutputs[0];
  EXPECT_TRUE(test::has(messageOfLoading(bad), "before anything writes it"));
  bad = good;
  bad.outputs[0].shape = Shape{5};
  bad.plan.outputSlots = good.plan.outputSlots;
  EXPECT_TRUE(test::has(messageOfLoading(bad), "output"));
}

/// Index of the plan's conv epilogue step (PlanStep::afterEachSample), or -1.
int64_t epilogueStep(const Plan& plan) {
  for (size_t i = 0; i < plan.steps.size(); ++i)
    if (plan.steps[i].afterEachSample) return static_cast<int64_t>(i);
  return -1;
}

TEST(Executable, ConvEpilogueRunsInsideTheConvSampleBySample) {
  // The bias and ReLU after a conv run inside it, over each sample as it is written. Bit for bit
  // equal to eager: the same conv kernel, and the same float ops in the same order after it.
  // The conv's input (sin) dies at the conv and is smaller per sample than what the epilogue
  // writes: were the epilogue's output planned over it, sample 0's epilogue would overwrite the
  // input of samples 1-3 before the conv reads them. The epilogue writes the biased result (the
  // mean reads it later) and the doubled ReLU apart.
  manual_seed(11);
  Tensor w = randn({8, 2, 3, 3}), b = randn({8});
  auto layer = [&](const Tensor& x) {
    Tensor y = conv2d(x.sin(), w, b, 1, 1);
    Tensor z = (y.relu() * 2).sum({1});
    return z + y.mean();
  };
  auto f = compile(layer);
  Tensor x = randn({4, 2, 8, 8});
  Tensor expected = layer(x);
  EXPECT_EQ(f(x).to_vector<float>(), expected.to_vector<float>());
  std::shared_ptr<const Executable> exe = f.compiled().executable();
  ASSERT_NE(exe, nullptr);
  const int64_t i = epilogueStep(exe->plan);
  ASSERT_GT(i, 0) << "no conv epilogue";
  EXPECT_EQ(exe->plan.steps[static_cast<size_t>(i - 1)].op, OpCode::Conv);

  // Saved and loaded, it runs to the same bits.
  std::vector<uint8_t> bytes = exe->save();
  Executable loaded = Executable::load(bytes);
  EXPECT_EQ(epilogueStep(loaded.plan), i);
  std::vector<Buffer> out = loaded.run(hal::cpu(), buffersOf({x}), buffersOf({w, b}));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(valuesOf(out[0]), expected.to_vector<float>());

  // A step marked to run inside a step that is not a conv is damaged bytes, not a crash; so is an
  // epilogue writing into a slot the conv reads (it would free the conv's input).
  Executable damaged = loaded;
  damaged.plan.steps[0].afterEachSample = true;
  EXPECT_THROW(Executable::load(damaged.save()), IOError);
  damaged = loaded;
  PlanStep& epilogue = damaged.plan.steps[static_cast<size_t>(i)];
  epilogue.kernelOutputs[0] = damaged.plan.steps[static_cast<size_t>(i - 1)].inputs[0];
  epilogue.kernelInPlace[0] = -1;
  EXPECT_THROW(Executable::load(damaged.save()), IOError);
}

TEST(Executable, ConvEpiloguesOfOtherShapesAndTypes) {
  // Groups, stride, float64, a batch of one, and a residual add: each as eager, bit for bit.
  manual_seed(12);
  Tensor w = randn({6, 2, 3, 3}, kFloat64), b = randn({6}, kFloat64);
  auto grouped = [&](const Tensor& x) {
    return (conv2d(x, w, b, 2, 1, 1, 2).relu() + 0.5).sigmoid();
  };
  auto f = compile(grouped);
  for (int64_t n : {1, 3}) {
    Tensor x = randn({n, 4, 7, 7}, kFloat64);
    EXPECT_EQ(f(x).to_vector<double>(), grouped(x).to_vector<double>()) << n;
    EXPECT_GT(epilogueStep(f.compiled().executable()->plan), 0) << n;
  }
  Tensor w2 = randn({4, 4, 3, 3});
  auto residual = [&](const Tensor& x) { return (conv2d(x, w2, {}, 1, 1) + x).relu(); };
  auto g = compile(residual);
  Tensor x = randn({2, 4, 5, 5});
  EXPECT_EQ(g(x).to_vector<float>(), residual(x).to_vector<float>());
  EXPECT_GT(epilogueStep(g.compiled().executable()->plan), 0);
}

/// Every truncation of a saved executable is an error, never a crash or a partial load.
TEST(Executable, EveryTruncationIsAnError) {
  auto f = compile([](const Tensor& x) { return x.matmul(x.t()).relu() + 1; });
  f(ones({2, 3}));
  std::vector<uint8_t> bytes = f.compiled().executable()->save();
  for (size_t n = 0; n < bytes.size(); n += std::max<size_t>(1, bytes.size() / 200))
    EXPECT_THROW(Executable::load(std::vector<uint8_t>(bytes.begin(), bytes.begin() + n)), Error)
        << "at " << n;
}

} // namespace
} // namespace weft
