// Batch transforms the DataLoader's workers apply: normalization and seeded augmentation.
#pragma once

#include "weft/Functions.h"
#include "weft/data/Dataset.h"

#include <vector>

namespace weft::data {

/// A function of a batch, applied by the DataLoader's worker threads after get_batch. Random
/// transforms draw from `gen`, which the loader derives from (seed, epoch, batch index), so a seed
/// reproduces the same augmentation for any worker count. Must be thread-safe (const).
class Transform {
public:
  virtual ~Transform() = default;
  /// The transformed batch; the input batch's tensors are not modified.
  virtual Example operator()(Example batch, Generator& gen) const = 0;
};

/// (x - mean[c]) / std[c] per channel of float data [N, C, ...], as torchvision's Normalize.
class Normalize : public Transform {
public:
  /// One mean and std per channel (or one each for every channel).
  Normalize(std::vector<double> mean, std::vector<double> std, WEFT_LOC);
  /// Normalizes batch.data.
  Example operator()(Example batch, Generator& gen) const override;

private:
  std::vector<double> mean_, std_;
};

/// A random size x size crop of each sample of float data [N, C, H, W], after zero padding by
/// `padding` on every side, as torchvision's RandomCrop(size, padding).
class RandomCrop : public Transform {
public:
  /// Crops to size x size after padding each side with `padding` zeros.
  explicit RandomCrop(int64_t size, int64_t padding = 0, WEFT_LOC);
  /// Crops each sample of batch.data at its own random offset.
  Example operator()(Example batch, Generator& gen) const override;

private:
  int64_t size_, padding_;
};

/// Mirrors each sample of data [N, ..., W] along its last dimension with probability `p`.
class RandomHorizontalFlip : public Transform {
public:
  /// Flips with probability `p` (0 <= p <= 1).
  explicit RandomHorizontalFlip(double p = 0.5, WEFT_LOC);
  /// Flips each sample of batch.data independently.
  Example operator()(Example batch, Generator& gen) const override;

private:
  double p_;
};

} // namespace weft::data
