// Writing a file atomically: the bytes go to a temporary file beside the target, synced, then
// renamed over it, so a process killed while writing leaves the previous file whole.
#pragma once

#include <cstddef>
#include <string>

namespace weft::detail {

/// A temporary file next to `target`: commit() renames it over the target, else it is removed.
/// Errors are IOErrors starting with `context` (the operation and the path).
class AtomicFile {
public:
  AtomicFile(const std::string& target, std::string context);
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();

  void write(const void* data, size_t n);
  /// Makes the file's bytes durable, then atomically replaces the target with it.
  void commit();

private:
  std::string target_, path_, ctx_;
  int fd_ = -1;
  bool committed_ = false;
};

} // namespace weft::detail
