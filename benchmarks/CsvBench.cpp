// The data room's throughput, driven by csv_vs_pandas.sh: writes the benchmark CSV, times
// read_csv_tensor plus a DataLoader pass over it, and times a DataLoader with augmentation over
// Fashion-MNIST. Each mode prints one line of "name value" pairs for the script to tabulate.
#include <weft/weft.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>

using namespace weft;

namespace {

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// Writes `rows` x `cols` uniform floats in [-10, 10) with 6 decimals and a header row.
int generate(const std::string& path, long rows, long cols) {
  std::ofstream out(path, std::ios::binary);
  for (long c = 0; c < cols; ++c)
    out << (c ? ",c" : "c") << c;
  out << '\n';
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<float> dist(-10.0f, 10.0f);
  std::string line;
  char buf[32];
  for (long r = 0; r < rows; ++r) {
    line.clear();
    for (long c = 0; c < cols; ++c) {
      auto res = std::to_chars(buf, buf + sizeof buf, dist(rng), std::chars_format::fixed, 6);
      if (c) line += ',';
      line.append(buf, res.ptr);
    }
    line += '\n';
    out << line;
  }
  return out ? 0 : 1;
}

/// read_csv_tensor with `threads`, then one epoch of batches through a DataLoader (2 workers).
int csv(const std::string& path, int threads, size_t batch) {
  auto start = std::chrono::steady_clock::now();
  Tensor table = data::read_csv_tensor(path, data::CsvOptions().threads(threads));
  const double read = secondsSince(start);
  start = std::chrono::steady_clock::now();
  data::DataLoader loader(data::TensorDataset(table),
                          data::DataLoaderOptions(batch).workers(static_cast<size_t>(threads)));
  size_t batches = 0, rows = 0;
  for (data::Example<>& b : loader) {
    rows += static_cast<size_t>(b.data.size(0));
    ++batches;
  }
  const double iterate = secondsSince(start);
  std::printf("read %.4f batch %.4f rows %zu cols %lld batches %zu\n", read, iterate, rows,
              static_cast<long long>(table.size(1)), batches);
  return 0;
}

/// One shuffled epoch of the Fashion-MNIST training set with Normalize, RandomCrop(28, 2) and
/// RandomHorizontalFlip.
int fmnist(const std::string& root, size_t workers, size_t batch) {
  auto start = std::chrono::steady_clock::now();
  data::FashionMNIST train(root, true);
  const double load = secondsSince(start);
  data::DataLoader loader(train, data::DataLoaderOptions(batch)
                                     .shuffle()
                                     .seed(1)
                                     .workers(workers)
                                     .prefetch(4)
                                     .transform(data::Normalize({0.2860}, {0.3530}))
                                     .transform(data::RandomCrop(28, 2))
                                     .transform(data::RandomHorizontalFlip()));
  start = std::chrono::steady_clock::now();
  size_t samples = 0;
  for (data::Example<>& b : loader)
    samples += static_cast<size_t>(b.data.size(0));
  const double epoch = secondsSince(start);
  std::printf("load %.4f epoch %.4f samples %zu samples_per_s %.0f\n", load, epoch, samples,
              static_cast<double>(samples) / epoch);
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "generate" && argc == 5)
      return generate(argv[2], std::atol(argv[3]), std::atol(argv[4]));
    if (mode == "csv" && argc == 5)
      return csv(argv[2], std::atoi(argv[3]), std::strtoul(argv[4], nullptr, 10));
    if (mode == "fmnist" && argc == 5)
      return fmnist(argv[2], std::strtoul(argv[3], nullptr, 10),
                    std::strtoul(argv[4], nullptr, 10));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft_csv_bench: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "usage: weft_csv_bench generate PATH ROWS COLS\n"
                       "       weft_csv_bench csv PATH THREADS BATCH\n"
                       "       weft_csv_bench fmnist ROOT WORKERS BATCH\n");
  return 2;
}
