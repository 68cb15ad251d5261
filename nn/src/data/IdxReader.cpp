// read_idx: the IDX format of MNIST-like datasets (big-endian header and data, optionally gzip).
#include "weft/data/Readers.h"

#include "weft/runtime/InputFile.h"
#include "weft/Functions.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>

namespace weft::data {
namespace {

/// gzip's deflate expands at most 1032-fold (a 258-byte match in two bits), so a compressed file
/// of n bytes cannot hold more than this many times n bytes.
constexpr uint64_t kMaxDeflateRatio = 1032;

/// The bytes of an IDX file in order, raw or gzip (told apart by the magic 1f 8b), read exactly
/// as far as asked: a gzip bomb costs only what the header declares.
class IdxStream {
public:
  IdxStream(const std::string& path, const std::string& ctx) : file_(path, ctx) {
    unsigned char magic[2] = {};
    if (file_.readSome(0, magic, 2) == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
      const int fd = ::dup(file_.fd()); // gzclose closes its own descriptor
      WEFT_CHECK(fd >= 0, IO, ctx, "cannot read it: ", detail::errnoText());
      gz_ = gzdopen(fd, "rb");
      if (gz_ == nullptr) ::close(fd);
      WEFT_CHECK(gz_ != nullptr, IO, ctx, "cannot start decompressing it");
    }
  }
  ~IdxStream() {
    if (gz_) gzclose(gz_);
  }
  IdxStream(const IdxStream&) = delete;
  IdxStream& operator=(const IdxStream&) = delete;

  /// The most bytes the file can hold once decompressed.
  uint64_t capacity() const { return gz_ ? file_.size() * kMaxDeflateRatio : file_.size(); }
  /// Whether the file is gzip.
  bool compressed() const { return gz_ != nullptr; }
  /// Reads up to `n` bytes; fewer only where the data ends.
  uint64_t read(void* dst, uint64_t n) {
    if (!gz_) { // bytes the size at open promised must be there: if not, the file changed
      const uint64_t got = offset_ + n <= file_.size() ? (file_.readAt(offset_, dst, n), n)
                                                       : file_.readSome(offset_, dst, n);
      offset_ += got;
      return got;
    }
    uint64_t done = 0;
    while (done < n) {
      const auto want = static_cast<unsigned>(std::min<uint64_t>(n - done, 1U << 30));
      const int got = gzread(gz_, static_cast<char*>(dst) + done, want);
      if (got < 0) {
        int code = 0;
        const char* msg = gzerror(gz_, &code);
        WEFT_FAIL(IO, file_.context(), "it is corrupt gzip data or truncated (zlib: ", msg, ")");
      }
      if (got == 0) break;
      done += static_cast<uint64_t>(got);
    }
    return done;
  }
  /// Whether more data follows what was read.
  bool more() {
    unsigned char probe = 0;
    return read(&probe, 1) == 1;
  }
  /// Checks that the file on disk did not change while it was read.
  void checkUnchanged() const { file_.checkUnchanged(); }
  const std::string& context() const { return file_.context(); }

private:
  detail::InputFile file_;
  gzFile gz_ = nullptr;
  uint64_t offset_ = 0;
};

uint32_t bigEndian32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

/// The IDX element type: its size in the file and the weft dtype it reads into.
struct IdxType {
  size_t bytes;
  DType dtype;
};

IdxType idxType(unsigned char code, const std::string& ctx) {
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
    WEFT_FAIL(IO, ctx, "it has unknown IDX type code 0x", std::hex, static_cast<int>(code),
              " (expected 0x08, 0x09, 0x0B, 0x0C, 0x0D or 0x0E)");
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

/// The header: the element type and the shape, each extent checked as it is read.
struct IdxHeader {
  unsigned char code = 0;
  IdxType type{};
  Shape shape;
  uint64_t payload = 0; // data bytes the shape declares
};

IdxHeader readHeader(IdxStream& in) {
  const std::string& ctx = in.context();
  unsigned char magic[4] = {};
  WEFT_CHECK(in.read(magic, 4) == 4 && magic[0] == 0 && magic[1] == 0, IO, ctx,
             "it is not an IDX file (bad magic: expected two zero bytes, a type code and a rank)");
  IdxHeader h;
  h.code = magic[2];
  h.type = idxType(h.code, ctx);
  const size_t rank = magic[3];
  WEFT_CHECK(rank >= 1, IO, ctx, "it declares rank 0");
  unsigned char dims[4 * 255];
  const uint64_t got = in.read(dims, 4 * rank);
  WEFT_CHECK(got == 4 * rank, IO, ctx, "it is truncated inside its header (", 4 + got,
             " bytes for a rank-", rank, " header of ", 4 + 4 * rank, ")");
  uint64_t count = 1;
  for (size_t d = 0; d < rank; ++d) {
    const uint32_t extent = bigEndian32(dims + 4 * d);
    h.shape.push_back(extent);
    WEFT_CHECK(!__builtin_mul_overflow(count, uint64_t{extent}, &count) &&
                   !__builtin_mul_overflow(count, uint64_t{h.type.bytes}, &h.payload),
               IO, ctx, "it declares a shape whose size overflows");
  }
  WEFT_CHECK(byteSize(h.shape, h.type.dtype), IO, ctx, "it declares shape ", shapeString(h.shape),
             ", too large for a tensor");
  return h;
}

} // namespace

Tensor read_idx(const std::string& path, std::source_location loc) {
  CallSite cs(loc);
  return detail::convertStdExceptions("read_idx", [&] {
    IdxStream in(path, detail::concat("read_idx: '", path, "': "));
    const IdxHeader h = readHeader(in);
    const std::string& ctx = in.context();
    const uint64_t header = 4 + 4 * h.shape.size();
    // Nothing is allocated for data the file cannot hold, compressed or not.
    const uint64_t room = in.capacity() - std::min(in.capacity(), header);
    WEFT_CHECK(in.compressed() || h.payload == room, IO, ctx,
               h.payload < room ? "it is longer than its header says" : "it is truncated",
               ": shape ", shapeString(h.shape), " needs ", h.payload, " data bytes, found ", room);
    WEFT_CHECK(h.payload <= room, IO, ctx, "it declares shape ", shapeString(h.shape), " (",
               h.payload, " data bytes), more than its ", in.capacity() / kMaxDeflateRatio,
               " compressed bytes can hold (deflate expands at most ", kMaxDeflateRatio,
               "-fold): it is truncated or damaged");
    Tensor out = empty(h.shape, h.type.dtype);
    // The payload in blocks: decompressed exactly as far as the header says, decoded as read.
    std::vector<unsigned char> block(std::min<uint64_t>(h.payload, uint64_t{1} << 20));
    const size_t perBlock = std::max<size_t>(block.size() / h.type.bytes, 1);
    auto* dst = static_cast<char*>(out.data_ptr());
    const size_t outSize = elementSize(h.type.dtype);
    for (uint64_t done = 0; done < h.payload;) {
      const uint64_t want = std::min<uint64_t>(h.payload - done, perBlock * h.type.bytes);
      const uint64_t got = in.read(block.data(), want);
      WEFT_CHECK(got == want, IO, ctx, "it is truncated: shape ", shapeString(h.shape), " needs ",
                 h.payload, " data bytes, found ", done + got);
      const size_t n = want / h.type.bytes;
      decode(h.code, block.data(), n, dst + done / h.type.bytes * outSize);
      done += want;
    }
    // A raw file's length was checked above: a byte past it now means the file grew.
    WEFT_CHECK(!in.compressed() || !in.more(), IO, ctx, "it is longer than its header says: shape ",
               shapeString(h.shape), " needs ", h.payload, " data bytes and more follow");
    in.checkUnchanged();
    return out;
  });
}

} // namespace weft::data
