// The DataLoader: batches of a dataset, built ahead by worker threads and handed out in order.
#pragma once

#include "weft/data/Dataset.h"
#include "weft/data/Samplers.h"
#include "weft/data/Transforms.h"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

namespace weft::data {

/// Options for DataLoader, spelled like torch::data::DataLoaderOptions (batch_size, workers,
/// max_jobs, timeout, enforce_ordering, drop_last), plus weft's shuffle, seed, prefetch,
/// distributed and transform.
struct DataLoaderOptions {
  size_t batch_size_ = 1;          ///< samples per batch
  bool shuffle_ = false;           ///< a fresh permutation every epoch
  uint64_t seed_ = 0;              ///< seeds the permutation and the random transforms
  bool drop_last_ = false;         ///< drop a last batch smaller than batch_size
  size_t workers_ = 0;             ///< worker threads building batches (0: the calling thread)
  size_t prefetch_ = 2;            ///< batches ahead of the consumer, besides one per worker
  std::optional<size_t> max_jobs_; ///< batches ahead of the consumer in all (overrides prefetch)
  std::optional<std::chrono::milliseconds> timeout_; ///< the longest wait for a worker's batch
  size_t num_replicas_ = 1;                          ///< shards of a distributed run
  size_t rank_ = 0;                                  ///< this process's shard
  bool allow_duplicates_ = true; ///< whether shards are padded to cover every sample
  std::vector<std::shared_ptr<const Transform>> transforms_; ///< applied in order to each batch

  /// Batches of 1, in order, built on the iterating thread.
  DataLoaderOptions() = default;
  /// Starts with `batch_size` samples per batch; implicit as LibTorch's, so that
  /// make_data_loader(dataset, 64) reads as there.
  DataLoaderOptions(size_t batch_size) : batch_size_(batch_size) {} // NOLINT: implicit by design
  /// Samples per batch (at least 1).
  DataLoaderOptions& batch_size(size_t n) { return set(batch_size_, n); }
  /// Whether every epoch visits the samples in a fresh random order.
  DataLoaderOptions& shuffle(bool on = true) { return set(shuffle_, on); }
  /// The seed of the shuffling and of the random transforms.
  DataLoaderOptions& seed(uint64_t s) { return set(seed_, s); }
  /// Whether a last, smaller batch is dropped.
  DataLoaderOptions& drop_last(bool on = true) { return set(drop_last_, on); }
  /// The number of worker threads (0 builds batches on the iterating thread).
  DataLoaderOptions& workers(size_t n) { return set(workers_, n); }
  /// Backpressure: workers block once prefetch + workers batches are built or being built ahead
  /// of the consumer (at least 1).
  DataLoaderOptions& prefetch(size_t n) { return set(prefetch_, n); }
  /// LibTorch's name for the same bound in all: at most `n` batches (at least 1) built or being
  /// built ahead of the consumer, whatever prefetch says.
  DataLoaderOptions& max_jobs(size_t n) { return set(max_jobs_, std::optional<size_t>(n)); }
  /// With workers, the longest the iterator waits for the next batch before it throws IOError and
  /// ends the epoch (positive). Without workers batches are built on the spot, and never waited
  /// for.
  DataLoaderOptions& timeout(std::chrono::milliseconds t) {
    return set(timeout_, std::optional<std::chrono::milliseconds>(t));
  }
  /// LibTorch's switch to let batches come out in the order workers finish them. weft always hands
  /// them out in sampler order (one of the orders `false` allows), which keeps a seed's run
  /// reproducible and a LoaderState resumable; its bounded reorder buffer costs little.
  DataLoaderOptions& enforce_ordering(bool) { return *this; }
  /// Loads only shard `rank` of `num_replicas` (see DistributedSampler), padded with repeated
  /// samples to cover the dataset when `allow_duplicates`, else without the tail.
  DataLoaderOptions& distributed(size_t num_replicas, size_t rank, bool allow_duplicates = true) {
    num_replicas_ = num_replicas;
    rank_ = rank;
    allow_duplicates_ = allow_duplicates;
    return *this;
  }
  /// Appends a transform, applied by the workers after the previous ones.
  template <typename T, typename = std::enable_if_t<std::is_base_of_v<Transform, T>>>
  DataLoaderOptions& transform(T t) {
    transforms_.push_back(std::make_shared<const T>(std::move(t)));
    return *this;
  }

private:
  template <typename V> DataLoaderOptions& set(V& field, V value) {
    field = value;
    return *this;
  }
};

/// Where a loader is in its data order: enough to continue after a checkpoint.
struct LoaderState {
  uint64_t epoch = 0;   ///< the epoch in progress (or last finished)
  uint64_t batches = 0; ///< batches handed out in that epoch
  uint64_t seed = 0;    ///< the seed of the order
  bool operator==(const LoaderState&) const = default;
};

namespace detail {
class EpochRun;
}

/// Iterates a dataset in batches, epoch by epoch: `for (auto& batch : loader)`. Each begin()
/// starts the next epoch (or the one set_epoch/restore chose). Worker threads build batches
/// (get_batch, then transforms) at most prefetch + workers (or max_jobs) batches ahead of the
/// consumer, and batches come out in sampler order whatever the workers' timing. Leaving the loop
/// early, or destroying the loader, stops and joins the workers. An exception a worker throws (or
/// a timeout) is rethrown from the iterator that reaches its batch, and ends the epoch; its
/// workers stop claiming batches and are joined by the next begin() or the loader's end.
class DataLoader {
public:
  class Iterator;
  /// Loads `dataset` as `options` say. The dataset's size() must have a value.
  DataLoader(std::shared_ptr<Dataset> dataset, DataLoaderOptions options = {}, WEFT_LOC);
  /// Loads a dataset held by value (moved into the loader).
  template <typename D, typename = std::enable_if_t<std::is_base_of_v<Dataset, D>>>
  DataLoader(D dataset, DataLoaderOptions options = {}, WEFT_LOC)
      : DataLoader(std::make_shared<D>(std::move(dataset)), std::move(options), loc) {}
  /// Stops and joins the workers of an epoch in progress.
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  /// Starts an epoch and returns its first batch (stopping an epoch still in progress). Errors
  /// of the epoch, its workers' included, name `loc`: the line of the loop.
  Iterator begin(WEFT_LOC);
  /// The end of any epoch.
  Iterator end();
  /// Makes the next begin() start epoch `epoch` (from its first batch).
  void set_epoch(uint64_t epoch);
  /// Stops the epoch in progress, if any, and joins its workers, as LibTorch's join(); the next
  /// begin() starts the following epoch.
  void join() { stopRun(); }
  /// Batches per epoch.
  size_t size() const;
  /// The epoch and batches handed out so far, and the seed.
  LoaderState state() const;
  /// Makes the next begin() continue where `state` was taken (a finished epoch continues with
  /// the next one). Also takes the state's seed. A state with more batches than an epoch of this
  /// loader has is an error, and the loader is left as it was.
  void restore(const LoaderState& state, WEFT_LOC);
  /// The dataset.
  Dataset& dataset() const { return *dataset_; }
  /// The options.
  const DataLoaderOptions& options() const { return options_; }

private:
  friend class Iterator;
  void stopRun();
  std::optional<Example<>> fetch(uint64_t generation);
  size_t datasetSize() const;
  static std::unique_ptr<Sampler> makeSampler(const DataLoaderOptions& options);

  std::shared_ptr<Dataset> dataset_;
  DataLoaderOptions options_;
  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<detail::EpochRun> run_;
  uint64_t epoch_ = 0, consumed_ = 0, skip_ = 0, generation_ = 0;
  std::optional<uint64_t> nextEpoch_;
  bool started_ = false;
};

/// An input iterator over one epoch's batches; moving it along fetches the next batch.
class DataLoader::Iterator {
public:
  using iterator_category = std::input_iterator_tag;
  using value_type = Example<>;
  using difference_type = std::ptrdiff_t;
  using pointer = Example<>*;
  using reference = Example<>&;

  /// The end iterator.
  Iterator() = default;
  /// Takes over `other`'s place in the epoch (`other` becomes an end iterator).
  Iterator(Iterator&& other) noexcept;
  /// Stops this iterator's epoch, if any, and takes over `other`'s.
  Iterator& operator=(Iterator&& other) noexcept;
  Iterator(const Iterator&) = delete;
  Iterator& operator=(const Iterator&) = delete;
  /// Stops the epoch's workers if this iterator was still walking it.
  ~Iterator();
  /// The current batch.
  Example<>& operator*() { return *current_; }
  /// The current batch.
  Example<>* operator->() { return &*current_; }
  /// Moves to the next batch; rethrows a worker's exception for it.
  Iterator& operator++();
  /// True when both are at the end (or both are not).
  bool operator==(const Iterator& other) const {
    return current_.has_value() == other.current_.has_value();
  }

private:
  friend class DataLoader;
  Iterator(DataLoader* loader, uint64_t generation, std::source_location site)
      : loader_(loader), generation_(generation), site_(site) {}
  void advance();
  DataLoader* loader_ = nullptr;
  uint64_t generation_ = 0;
  std::source_location site_;
  std::optional<Example<>> current_;
};

namespace detail {
/// The options with the order `sampler` stands for (checked against the dataset's `size`).
DataLoaderOptions withSampler(DataLoaderOptions options, const samplers::SequentialSampler& sampler,
                              size_t size);
/// The options with the order `sampler` stands for (checked against the dataset's `size`).
DataLoaderOptions withSampler(DataLoaderOptions options, const samplers::RandomSampler& sampler,
                              size_t size);
/// The options with the order `sampler` stands for (checked against the dataset's `size`).
DataLoaderOptions withSampler(DataLoaderOptions options,
                              const samplers::DistributedRandomSampler& sampler, size_t size);
/// The options with the order `sampler` stands for (checked against the dataset's `size`).
DataLoaderOptions withSampler(DataLoaderOptions options,
                              const samplers::DistributedSequentialSampler& sampler, size_t size);
/// dataset.size()'s value, or a ValueError saying the loader needs one.
size_t sizeForLoader(const Dataset& dataset);
} // namespace detail

/// A loader of `dataset` (moved in) in the order `sampler` stands for, as
/// torch::data::make_data_loader(dataset, sampler, options); `*loader` is the DataLoader.
template <typename D, typename Sampler, typename = std::enable_if_t<std::is_base_of_v<Dataset, D>>>
std::unique_ptr<DataLoader> make_data_loader(D dataset, Sampler sampler, DataLoaderOptions options,
                                             WEFT_LOC) {
  CallSite cs(loc);
  auto shared = std::make_shared<D>(std::move(dataset));
  options = detail::withSampler(std::move(options), sampler, detail::sizeForLoader(*shared));
  return std::make_unique<DataLoader>(std::move(shared), std::move(options), loc);
}

/// A loader of `dataset` (moved in) in the order of a `Sampler` over the whole dataset
/// (samplers::RandomSampler unless given), as torch::data::make_data_loader<Sampler>(dataset,
/// options); `options` may be a batch size. `*loader` is the DataLoader.
template <typename Sampler = samplers::RandomSampler, typename D,
          typename = std::enable_if_t<std::is_base_of_v<Dataset, D> &&
                                      std::is_constructible_v<Sampler, size_t>>>
std::unique_ptr<DataLoader> make_data_loader(D dataset, DataLoaderOptions options = {}, WEFT_LOC) {
  CallSite cs(loc);
  const size_t size = detail::sizeForLoader(dataset);
  return make_data_loader(std::move(dataset), Sampler(size), std::move(options), loc);
}

} // namespace weft::data
