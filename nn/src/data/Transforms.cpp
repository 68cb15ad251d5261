// Normalize, RandomCrop and RandomHorizontalFlip as loops over contiguous float batches (a
// per-sample random offset has no whole-batch tensor op, and loops keep the workers fast), and
// the checks of LibTorch's per-example transforms::Normalize<>.
#include "weft/data/Transforms.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace weft::data {
namespace {

/// The batch data as a contiguous float tensor with at least `minDim` dims, checked for `op`.
Tensor floatData(const Example<>& batch, int64_t minDim, const char* op) {
  const Tensor& x = batch.data;
  WEFT_CHECK(x.defined() && x.dim() >= minDim, Shape, op, ": expected batch data with at least ",
             minDim, " dimensions, got ", x.defined() ? shapeString(x.sizes()) : "undefined");
  WEFT_CHECK(x.dtype() == kFloat32 || x.dtype() == kFloat64, DType, op,
             ": expected float32 or float64 data, got ", dtypeName(x.dtype()),
             "; convert with .to(kFloat32) in the dataset");
  return x.contiguous();
}

/// Calls fn(T*) with T float or double for a float32/float64 tensor.
template <typename Fn> void visitFloat(const Tensor& x, Fn&& fn) {
  if (x.dtype() == kFloat32)
    fn(static_cast<float*>(nullptr));
  else
    fn(static_cast<double*>(nullptr));
}

} // namespace

Normalize::Normalize(std::vector<double> mean, std::vector<double> std, std::source_location loc)
    : mean_(std::move(mean)), std_(std::move(std)) {
  CallSite cs(loc);
  WEFT_CHECK(!mean_.empty() && mean_.size() == std_.size(), Value,
             "Normalize: expected one mean and one std per channel, got ", mean_.size(),
             " means and ", std_.size(), " stds");
  for (double s : std_)
    WEFT_CHECK(s != 0, Value, "Normalize: std must be non-zero");
}

Example<> Normalize::operator()(Example<> batch, Generator&) const {
  Tensor x = floatData(batch, 2, "Normalize");
  const int64_t n = x.size(0), c = x.size(1), inner = x.numel() / std::max<int64_t>(n * c, 1);
  WEFT_CHECK(mean_.size() == 1 || static_cast<int64_t>(mean_.size()) == c, Shape,
             "Normalize: ", mean_.size(), " means for ", c, " channels in batch of shape ",
             shapeString(x.sizes()));
  Tensor out = empty(x.sizes(), x.dtype());
  visitFloat(x, [&]<typename T>(T*) {
    const T* in = x.data_ptr<T>();
    T* o = out.data_ptr<T>();
    for (int64_t s = 0; s < n; ++s)
      for (int64_t ch = 0; ch < c; ++ch) {
        const size_t k = mean_.size() == 1 ? 0 : static_cast<size_t>(ch);
        const T m = static_cast<T>(mean_[k]), inv = static_cast<T>(1.0 / std_[k]);
        const int64_t base = (s * c + ch) * inner;
        for (int64_t i = 0; i < inner; ++i)
          o[base + i] = (in[base + i] - m) * inv;
      }
  });
  batch.data = out;
  return batch;
}

RandomCrop::RandomCrop(int64_t size, int64_t padding, std::source_location loc)
    : size_(size), padding_(padding) {
  CallSite cs(loc);
  // Below 2^31, as torchvision's ints: size + 2 * padding then never overflows.
  WEFT_CHECK(size > 0 && size <= INT32_MAX && padding >= 0 && padding <= INT32_MAX, Value,
             "RandomCrop: expected 0 < size < 2^31 and 0 <= padding < 2^31, got size ", size,
             " and padding ", padding);
}

Example<> RandomCrop::operator()(Example<> batch, Generator& gen) const {
  Tensor x = floatData(batch, 4, "RandomCrop");
  const int64_t n = x.size(0), h = x.size(-2), w = x.size(-1), p = padding_;
  const int64_t c = x.numel() / std::max<int64_t>(n * h * w, 1); // planes per sample
  WEFT_CHECK(size_ <= h + 2 * p && size_ <= w + 2 * p, Shape, "RandomCrop: a ", size_, "x", size_,
             " crop does not fit in ", h, "x", w, " images padded by ", p);
  // One draw per batch: uniform numbers that pick a top and a left offset for each sample.
  std::vector<double> u = rand({n, 2}, kFloat64, gen).to_vector<double>();
  auto offset = [&](int64_t s, int k, int64_t extent) {
    const int64_t choices = extent + 2 * p - size_ + 1;
    const auto pick = static_cast<int64_t>(u[static_cast<size_t>(2 * s + k)] * choices);
    return std::min(pick, choices - 1) - p;
  };
  Shape shape = x.sizes();
  shape[shape.size() - 2] = shape[shape.size() - 1] = size_;
  Tensor out = zeros(shape, x.dtype());
  visitFloat(x, [&]<typename T>(T*) {
    const T* in = x.data_ptr<T>();
    T* o = out.data_ptr<T>();
    for (int64_t s = 0; s < n; ++s) {
      // Output row i reads input row top + i - p; columns likewise. Outside the image stays 0.
      const int64_t top = offset(s, 0, h), left = offset(s, 1, w);
      const int64_t x0 = std::max<int64_t>(0, -left), x1 = std::min(size_, w - left);
      for (int64_t ch = 0; ch < c; ++ch) {
        const T* plane = in + (s * c + ch) * h * w;
        T* dst = o + (s * c + ch) * size_ * size_;
        for (int64_t i = 0; i < size_; ++i) {
          const int64_t row = top + i;
          if (row < 0 || row >= h || x1 <= x0) continue;
          std::memcpy(dst + i * size_ + x0, plane + row * w + left + x0,
                      static_cast<size_t>(x1 - x0) * sizeof(T));
        }
      }
    }
  });
  batch.data = out;
  return batch;
}

RandomHorizontalFlip::RandomHorizontalFlip(double p, std::source_location loc) : p_(p) {
  CallSite cs(loc);
  WEFT_CHECK(p >= 0 && p <= 1, Value, "RandomHorizontalFlip: expected 0 <= p <= 1, got ", p);
}

Example<> RandomHorizontalFlip::operator()(Example<> batch, Generator& gen) const {
  Tensor x = floatData(batch, 2, "RandomHorizontalFlip");
  const int64_t n = x.size(0), w = x.size(-1);
  const int64_t rows = x.numel() / std::max<int64_t>(n * w, 1); // rows of width w per sample
  std::vector<double> u = rand({n}, kFloat64, gen).to_vector<double>();
  Tensor out = empty(x.sizes(), x.dtype());
  visitFloat(x, [&]<typename T>(T*) {
    const T* in = x.data_ptr<T>();
    T* o = out.data_ptr<T>();
    for (int64_t s = 0; s < n; ++s) {
      const int64_t base = s * rows * w;
      if (!(u[static_cast<size_t>(s)] < p_)) {
        std::memcpy(o + base, in + base, static_cast<size_t>(rows * w) * sizeof(T));
        continue;
      }
      for (int64_t r = 0; r < rows; ++r)
        std::reverse_copy(in + base + r * w, in + base + (r + 1) * w, o + base + r * w);
    }
  });
  batch.data = out;
  return batch;
}

std::pair<Tensor, Tensor>
transforms::detail::normalizeStatistics(const std::vector<double>& mean,
                                        const std::vector<double>& stddev) {
  WEFT_CHECK(!mean.empty() && !stddev.empty(), Value,
             "Normalize: expected at least one mean and one stddev, got ", mean.size(), " and ",
             stddev.size());
  WEFT_CHECK(mean.size() == stddev.size() || mean.size() == 1 || stddev.size() == 1, Value,
             "Normalize: ", mean.size(), " means and ", stddev.size(),
             " stddevs; give one of each per channel, or one for every channel");
  // As LibTorch's, the statistics are float32 (a stddev that rounds to zero there divides by 0).
  auto channels = [](const std::vector<double>& values) {
    std::vector<float> v(values.begin(), values.end());
    return from_vector(v, {static_cast<int64_t>(v.size()), 1, 1});
  };
  for (size_t i = 0; i < stddev.size(); ++i)
    WEFT_CHECK(static_cast<float>(stddev[i]) != 0.0f, Value, "Normalize: stddev ", i, " is ",
               stddev[i], ", which is zero as float32 and would divide by zero");
  return {channels(mean), channels(stddev)};
}

Tensor transforms::detail::normalize(const Tensor& input, const Tensor& mean,
                                     const Tensor& stddev) {
  WEFT_CHECK(input.defined(), Value, "Normalize: the example's data is an undefined tensor");
  WEFT_CHECK(input.dtype() != kBool, DType,
             "Normalize: expected numeric data, got bool; convert it with .to(kFloat32) first");
  const int64_t c = std::max(mean.size(0), stddev.size(0));
  const bool broadcasts = c == 1 || input.dim() < 3 || input.size(-3) == c || input.size(-3) == 1;
  WEFT_CHECK(broadcasts, Shape, "Normalize: ", c, " channel statistics do not broadcast over data",
             " of shape ", shapeString(input.sizes()), ", whose channel dim (-3) has ",
             input.size(-3), "; give one mean and stddev per channel");
  return input.sub(mean).div(stddev);
}

} // namespace weft::data
