// Datasets: the Example a dataset yields, the Dataset interface and in-memory TensorDataset.
#pragma once

#include "weft/Tensor.h"

#include <cstddef>
#include <vector>

namespace weft::data {

/// One sample or one batch: the model's input and its target (undefined when there is none).
struct Example {
  Tensor data;   ///< the input
  Tensor target; ///< the label or next-token target, or undefined
};

/// A map-style dataset, as torch::data::Dataset: `size()` samples reachable by index. A DataLoader
/// calls `get` and `get_batch` from several worker threads at once, so both must be thread-safe.
class Dataset {
public:
  virtual ~Dataset() = default;
  /// The sample at `index` (0 <= index < size()).
  virtual Example get(size_t index) = 0;
  /// The number of samples.
  virtual size_t size() const = 0;
  /// The samples at `indices` as one batch (a new leading dimension). The default calls get()
  /// for each index and stacks; datasets over contiguous tensors override it to copy rows.
  virtual Example get_batch(const std::vector<size_t>& indices);
};

/// A fresh tensor [indices.size(), ...] holding rows `indices` of `src` (dim 0), copied with one
/// memcpy per row; `src` must be contiguous. The fast path of get_batch for in-memory datasets.
Tensor gather_rows(const Tensor& src, const std::vector<size_t>& indices, WEFT_LOC);

/// Rows of in-memory tensors: sample i is (data[i], target[i]). Tensors are made contiguous once,
/// so get() returns views and get_batch() copies rows into a fresh batch.
class TensorDataset : public Dataset {
public:
  /// Samples along dim 0 of `data` and, if defined, of `target` (their sizes must agree).
  explicit TensorDataset(Tensor data, Tensor target = {}, WEFT_LOC);
  /// Views of row `index` (no copy).
  Example get(size_t index) override;
  /// The rows at `indices`, copied into fresh contiguous tensors.
  Example get_batch(const std::vector<size_t>& indices) override;
  /// data.size(0).
  size_t size() const override { return static_cast<size_t>(data_.size(0)); }
  /// All inputs, [size, ...].
  const Tensor& data() const { return data_; }
  /// All targets, [size, ...], or undefined.
  const Tensor& target() const { return target_; }

private:
  Tensor data_, target_;
};

} // namespace weft::data
