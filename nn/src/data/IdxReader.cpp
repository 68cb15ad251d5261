// read_idx: the IDX format of MNIST-like datasets (big-endian header and data, optionally gzip).
#include "weft/data/Readers.h"

#include "weft/Functions.h"

#include <zlib.h>

#include <cstring>
#include <limits>
#include <memory>

namespace weft::data {
namespace {

/// The whole decompressed content of `path` (zlib reads gzip and, transparently, raw files).
std::vector<unsigned char> readAll(const std::string& path) {
  std::unique_ptr<gzFile_s, int (*)(gzFile)> file(gzopen(path.c_str(), "rb"), gzclose);
  WEFT_CHECK(file != nullptr, IO, "read_idx: cannot open '", path, "': ", std::strerror(errno));
  std::vector<unsigned char> bytes(size_t{1} << 20);
  size_t used = 0;
  for (;;) {
    if (used == bytes.size()) bytes.resize(bytes.size() * 2);
    const auto want = static_cast<unsigned>(std::min<size_t>(bytes.size() - used, 1u << 30));
    const int got = gzread(file.get(), bytes.data() + used, want);
    if (got < 0) {
      int code = 0;
      const char* msg = gzerror(file.get(), &code);
      WEFT_FAIL(IO, "read_idx: '", path, "' is corrupt or truncated (", msg, ")");
    }
    if (got == 0) break;
    used += static_cast<size_t>(got);
  }
  bytes.resize(used);
  return bytes;
}

uint32_t bigEndian32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

/// The IDX element type: its size in the file and the weft dtype it reads into.
struct IdxType {
  size_t bytes;
  DType dtype;
};

IdxType idxType(unsigned char code, const std::string& path) {
  switch (code) {
  case 0x08:
    return {1, kUInt8};
  case 0x09: // int8 and int16 have no weft dtype: widen to int32
    return {1, kInt32};
  case 0x0B:
    return {2, kInt32};
  case 0x0C:
    return {4, kInt32};
  case 0x0D:
    return {4, kFloat32};
  case 0x0E:
    return {8, kFloat64};
  default:
    WEFT_FAIL(IO, "read_idx: '", path, "' has unknown IDX type code 0x", std::hex,
              static_cast<int>(code), " (expected 0x08, 0x09, 0x0B, 0x0C, 0x0D or 0x0E)");
  }
}

/// Converts `count` big-endian elements of type `code` at `src` into `dst` (the dtype's layout).
void decode(unsigned char code, const unsigned char* src, size_t count, void* dst) {
  auto swapInto = [&]<typename U>(U*) {
    for (size_t i = 0; i < count; ++i) {
      U v = 0; // assembled most significant byte first; compilers turn this into a bswap
      for (size_t k = 0; k < sizeof(U); ++k)
        v = static_cast<U>(v << 8) | src[i * sizeof(U) + k];
      std::memcpy(static_cast<char*>(dst) + i * sizeof(U), &v, sizeof(U));
    }
  };
  auto* out32 = static_cast<int32_t*>(dst);
  switch (code) {
  case 0x08:
    std::memcpy(dst, src, count);
    break;
  case 0x09:
    for (size_t i = 0; i < count; ++i)
      out32[i] = src[i] < 0x80 ? src[i] : src[i] - 0x100; // two's complement byte
    break;
  case 0x0B:
    for (size_t i = 0; i < count; ++i)
      out32[i] = ((src[2 * i] << 8) | src[2 * i + 1]) - (src[2 * i] < 0x80 ? 0 : 0x10000);
    break;
  case 0x0C:
  case 0x0D:
    swapInto(static_cast<uint32_t*>(nullptr));
    break;
  default: // 0x0E; idxType rejected the rest
    swapInto(static_cast<uint64_t*>(nullptr));
    break;
  }
}

} // namespace

Tensor read_idx(const std::string& path, std::source_location loc) {
  CallSite cs(loc);
  const std::vector<unsigned char> bytes = readAll(path);
  WEFT_CHECK(bytes.size() >= 4 && bytes[0] == 0 && bytes[1] == 0, IO, "read_idx: '", path,
             "' is not an IDX file (bad magic: expected two zero bytes, a type code and a rank)");
  const unsigned char code = bytes[2];
  const size_t rank = bytes[3];
  const IdxType type = idxType(code, path);
  WEFT_CHECK(rank >= 1, IO, "read_idx: '", path, "' declares rank 0");
  const size_t header = 4 + 4 * rank;
  WEFT_CHECK(bytes.size() >= header, IO, "read_idx: '", path, "' is truncated inside its header (",
             bytes.size(), " bytes for a rank-", rank, " header of ", header, ")");
  Shape shape;
  size_t count = 1;
  for (size_t d = 0; d < rank; ++d) {
    const uint32_t extent = bigEndian32(bytes.data() + 4 + 4 * d);
    shape.push_back(extent);
    WEFT_CHECK(!__builtin_mul_overflow(count, size_t{extent}, &count) &&
                   count <= std::numeric_limits<size_t>::max() / type.bytes,
               IO, "read_idx: '", path, "' declares a shape whose size overflows");
  }
  const size_t expected = count * type.bytes, found = bytes.size() - header;
  WEFT_CHECK(found == expected, IO, "read_idx: '", path, "' is ",
             found < expected ? "truncated" : "longer than its header says", ": shape ",
             shapeString(shape), " needs ", expected, " data bytes, found ", found);
  Tensor out = empty(shape, type.dtype);
  decode(code, bytes.data() + header, count, out.data_ptr());
  return out;
}

} // namespace weft::data
