// Samplers: the order in which an epoch visits a dataset's samples.
#pragma once

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
/// not) is padded by wrapping around to a multiple of `num_replicas`, and replica `rank` takes
/// every num_replicas-th index from position `rank`. Shards are disjoint up to the padding, equal
/// in size, and together cover the dataset.
class DistributedSampler : public Sampler {
public:
  /// Replica `rank` of `num_replicas`; shuffles with `seed` when `shuffle`.
  DistributedSampler(size_t num_replicas, size_t rank, bool shuffle = true, uint64_t seed = 0,
                     WEFT_LOC);
  /// This replica's indices for epoch `epoch`: ceil(size / num_replicas) of them.
  std::vector<size_t> indices(size_t size, uint64_t epoch) const override;

private:
  size_t numReplicas_, rank_;
  bool shuffle_;
  uint64_t seed_;
};

} // namespace weft::data
