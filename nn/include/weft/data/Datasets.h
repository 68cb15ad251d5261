// Datasets over files: (Fashion-)MNIST, CSV tables and byte-level text corpora.
#pragma once

#include "weft/data/Dataset.h"
#include "weft/data/Readers.h"

#include <optional>
#include <string>
#include <vector>

namespace weft::data {

namespace datasets {

/// MNIST or Fashion-MNIST (one file layout), as torch::data::datasets::MNIST: from `root`,
/// {train,t10k}-images-idx3-ubyte and {train,t10k}-labels-idx1-ubyte, each raw or with ".gz" (as
/// Debian's dataset-fashion-mnist ships them, in /usr/share/datasets/fashion-mnist). Images are
/// float32 [N, 1, H, W] scaled to [0, 1], targets int64 [N]. N, H and W are the files' own
/// (LibTorch insists on 60,000 or 10,000 images of 28x28).
class MNIST : public detail::TensorRows<MNIST> {
public:
  /// Which of the two sets to read.
  enum class Mode { kTrain, kTest };
  /// The training set (60,000 samples) for kTrain, else the test set (10,000).
  explicit MNIST(const std::string& root, Mode mode = Mode::kTrain, WEFT_LOC);
  /// weft's spelling: the training set when `train`, else the test set.
  MNIST(const std::string& root, bool train, WEFT_LOC);
  /// Whether this is the training set.
  bool is_train() const noexcept { return train_; }
  /// All images, float32 [N, 1, H, W] in [0, 1].
  const Tensor& images() const { return data(); }
  /// All labels, int64 [N].
  const Tensor& targets() const { return target(); }

private:
  bool train_;
};

} // namespace datasets

/// weft's name of datasets::MNIST.
using MNIST = datasets::MNIST;
/// Fashion-MNIST ships in MNIST's layout.
using FashionMNIST = datasets::MNIST;

/// Rows of a CSV file (read with read_csv_tensor): the other columns are the input and
/// `target_column`, if given, the target, converted to `target_dtype`.
class CsvDataset : public detail::TensorRows<CsvDataset> {
public:
  /// Reads `path`; a negative target column counts from the end.
  explicit CsvDataset(const std::string& path, CsvOptions options = {},
                      std::optional<int64_t> target_column = std::nullopt,
                      DType target_dtype = kFloat32, WEFT_LOC);
};

/// Windows of a token stream for a next-token (character-level) language model: example i is
/// input tokens[i*stride, i*stride + block_size) and target the same window shifted by one, both
/// int64 [block_size]. Bytes from read_bytes are a 256-symbol vocabulary.
class TextDataset : public datasets::Dataset<TextDataset> {
public:
  /// Windows over a 1-D uint8, int32 or int64 `tokens`; `stride` defaults to block_size (every
  /// token is predicted once per epoch).
  TextDataset(Tensor tokens, int64_t block_size, std::optional<int64_t> stride = std::nullopt,
              WEFT_LOC);
  /// The window at `index`.
  Example<> get(size_t index) override;
  /// The windows at `indices` as int64 [n, block_size] inputs and targets.
  Example<> get_batch(const std::vector<size_t>& indices) override;
  /// The number of whole windows of block_size + 1 tokens.
  std::optional<size_t> size() const override { return size_; }
  /// The token stream.
  const Tensor& tokens() const { return tokens_; }
  /// The text of byte tokens (any integer tensor with values 0..255), for printing samples.
  static std::string decode(const Tensor& tokens, WEFT_LOC);

private:
  Tensor tokens_;
  int64_t blockSize_, stride_;
  size_t size_;
};

} // namespace weft::data
