// Checkpoints in Hugging Face's safetensors format, spelled as the Python `safetensors` package.
#pragma once

#include "weft/Tensor.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace weft::safetensors {

/// Named tensors; loading returns them in the order the file's header lists them.
using TensorMap = std::vector<std::pair<std::string, Tensor>>;
/// The string-to-string "__metadata__" of a file.
using Metadata = std::map<std::string, std::string>;

/// Writes `tensors` (any strides; stored contiguous, little-endian) and `metadata` to `path`
/// atomically: a temporary file in the same directory is written, synced and renamed over `path`,
/// so readers never see a half-written file. Tensors are laid out as the reference library lays
/// them out (larger dtypes first, then by name), so its files and weft's are byte-identical.
void save_file(const TensorMap& tensors, const std::string& path, const Metadata& metadata = {},
               WEFT_LOC);
/// The bytes save_file would write.
std::vector<uint8_t> save(const TensorMap& tensors, const Metadata& metadata = {}, WEFT_LOC);
/// Reads every tensor of the file at `path` into fresh tensors, and its metadata into `metadata`
/// where given (from the same read); throws IOError naming the file and the problem for anything
/// that is not a well-formed safetensors file.
TensorMap load_file(const std::string& path, Metadata* metadata = nullptr, WEFT_LOC);
/// Reads every tensor of the safetensors bytes [data, data + size), copying them.
TensorMap load(const uint8_t* data, size_t size, WEFT_LOC);
/// The metadata of the file at `path` (empty when it has none); reads and validates the header
/// only.
Metadata metadata(const std::string& path, WEFT_LOC);

} // namespace weft::safetensors
