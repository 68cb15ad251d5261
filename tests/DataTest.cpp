// The data room: datasets, samplers, the DataLoader's order, shutdown and errors, the IDX, CSV and
// text readers, and transforms. Run under ASan and TSan in CI, so kept small and fast.
#include "TestUtil.h"

#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <set>
#include <thread>
#include <unistd.h>

namespace weft::test {
namespace {

using data::DataLoader;
using data::DataLoaderOptions;
using data::Example;

/// Sample i is data [i as float] and target i; counts calls, and can throw or stall on request.
class CountingDataset : public data::Dataset {
public:
  explicit CountingDataset(size_t n, std::optional<size_t> throwAt = std::nullopt)
      : n_(n), throwAt_(throwAt) {}
  Example<> get(size_t index) override {
    ++calls;
    WEFT_CHECK(index != throwAt_, Value, "CountingDataset: sample ", index, " is corrupt");
    return {full({1}, static_cast<double>(index)), scalar_tensor(static_cast<int64_t>(index))};
  }
  std::optional<size_t> size() const override { return n_; }
  std::atomic<size_t> calls{0};

private:
  size_t n_;
  std::optional<size_t> throwAt_;
};

/// The sample ids of one epoch, in the order the loader gives them.
std::vector<int64_t> epochIds(DataLoader& loader) {
  std::vector<int64_t> ids;
  for (Example<>& batch : loader)
    for (int64_t id : batch.target.to_vector<int64_t>())
      ids.push_back(id);
  return ids;
}

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

// ---- the loader's order ----

TEST(DataLoader, EverySampleOncePerEpoch) {
  auto ds = std::make_shared<CountingDataset>(103);
  for (bool shuffle : {false, true})
    for (bool dropLast : {false, true})
      for (size_t workers : {0, 1, 3}) {
        DataLoader loader(
            ds, DataLoaderOptions(10).shuffle(shuffle).drop_last(dropLast).workers(workers));
        EXPECT_EQ(loader.size(), dropLast ? 10u : 11u);
        std::vector<int64_t> ids = epochIds(loader);
        EXPECT_EQ(ids.size(), dropLast ? 100u : 103u);
        EXPECT_EQ(std::set<int64_t>(ids.begin(), ids.end()).size(), ids.size()) << "a repeat";
        if (!dropLast) {
          std::sort(ids.begin(), ids.end());
          EXPECT_EQ(ids, iota(103)) << "shuffle " << shuffle << " workers " << workers;
        }
        if (!shuffle) {
          EXPECT_EQ(ids, iota(static_cast<int64_t>(ids.size())));
        }
      }
}

TEST(DataLoader, SameOrderForASeedAtAnyWorkerCount) {
  auto ds = std::make_shared<CountingDataset>(64);
  std::vector<std::vector<int64_t>> reference;
  for (size_t workers : {0, 1, 2, 4}) {
    DataLoader loader(ds, DataLoaderOptions(5).shuffle().seed(7).workers(workers).prefetch(1));
    std::vector<std::vector<int64_t>> epochs{epochIds(loader), epochIds(loader)};
    if (reference.empty()) reference = epochs;
    EXPECT_EQ(epochs, reference) << "workers " << workers;
  }
  EXPECT_NE(reference[0], reference[1]) << "two epochs gave one permutation";
}

TEST(DataLoader, EpochsAndSeedsGiveDifferentPermutations) {
  auto ds = std::make_shared<CountingDataset>(50);
  DataLoader a(ds, DataLoaderOptions(50).shuffle().seed(1));
  DataLoader b(ds, DataLoaderOptions(50).shuffle().seed(2));
  std::vector<int64_t> e0 = epochIds(a), e1 = epochIds(a);
  EXPECT_NE(e0, e1);
  EXPECT_NE(e0, epochIds(b));
  a.set_epoch(0);
  EXPECT_EQ(epochIds(a), e0);
  // The order is randperm from Generator(seed) advanced by the epoch.
  Generator g(1);
  g.set_offset(1);
  EXPECT_EQ(e1, randperm(50, g).to_vector<int64_t>());
}

TEST(Samplers, DistributedShardsAreDisjointEqualAndCover) {
  for (size_t n : {12, 10}) {
    std::vector<size_t> all;
    for (size_t rank = 0; rank < 3; ++rank) {
      std::vector<size_t> shard = data::DistributedSampler(3, rank, true, 5).indices(n, 2);
      EXPECT_EQ(shard.size(), 4u);
      all.insert(all.end(), shard.begin(), shard.end());
    }
    std::set<size_t> distinct(all.begin(), all.end());
    EXPECT_EQ(distinct.size(), n) << "shards must cover every sample";
    EXPECT_EQ(all.size() - distinct.size(), 12 - n) << "only the wrap-around padding repeats";
  }
  // Through the loader: ranks see disjoint samples of one permutation.
  auto ds = std::make_shared<CountingDataset>(40);
  std::set<int64_t> seen;
  for (size_t rank = 0; rank < 4; ++rank) {
    DataLoader loader(ds, DataLoaderOptions(3).shuffle().seed(9).distributed(4, rank).workers(1));
    for (int64_t id : epochIds(loader))
      EXPECT_TRUE(seen.insert(id).second) << "sample " << id << " in two shards";
  }
  EXPECT_EQ(seen.size(), 40u);
  EXPECT_TRUE(throwsWith<ValueError>([] { data::DistributedSampler(2, 2); }, {"rank 2"}));
}

// ---- shutdown, errors and backpressure ----

TEST(DataLoader, BreakingOutWithWorkersBlockedStopsThemPromptly) {
  auto ds = std::make_shared<CountingDataset>(10000);
  {
    DataLoader loader(ds, DataLoaderOptions(1).workers(4).prefetch(1));
    for (Example<>& batch : loader) {
      (void)batch;
      // Let the workers fill the window and block on it before leaving.
      while (ds->calls.load() < 5)
        std::this_thread::yield();
      break;
    }
    const size_t after = ds->calls.load();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(ds->calls.load(), after) << "workers kept building after the loop ended";
    EXPECT_LE(after, 6u);
  } // destroying the loader must not hang
  DataLoader again(ds, DataLoaderOptions(1000).workers(2));
  EXPECT_EQ(again.begin()->data.size(0), 1000);
}

TEST(DataLoader, WorkerExceptionReachesTheCallerWithItsMessage) {
  auto ds = std::make_shared<CountingDataset>(100, 37);
  for (size_t workers : {0, 2}) {
    DataLoader loader(ds, DataLoaderOptions(10).workers(workers));
    size_t batches = 0;
    EXPECT_TRUE(throwsWith<ValueError>(
        [&] {
          for (Example<>& b : loader) {
            (void)b;
            ++batches;
          }
        },
        {"sample 37 is corrupt"}));
    EXPECT_EQ(batches, 3u) << "the batches before the bad one still arrive, in order";
    EXPECT_EQ(loader.state().batches, 3u);
  }
}

TEST(DataLoader, BackpressureBoundsBatchesBuiltAhead) {
  constexpr size_t kWorkers = 2, kPrefetch = 3;
  auto ds = std::make_shared<CountingDataset>(60);
  DataLoader loader(ds, DataLoaderOptions(1).workers(kWorkers).prefetch(kPrefetch));
  size_t consumed = 0;
  for (Example<>& batch : loader) {
    (void)batch;
    ++consumed;
    if (consumed == 1) // wait until the workers have filled the window
      while (ds->calls.load() < 1 + kWorkers + kPrefetch)
        std::this_thread::yield();
    EXPECT_LE(ds->calls.load(), consumed + kWorkers + kPrefetch);
  }
  EXPECT_EQ(consumed, 60u);
}

TEST(DataLoader, StateRestoreContinuesTheSameOrder) {
  auto ds = std::make_shared<CountingDataset>(100);
  auto opts = DataLoaderOptions(10).shuffle().seed(3).workers(2);
  DataLoader first(ds, opts);
  (void)epochIds(first); // finish epoch 0
  data::LoaderState saved;
  std::vector<int64_t> rest;
  size_t k = 0;
  for (Example<>& batch : first) { // epoch 1: checkpoint after 4 batches
    if (++k == 4) saved = first.state();
    if (k > 4)
      for (int64_t id : batch.target.to_vector<int64_t>())
        rest.push_back(id);
  }
  EXPECT_EQ(saved, (data::LoaderState{1, 4, 3}));
  std::vector<int64_t> epoch2 = epochIds(first);

  DataLoader resumed(ds, DataLoaderOptions(10).shuffle().seed(99).workers(1));
  resumed.restore(saved);
  EXPECT_EQ(epochIds(resumed), rest);
  EXPECT_EQ(epochIds(resumed), epoch2);
  resumed.restore(first.state()); // a finished epoch continues with the next
  EXPECT_EQ(resumed.state().epoch, 3u);
}

// ---- datasets ----

TEST(TensorDataset, BatchesAreRowCopiesAndGetIsAView) {
  Tensor x = arange(24, kFloat32).reshape({6, 2, 2}), y = arange(6);
  data::TensorDataset ds(x, y);
  Example<> b = ds.get_batch({4, 1});
  EXPECT_EQ(b.data.sizes(), (Shape{2, 2, 2}));
  EXPECT_EQ(b.data.to_vector<float>(), (std::vector<float>{16, 17, 18, 19, 4, 5, 6, 7}));
  EXPECT_EQ(b.target.to_vector<int64_t>(), (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(ds.get(2).data.data_ptr(), ds.data().select(0, 2).data_ptr());
  EXPECT_TRUE(throwsWith<IndexError>([&] { ds.get_batch({6}); }, {"index 6", "6 rows"}));
  EXPECT_TRUE(throwsWith<ShapeError>([&] { data::TensorDataset(x, arange(5)); }, {"6 samples"}));
}

TEST(TextDataset, WindowsPredictTheNextByte) {
  TempDir dir;
  Tensor bytes = data::read_bytes({dir.write("a.txt", "hello "), dir.write("b.txt", "world")});
  EXPECT_EQ(bytes.numel(), 11);
  data::TextDataset ds(bytes, 4);
  ASSERT_EQ(ds.size(), 2u); // windows at 0 and 4 ("hello" and "o wor"); 8 lacks a fifth byte
  Example<> b = ds.get_batch({1, 0});
  EXPECT_EQ(b.data.dtype(), kInt64);
  EXPECT_EQ(data::TextDataset::decode(b.data), "o wohell");
  EXPECT_EQ(data::TextDataset::decode(b.target), " worello");
  EXPECT_EQ(data::TextDataset(bytes, 4, 1).size(), 7u);
  EXPECT_EQ(data::TextDataset::decode(ds.get(0).target), "ello");
}

// ---- IDX ----

TEST(Idx, RawAndGzippedFilesParse) {
  TempDir dir;
  std::string payload;
  for (int i = 0; i < 24; ++i)
    payload += static_cast<char>(i * 10);
  const std::string bytes = idxBytes(0x08, {2, 3, 4}, payload);
  const std::string raw = dir.write("x.idx", bytes);
  const std::string gz = (dir.path / "x.idx.gz").string();
  gzFile f = gzopen(gz.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
  for (const std::string& path : {raw, gz}) {
    Tensor t = data::read_idx(path);
    EXPECT_EQ(t.dtype(), kUInt8);
    EXPECT_EQ(t.sizes(), (Shape{2, 3, 4}));
    EXPECT_EQ(t.to_vector<int64_t>()[23], 230);
  }
  // Big-endian multi-byte types: int32 -1 and 258, float32 1.5; int16 and int8 widen to int32.
  Tensor i32 = data::read_idx(
      dir.write("i.idx", idxBytes(0x0C, {2}, std::string("\xff\xff\xff\xff\x00\x00\x01\x02", 8))));
  EXPECT_EQ(i32.to_vector<int32_t>(), (std::vector<int32_t>{-1, 258}));
  Tensor f32 =
      data::read_idx(dir.write("f.idx", idxBytes(0x0D, {1}, std::string("\x3f\xc0\x00\x00", 4))));
  EXPECT_EQ(f32.to_vector<float>(), std::vector<float>{1.5f});
  Tensor i16 = data::read_idx(dir.write("s.idx", idxBytes(0x0B, {1}, "\xff\xfe")));
  EXPECT_EQ(i16.to_vector<int32_t>(), std::vector<int32_t>{-2});
  Tensor i8 = data::read_idx(dir.write("b.idx", idxBytes(0x09, {2}, "\x05\xfb")));
  EXPECT_EQ(i8.to_vector<int32_t>(), (std::vector<int32_t>{5, -5}));
}

TEST(Idx, MalformedFilesAreIOErrorsNamingTheFile) {
  TempDir dir;
  const std::string truncated = dir.write("t.idx", idxBytes(0x08, {2, 3}, "abcde"));
  EXPECT_TRUE(throwsWith<IOError>([&] { data::read_idx(truncated); },
                                  {truncated, "truncated", "needs 6 data bytes, found 5"}));
  const std::string magic = dir.write("m.idx", "PK\x03\x04 not idx");
  EXPECT_TRUE(throwsWith<IOError>([&] { data::read_idx(magic); }, {magic, "bad magic"}));
  const std::string type = dir.write("y.idx", idxBytes(0x07, {1}, "a"));
  EXPECT_TRUE(throwsWith<IOError>([&] { data::read_idx(type); }, {"type code 0x7"}));
  const std::string huge =
      dir.write("h.idx", idxBytes(0x0E, {0xffffffff, 0xffffffff, 0xffffffff}, ""));
  EXPECT_TRUE(throwsWith<IOError>([&] { data::read_idx(huge); }, {"overflows"}));
  EXPECT_TRUE(
      throwsWith<IOError>([&] { data::read_idx((dir.path / "none").string()); }, {"cannot open"}));
}

TEST(Idx, FashionMnistTestSetLoads) {
  const std::string root = "/usr/share/datasets/fashion-mnist";
  if (!std::filesystem::exists(root + "/t10k-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST is not installed at " << root
                 << " (Debian package dataset-fashion-mnist)";
  Tensor images = data::read_idx(root + "/t10k-images-idx3-ubyte.gz");
  EXPECT_EQ(images.sizes(), (Shape{10000, 28, 28}));
  data::FashionMNIST test(root, false);
  EXPECT_EQ(test.data().sizes(), (Shape{10000, 1, 28, 28}));
  EXPECT_EQ(test.target().dtype(), kInt64);
  EXPECT_LE(test.data().max().item<float>(), 1.0f);
  EXPECT_EQ(test.target().max().item<int64_t>(), 9);
}

// ---- CSV ----

TEST(Csv, SmallFileParsesToExactValues) {
  TempDir dir;
  const std::string path =
      dir.write("a.csv", "\"id\",\"price, usd\",x\r\n1,2.5,-3e2\r\n\r\n2, +0.25 ,\"7\"\r\n3,,1");
  data::CsvTable t = data::read_csv(path);
  EXPECT_EQ(t.names, (std::vector<std::string>{"id", "price, usd", "x"}));
  ASSERT_EQ(t.rows(), 3);
  EXPECT_EQ(t.columns[0].dtype(), kInt64);
  EXPECT_EQ(t.column("id").to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3}));
  std::vector<float> price = t.columns[1].to_vector<float>();
  EXPECT_EQ(price[0], 2.5f);
  EXPECT_EQ(price[1], 0.25f);
  EXPECT_TRUE(std::isnan(price[2])) << "an empty float field is NaN";
  EXPECT_EQ(t.columns[2].to_vector<float>(), (std::vector<float>{-300, 7, 1}));
  Tensor m = data::read_csv_tensor(path, data::CsvOptions().dtype(kFloat64));
  EXPECT_EQ(m.sizes(), (Shape{3, 3}));
  EXPECT_EQ(m.to_vector<double>()[2], -300.0);
  // Without a header row every line is data.
  Tensor n =
      data::read_csv_tensor(dir.write("b.csv", "1;2\n3;4\n"), data::CsvOptions().delimiter(';'));
  EXPECT_EQ(n.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
}

TEST(Csv, BadRowsNameFileLineAndColumn) {
  TempDir dir;
  const std::string bad = dir.write("bad.csv", "a,b,c\n1,2,3\n4,x5,6\n");
  EXPECT_TRUE(throwsWith<IOError>([&] { data::read_csv_tensor(bad); },
                                  {bad, "line 3, column 2 ('b')", "\"x5\"", "float32"}));
  const std::string fields = dir.write("fields.csv", "a,b\n1,2\n\n3,4,5\n");
  EXPECT_TRUE(throwsWith<IOError>([&] { data::read_csv(fields); },
                                  {"line 4", "expected 2 fields, found 3"}));
  std::string ints = "a\n"; // 101 integers, then a float the inference did not see
  for (int i = 0; i < 101; ++i)
    ints += "1\n";
  const std::string inferred = dir.write("int.csv", ints + "2.5\n");
  EXPECT_TRUE(throwsWith<IOError>([&] { data::read_csv(inferred); },
                                  {"line 103, column 1 ('a')", "int64", "inferred"}));
  const std::string empty = dir.write("empty.csv", "");
  EXPECT_TRUE(throwsWith<IOError>([&] { data::read_csv(empty); }, {empty, "empty"}));
  EXPECT_EQ(data::read_csv(dir.write("h.csv", "a,b\n")).rows(), 0);
}

TEST(Csv, ParallelChunksMatchOneThread) {
  TempDir dir;
  std::string text = "a,b,c\n";
  for (int i = 0; i < 30000; ++i)
    text += std::to_string(i) + "," + std::to_string(i * 0.5) + "," + std::to_string(-i) + "\n";
  const std::string path = dir.write("big.csv", text);
  Tensor one = data::read_csv_tensor(path, data::CsvOptions().threads(1));
  Tensor four = data::read_csv_tensor(path, data::CsvOptions().threads(4));
  EXPECT_EQ(one.sizes(), (Shape{30000, 3}));
  EXPECT_EQ(one.to_vector<float>(), four.to_vector<float>());
  EXPECT_EQ(four.select(0, 29999).to_vector<float>(), (std::vector<float>{29999, 14999.5, -29999}));
  // A bad row far into the file is reported by its own line, whichever chunk holds it.
  text += "1,2\n";
  const std::string bad = dir.write("bad.csv", text);
  EXPECT_TRUE(throwsWith<IOError>([&] { data::read_csv(bad, data::CsvOptions().threads(4)); },
                                  {"line 30002"}));
  data::CsvDataset ds(path, {}, -1, kInt64);
  EXPECT_EQ(ds.data().sizes(), (Shape{30000, 2}));
  EXPECT_EQ(ds.get(7).target.item<int64_t>(), -7);
}

TEST(Csv, NumbersParseAsFromCharsDoes) {
  // Short decimals take a fast path; long ones, exponents and specials go to from_chars: both
  // must give from_chars' correctly rounded value.
  std::mt19937_64 rng(5);
  std::vector<std::string> texts{"0.1",
                                 "-0.0",
                                 "3.4028235e38",
                                 "1e-50",
                                 "inf",
                                 "-nan",
                                 "7.",
                                 ".5",
                                 "123456789012345678901234",
                                 "0.30000000000000004"};
  for (int i = 0; i < 3000; ++i) {
    std::string digits = std::to_string(rng() % 100000000000ULL);
    const size_t point = rng() % (digits.size() + 1);
    texts.push_back((i % 2 ? "-" : "") + digits.substr(0, point) + "." + digits.substr(point));
  }
  std::string text;
  for (const std::string& t : texts)
    text += t + "\n";
  TempDir dir;
  const std::string path = dir.write("n.csv", text);
  std::vector<float> f = data::read_csv_tensor(path).to_vector<float>();
  std::vector<double> d =
      data::read_csv_tensor(path, data::CsvOptions().dtype(kFloat64)).to_vector<double>();
  for (size_t i = 0; i < texts.size(); ++i) {
    float ef = 0;
    double ed = 0;
    const char* b = texts[i].data() + (texts[i][0] == '+');
    if (std::from_chars(b, b + texts[i].size(), ef).ec != std::errc()) ef = std::strtof(b, nullptr);
    if (std::from_chars(b, b + texts[i].size(), ed).ec != std::errc()) ed = std::strtod(b, nullptr);
    if (std::isnan(ed)) {
      EXPECT_TRUE(std::isnan(f[i]) && std::isnan(d[i])) << texts[i];
      continue;
    }
    EXPECT_EQ(f[i], ef) << texts[i];
    EXPECT_EQ(d[i], ed) << texts[i];
    EXPECT_EQ(std::signbit(d[i]), std::signbit(ed)) << texts[i];
  }
}

// ---- transforms ----

TEST(Transforms, FlipIsExactAndCropKeepsShape) {
  Tensor x = randn({4, 3, 5, 6}, kFloat32, Generator(1));
  Generator g(0);
  EXPECT_EQ(data::RandomHorizontalFlip(1.0)({x, {}}, g).data.to_vector<float>(),
            x.flip({3}).to_vector<float>());
  EXPECT_EQ(data::RandomHorizontalFlip(0.0)({x, {}}, g).data.to_vector<float>(),
            x.to_vector<float>());
  EXPECT_EQ(data::RandomCrop(5, 0)({x.narrow(3, 0, 5), {}}, g).data.to_vector<float>(),
            x.narrow(3, 0, 5).to_vector<float>());
  // Each padded crop is the zero-padded image at some offset.
  Tensor crop = data::RandomCrop(5, 2)({x, {}}, g).data;
  EXPECT_EQ(crop.sizes(), (Shape{4, 3, 5, 5}));
  Tensor padded = pad(x, {2, 2, 2, 2});
  for (int64_t s = 0; s < 4; ++s) {
    bool found = false;
    for (int64_t top = 0; top <= 4 && !found; ++top)
      for (int64_t left = 0; left <= 5 && !found; ++left)
        found = padded.select(0, s).narrow(1, top, 5).narrow(2, left, 5).to_vector<float>() ==
                crop.select(0, s).to_vector<float>();
    EXPECT_TRUE(found) << "sample " << s;
  }
  Tensor norm = data::Normalize({1, 2, 3}, {2, 4, 8})({ones({1, 3, 1, 1}), {}}, g).data;
  EXPECT_EQ(norm.to_vector<float>(), (std::vector<float>{0, -0.25f, -0.25f}));
  EXPECT_TRUE(throwsWith<ShapeError>(
      [&] {
        data::RandomCrop(10, 2)({x, {}}, g);
      },
      {"does not fit"}));
}

TEST(Transforms, AugmentationIsReproducibleForASeedAtAnyWorkerCount) {
  auto ds = std::make_shared<data::TensorDataset>(rand({40, 1, 6, 6}, kFloat32, Generator(4)),
                                                  arange(40));
  std::vector<std::vector<float>> reference;
  for (size_t workers : {0, 3}) {
    DataLoader loader(ds, DataLoaderOptions(8)
                              .seed(11)
                              .workers(workers)
                              .transform(data::Normalize({0.5}, {0.25}))
                              .transform(data::RandomCrop(6, 2))
                              .transform(data::RandomHorizontalFlip()));
    std::vector<std::vector<float>> batches;
    for (Example<>& b : loader)
      batches.push_back(b.data.to_vector<float>());
    if (reference.empty()) reference = batches;
    EXPECT_EQ(batches, reference) << "workers " << workers;
  }
  EXPECT_NE(reference[0], ((ds->data().narrow(0, 0, 8) - 0.5) / 0.25).to_vector<float>());
}

} // namespace
} // namespace weft::test
