// Datasets over files: (Fashion-)MNIST, CSV tables and byte-level text corpora.
#pragma once

#include "weft/data/Dataset.h"
#include "weft/data/Readers.h"

#include <optional>
#include <string>
#include <vector>

namespace weft::data {

/// MNIST or Fashion-MNIST (one file layout) from `root`: {train,t10k}-images-idx3-ubyte and
/// -labels-idx1-ubyte, each raw or with ".gz". Images are float32 [N, 1, 28, 28] scaled to [0, 1],
/// targets int64 [N], as torch::data::datasets::MNIST.
class MNIST : public TensorDataset {
public:
  /// The training set (60,000 samples) when `train`, else the test set (10,000).
  explicit MNIST(const std::string& root, bool train = true, WEFT_LOC);
};
/// Fashion-MNIST ships in MNIST's layout.
using FashionMNIST = MNIST;

/// Rows of a CSV file (read with read_csv_tensor): the other columns are the input and
/// `target_column`, if given, the target, converted to `target_dtype`.
class CsvDataset : public TensorDataset {
public:
  /// Reads `path`; a negative target column counts from the end.
  explicit CsvDataset(const std::string& path, CsvOptions options = {},
                      std::optional<int64_t> target_column = std::nullopt,
                      DType target_dtype = kFloat32, WEFT_LOC);
};

/// Windows of a token stream for a next-token (character-level) language model: example i is
/// input tokens[i*stride, i*stride + block_size) and target the same window shifted by one, both
/// int64 [block_size]. Bytes from read_bytes are a 256-symbol vocabulary.
class TextDataset : public Dataset {
public:
  /// Windows over a 1-D uint8, int32 or int64 `tokens`; `stride` defaults to block_size (every
  /// token is predicted once per epoch).
  TextDataset(Tensor tokens, int64_t block_size, std::optional<int64_t> stride = std::nullopt,
              WEFT_LOC);
  /// The window at `index`.
  Example get(size_t index) override;
  /// The windows at `indices` as int64 [n, block_size] inputs and targets.
  Example get_batch(const std::vector<size_t>& indices) override;
  /// The number of whole windows of block_size + 1 tokens.
  size_t size() const override { return size_; }
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
