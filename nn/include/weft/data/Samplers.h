// Samplers: the order in which an epoch visits a dataset's samples, and LibTorch's sampler names.
#pragma once

#include "weft/runtime/DType.h"
#include "weft/runtime/Error.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace weft::data {

/// Decides which sample indices an epoch visits and in what order. Pure: the same (size, epoch)
/// always gives the same list, whichever thread or worker count asks.
class Sampler {
public:
  virtual ~Sampler() = default;
  /// The indices epoch `epoch` visits over a dataset of `size` samples.
  virtual std::vector<size_t> indices(size_t size, uint64_t epoch) const = 0;
};

/// 0, 1, ..., size - 1 in every epoch.
class SequentialSampler : public Sampler {
public:
  /// The identity order.
  std::vector<size_t> indices(size_t size, uint64_t epoch) const override;
};

/// A fresh permutation per epoch: randperm from weft::Generator(seed) advanced by `epoch` draws,
/// so a (seed, epoch) pair gives one order on every machine and for any worker count.
class RandomSampler : public Sampler {
public:
  /// Shuffles with `seed`.
  explicit RandomSampler(uint64_t seed = 0) : seed_(seed) {}
  /// The permutation of epoch `epoch`.
  std::vector<size_t> indices(size_t size, uint64_t epoch) const override;

private:
  uint64_t seed_;
};

/// One replica's shard, as torch.utils.data.DistributedSampler: the epoch's order (shuffled or
/// not) is padded by wrapping around to a multiple of `num_replicas` (or, without
/// `allow_duplicates`, cut to one), and replica `rank` takes every num_replicas-th index from
/// position `rank`. Shards are disjoint up to the padding, equal in size, and together cover the
/// dataset (all but the cut tail).
class DistributedSampler : public Sampler {
public:
  /// Replica `rank` of `num_replicas`; shuffles with `seed` when `shuffle`; pads with repeated
  /// samples when `allow_duplicates` (LibTorch's name; PyTorch's drop_last=False), else drops
  /// the last size % num_replicas samples of the order.
  DistributedSampler(size_t num_replicas, size_t rank, bool shuffle = true, uint64_t seed = 0,
                     bool allow_duplicates = true, WEFT_LOC);
  /// This replica's indices for epoch `epoch`: ceil(size / num_replicas) of them, or
  /// floor(size / num_replicas) without allow_duplicates.
  std::vector<size_t> indices(size_t size, uint64_t epoch) const override;
  /// The number of indices a replica gets per epoch over `size` samples.
  static size_t shardSize(size_t size, size_t num_replicas, bool allow_duplicates);

private:
  size_t numReplicas_, rank_;
  bool shuffle_;
  uint64_t seed_;
  bool allowDuplicates_;
};

/// LibTorch's samplers, constructed as LibTorch's are and handed to make_data_loader (by type or
/// by value), which maps each onto the loader's own orders above. Those are pure functions of
/// (seed, epoch), so an order is the same for any worker count and resumes from a LoaderState;
/// these classes say which order to take and hand out no indices themselves.
namespace samplers {

/// Every sample in order, as torch::data::samplers::SequentialSampler.
class SequentialSampler {
public:
  /// Over `size` samples: the dataset's size, which make_data_loader checks.
  explicit SequentialSampler(size_t size) : size_(size) {}
  /// The number of samples.
  size_t size() const { return size_; }

private:
  size_t size_;
};

/// A fresh permutation every epoch, as torch::data::samplers::RandomSampler. The permutation is
/// weft's RandomSampler's, seeded by DataLoaderOptions::seed (LibTorch draws from its global
/// generator instead).
class RandomSampler {
public:
  /// Over `size` samples; `index_dtype`, an integer dtype, only saves memory in LibTorch.
  explicit RandomSampler(int64_t size, DType index_dtype = DType::Int64, WEFT_LOC);
  /// The number of samples.
  size_t size() const { return size_; }

private:
  size_t size_;
};

/// Replica `rank`'s shard of `num_replicas`: what DistributedRandomSampler and
/// DistributedSequentialSampler share, as LibTorch's DistributedSampler<> base.
class DistributedSampler {
public:
  /// The number of samples.
  size_t size() const { return size_; }
  /// The number of replicas.
  size_t num_replicas() const { return numReplicas_; }
  /// This replica.
  size_t rank() const { return rank_; }
  /// Whether shards are padded with repeated samples to cover the dataset (else the tail is cut).
  bool allow_duplicates() const { return allowDuplicates_; }

protected:
  /// Checks 0 <= rank < num_replicas, naming `sampler` and the caller's line `loc`.
  DistributedSampler(const char* sampler, size_t size, size_t num_replicas, size_t rank,
                     bool allow_duplicates, std::source_location loc);

private:
  size_t size_, numReplicas_, rank_;
  bool allowDuplicates_;
};

/// A shuffled shard per epoch, as torch::data::samplers::DistributedRandomSampler. Shards are
/// strided, as torch.utils.data.DistributedSampler's (LibTorch's are contiguous blocks).
class DistributedRandomSampler : public DistributedSampler {
public:
  /// Shard `rank` of `num_replicas` over `size` samples.
  explicit DistributedRandomSampler(size_t size, size_t num_replicas = 1, size_t rank = 0,
                                    bool allow_duplicates = true, WEFT_LOC);
};

/// A shard in order, as torch::data::samplers::DistributedSequentialSampler. Shards are strided
/// (rank, rank + num_replicas, ...), as torch.utils.data.DistributedSampler's with
/// shuffle=False; LibTorch's are contiguous blocks.
class DistributedSequentialSampler : public DistributedSampler {
public:
  /// Shard `rank` of `num_replicas` over `size` samples.
  explicit DistributedSequentialSampler(size_t size, size_t num_replicas = 1, size_t rank = 0,
                                        bool allow_duplicates = true, WEFT_LOC);
};

} // namespace samplers

} // namespace weft::data
