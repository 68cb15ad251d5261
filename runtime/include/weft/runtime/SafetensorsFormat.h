// The safetensors format without tensors: a header validated against untrusted bytes, and one
// written for tensors described by name, dtype and shape. The format:
// https://github.com/huggingface/safetensors (an 8-byte little-endian header length, a JSON header
// padded with spaces, then the tensors' bytes with no holes). weft's checkpoints
// (weft/Safetensors.h) and an artifact's named state both use it.
#pragma once

#include "weft/runtime/DType.h"
#include "weft/runtime/Shape.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace weft::safetensors::format {

using Metadata = std::map<std::string, std::string>;

/// The reference reader rejects larger headers, so weft neither writes nor reads them.
inline constexpr uint64_t kMaxHeaderSize = 100'000'000;

/// A dtype's safetensors code, and its rank in the reference's dtype enumeration: files list
/// tensors by descending rank (larger elements first, so each tensor's data is aligned), then name.
struct Code {
  std::string_view name;
  int rank;
};

Code codeOf(DType t);
std::optional<DType> dtypeOfCode(std::string_view name);

/// Whether `s` is well-formed UTF-8 (as JSON strings must be).
bool isUtf8(std::string_view s);
/// A name or value from a file, shortened and escaped for an error message.
std::string quoted(std::string_view s);

/// One tensor as the header describes it; offsets count from the start of the data section.
struct Entry {
  std::string name;
  DType dtype = DType::Float32;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

/// A validated header: the tensors in header order, and the metadata.
struct Header {
  std::vector<Entry> entries;
  Metadata metadata;
};

/// Reads the 8-byte header length at the start of a `total`-byte file and checks it (an IOError
/// starting with `ctx` where it cannot be).
uint64_t headerLength(const uint8_t* prefix, uint64_t total, const std::string& ctx);
/// Parses and validates a header's JSON `text` for a data section of `dataSize` bytes: every
/// tensor inside it, the tensors tiling it, no flaw in the JSON (IOErrors naming the flaw).
Header parseHeader(std::string_view text, uint64_t dataSize, const std::string& ctx);
/// C++ bools must hold 0 or 1: an IOError where a bool tensor's `bytes` hold anything else.
void checkBools(const Entry& e, const uint8_t* bytes, const std::string& ctx);

/// Checks that tensors of `names` and `metadata` can be written: unique valid UTF-8 names, none
/// "__metadata__" (ValueErrors naming `op`).
void checkWritable(const std::vector<std::string>& names, const Metadata& metadata, const char* op);
/// The header (length prefix included) for `entries` given by name, dtype and shape: they are put
/// in the reference's order (larger elements first, so each tensor's data is aligned, then by
/// name) and their offsets set. The JSON is padded with spaces so that the data section starts
/// at a multiple of `align` (a power of two, at least 8) bytes from the header's start.
std::string writeHeader(std::vector<Entry>& entries, const Metadata& metadata, const char* op,
                        size_t align = 8);

} // namespace weft::safetensors::format
