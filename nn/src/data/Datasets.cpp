// Datasets over files: (Fashion-)MNIST from IDX, CSV rows, and windows of a byte corpus.
#include "weft/data/Datasets.h"

#include "weft/runtime/InputFile.h"
#include "weft/Functions.h"

#include <sys/stat.h>

namespace weft::data {
namespace {

/// `root/name`, or `root/name.gz` if only the compressed file exists.
std::string idxPath(const std::string& root, const std::string& name) {
  std::string raw = root + "/" + name;
  struct stat st {};
  if (::stat(raw.c_str(), &st) == 0) return raw;
  std::string gz = raw + ".gz";
  WEFT_CHECK(::stat(gz.c_str(), &st) == 0, IO, "MNIST: neither '", raw, "' nor '", gz,
             "' exists; download the dataset's four IDX files into '", root, "'");
  return gz;
}

/// Images [N, H, W] uint8 and labels [N] -> float32 [N, 1, H, W] in [0, 1] and int64 [N].
TensorDataset mnistFrom(const std::string& root, bool train) {
  const std::string prefix = train ? "train" : "t10k";
  const std::string imagesPath = idxPath(root, prefix + "-images-idx3-ubyte");
  const std::string labelsPath = idxPath(root, prefix + "-labels-idx1-ubyte");
  Tensor images = read_idx(imagesPath), labels = read_idx(labelsPath);
  WEFT_CHECK(images.dim() == 3 && images.dtype() == kUInt8, IO, "MNIST: '", imagesPath, "' holds ",
             dtypeName(images.dtype()), " ", shapeString(images.sizes()),
             ", not uint8 images [N, H, W]");
  WEFT_CHECK(labels.dim() == 1 && labels.dtype() == kUInt8 && labels.size(0) == images.size(0), IO,
             "MNIST: '", labelsPath, "' holds ", dtypeName(labels.dtype()), " ",
             shapeString(labels.sizes()), ", not one uint8 label per image of '", imagesPath, "' (",
             images.size(0), " images)");
  Tensor x =
      images.to(kFloat32).div_(255.0).reshape({images.size(0), 1, images.size(1), images.size(2)});
  return TensorDataset(x, labels.to(kInt64));
}

/// The data columns (all but `target`) and the target column of a [rows, cols] table.
std::pair<Tensor, Tensor> splitTarget(const Tensor& table, std::optional<int64_t> target,
                                      DType targetDType) {
  if (!target) return {table, Tensor()};
  const int64_t cols = table.size(1);
  const int64_t t = *target < 0 ? *target + cols : *target;
  WEFT_CHECK(t >= 0 && t < cols, Index, "CsvDataset: target column ", *target,
             " is out of range for ", cols, " columns");
  Tensor data = cat({table.slice(1, 0, t), table.slice(1, t + 1)}, 1);
  return {data, table.select(1, t).to(targetDType)};
}

} // namespace

namespace datasets {

MNIST::MNIST(const std::string& root, Mode mode, std::source_location loc)
    : TensorRows([&] {
        CallSite cs(loc);
        return mnistFrom(root, mode == Mode::kTrain);
      }()),
      train_(mode == Mode::kTrain) {}

MNIST::MNIST(const std::string& root, bool train, std::source_location loc)
    : MNIST(root, train ? Mode::kTrain : Mode::kTest, loc) {}

} // namespace datasets

CsvDataset::CsvDataset(const std::string& path, CsvOptions options,
                       std::optional<int64_t> target_column, DType target_dtype,
                       std::source_location loc)
    : TensorRows([&] {
        CallSite cs(loc);
        auto [data, target] =
            splitTarget(read_csv_tensor(path, std::move(options)), target_column, target_dtype);
        return TensorDataset(data, target);
      }()) {}

Tensor read_bytes(const std::vector<std::string>& paths, std::source_location loc) {
  CallSite cs(loc);
  return weft::detail::convertStdExceptions("read_bytes", [&] {
    auto context = [](const std::string& path) {
      return weft::detail::concat("read_bytes: '", path, "': ");
    };
    // Sizes first (one file open at a time, however many paths), then each file read in full
    // where its size said; a file whose size changed since is an IOError, not a short read.
    std::vector<uint64_t> sizes;
    int64_t total = 0;
    for (const std::string& path : paths) {
      sizes.push_back(weft::detail::InputFile(path, context(path)).size());
      std::optional<int64_t> sum = sizes.back() <= INT64_MAX
                                       ? checkedAdd(total, static_cast<int64_t>(sizes.back()))
                                       : std::nullopt;
      WEFT_CHECK(sum, IO, context(path), "the files' total size overflows");
      total = *sum;
    }
    Tensor out = empty({total}, kUInt8);
    auto* dst = static_cast<char*>(out.data_ptr());
    for (size_t i = 0; i < paths.size(); ++i) {
      weft::detail::InputFile file(paths[i], context(paths[i]));
      file.expectSize(sizes[i]);
      file.readAt(0, dst, sizes[i]);
      file.checkUnchanged();
      dst += sizes[i];
    }
    return out;
  });
}

TextDataset::TextDataset(Tensor tokens, int64_t block_size, std::optional<int64_t> stride,
                         std::source_location loc)
    : blockSize_(block_size), stride_(stride.value_or(block_size)) {
  CallSite cs(loc);
  WEFT_CHECK(tokens.defined() && tokens.dim() == 1, Shape,
             "TextDataset: expected a 1-D token tensor, got ",
             tokens.defined() ? shapeString(tokens.sizes()) : "undefined");
  const DType t = tokens.dtype();
  WEFT_CHECK(t == kUInt8 || t == kInt32 || t == kInt64, DType,
             "TextDataset: expected uint8, int32 or int64 tokens, got ", dtypeName(t));
  WEFT_CHECK(block_size >= 1 && stride_ >= 1, Value,
             "TextDataset: block_size and stride must be at least 1, got ", block_size, " and ",
             stride_);
  tokens_ = tokens.detach().contiguous();
  const int64_t n = tokens_.numel();
  size_ = n > block_size ? static_cast<size_t>((n - block_size - 1) / stride_ + 1) : 0;
}

Example<> TextDataset::get(size_t index) {
  Example<> batch = get_batch({index});
  return {batch.data.select(0, 0), batch.target.select(0, 0)};
}

Example<> TextDataset::get_batch(const std::vector<size_t>& indices) {
  const auto n = static_cast<int64_t>(indices.size());
  Tensor data = empty({n, blockSize_}, kInt64), target = empty({n, blockSize_}, kInt64);
  int64_t* x = data.data_ptr<int64_t>();
  int64_t* y = target.data_ptr<int64_t>();
  auto copyWindows = [&]<typename T>(const T* src) {
    for (size_t i = 0; i < indices.size(); ++i) {
      WEFT_CHECK(indices[i] < size_, Index, "TextDataset: index ", indices[i],
                 " is out of range for ", size_, " windows");
      const T* w = src + static_cast<int64_t>(indices[i]) * stride_;
      int64_t* xi = x + static_cast<int64_t>(i) * blockSize_;
      int64_t* yi = y + static_cast<int64_t>(i) * blockSize_;
      for (int64_t k = 0; k < blockSize_; ++k) {
        xi[k] = static_cast<int64_t>(w[k]);
        yi[k] = static_cast<int64_t>(w[k + 1]);
      }
    }
  };
  if (tokens_.dtype() == kUInt8)
    copyWindows(static_cast<const uint8_t*>(tokens_.data_ptr()));
  else if (tokens_.dtype() == kInt32)
    copyWindows(static_cast<const int32_t*>(tokens_.data_ptr()));
  else
    copyWindows(static_cast<const int64_t*>(tokens_.data_ptr()));
  return {data, target};
}

std::string TextDataset::decode(const Tensor& tokens, std::source_location loc) {
  CallSite cs(loc);
  std::string text;
  for (int64_t v : tokens.to_vector<int64_t>()) {
    WEFT_CHECK(v >= 0 && v < 256, Value, "TextDataset::decode: token ", v, " is not a byte");
    text += static_cast<char>(v);
  }
  return text;
}

} // namespace weft::data
