// Safetensors checkpoints: tensors read from and written to the format (its header's parsing and
// validation are the runtime's, weft/runtime/SafetensorsFormat.h), files written atomically.
#include "weft/Safetensors.h"

#include "weft/runtime/AtomicFile.h"
#include "weft/runtime/InputFile.h"
#include "weft/runtime/SafetensorsFormat.h"
#include "weft/Functions.h"

#include <bit>
#include <cstring>
#include <map>
#include <string_view>

namespace weft::safetensors {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian and weft copies tensor bytes unchanged");

using namespace format;

/// Makes the tensors of `entries`; `read(entry, dst)` fills one tensor's bytes.
template <typename Read>
TensorMap materialize(std::vector<Entry>& entries, const std::string& ctx, Read read) {
  TensorMap out;
  out.reserve(entries.size());
  for (Entry& e : entries) {
    Tensor t = empty(e.shape, e.dtype);
    if (e.end > e.begin) {
      read(e, t.data_ptr());
      checkBools(e, static_cast<const uint8_t*>(t.data_ptr()), ctx);
    }
    out.emplace_back(std::move(e.name), std::move(t));
  }
  return out;
}

// ---- files ----

std::string fileContext(const char* op, const std::string& path) {
  return detail::concat(op, ": '", path, "': ");
}

/// A validated header of an open file, and where its data section starts.
struct Layout {
  Header header;
  uint64_t dataStart = 0;
};

/// Reads and validates the header of `file`; tensors are read afterwards, each into its own
/// tensor, so nothing the size of the file is ever allocated twice.
Layout readHeader(const detail::InputFile& file) {
  const std::string& ctx = file.context();
  uint8_t prefix[8] = {};
  if (file.size() >= 8) file.readAt(0, prefix, 8);
  uint64_t n = headerLength(prefix, file.size(), ctx);
  std::string text(n, '\0');
  file.readAt(8, text.data(), n);
  return {parseHeader(text, file.size() - 8 - n, ctx), 8 + n};
}

// ---- writing ----

/// The header to write (length prefix included) and the tensors' contiguous data in file order.
struct Prepared {
  std::string head;
  std::vector<Tensor> data;
};

size_t nbytes(const Tensor& t) {
  return static_cast<size_t>(t.numel()) * elementSize(t.dtype());
}

Prepared prepare(const TensorMap& tensors, const Metadata& metadata, const char* op) {
  std::vector<Entry> entries;
  std::map<std::string_view, const Tensor*> byName;
  for (const auto& [name, t] : tensors) {
    WEFT_CHECK(t.defined(), Value, op, ": tensor ", quoted(name), " is undefined");
    entries.push_back({name, t.dtype(), t.sizes(), 0, 0});
    byName.emplace(name, &t);
  }
  Prepared p;
  p.head = writeHeader(entries, metadata, op);
  for (const Entry& e : entries) // a device's tensors too
    p.data.push_back(byName.at(e.name)->detach().cpu().contiguous());
  return p;
}

} // namespace

void save_file(const TensorMap& tensors, const std::string& path, const Metadata& metadata,
               std::source_location loc) {
  CallSite cs(loc);
  detail::convertStdExceptions("safetensors::save_file", [&] {
    Prepared p = prepare(tensors, metadata, "safetensors::save_file");
    std::string ctx = fileContext("safetensors::save_file", path);
    detail::AtomicFile file(path, ctx);
    file.write(p.head.data(), p.head.size());
    for (const Tensor& t : p.data)
      if (size_t n = nbytes(t)) file.write(t.data_ptr(), n);
    file.commit();
  });
}

std::vector<uint8_t> save(const TensorMap& tensors, const Metadata& metadata,
                          std::source_location loc) {
  CallSite cs(loc);
  return detail::convertStdExceptions("safetensors::save", [&] {
    Prepared p = prepare(tensors, metadata, "safetensors::save");
    std::vector<uint8_t> out(p.head.begin(), p.head.end());
    for (const Tensor& t : p.data)
      if (size_t n = nbytes(t)) {
        const auto* bytes = static_cast<const uint8_t*>(t.data_ptr());
        out.insert(out.end(), bytes, bytes + n);
      }
    return out;
  });
}

TensorMap load_file(const std::string& path, Metadata* metadata, std::source_location loc) {
  CallSite cs(loc);
  return detail::convertStdExceptions("safetensors::load_file", [&] {
    detail::InputFile file(path, fileContext("safetensors::load_file", path));
    Layout layout = readHeader(file);
    if (metadata != nullptr) *metadata = layout.header.metadata;
    TensorMap out =
        materialize(layout.header.entries, file.context(), [&](const Entry& e, void* dst) {
          file.readAt(layout.dataStart + e.begin, dst, e.end - e.begin);
        });
    file.checkUnchanged();
    return out;
  });
}

TensorMap load(const uint8_t* data, size_t size, std::source_location loc) {
  CallSite cs(loc);
  return detail::convertStdExceptions("safetensors::load", [&] {
    const std::string ctx = "safetensors::load: safetensors buffer: ";
    WEFT_CHECK(data != nullptr || size == 0, IO, ctx, "the data pointer is null");
    uint64_t n = headerLength(data, size, ctx);
    std::string_view text(reinterpret_cast<const char*>(data) + 8, n);
    Header header = parseHeader(text, size - 8 - n, ctx);
    const uint8_t* base = data + 8 + n;
    return materialize(header.entries, ctx, [&](const Entry& e, void* dst) {
      std::memcpy(dst, base + e.begin, e.end - e.begin);
    });
  });
}

Metadata metadata(const std::string& path, std::source_location loc) {
  CallSite cs(loc);
  return detail::convertStdExceptions("safetensors::metadata", [&] {
    detail::InputFile file(path, fileContext("safetensors::metadata", path));
    Metadata m = readHeader(file).header.metadata;
    file.checkUnchanged();
    return m;
  });
}

} // namespace weft::safetensors
