// Transforms: the batch transforms the DataLoader's workers apply (normalization and seeded
// augmentation), and LibTorch's transforms for dataset.map() (Normalize<>, Stack<>, Lambda<>).
#pragma once

#include "weft/Functions.h"
#include "weft/data/Dataset.h"

#include <functional>
#include <initializer_list>
#include <tuple>
#include <utility>
#include <vector>

namespace weft::data {

/// A function of a batch, applied by the DataLoader's worker threads after get_batch. Random
/// transforms draw from `gen`, which the loader derives from (seed, epoch, batch index), so a seed
/// reproduces the same augmentation for any worker count. Must be thread-safe (const).
class Transform {
public:
  virtual ~Transform() = default;
  /// The transformed batch; the input batch's tensors are not modified.
  virtual Example<> operator()(Example<> batch, Generator& gen) const = 0;
};

/// (x - mean[c]) / std[c] per channel of float data [N, C, ...], as torchvision's Normalize: the
/// loader's batch transform (dataset.map() takes LibTorch's per-example transforms::Normalize<>).
class Normalize : public Transform {
public:
  /// One mean and std per channel (or one each for every channel).
  Normalize(std::vector<double> mean, std::vector<double> std, WEFT_LOC);
  /// Normalizes batch.data.
  Example<> operator()(Example<> batch, Generator& gen) const override;

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
  Example<> operator()(Example<> batch, Generator& gen) const override;

private:
  int64_t size_, padding_;
};

/// Mirrors each sample of data [N, ..., W] along its last dimension with probability `p`.
class RandomHorizontalFlip : public Transform {
public:
  /// Flips with probability `p` (0 <= p <= 1).
  explicit RandomHorizontalFlip(double p = 0.5, WEFT_LOC);
  /// Flips each sample of batch.data independently.
  Example<> operator()(Example<> batch, Generator& gen) const override;

private:
  double p_;
};

namespace transforms {

/// A function of a batch, as torch::data::transforms::BatchTransform. MapDataset applies it to a
/// batch's examples (InputBatch std::vector<Example<>>) or to a stacked batch (Example<>).
template <typename InputBatch, typename OutputBatch> class BatchTransform {
public:
  using InputBatchType = InputBatch;   ///< what it takes
  using OutputBatchType = OutputBatch; ///< what it gives
  virtual ~BatchTransform() = default;
  /// The transformed batch.
  virtual OutputBatch apply_batch(InputBatch input_batch) = 0;
};

/// A function of one example, as torch::data::transforms::Transform: a batch transform that
/// applies it to each example of a batch.
template <typename Input, typename Output>
class Transform : public BatchTransform<std::vector<Input>, std::vector<Output>> {
public:
  using InputType = Input;   ///< the example it takes
  using OutputType = Output; ///< the example it gives
  /// The transformed example.
  virtual Output apply(Input input) = 0;
  /// apply() on each example of `input_batch`, in order.
  std::vector<Output> apply_batch(std::vector<Input> input_batch) override {
    std::vector<Output> output;
    output.reserve(input_batch.size());
    for (Input& input : input_batch)
      output.push_back(apply(std::move(input)));
    return output;
  }
};

/// A function object as a per-example Transform, as torch::data::transforms::Lambda (whose Input
/// has no default; here it is Example<>).
template <typename Input = Example<>, typename Output = Input>
class Lambda : public Transform<Input, Output> {
public:
  using FunctionType = std::function<Output(Input)>; ///< the function's type
  /// Applies `function` to each example.
  explicit Lambda(FunctionType function) : function_(std::move(function)) {}
  /// function(input).
  Output apply(Input input) override { return function_(std::move(input)); }

private:
  FunctionType function_;
};

/// A function object as a BatchTransform, as torch::data::transforms::BatchLambda.
template <typename Input, typename Output = Input>
class BatchLambda : public BatchTransform<Input, Output> {
public:
  using FunctionType = std::function<Output(Input)>; ///< the function's type
  /// Applies `function` to each batch.
  explicit BatchLambda(FunctionType function) : function_(std::move(function)) {}
  /// function(input_batch).
  Output apply_batch(Input input_batch) override { return function_(std::move(input_batch)); }

private:
  FunctionType function_;
};

/// A transform that reduces a batch of T to one T, as torch::data::transforms::Collation.
template <typename T, typename BatchType = std::vector<T>>
using Collation = BatchTransform<BatchType, T>;

/// A function object as a Collation, as torch::data::transforms::Collate.
template <typename T, typename BatchType = std::vector<T>>
using Collate = BatchLambda<BatchType, T>;

/// A function of an example's data tensor (the target passes through), as
/// torch::data::transforms::TensorTransform: override operator().
template <typename Target = Tensor>
class TensorTransform : public Transform<Example<Tensor, Target>, Example<Tensor, Target>> {
public:
  using E = Example<Tensor, Target>; ///< the example type
  /// The transformed data.
  virtual Tensor operator()(Tensor input) = 0;
  /// The example with its data transformed.
  E apply(E input) override {
    input.data = (*this)(std::move(input.data));
    return input;
  }
};

/// A function object as a TensorTransform, as torch::data::transforms::TensorLambda.
template <typename Target = Tensor> class TensorLambda : public TensorTransform<Target> {
public:
  using FunctionType = std::function<Tensor(Tensor)>; ///< the function's type
  /// Applies `function` to each example's data.
  explicit TensorLambda(FunctionType function) : function_(std::move(function)) {}
  /// function(input).
  Tensor operator()(Tensor input) override { return function_(std::move(input)); }

private:
  FunctionType function_;
};

/// One double or a list of them, as LibTorch's ArrayRef<double> takes Normalize's statistics.
class DoubleArrayRef : public std::vector<double> {
public:
  /// One value.
  DoubleArrayRef(double value) : std::vector<double>{value} {} // NOLINT: implicit by design
  /// A braced list.
  DoubleArrayRef(std::initializer_list<double> values) : std::vector<double>(values) {} // NOLINT
  /// A vector.
  DoubleArrayRef(std::vector<double> values) : std::vector<double>(std::move(values)) {} // NOLINT
};

namespace detail {
/// Normalize's mean and stddev as float32 tensors [C, 1, 1] (a channel's value broadcasts over
/// its H and W), checked: non-empty, no zero stddev, and C means for C stddevs (or one of either).
std::pair<Tensor, Tensor> normalizeStatistics(const std::vector<double>& mean,
                                              const std::vector<double>& stddev);
/// (input - mean) / stddev, as Normalize's, with Normalize's errors.
Tensor normalize(const Tensor& input, const Tensor& mean, const Tensor& stddev);
} // namespace detail

/// (input - mean) / stddev on each example's data, as torch::data::transforms::Normalize: mean
/// and stddev become float32 tensors [C, 1, 1] (C values, or one for every channel), which
/// broadcast over data [C, H, W]; PyTorch's type promotion gives the result's dtype (uint8 data
/// becomes float32). A zero stddev is an error here, as in torchvision's Normalize.
template <typename Target = Tensor> struct Normalize : public TensorTransform<Target> {
  /// Subtracts `mean` and divides by `stddev`: a value each, or one per channel.
  Normalize(DoubleArrayRef mean, DoubleArrayRef stddev, WEFT_LOC) {
    CallSite cs(loc);
    std::tie(this->mean, this->stddev) = detail::normalizeStatistics(mean, stddev);
  }
  /// (input - mean) / stddev.
  Tensor operator()(Tensor input) override { return detail::normalize(input, mean, stddev); }

  Tensor mean;   ///< [C, 1, 1] float32
  Tensor stddev; ///< [C, 1, 1] float32
};

/// Collates a batch's examples into one Example (data and targets stacked into [n, ...]), as
/// torch::data::transforms::Stack<>: `dataset.map(Stack<>())`. weft's datasets and loader stack
/// every batch anyway, so for them it changes nothing; it is there for LibTorch's spelling and
/// for Collation code.
template <typename T = Example<>> struct Stack;

/// Stack<> of Example<>: see above.
template <> struct Stack<Example<>> : public Collation<Example<>> {
  /// The examples stacked: data [n, ...] and target [n, ...] (or undefined when none has one).
  Example<> apply_batch(std::vector<Example<>> examples) override {
    return data::detail::stackExamples(std::move(examples));
  }
};

} // namespace transforms
} // namespace weft::data
