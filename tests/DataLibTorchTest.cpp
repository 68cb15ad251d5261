// Small data-pipeline programs written in LibTorch's spelling (written here, not copied): MNIST
// read from IDX files, dataset.map() with Normalize<>, Stack<>, Lambda<> and friends, Example<>,
// size().value(), make_data_loader with samplers and DataLoaderOptions. Each must compile and do
// what LibTorch does, so the spellings stay; values are checked, not only types.
#include "TestUtil.h"

#include <zlib.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace weft::test {
namespace {

// ---- a small MNIST written as IDX files ----

/// The pixel of image `i` at position `p` (of 28 * 28): every image differs.
uint8_t pixel(size_t i, size_t p) {
  return static_cast<uint8_t>((i * 7 + p * 3) % 256);
}

/// An IDX header: magic (type 0x08 = ubyte, `dims.size()` dims) and the big-endian sizes.
std::string idxHeader(const std::vector<uint32_t>& dims) {
  std::string s{'\0', '\0', '\x08', static_cast<char>(dims.size())};
  for (uint32_t d : dims)
    for (int shift = 24; shift >= 0; shift -= 8)
      s += static_cast<char>((d >> shift) & 0xff);
  return s;
}

/// `n` images of 28x28 (pixel()) and labels i % 10, in MNIST's layout under `dir`: the set
/// `prefix` ("train" or "t10k"), gzipped or raw.
void writeMnist(const TempDir& dir, const std::string& prefix, size_t n, bool gz) {
  std::string images = idxHeader({static_cast<uint32_t>(n), 28, 28}),
              labels = idxHeader({static_cast<uint32_t>(n)});
  for (size_t i = 0; i < n; ++i) {
    for (size_t p = 0; p < 28 * 28; ++p)
      images += static_cast<char>(pixel(i, p));
    labels += static_cast<char>(i % 10);
  }
  auto put = [&](const std::string& name, const std::string& bytes) {
    if (!gz) {
      dir.write(name, bytes);
      return;
    }
    const std::string path = (dir.path / (name + ".gz")).string();
    gzFile f = gzopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(f);
  };
  put(prefix + "-images-idx3-ubyte", images);
  put(prefix + "-labels-idx1-ubyte", labels);
}

/// What Normalize<>(mean, stddev) makes of pixel(i, p): LibTorch's formula in float32, as its
/// images are float32 (byte / 255) and its statistics float32 tensors.
double normalized(size_t i, size_t p, float mean, float stddev) {
  return (static_cast<float>(pixel(i, p)) / 255.0f - mean) / stddev;
}

// Tolerance of the normalized pixels: two float32 roundings of values below 4 in magnitude
// (about 5e-7 each) against the formula evaluated in float32 on the same inputs.
constexpr double kPixelTol = 2e-6;

TEST(LibTorchData, MnistTrainingLoopAsLibTorchWritesIt) {
  TempDir dir;
  writeMnist(dir, "train", 10, /*gz=*/true);
  const std::string root = dir.path.string();

  auto dataset = data::datasets::MNIST(root)
                     .map(data::transforms::Normalize<>(0.1307, 0.3081))
                     .map(data::transforms::Stack<>());
  const size_t n = dataset.size().value();
  EXPECT_EQ(n, 10u);
  auto loader = data::make_data_loader<data::samplers::SequentialSampler>(
      std::move(dataset), data::DataLoaderOptions().batch_size(4).workers(2));

  nn::Linear model(28 * 28, 10);
  optim::SGD optimizer(model->parameters(), optim::SGDOptions(0.1));
  std::vector<double> epochLoss;
  for (int epoch = 0; epoch < 30; ++epoch) {
    double total = 0;
    size_t seen = 0;
    for (auto& batch : *loader) {
      Tensor x = batch.data, y = batch.target;
      const int64_t b = x.size(0);
      EXPECT_EQ(x.sizes(), (Shape{b, 1, 28, 28}));
      EXPECT_EQ(x.dtype(), kFloat32);
      EXPECT_EQ(y.dtype(), kInt64);
      if (epoch == 0) { // sequential order: batch k holds samples 4k, 4k+1, ...
        std::vector<double> expected;
        for (int64_t s = 0; s < b; ++s)
          for (size_t p = 0; p < 28 * 28; ++p)
            expected.push_back(normalized(seen + static_cast<size_t>(s), p, 0.1307f, 0.3081f));
        EXPECT_TRUE(allClose(x.to_vector<double>(), expected, kPixelTol, kPixelTol));
        for (int64_t s = 0; s < b; ++s)
          EXPECT_EQ(y.to_vector<int64_t>()[static_cast<size_t>(s)],
                    static_cast<int64_t>((seen + static_cast<size_t>(s)) % 10));
      }
      seen += static_cast<size_t>(b);
      optimizer.zero_grad();
      Tensor loss = nn::functional::cross_entropy(model->forward(x.view({b, -1})), y);
      loss.backward();
      optimizer.step();
      total += loss.item<double>() * static_cast<double>(b);
    }
    EXPECT_EQ(seen, n) << "epoch " << epoch;
    epochLoss.push_back(total / static_cast<double>(n));
  }
  // Ten distinct images and labels: a linear model fits them, so the loss must fall a lot.
  EXPECT_LT(epochLoss.back(), 0.5 * epochLoss.front())
      << "first " << epochLoss.front() << ", last " << epochLoss.back();
}

TEST(LibTorchData, MnistTestModeAccessorsAndErrors) {
  TempDir dir;
  writeMnist(dir, "t10k", 6, /*gz=*/false);
  writeMnist(dir, "train", 3, /*gz=*/false);
  data::datasets::MNIST test(dir.path.string(), data::datasets::MNIST::Mode::kTest);
  EXPECT_FALSE(test.is_train());
  EXPECT_EQ(test.size().value(), 6u);
  EXPECT_EQ(test.images().sizes(), (Shape{6, 1, 28, 28}));
  EXPECT_EQ(test.images().dtype(), kFloat32);
  EXPECT_EQ(test.targets().dtype(), kInt64);
  EXPECT_EQ(test.targets().to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(test.images().select(0, 5).view(-1).to_vector<float>()[100],
            static_cast<float>(pixel(5, 100)) / 255.0f);
  data::Example<> e = test.get(2);
  EXPECT_EQ(e.data.sizes(), (Shape{1, 28, 28}));
  EXPECT_EQ(e.target.item<int64_t>(), 2);
  data::datasets::MNIST train(dir.path.string());
  EXPECT_TRUE(train.is_train());
  EXPECT_EQ(train.size().value(), 3u);
  EXPECT_EQ(data::FashionMNIST(dir.path.string(), false).size().value(), 6u) << "weft's spelling";

  // A missing directory, and a label file that does not match its images, name the path.
  const std::string none = (dir.path / "none").string();
  EXPECT_TRUE(throwsWith<IOError>([&] { data::datasets::MNIST{none}; },
                                  {none + "/train-images-idx3-ubyte", "neither"}));
  dir.write("t10k-labels-idx1-ubyte", idxHeader({5}) + "\x01\x02\x03\x04\x05");
  EXPECT_TRUE(throwsWith<IOError>(
      [&] { data::datasets::MNIST(dir.path.string(), data::datasets::MNIST::Mode::kTest); },
      {"t10k-labels-idx1-ubyte", "[5]", "6 images"}));
}

// ---- Example<> ----

TEST(LibTorchData, ExampleIsTemplatedAsLibTorchs) {
  data::Example<> e(ones({2}), tensor({3}));
  EXPECT_EQ(e.target.item<int64_t>(), 3);
  data::Example<Tensor, int64_t> labelled{zeros({1}), 7};
  EXPECT_EQ(labelled.target, 7);
  static_assert(std::is_same_v<data::Example<>::DataType, Tensor>);
  data::TensorExample unlabelled = ones({3});
  const Tensor& viewed = unlabelled; // converts to its data, as LibTorch's
  EXPECT_EQ(viewed.numel(), 3);
  static_assert(std::is_same_v<data::TensorExample::TargetType, data::example::NoTarget>);
}

// ---- transforms ----

TEST(LibTorchData, NormalizeFollowsTheFormulaPerChannel) {
  Tensor x = arange(12, kFloat32).reshape({3, 2, 2}) / 11.0;
  data::transforms::Normalize<> norm({0.5, 0.25, 0.125}, {2, 4, 8});
  EXPECT_EQ(norm.mean.sizes(), (Shape{3, 1, 1}));
  Tensor y = norm(x);
  std::vector<float> in = x.to_vector<float>();
  const float mean[3] = {0.5f, 0.25f, 0.125f}, stddev[3] = {2, 4, 8};
  std::vector<double> expected;
  for (size_t i = 0; i < 12; ++i)
    expected.push_back((in[i] - mean[i / 4]) / stddev[i / 4]);
  // float32 arithmetic on values below 1: one rounding each for the subtraction and division.
  EXPECT_TRUE(allClose(y.to_vector<double>(), expected, 1e-6, 1e-7));
  // One value for every channel broadcasts; uint8 data is promoted to float32, as in PyTorch.
  Tensor bytes = full({2, 2, 2}, 51, kUInt8);
  Tensor z = data::transforms::Normalize<>(1, 10)(bytes);
  EXPECT_EQ(z.dtype(), kFloat32);
  EXPECT_EQ(z.to_vector<float>(), std::vector<float>(8, 5.0f));
  // As a dataset transform it changes the data and keeps the target.
  data::Example<> e = norm.apply({x, tensor({4})});
  EXPECT_TRUE(sameBytes(e.data, y));
  EXPECT_EQ(e.target.item<int64_t>(), 4);

  EXPECT_TRUE(throwsWith<ValueError>([] { data::transforms::Normalize<>(0.5, 0); },
                                     {"Normalize", "stddev 0 is 0", "zero"}));
  EXPECT_TRUE(throwsWith<ValueError>(
      [] {
        data::transforms::Normalize<>({1, 2}, {1, 2, 3});
      },
      {"Normalize", "2 means and 3 stddevs"}));
  EXPECT_TRUE(throwsWith<ShapeError>(
      [&] {
        norm(ones({2, 4, 4}));
      },
      {"Normalize", "3 channel", "[2, 4, 4]"}));
  EXPECT_TRUE(throwsWith<DTypeError>([&] { norm(ones({3, 1, 1}, kBool)); }, {"bool"}));
}

TEST(LibTorchData, StackCollatesExamples) {
  std::vector<data::Example<>> examples;
  for (int64_t i = 0; i < 3; ++i)
    examples.push_back({full({2, 3}, static_cast<double>(i)), tensor({static_cast<int>(i)})});
  data::Example<> batch = data::transforms::Stack<>().apply_batch(examples);
  EXPECT_EQ(batch.data.sizes(), (Shape{3, 2, 3}));
  EXPECT_EQ(batch.target.sizes(), (Shape{3, 1}));
  EXPECT_EQ(batch.data.select(0, 2).sum().item<float>(), 12.0f);
  EXPECT_EQ(batch.target.view(-1).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2}));
  data::Example<> noTarget =
      data::transforms::Stack<>().apply_batch({{ones({2}), {}}, {zeros({2}), {}}});
  EXPECT_FALSE(noTarget.target.defined());
  EXPECT_EQ(noTarget.data.sizes(), (Shape{2, 2}));
  EXPECT_TRUE(throwsWith<ValueError>(
      [] {
        data::transforms::Stack<>().apply_batch({{ones({2}), ones({1})}, {ones({2}), {}}});
      },
      {"Stack", "example 1", "none"}));
}

/// A dataset as LibTorch's tutorials write one: sample i is data [i, i] and target i.
class Pairs : public data::datasets::Dataset<Pairs> {
public:
  explicit Pairs(size_t n) : n_(n) {}
  data::Example<> get(size_t index) override {
    const auto i = static_cast<double>(index);
    return {full({2}, i), tensor({static_cast<int>(index)})};
  }
  weft::optional<size_t> size() const override { return n_; }

private:
  size_t n_;
};

TEST(LibTorchData, MapChainsLambdasCollationsAndBatchTransforms) {
  Pairs pairs(6);
  // Per example: a TensorLambda on the data, then a Lambda on the whole example; then a batch
  // transform of the stacked batch. The lvalue `pairs` is copied, as LibTorch's map() does.
  auto mapped = pairs.map(data::transforms::TensorLambda<>([](Tensor x) { return x * 10; }))
                    .map(data::transforms::Lambda<data::Example<>>(
                        [](data::Example<> e) { return data::Example<>(e.data + 1, e.target); }))
                    .map(data::transforms::Stack<>())
                    .map(data::transforms::BatchLambda<data::Example<>>([](data::Example<> b) {
                      return data::Example<>(b.data.sum(1), b.target.view(-1));
                    }));
  EXPECT_EQ(mapped.size().value(), 6u);
  EXPECT_EQ(pairs.size().value(), 6u);
  data::Example<> b = mapped.get_batch({4, 1});
  EXPECT_EQ(b.data.to_vector<float>(), (std::vector<float>{82, 22})); // 2 * (10 i + 1)
  EXPECT_EQ(b.target.to_vector<int64_t>(), (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(mapped.get(3).data.item<float>(), 62.0f) << "one example is a batch of one, row 0";
  // dataset() walks back down the chain: Stack's source, the Lambda's, the TensorLambda's.
  EXPECT_EQ(mapped.dataset().dataset().dataset().dataset().size().value(), 6u);

  // A collation of our own, as transforms::Collate: the batch is the first example's data.
  auto firsts = Pairs(5).map(data::transforms::Collate<data::Example<>>(
      [](std::vector<data::Example<>> e) { return std::move(e.front()); }));
  EXPECT_EQ(firsts.get_batch({3, 0}).data.to_vector<float>(), (std::vector<float>{3, 3}));
  EXPECT_EQ(firsts.get(2).target.item<int64_t>(), 2);

  // Through a loader with workers, the per-example transforms run on the workers.
  auto loader = data::make_data_loader<data::samplers::SequentialSampler>(
      Pairs(7).map(data::transforms::TensorLambda<>([](Tensor x) { return -x; })), 3);
  std::vector<float> seen;
  for (auto& batch : *loader) {
    EXPECT_EQ(batch.data.size(1), 2);
    for (float v : batch.data.select(1, 0).to_vector<float>())
      seen.push_back(v);
  }
  EXPECT_EQ(seen, (std::vector<float>{0, -1, -2, -3, -4, -5, -6}));
  // A transform that makes two examples of one is an error at the line of the loop.
  auto doubled = Pairs(2).map(data::transforms::BatchLambda<std::vector<data::Example<>>>(
      [](std::vector<data::Example<>> e) {
        e.push_back(e.front());
        return e;
      }));
  EXPECT_TRUE(throwsWith<ValueError>([&] { doubled.get(0); }, {"into 2 examples"}));
}

// ---- make_data_loader, samplers and options ----

/// Sample i of a TensorDataset of `n`: data [i] (float) and target i.
data::TensorDataset numbered(int64_t n) {
  return data::TensorDataset(arange(n, kFloat32).view({n, 1}), arange(n));
}

/// The targets of one epoch, in the order the loader hands them out.
std::vector<int64_t> epochTargets(data::DataLoader& loader) {
  std::vector<int64_t> ids;
  for (auto& batch : loader)
    for (int64_t id : batch.target.to_vector<int64_t>())
      ids.push_back(id);
  return ids;
}

std::vector<int64_t> range(int64_t from, int64_t to, int64_t step = 1) {
  std::vector<int64_t> v;
  for (int64_t i = from; i < to; i += step)
    v.push_back(i);
  return v;
}

TEST(LibTorchData, SequentialAndRandomSamplersAndSizes) {
  auto ds = numbered(20);
  EXPECT_EQ(ds.size().value(), 20u);
  size_t count = 0;
  for (size_t i = 0; i < ds.size(); ++i) // weft code comparing with size() still compiles
    ++count;
  EXPECT_EQ(count, 20u);

  auto sequential = data::make_data_loader<data::samplers::SequentialSampler>(
      ds, data::DataLoaderOptions().batch_size(6).drop_last(true));
  EXPECT_EQ(sequential->size(), 3u);
  EXPECT_EQ(epochTargets(*sequential), range(0, 18));

  auto shuffled = data::make_data_loader(numbered(20), 8); // RandomSampler, as LibTorch's default
  std::vector<int64_t> first = epochTargets(*shuffled), second = epochTargets(*shuffled);
  EXPECT_NE(first, range(0, 20)) << "the default sampler shuffles";
  EXPECT_NE(first, second) << "a fresh permutation each epoch";
  std::sort(first.begin(), first.end());
  EXPECT_EQ(first, range(0, 20));
  EXPECT_EQ(shuffled->begin()->data.size(0), 8) << "loader-> reaches the DataLoader";
  // The permutation comes from DataLoaderOptions::seed (weft's), not from a global generator.
  auto seeded = [](uint64_t seed) {
    auto loader = data::make_data_loader(numbered(20), data::DataLoaderOptions(20).seed(seed));
    return epochTargets(*loader);
  };
  EXPECT_EQ(seeded(3), seeded(3));
  EXPECT_NE(seeded(3), seeded(4));

  auto given = data::make_data_loader(numbered(5), data::samplers::SequentialSampler(5),
                                      data::DataLoaderOptions(2));
  EXPECT_EQ(epochTargets(*given), range(0, 5));
  EXPECT_TRUE(throwsWith<ValueError>(
      [] { data::make_data_loader(numbered(5), data::samplers::RandomSampler(4), 2); },
      {"RandomSampler covers 4 samples", "dataset has 5", "dataset.size().value()"}));
  EXPECT_TRUE(throwsWith<DTypeError>([] { data::samplers::RandomSampler(4, kFloat32); },
                                     {"index_dtype", "float32"}));
}

TEST(LibTorchData, DistributedSamplersShardTheDataset) {
  // Sequential shards are strided, as torch.utils.data.DistributedSampler's, and padded to equal
  // sizes by wrapping around.
  const std::vector<std::vector<int64_t>> shards{{0, 3, 6, 9}, {1, 4, 7, 0}, {2, 5, 8, 1}};
  for (size_t rank = 0; rank < 3; ++rank) {
    auto loader = data::make_data_loader(
        numbered(10), data::samplers::DistributedSequentialSampler(10, 3, rank), 2);
    EXPECT_EQ(epochTargets(*loader), shards[rank]) << "rank " << rank;
  }
  // Without duplicates the tail is cut: 3 each, 9 distinct samples in all.
  std::set<int64_t> seen;
  for (size_t rank = 0; rank < 3; ++rank) {
    auto loader = data::make_data_loader(
        numbered(10), data::samplers::DistributedRandomSampler(10, 3, rank, false),
        data::DataLoaderOptions(2).workers(1));
    EXPECT_EQ(loader->size(), 2u);
    std::vector<int64_t> shard = epochTargets(*loader);
    EXPECT_EQ(shard.size(), 3u);
    seen.insert(shard.begin(), shard.end());
  }
  EXPECT_EQ(seen.size(), 9u);
  EXPECT_TRUE(throwsWith<ValueError>([] { data::samplers::DistributedRandomSampler(10, 2, 2); },
                                     {"DistributedRandomSampler", "rank 2", "2 replicas"}));
}

/// Sample i is data [i]; sample `held` waits until `release` is set. The dataset may have no size.
class Held : public data::datasets::Dataset<Held> {
public:
  Held(size_t held, bool sized) : held_(held), sized_(sized) {}
  data::Example<> get(size_t index) override {
    while (index == held_ && !release->load())
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return {full({1}, static_cast<double>(index)), tensor({static_cast<int>(index)})};
  }
  weft::optional<size_t> size() const override {
    return sized_ ? weft::optional<size_t>(8) : weft::nullopt;
  }
  std::shared_ptr<std::atomic<bool>> release = std::make_shared<std::atomic<bool>>(false);

private:
  size_t held_;
  bool sized_;
};

TEST(LibTorchData, OptionsMaxJobsTimeoutAndOrdering) {
  // enforce_ordering(false) and max_jobs are accepted; batches still come out in order.
  auto loader = data::make_data_loader<data::samplers::SequentialSampler>(
      numbered(30), data::DataLoaderOptions(4).workers(3).max_jobs(2).enforce_ordering(false));
  EXPECT_EQ(epochTargets(*loader), range(0, 30));

  // A batch that takes longer than the timeout is an IOError and ends the epoch: the first one is
  // held, so that no batch has to come in time (a loaded machine may delay any of them).
  Held held(0, true);
  auto release = held.release;
  auto slow = data::make_data_loader<data::samplers::SequentialSampler>(
      std::move(held),
      data::DataLoaderOptions(2).workers(2).timeout(std::chrono::milliseconds(200)));
  size_t batches = 0;
  EXPECT_TRUE(throwsWith<IOError>(
      [&] {
        for (auto& batch : *slow) {
          (void)batch;
          ++batches;
        }
      },
      {"batch 0 of epoch 0", "timeout of 200 ms"}));
  EXPECT_EQ(batches, 0u);
  release->store(true); // the held worker finishes, and join() waits for it
  slow->join();
  EXPECT_EQ(slow->state().epoch, 0u);
  EXPECT_EQ(epochTargets(*slow), range(0, 8)) << "the next epoch has every batch";
  EXPECT_EQ(slow->state().epoch, 1u);

  EXPECT_TRUE(throwsWith<ValueError>(
      [] {
        data::make_data_loader(numbered(3),
                               data::DataLoaderOptions(1).timeout(std::chrono::milliseconds(-5)));
      },
      {"timeout must be positive", "-5 ms"}));
  EXPECT_TRUE(throwsWith<ValueError>(
      [] { data::make_data_loader(numbered(3), data::DataLoaderOptions(1).max_jobs(0)); },
      {"max_jobs must be at least 1"}));
  EXPECT_TRUE(throwsWith<ValueError>([] { data::make_data_loader(Held(0, false), 2); },
                                     {"size() has no value"}));
}

} // namespace
} // namespace weft::test
