// The Dataset interface's default batching (Stack's collation), row gathering and TensorDataset.
#include "weft/data/Dataset.h"

#include "weft/Functions.h"

#include <cstring>

namespace weft::data {

Example<> Dataset::get_batch(const std::vector<size_t>& indices) {
  std::vector<Example<>> examples;
  examples.reserve(indices.size());
  for (size_t i : indices)
    examples.push_back(get(i));
  return detail::stackExamples(std::move(examples));
}

Example<> detail::stackExamples(std::vector<Example<>> examples) {
  WEFT_CHECK(!examples.empty(), Value, "Stack: a batch needs at least one example");
  const bool targets = examples.front().target.defined();
  std::vector<Tensor> data, target;
  data.reserve(examples.size());
  target.reserve(targets ? examples.size() : 0);
  for (Example<>& e : examples) {
    WEFT_CHECK(e.data.defined(), Value, "Stack: example ", data.size(),
               " of the batch has no data");
    WEFT_CHECK(e.target.defined() == targets, Value, "Stack: example 0 of the batch ",
               targets ? "has a target but example " : "has no target but example ", data.size(),
               targets ? " has none" : " has one", "; give every example a target, or none");
    data.push_back(std::move(e.data));
    if (targets) target.push_back(std::move(e.target));
  }
  return {stack(data), targets ? stack(target) : Tensor()};
}

namespace {

/// gather_rows without a call site of its own: run by loader workers, where no user line applies.
Tensor gatherRows(const Tensor& src, const std::vector<size_t>& indices) {
  WEFT_CHECK(src.defined() && src.dim() >= 1, Shape,
             "gather_rows: expected a tensor with at least one dimension");
  WEFT_CHECK(src.is_contiguous(), Value, "gather_rows: expected a contiguous tensor, got shape ",
             shapeString(src.sizes()), " with strides ", shapeString(src.strides()),
             "; call .contiguous() once first");
  Shape shape = src.sizes();
  const auto rows = static_cast<size_t>(shape[0]);
  shape[0] = static_cast<int64_t>(indices.size());
  Tensor out = empty(shape, src.dtype());
  const size_t rowBytes =
      rows == 0 ? 0 : static_cast<size_t>(src.numel()) / rows * elementSize(src.dtype());
  const auto* from = static_cast<const char*>(src.data_ptr());
  auto* to = static_cast<char*>(out.data_ptr());
  for (size_t i = 0; i < indices.size(); ++i) {
    WEFT_CHECK(indices[i] < rows, Index, "gather_rows: index ", indices[i], " is out of range for ",
               rows, " rows");
    std::memcpy(to + i * rowBytes, from + indices[i] * rowBytes, rowBytes);
  }
  return out;
}

} // namespace

Tensor gather_rows(const Tensor& src, const std::vector<size_t>& indices,
                   std::source_location loc) {
  CallSite cs(loc);
  return gatherRows(src, indices);
}

TensorDataset::TensorDataset(Tensor data, Tensor target, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(data.defined() && data.dim() >= 1, Shape,
             "TensorDataset: expected data with at least one dimension (samples along dim 0)");
  WEFT_CHECK(!target.defined() || (target.dim() >= 1 && target.size(0) == data.size(0)), Shape,
             "TensorDataset: data has ", data.size(0), " samples (shape ",
             shapeString(data.sizes()), ") but target has shape ",
             target.defined() ? shapeString(target.sizes()) : "");
  // Batches are rows copied with memcpy, which needs plain row-major memory without autograd.
  data_ = data.detach().contiguous();
  if (target.defined()) target_ = target.detach().contiguous();
}

Example<> TensorDataset::get(size_t index) {
  WEFT_CHECK(index < rows(), Index, "TensorDataset::get: index ", index, " is out of range for ",
             rows(), " samples");
  const auto i = static_cast<int64_t>(index);
  return {data_.select(0, i), target_.defined() ? target_.select(0, i) : Tensor()};
}

Example<> TensorDataset::get_batch(const std::vector<size_t>& indices) {
  return {gatherRows(data_, indices), target_.defined() ? gatherRows(target_, indices) : Tensor()};
}

} // namespace weft::data
