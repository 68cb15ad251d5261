// Many threads running forward and backward at once, sharing read-only parameters, agree with a
// serial run. Run under ThreadSanitizer in CI.
#include "TestUtil.h"

#include <atomic>
#include <chrono>
#include <thread>

namespace weft::test {
namespace {

struct Params {
  Tensor w1 = (randn({16, 32}, kFloat32, Generator(1)) * 0.2).requires_grad_();
  Tensor b1 = zeros({32}, TensorOptions().requires_grad());
  Tensor k = (randn({4, 1, 3, 3}, kFloat32, Generator(2)) * 0.3).requires_grad_();
  Tensor w2 = (randn({32 + 4 * 16, 5}, kFloat32, Generator(3)) * 0.2).requires_grad_();
};

Tensor lossOf(const Params& p, const Tensor& x, const Tensor& img, const Tensor& y) {
  Tensor h = relu(x.matmul(p.w1) + p.b1);
  Tensor c = max_pool2d(conv2d(img, p.k, {}, {1}, {1}).tanh(), {2}).flatten(1);
  Tensor logits = cat({h, c}, 1).matmul(p.w2);
  return -(logits.log_softmax(1).gather(1, y.unsqueeze(1))).mean();
}

std::vector<std::vector<float>> step(const Params& p, int seed) {
  Generator g(100 + static_cast<uint64_t>(seed));
  Tensor x = randn({8, 16}, kFloat32, g), img = randn({8, 1, 8, 8}, kFloat32, g);
  Tensor y = randint(0, 5, {8}, kInt64, g);
  Tensor loss = lossOf(p, x, img, y);
  std::vector<std::vector<float>> out{loss.to_vector<float>()};
  for (const Tensor& gr : autograd::grad({loss}, {p.w1, p.b1, p.k, p.w2}))
    out.push_back(gr.to_vector<float>());
  return out;
}

TEST(Concurrency, ThreadsSharingParametersMatchASerialRun) {
  Params p;
  constexpr int kThreads = 8, kSteps = 5;
  std::vector<std::vector<std::vector<float>>> serial;
  for (int t = 0; t < kThreads; ++t)
    serial.push_back(step(p, t));
  std::vector<std::vector<std::vector<float>>> parallel(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int s = 0; s < kSteps; ++s)
        parallel[static_cast<size_t>(t)] = step(p, t);
    });
  for (auto& th : threads)
    th.join();
  // The same kernels split work the same way: results are bit-identical.
  for (int t = 0; t < kThreads; ++t)
    EXPECT_EQ(parallel[static_cast<size_t>(t)], serial[static_cast<size_t>(t)]) << "thread " << t;
}

TEST(Concurrency, ConcurrentBackwardAccumulatesIntoSharedLeaves) {
  Params p;
  constexpr int kThreads = 8;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      Generator g(static_cast<uint64_t>(t));
      Tensor x = randn({4, 16}, kFloat32, g);
      (x.matmul(p.w1) + p.b1).sum().backward();
    });
  for (auto& th : threads)
    th.join();
  // d/db1 of sum(x w1 + b1) over 4 rows is 4 per thread: 32 in total, whatever the order.
  EXPECT_EQ(p.b1.grad().to_vector<float>(), std::vector<float>(32, 32.0f));
}

/// Eight threads run backward (or autograd::grad) through one graph without retain_graph, at
/// once: exactly one gets through and every other gets the "second time" error, never a crash.
/// Repeated so the threads interleave differently; TSan and ASan check the memory in CI.
TEST(Concurrency, ConcurrentBackwardThroughOneGraphLetsExactlyOneThrough) {
  constexpr int kThreads = 8, kRounds = 40;
  for (int round = 0; round < kRounds; ++round) {
    Params p;
    Tensor x = randn({4, 16}, kFloat32, Generator(static_cast<uint64_t>(round)));
    Tensor loss = (x.matmul(p.w1) + p.b1).tanh().sum(); // tanh saves its output
    std::atomic<int> ok{0}, secondTime{0}, other{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        try {
          if (t % 2 == 0)
            loss.backward();
          else
            (void)autograd::grad({loss}, {p.w1});
          ++ok;
        } catch (const ValueError& e) {
          bool expected = std::string(e.what()).find("second time") != std::string::npos;
          ++(expected ? secondTime : other);
        } catch (...) {
          ++other;
        }
      });
    for (auto& th : threads)
      th.join();
    ASSERT_EQ(ok.load(), 1) << "round " << round;
    ASSERT_EQ(secondTime.load(), kThreads - 1) << "round " << round;
    ASSERT_EQ(other.load(), 0) << "round " << round;
  }
}

TEST(Concurrency, OneCompiledFunctionCalledFromManyThreads) {
  // Inference (no state written): the cached executable is shared and immutable.
  Params p;
  auto predict = compile(
      [&](const Tensor& x) { return relu(x.matmul(p.w1) + p.b1).matmul(p.w2.narrow(0, 0, 32)); });
  std::vector<Tensor> inputs;
  std::vector<std::vector<float>> serial;
  for (int t = 0; t < 8; ++t) {
    inputs.push_back(randn({4, 16}, kFloat32, Generator(static_cast<uint64_t>(200 + t))));
    serial.push_back(predict(inputs.back()).to_vector<float>());
  }
  std::vector<std::vector<float>> parallel(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 5; ++rep)
        parallel[static_cast<size_t>(t)] =
            predict(inputs[static_cast<size_t>(t)]).to_vector<float>();
    });
  for (auto& th : threads)
    th.join();
  EXPECT_EQ(parallel, serial);
  EXPECT_EQ(predict.compiled().num_compiled(), 1u);
}

/// A signature being compiled does not hold up callers of other signatures, and callers of the
/// same signature wait for that one compilation instead of starting their own.
TEST(Concurrency, CompilingOneSignatureDoesNotBlockOthers) {
  std::atomic<bool> otherDone{false}, tracingSlow{false}, timedOut{false};
  std::atomic<int> traces{0};
  auto f = compile([&](const Tensor& x) {
    ++traces;
    if (x.size(0) == 7) { // the slow compilation: traces until the other caller got through
      tracingSlow = true;
      for (int i = 0; i < 2000 && !otherDone; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      timedOut = !otherDone; // the other callers were held up for 10 s
    }
    return x * 2.0 + 1.0;
  });
  f(ones({3})); // compiled before
  std::thread slow([&] { f(ones({7})); });
  while (!tracingSlow)
    std::this_thread::yield();
  // While the 7-row signature compiles: a compiled signature runs, a new one compiles.
  EXPECT_EQ(f(ones({3})).to_vector<float>(), std::vector<float>(3, 3.0f));
  EXPECT_EQ(f(ones({5})).to_vector<float>(), std::vector<float>(5, 3.0f));
  otherDone = true;
  // A second caller of the signature in flight waits for it and compiles nothing.
  std::thread same(
      [&] { EXPECT_EQ(f(ones({7})).to_vector<float>(), std::vector<float>(7, 3.0f)); });
  slow.join();
  same.join();
  EXPECT_FALSE(timedOut.load());
  EXPECT_EQ(f.compiled().num_compiled(), 3u);
  EXPECT_EQ(traces.load(), 3);
}

TEST(Concurrency, ParallelForIsReentrantAcrossThreads) {
  std::vector<std::thread> threads;
  std::vector<double> sums(8);
  for (int t = 0; t < 8; ++t)
    threads.emplace_back(
        [&, t] { sums[static_cast<size_t>(t)] = ones({1 << 18}, kFloat64).sum().item<double>(); });
  for (auto& th : threads)
    th.join();
  for (double s : sums)
    EXPECT_EQ(s, static_cast<double>(1 << 18));
}

} // namespace
} // namespace weft::test
