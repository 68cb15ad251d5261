// Datasets: the Example a dataset yields, the Dataset interface, LibTorch's datasets::Dataset and
// MapDataset (what dataset.map(transform) returns), and in-memory TensorDataset.
#pragma once

#include "weft/Tensor.h"

#include <cstddef>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

namespace weft {
// LibTorch's spelling of a dataset's size: `torch::optional<size_t> size() const override`.
using std::nullopt;
using std::optional;
} // namespace weft

namespace weft::data {

/// One sample or one batch, as torch::data::Example: the model's input and its target.
/// `Example<>` (a Tensor each) is what weft's datasets and DataLoader yield.
template <typename Data = Tensor, typename Target = Tensor> struct Example {
  using DataType = Data;     ///< the input's type
  using TargetType = Target; ///< the target's type
  /// Empty (undefined) data and target.
  Example() = default;
  /// `data` and its `target`.
  Example(Data data, Target target) : data(std::move(data)), target(std::move(target)) {}
  Data data;     ///< the input
  Target target; ///< the label or next-token target (an undefined Tensor when there is none)
};

namespace example {
/// The Target of an Example that has none, as torch::data::example::NoTarget.
using NoTarget = void;
} // namespace example

/// An Example without a target, as LibTorch's: only data, and usable where its data is.
template <typename Data> struct Example<Data, example::NoTarget> {
  using DataType = Data;                ///< the input's type
  using TargetType = example::NoTarget; ///< no target
  /// Empty data.
  Example() = default;
  /// Wraps `data`.
  Example(Data data) : data(std::move(data)) {} // NOLINT: implicit as LibTorch's
  /// The data.
  operator Data&() { return data; } // NOLINT: implicit as LibTorch's
  /// The data.
  operator const Data&() const { return data; } // NOLINT: implicit as LibTorch's
  Data data;                                    ///< the input
};

/// A tensor without a target, as torch::data::TensorExample.
using TensorExample = Example<Tensor, example::NoTarget>;

/// A map-style dataset: samples reachable by index. The DataLoader reads any Dataset; derive from
/// datasets::Dataset<Self> (as LibTorch's datasets do) to also get map(). A DataLoader calls `get`
/// and `get_batch` from several worker threads at once, so both must be thread-safe.
class Dataset {
public:
  virtual ~Dataset() = default;
  /// The sample at `index` (0 <= index < size()).
  virtual Example<> get(size_t index) = 0;
  /// The number of samples, as LibTorch's: an optional, so `size().value()` reads it. A
  /// DataLoader needs it to have a value.
  virtual std::optional<size_t> size() const = 0;
  /// The samples at `indices` as one batch (a new leading dimension). The default calls get()
  /// for each index and stacks, as transforms::Stack<> does; datasets over contiguous tensors
  /// override it to copy rows.
  virtual Example<> get_batch(const std::vector<size_t>& indices);

protected:
  Dataset() = default;
  Dataset(const Dataset&) = default;
  Dataset(Dataset&&) = default;
  Dataset& operator=(const Dataset&) = default;
  Dataset& operator=(Dataset&&) = default;
};

/// A fresh tensor [indices.size(), ...] holding rows `indices` of `src` (dim 0), copied with one
/// memcpy per row; `src` must be contiguous. The fast path of get_batch for in-memory datasets.
Tensor gather_rows(const Tensor& src, const std::vector<size_t>& indices, WEFT_LOC);

namespace transforms {
template <typename T> struct Stack;
} // namespace transforms

namespace detail {
/// `examples` collated into one batch: data stacked into [n, ...], targets likewise, or undefined
/// when no example has one (some with and some without is an error). What transforms::Stack<>
/// and Dataset::get_batch's default do; no call site of its own, as loader workers call it.
Example<> stackExamples(std::vector<Example<>> examples);
} // namespace detail

namespace datasets {

template <typename Source, typename AppliedTransform> class MapDataset;

/// A dataset whose map(transform) returns a MapDataset, as torch::data::datasets::Dataset: derive
/// a dataset class from it (`class Mine : public datasets::Dataset<Mine>`) and override get() and
/// size(). weft's datasets yield Example<> (the target may be undefined), so SingleExample is that.
template <typename Self, typename SingleExample = Example<>> class Dataset : public data::Dataset {
  static_assert(std::is_same_v<SingleExample, Example<>>,
                "weft datasets yield Example<> (data and target tensors; the target may be an "
                "undefined Tensor)");

public:
  using ExampleType = SingleExample; ///< what get() returns

  /// This dataset (copied) with `transform` applied to what it yields.
  template <typename T> MapDataset<Self, T> map(T transform) & {
    return {static_cast<Self&>(*this), std::move(transform)};
  }
  /// This dataset (moved) with `transform` applied to what it yields.
  template <typename T> MapDataset<Self, T> map(T transform) && {
    return {std::move(static_cast<Self&>(*this)), std::move(transform)};
  }
};

/// A dataset with a transform applied, as torch::data::datasets::MapDataset; dataset.map(t)
/// makes one. Three kinds of transform fit, told apart by their batch types:
/// - per example (a transforms::Transform of Example<>, e.g. Normalize<>, TensorLambda<>,
///   Lambda<>): get() transforms one example, get_batch() each one and then stacks;
/// - collations (std::vector<Example<>> to Example<>, e.g. Stack<>, Collate<Example<>>): they make
///   the batch. Stack<> is what get_batch() does anyway, so it reads the source's batch directly;
/// - on batches (Example<> to Example<>, e.g. BatchLambda<Example<>>): applied to the stacked batch
///   (and to a batch of one for get()).
/// Unlike LibTorch's loader, weft's shares one dataset among its workers, so the transform is
/// called from several threads at once and must be safe to (all of LibTorch's are).
template <typename Source, typename AppliedTransform>
class MapDataset : public Dataset<MapDataset<Source, AppliedTransform>> {
  using In = typename AppliedTransform::InputBatchType;
  using Out = typename AppliedTransform::OutputBatchType;
  using Examples = std::vector<Example<>>;
  static constexpr bool kPerExample = std::is_same_v<In, Examples> && std::is_same_v<Out, Examples>;
  static constexpr bool kCollation = std::is_same_v<In, Examples> && std::is_same_v<Out, Example<>>;
  static constexpr bool kOnBatches =
      std::is_same_v<In, Example<>> && std::is_same_v<Out, Example<>>;
  static_assert(std::is_base_of_v<data::Dataset, Source>, "map() needs a weft dataset");
  static_assert(kPerExample || kCollation || kOnBatches,
                "a transform of a weft dataset takes and returns Example<> (per example or as a "
                "stacked batch), or collates std::vector<Example<>> into an Example<>");

public:
  using DatasetType = Source;             ///< the dataset transformed
  using TransformType = AppliedTransform; ///< the transform

  /// `dataset` with `transform` applied.
  MapDataset(Source dataset, AppliedTransform transform)
      : dataset_(std::move(dataset)), transform_(std::move(transform)) {}

  /// The transformed sample at `index`.
  Example<> get(size_t index) override {
    if constexpr (kPerExample) {
      return single(transform_.apply_batch({dataset_.get(index)}));
    } else if constexpr (kCollation) {
      return dataset_.get(index); // one example needs no collating
    } else {
      return firstRow(transform_.apply_batch(dataset_.get_batch({index})));
    }
  }
  /// The transformed samples at `indices` as one batch.
  Example<> get_batch(const std::vector<size_t>& indices) override {
    if constexpr (kOnBatches || std::is_same_v<AppliedTransform, transforms::Stack<Example<>>>) {
      Example<> batch = dataset_.get_batch(indices);
      if constexpr (kOnBatches) batch = transform_.apply_batch(std::move(batch));
      return batch;
    } else {
      Examples examples;
      examples.reserve(indices.size());
      for (size_t i : indices)
        examples.push_back(dataset_.get(i));
      if constexpr (kPerExample)
        return detail::stackExamples(transform_.apply_batch(std::move(examples)));
      else
        return transform_.apply_batch(std::move(examples));
    }
  }
  /// The source dataset's size.
  std::optional<size_t> size() const override { return dataset_.size(); }
  /// The source dataset.
  const Source& dataset() const noexcept { return dataset_; }
  /// The transform.
  const AppliedTransform& transform() const noexcept { return transform_; }

private:
  static Example<> single(Examples examples) {
    checkCount(static_cast<int64_t>(examples.size()), "examples");
    return std::move(examples.front());
  }
  static Example<> firstRow(const Example<>& batch) {
    checkCount(batch.data.defined() && batch.data.dim() > 0 ? batch.data.size(0) : 0, "rows");
    return {batch.data.select(0, 0), batch.target.defined() ? batch.target.select(0, 0) : Tensor()};
  }
  /// A transform that turned one example into `count` things has no single example to give.
  static void checkCount(int64_t count, const char* what);

  Source dataset_;
  AppliedTransform transform_;
};

template <typename Source, typename AppliedTransform>
void MapDataset<Source, AppliedTransform>::checkCount(int64_t count, const char* what) {
  WEFT_CHECK(count == 1, Value, "MapDataset::get: the transform turned one example into ", count,
             " ", what, "; a transform of a dataset must keep one example per index");
}

} // namespace datasets

/// Rows of in-memory tensors: sample i is (data[i], target[i]). Tensors are made contiguous once,
/// so get() returns views and get_batch() copies rows into a fresh batch.
class TensorDataset : public datasets::Dataset<TensorDataset> {
public:
  /// Samples along dim 0 of `data` and, if defined, of `target` (their sizes must agree).
  explicit TensorDataset(Tensor data, Tensor target = {}, WEFT_LOC);
  /// Views of row `index` (no copy).
  Example<> get(size_t index) override;
  /// The rows at `indices`, copied into fresh contiguous tensors.
  Example<> get_batch(const std::vector<size_t>& indices) override;
  /// data.size(0).
  std::optional<size_t> size() const override { return rows(); }
  /// All inputs, [size, ...].
  const Tensor& data() const { return data_; }
  /// All targets, [size, ...], or undefined.
  const Tensor& target() const { return target_; }

private:
  size_t rows() const { return static_cast<size_t>(data_.size(0)); }
  Tensor data_, target_;
};

namespace detail {

/// TensorDataset's rows as a dataset class of its own (`Self`), so that its map() returns
/// MapDataset<Self, T>: the base of MNIST and CsvDataset.
template <typename Self> class TensorRows : public datasets::Dataset<Self> {
public:
  /// Views of row `index` (no copy).
  Example<> get(size_t index) override { return rows_.get(index); }
  /// The rows at `indices`, copied into fresh contiguous tensors.
  Example<> get_batch(const std::vector<size_t>& indices) override {
    return rows_.get_batch(indices);
  }
  /// The number of rows.
  std::optional<size_t> size() const override { return rows_.size(); }
  /// All inputs, [size, ...].
  const Tensor& data() const { return rows_.data(); }
  /// All targets, [size, ...], or undefined.
  const Tensor& target() const { return rows_.target(); }

protected:
  /// Serves the rows of `rows`.
  explicit TensorRows(TensorDataset rows) : rows_(std::move(rows)) {}

private:
  TensorDataset rows_;
};

} // namespace detail
} // namespace weft::data
