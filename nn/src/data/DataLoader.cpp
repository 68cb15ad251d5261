// The DataLoader: an epoch's workers, its bounded reorder buffer, and the iterator over it.
#include "weft/data/DataLoader.h"

#include "weft/runtime/InputFile.h"
#include "weft/Functions.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

namespace weft::data {
namespace {

/// Batches of `bs` in `n` samples, without the overflow of (n + bs - 1) / bs.
size_t batchCount(size_t n, size_t bs, bool dropLast) {
  return n / bs + (!dropLast && n % bs != 0 ? 1 : 0);
}

} // namespace

namespace detail {

/// One epoch in progress. Workers claim batch indices in order, build them, and leave them in a
/// map keyed by index; the consumer takes them out in index order. A worker may only claim a
/// batch less than `window` ahead of the consumer, which bounds memory (backpressure).
class EpochRun {
public:
  /// Starts the workers; `site` is the loop's line, which their errors name.
  EpochRun(Dataset& dataset, const DataLoaderOptions& options, std::vector<size_t> order,
           uint64_t epoch, size_t first, std::source_location site)
      : dataset_(dataset), options_(options), order_(std::move(order)), epoch_(epoch),
        window_(options.max_jobs_.value_or(options.prefetch_ + options.workers_)),
        nextClaim_(first), nextOut_(first), site_(site) {
    numBatches_ = batchCount(order_.size(), options.batch_size_, options.drop_last_);
    for (size_t w = 0; w < options.workers_; ++w) {
      try {
        threads_.emplace_back([this] { work(); });
      } catch (const std::system_error& e) {
        stop();
        WEFT_FAIL(Value, "DataLoader: cannot start worker thread ", w + 1, " of ", options.workers_,
                  " (", e.what(), "); use fewer workers");
      } catch (...) {
        stop();
        throw;
      }
    }
  }
  ~EpochRun() { stop(); }
  EpochRun(const EpochRun&) = delete;
  EpochRun& operator=(const EpochRun&) = delete;

  /// The next batch in order, or nullopt after the last; rethrows the exception that building it
  /// threw, and throws IOError when a timeout is set and the batch takes longer.
  std::optional<Example<>> next() {
    if (threads_.empty()) { // workers(0): build on the calling thread
      if (nextOut_ >= numBatches_) return std::nullopt;
      return build(nextOut_++);
    }
    Slot slot;
    {
      std::unique_lock lock(mutex_);
      if (nextOut_ >= numBatches_) return std::nullopt;
      auto arrived = [&] { return done_.count(nextOut_) > 0; };
      if (!options_.timeout_)
        ready_.wait(lock, arrived);
      else if (!ready_.wait_for(lock, *options_.timeout_, arrived))
        WEFT_FAIL(IO, "DataLoader: batch ", nextOut_, " of epoch ", epoch_,
                  " did not arrive within the timeout of ", options_.timeout_->count(),
                  " ms; give DataLoaderOptions::timeout more time, or use more workers");
      auto node = done_.extract(nextOut_++);
      slot = std::move(node.mapped());
    }
    space_.notify_all();
    if (slot.error) std::rethrow_exception(slot.error);
    return std::move(slot.batch);
  }

  /// Tells the workers to stop claiming batches, without waiting for them: a batch being built
  /// (perhaps one a timeout gave up on, still inside the dataset's get) finishes meanwhile.
  void cancel() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    space_.notify_all();
  }

private:
  struct Slot {
    Example<> batch;
    std::exception_ptr error;
  };

  /// Tells the workers to stop claiming batches and joins them; a batch being built finishes.
  void stop() {
    cancel();
    for (std::thread& t : threads_)
      if (t.joinable()) t.join();
  }

  void work() {
    CallSite cs(site_); // a worker's error names the loop that asked for the batch
    for (;;) {
      size_t b = 0;
      {
        std::unique_lock lock(mutex_);
        space_.wait(lock, [&] {
          return stopping_ || failed_ || nextClaim_ >= numBatches_ ||
                 nextClaim_ < nextOut_ + window_;
        });
        if (stopping_ || failed_ || nextClaim_ >= numBatches_) return;
        b = nextClaim_++;
      }
      Slot slot;
      try {
        slot.batch = build(b);
      } catch (...) {
        slot.error = std::current_exception();
      }
      const bool failed = slot.error != nullptr;
      {
        std::lock_guard lock(mutex_);
        failed_ = failed_ || failed;
        done_.emplace(b, std::move(slot));
      }
      ready_.notify_one();
      if (failed) space_.notify_all(); // idle workers need not wait for batches nobody takes
    }
  }

  /// Batch `b`: get_batch over its slice of the order, then the transforms with a generator that
  /// depends only on (seed, rank, epoch, b), so any worker count draws the same numbers.
  Example<> build(size_t b) const {
    try {
      const size_t bs = options_.batch_size_, first = b * bs; // b < numBatches_: no overflow
      const auto begin = order_.begin() + static_cast<std::ptrdiff_t>(first);
      const auto end =
          order_.begin() + static_cast<std::ptrdiff_t>(first + std::min(bs, order_.size() - first));
      Example<> batch = dataset_.get_batch(std::vector<size_t>(begin, end));
      if (options_.transforms_.empty()) return batch;
      Generator gen(mix(mix(mix(options_.seed_, options_.rank_), epoch_), b));
      for (const auto& t : options_.transforms_)
        batch = (*t)(std::move(batch), gen);
      return batch;
    } catch (const std::bad_alloc&) {
      WEFT_FAIL(Value, "DataLoader: out of memory building batch ", b, " of epoch ", epoch_, " (",
                options_.batch_size_, " samples); use a smaller batch_size");
    }
  }

  /// A splitmix64 step: well-spread seeds from small, structured inputs.
  static uint64_t mix(uint64_t h, uint64_t v) {
    uint64_t z = h + 0x9e3779b97f4a7c15ULL * (v + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  Dataset& dataset_;
  const DataLoaderOptions& options_;
  const std::vector<size_t> order_;
  const uint64_t epoch_;
  const size_t window_;
  size_t numBatches_ = 0;
  std::mutex mutex_;
  std::condition_variable ready_, space_;
  std::map<size_t, Slot> done_;
  size_t nextClaim_, nextOut_;
  std::source_location site_;
  bool stopping_ = false, failed_ = false;
  std::vector<std::thread> threads_;
};

} // namespace detail

DataLoader::DataLoader(std::shared_ptr<Dataset> dataset, DataLoaderOptions options,
                       std::source_location loc)
    : dataset_(std::move(dataset)), options_(std::move(options)) {
  CallSite cs(loc);
  WEFT_CHECK(dataset_ != nullptr, Value, "DataLoader: the dataset is null");
  // size_t options past PTRDIFF_MAX are negative numbers converted (PyTorch: "should be
  // non-negative"); refusing them also keeps prefetch + workers from overflowing.
  auto count = [](const char* option, size_t value, size_t least) {
    WEFT_CHECK(value >= least && value <= PTRDIFF_MAX, Value, "DataLoader: ", option,
               " must be at least ", least, ", got ",
               value > PTRDIFF_MAX ? std::to_string(static_cast<std::ptrdiff_t>(value))
                                   : std::to_string(value),
               value > PTRDIFF_MAX ? " (a negative number converted to size_t)" : "");
  };
  count("batch_size", options_.batch_size_, 1);
  count("workers", options_.workers_, 0);
  count("prefetch", options_.prefetch_, 1);
  if (options_.max_jobs_) count("max_jobs", *options_.max_jobs_, 1);
  WEFT_CHECK(!options_.timeout_ || options_.timeout_->count() > 0, Value,
             "DataLoader: timeout must be positive, got ", options_.timeout_->count(), " ms");
  (void)datasetSize();
  for (const auto& t : options_.transforms_)
    WEFT_CHECK(t != nullptr, Value, "DataLoader: a transform is null");
  sampler_ = makeSampler(options_);
}

DataLoader::~DataLoader() = default;

std::unique_ptr<Sampler> DataLoader::makeSampler(const DataLoaderOptions& o) {
  if (o.num_replicas_ != 1 || o.rank_ != 0)
    return std::make_unique<DistributedSampler>(o.num_replicas_, o.rank_, o.shuffle_, o.seed_,
                                                o.allow_duplicates_);
  if (o.shuffle_) return std::make_unique<RandomSampler>(o.seed_);
  return std::make_unique<SequentialSampler>();
}

DataLoader::Iterator DataLoader::begin(std::source_location loc) {
  CallSite cs(loc);
  stopRun();
  const uint64_t epoch = nextEpoch_ ? *nextEpoch_ : started_ ? epoch_ + 1 : 0;
  std::vector<size_t> order = weft::detail::convertStdExceptions(
      "DataLoader", [&] { return sampler_->indices(datasetSize(), epoch); });
  run_ = std::make_unique<detail::EpochRun>(*dataset_, options_, std::move(order), epoch,
                                            static_cast<size_t>(skip_), loc);
  epoch_ = epoch;
  nextEpoch_.reset();
  started_ = true;
  consumed_ = skip_;
  skip_ = 0;
  Iterator it(this, ++generation_, loc);
  it.advance();
  return it;
}

DataLoader::Iterator DataLoader::end() {
  return {};
}

void DataLoader::set_epoch(uint64_t epoch) {
  stopRun();
  nextEpoch_ = epoch;
  skip_ = 0;
}

size_t DataLoader::size() const {
  const size_t samples = DistributedSampler::shardSize(datasetSize(), options_.num_replicas_,
                                                       options_.allow_duplicates_);
  return batchCount(samples, options_.batch_size_, options_.drop_last_);
}

size_t DataLoader::datasetSize() const {
  return detail::sizeForLoader(*dataset_);
}

LoaderState DataLoader::state() const {
  if (nextEpoch_) return {*nextEpoch_, skip_, options_.seed_};
  return {epoch_, consumed_, options_.seed_};
}

void DataLoader::restore(const LoaderState& state, std::source_location loc) {
  CallSite cs(loc);
  const size_t batches = size();
  WEFT_CHECK(state.batches <= batches, Value, "DataLoader::restore: the state has ", state.batches,
             " batches of epoch ", state.epoch, " handed out, but an epoch of this ", "loader has ",
             batches, " (was it saved with another dataset or batch_size?)");
  const bool finished = state.batches == batches;
  WEFT_CHECK(!finished || state.epoch < UINT64_MAX, Value,
             "DataLoader::restore: the state's epoch ", state.epoch, " is the last there is");
  DataLoaderOptions options = options_;
  options.seed_ = state.seed;
  std::unique_ptr<Sampler> sampler = makeSampler(options);
  stopRun();
  options_ = std::move(options);
  sampler_ = std::move(sampler);
  nextEpoch_ = finished ? state.epoch + 1 : state.epoch;
  skip_ = finished ? 0 : state.batches;
}

void DataLoader::stopRun() {
  run_.reset();
  ++generation_; // iterators of the stopped epoch are now stale
}

std::optional<Example<>> DataLoader::fetch(uint64_t generation) {
  WEFT_CHECK(generation == generation_ && run_ != nullptr, Value,
             "DataLoader: this iterator's epoch has ended or a later begin() replaced it");
  std::optional<Example<>> batch;
  try {
    batch = run_->next();
  } catch (...) {
    // A failed batch ends the epoch. Its workers are joined by the next begin() or the loader's
    // end, not here: after a timeout one may still be waiting for a dataset that is stuck.
    run_->cancel();
    ++generation_;
    throw;
  }
  if (batch)
    ++consumed_;
  else
    run_.reset(); // the epoch is over: its workers have exited, join them
  return batch;
}

DataLoader::Iterator::Iterator(Iterator&& other) noexcept
    : loader_(std::exchange(other.loader_, nullptr)), generation_(other.generation_),
      site_(other.site_), current_(std::move(other.current_)) {
  other.current_.reset();
}

DataLoader::Iterator& DataLoader::Iterator::operator=(Iterator&& other) noexcept {
  if (this == &other) return *this;
  if (loader_ && loader_->generation_ == generation_) loader_->stopRun();
  loader_ = std::exchange(other.loader_, nullptr);
  generation_ = other.generation_;
  site_ = other.site_;
  current_ = std::move(other.current_);
  other.current_.reset();
  return *this;
}

DataLoader::Iterator::~Iterator() {
  // Leaving a loop early ends the epoch: stop and join its workers now, not at the next begin().
  if (loader_ && loader_->generation_ == generation_) loader_->stopRun();
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  advance();
  return *this;
}

void DataLoader::Iterator::advance() {
  CallSite cs(site_); // the loop's line: operator++ has no place to take one
  current_.reset();
  WEFT_CHECK(loader_ != nullptr, Value, "DataLoader: cannot advance an end iterator");
  current_ = loader_->fetch(generation_);
}

size_t detail::sizeForLoader(const Dataset& dataset) {
  const std::optional<size_t> size = dataset.size();
  WEFT_CHECK(size.has_value(), Value,
             "DataLoader: the dataset's size() has no value; a loader samples a dataset of known "
             "size, so return one from size()");
  return *size;
}

namespace {

/// `options` taking a LibTorch sampler's order: one over the whole dataset, as weft samples.
DataLoaderOptions sampled(DataLoaderOptions options, const char* sampler, size_t samplerSize,
                          size_t datasetSize, bool shuffle) {
  WEFT_CHECK(samplerSize == datasetSize, Value, "make_data_loader: the ", sampler, " covers ",
             samplerSize, " samples but the dataset has ", datasetSize,
             "; weft samples the whole dataset: make the sampler with dataset.size().value()");
  return options.shuffle(shuffle);
}

} // namespace

DataLoaderOptions detail::withSampler(DataLoaderOptions options,
                                      const samplers::SequentialSampler& sampler, size_t size) {
  return sampled(std::move(options), "SequentialSampler", sampler.size(), size, false);
}

DataLoaderOptions detail::withSampler(DataLoaderOptions options,
                                      const samplers::RandomSampler& sampler, size_t size) {
  return sampled(std::move(options), "RandomSampler", sampler.size(), size, true);
}

DataLoaderOptions detail::withSampler(DataLoaderOptions options,
                                      const samplers::DistributedRandomSampler& sampler,
                                      size_t size) {
  return sampled(std::move(options), "DistributedRandomSampler", sampler.size(), size, true)
      .distributed(sampler.num_replicas(), sampler.rank(), sampler.allow_duplicates());
}

DataLoaderOptions detail::withSampler(DataLoaderOptions options,
                                      const samplers::DistributedSequentialSampler& sampler,
                                      size_t size) {
  return sampled(std::move(options), "DistributedSequentialSampler", sampler.size(), size, false)
      .distributed(sampler.num_replicas(), sampler.rank(), sampler.allow_duplicates());
}

} // namespace weft::data
