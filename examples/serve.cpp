// Serving an exported model with the runtime alone (it links libweft_rt, no compiler): client
// threads send single-image requests through a bounded batching queue; worker threads join what is
// waiting into one batch (up to --max-batch images, or what came within --wait-us of the first),
// run it in the artifact's smallest bucket that holds it, and answer each request. Prints latency
// percentiles and throughput per client count, with and without batching, and checks every answer
// against the same image run alone.
//
//   fashion_mnist --out fm      # trains, and writes fm.weft (batches of 1 to 64 images)
//   serve fm.weft
#include "weft_rt.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <future>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

const char* kUsage =
    "usage: serve MODEL.weft [--clients 1,4,16,64] [--requests N] [--max-batch N] [--wait-us N]\n"
    "             [--workers N] [--queue N]\n"
    "Serves single-image requests of MODEL.weft's 'forward' (a program with a dynamic batch, as\n"
    "fashion_mnist writes it) from client threads through a batching queue.\n"
    "  --clients     client thread counts to measure (default 1,4,16,64)\n"
    "  --requests N  requests per client (default 400)\n"
    "  --max-batch N the largest batch a worker runs (default: the largest bucket)\n"
    "  --wait-us N   how long a worker waits for more requests after the first (default 200)\n"
    "  --workers N   worker threads, a session each (default 1)\n"
    "  --queue N     requests the queue holds before clients wait (default 256)\n";

struct Request {
  const float* input = nullptr;
  float* output = nullptr;
  std::promise<void> done;
};

/// A bounded queue of requests that hands them out in batches.
class BatchingQueue {
public:
  explicit BatchingQueue(size_t capacity) : capacity_(capacity) {}
  /// Waits while the queue is full.
  void push(Request* r) {
    std::unique_lock<std::mutex> lock(mutex_);
    notFull_.wait(lock, [&] { return queue_.size() < capacity_; });
    queue_.push_back(r);
    notEmpty_.notify_one();
  }
  /// Up to `maxBatch` requests: waits for the first, then up to `wait` for more (empty once
  /// closed and drained).
  std::vector<Request*> pop(size_t maxBatch, std::chrono::microseconds wait) {
    std::unique_lock<std::mutex> lock(mutex_);
    notEmpty_.wait(lock, [&] { return !queue_.empty() || closed_; });
    if (queue_.empty()) return {};
    const auto deadline = Clock::now() + wait;
    while (queue_.size() < maxBatch && !closed_ &&
           notEmpty_.wait_until(lock, deadline) != std::cv_status::timeout) {
    }
    std::vector<Request*> batch;
    while (!queue_.empty() && batch.size() < maxBatch) {
      batch.push_back(queue_.front());
      queue_.pop_front();
    }
    notFull_.notify_all();
    return batch;
  }
  void close() {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
    notEmpty_.notify_all();
  }

private:
  std::mutex mutex_;
  std::condition_variable notEmpty_, notFull_;
  std::deque<Request*> queue_;
  size_t capacity_;
  bool closed_ = false;
};

struct Config {
  std::vector<int> clients = {1, 4, 16, 64};
  int requests = 400;
  int64_t maxBatch = 0;
  int waitUs = 200;
  int workers = 1;
  size_t queue = 256;
};

struct Result {
  double seconds = 0, p50 = 0, p99 = 0, meanBatch = 0;
  long requests = 0, wrong = 0;
};

/// Serves `clients` threads' requests for the images of `pool` with batches of up to `maxBatch`.
Result serve(const weft_rt::Artifact& model, const Config& c, int clients, int64_t maxBatch,
             const std::vector<float>& pool, const std::vector<float>& expected, size_t inSize,
             size_t outSize) {
  const size_t images = pool.size() / inSize;
  BatchingQueue queue(c.queue);
  std::atomic<long> batches{0}, batched{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < c.workers; ++w)
    workers.emplace_back([&] {
      weft_rt::Session session(model, "forward");
      std::vector<float> in(static_cast<size_t>(maxBatch) * inSize),
          out(static_cast<size_t>(maxBatch) * outSize);
      for (;;) {
        std::vector<Request*> batch =
            queue.pop(static_cast<size_t>(maxBatch), std::chrono::microseconds(c.waitUs));
        if (batch.empty()) return;
        for (size_t i = 0; i < batch.size(); ++i)
          std::copy_n(batch[i]->input, inSize, in.data() + i * inSize);
        std::exception_ptr failed;
        try {
          session.run({in.data()}, {out.data()}, static_cast<int64_t>(batch.size()));
        } catch (const weft_rt::Error&) {
          failed = std::current_exception(); // each request of the batch gets the error
        }
        for (size_t i = 0; i < batch.size(); ++i) {
          if (!failed) std::copy_n(out.data() + i * outSize, outSize, batch[i]->output);
          // Moved out first: the client may free the request once its answer is ready.
          std::promise<void> done = std::move(batch[i]->done);
          if (failed)
            done.set_exception(failed);
          else
            done.set_value();
        }
        batches.fetch_add(1);
        batched.fetch_add(static_cast<long>(batch.size()));
      }
    });
  std::vector<std::vector<double>> latencies(static_cast<size_t>(clients));
  std::atomic<long> wrong{0};
  const auto start = Clock::now();
  std::vector<std::thread> senders;
  for (int k = 0; k < clients; ++k)
    senders.emplace_back([&, k] {
      std::vector<float> answer(outSize);
      for (int i = 0; i < c.requests; ++i) {
        const size_t image = static_cast<size_t>(k * 7919 + i) % images;
        Request r;
        r.input = pool.data() + image * inSize;
        r.output = answer.data();
        std::future<void> done = r.done.get_future();
        const auto t0 = Clock::now();
        queue.push(&r);
        try {
          done.get();
        } catch (const weft_rt::Error& e) {
          std::fprintf(stderr, "serve: a request failed: %s\n", e.what());
          wrong.fetch_add(1);
          continue;
        }
        latencies[static_cast<size_t>(k)].push_back(
            std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        // Batched in any bucket, an answer is its image's alone (other compilations of the same
        // graph: to 1e-4 relative, float rounding).
        for (size_t j = 0; j < outSize; ++j) {
          const float want = expected[image * outSize + j];
          if (std::abs(answer[j] - want) > 1e-4f * (1 + std::abs(want))) {
            wrong.fetch_add(1);
            break;
          }
        }
      }
    });
  for (std::thread& t : senders)
    t.join();
  Result r;
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  queue.close();
  for (std::thread& t : workers)
    t.join();
  std::vector<double> all;
  for (auto& l : latencies)
    all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  auto at = [&](double q) { return all[static_cast<size_t>(q * static_cast<double>(all.size() - 1))]; };
  r.requests = static_cast<long>(all.size());
  r.p50 = at(0.5);
  r.p99 = at(0.99);
  r.meanBatch = batches > 0 ? static_cast<double>(batched) / static_cast<double>(batches) : 0;
  r.wrong = wrong;
  return r;
}

std::vector<int> parseList(const std::string& text) {
  std::vector<int> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find(',', at);
    if (end == std::string::npos) end = text.size();
    out.push_back(std::stoi(text.substr(at, end - at)));
    at = end + 1;
  }
  return out;
}

int run(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help") {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  Config c;
  for (int i = 2; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument(k + " needs a value");
    const std::string v = argv[++i];
    if (k == "--clients") c.clients = parseList(v);
    else if (k == "--requests") c.requests = std::stoi(v);
    else if (k == "--max-batch") c.maxBatch = std::stoll(v);
    else if (k == "--wait-us") c.waitUs = std::stoi(v);
    else if (k == "--workers") c.workers = std::stoi(v);
    else if (k == "--queue") c.queue = static_cast<size_t>(std::stoll(v));
    else throw std::invalid_argument("unknown option " + k);
  }
  const bool valid = c.requests > 0 && c.waitUs >= 0 && c.workers > 0 && c.queue > 0 &&
                     c.maxBatch >= 0 && !c.clients.empty() &&
                     std::ranges::all_of(c.clients, [](int n) { return n > 0; });
  if (!valid) throw std::invalid_argument("counts must be positive");
  weft_rt::Artifact model = weft_rt::Artifact::open(argv[1]);
  weft_rt::Session probe(model, "forward");
  const std::vector<int64_t> buckets = probe.buckets();
  const bool fits = !buckets.empty() && probe.dynamic_dim() == 0 &&
                    probe.arguments().size() == 1 && probe.outputs().size() == 1 &&
                    probe.arguments()[0].dtype == WEFT_FLOAT32 &&
                    probe.outputs()[0].dtype == WEFT_FLOAT32 && probe.argument_batched(0) &&
                    probe.output_batch(0) == std::pair<int32_t, int64_t>{0, 1};
  if (!fits)
    throw std::invalid_argument(std::string(argv[1]) +
                                ": 'forward' must take one batched float32 input and give one "
                                "float32 output, a row per input row, with a dynamic batch "
                                "(export_model's dynamic_dim(0))");
  if (c.maxBatch == 0 || c.maxBatch > buckets.back()) c.maxBatch = buckets.back();
  const size_t inSize = probe.arguments()[0].nbytes / sizeof(float) /
                        static_cast<size_t>(buckets.back());
  const size_t outSize = probe.outputs()[0].nbytes / sizeof(float) /
                         static_cast<size_t>(buckets.back());
  // 256 images, and each one's answer run alone (the bucket of 1).
  const size_t images = 256;
  std::vector<float> pool(images * inSize), expected(images * outSize);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  for (float& x : pool)
    x = normal(rng);
  for (size_t i = 0; i < images; ++i)
    probe.run({pool.data() + i * inSize}, {expected.data() + i * outSize}, 1);

  std::printf("serve: %s, buckets", argv[1]);
  for (int64_t b : buckets)
    std::printf(" %lld", static_cast<long long>(b));
  std::printf("; %d worker(s), %d requests per client, batches up to %lld, wait %d us\n",
              c.workers, c.requests, static_cast<long long>(c.maxBatch), c.waitUs);
  std::printf("| clients | batching | requests/s | p50 ms | p99 ms | mean batch |\n"
              "|---|---|---|---|---|---|\n");
  long wrong = 0;
  for (int clients : c.clients)
    for (int64_t maxBatch : {int64_t{1}, c.maxBatch}) {
      Result r = serve(model, c, clients, maxBatch, pool, expected, inSize, outSize);
      wrong += r.wrong;
      std::printf("| %d | %s | %.0f | %.3f | %.3f | %.1f |\n", clients,
                  maxBatch == 1 ? "off" : "on", static_cast<double>(r.requests) / r.seconds, r.p50,
                  r.p99, r.meanBatch);
    }
  std::printf("answers differing from the image run alone: %ld\n", wrong);
  return wrong == 0 ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "serve: %s\n%s", e.what(), kUsage);
    return 1;
  }
}
