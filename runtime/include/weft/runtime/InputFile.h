// Reading untrusted files that may change while read: regular files only, every read checked,
// the size taken at open confirmed at the end, and standard-library exceptions turned into
// weft errors at the readers' boundary.
#pragma once

#include "weft/runtime/Error.h"

#include <cstddef>
#include <cstdint>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

namespace weft::detail {

/// Bytes from a file, safe to print in a message: at most `max` of them, quotes, backslashes,
/// control and non-ASCII bytes escaped (\xNN), and "..." where the excerpt was cut.
std::string excerpt(std::string_view bytes, size_t max = 40);

/// A regular file open for reading. Every error is an IOError starting with `context` (which
/// names the operation and the path, e.g. "read_csv: 'a.csv': "). Reads never trust the size the
/// file had at open: a read that ends early, or a file whose size or modification time differs
/// when checkUnchanged() runs, is an IOError saying that the file changed while being read.
class InputFile {
public:
  /// Opens `path`; a missing, unreadable or non-regular file (a directory, a FIFO) is an IOError.
  InputFile(const std::string& path, std::string context);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  /// The file's size when it was opened.
  uint64_t size() const { return size_; }
  /// The descriptor, positioned at the start (reads go through pread and leave it there).
  int fd() const { return fd_; }
  /// The prefix of every error message.
  const std::string& context() const { return context_; }
  /// Reads exactly `n` bytes at `offset` into `dst`; a file that ends first changed while read.
  void readAt(uint64_t offset, void* dst, uint64_t n) const;
  /// Reads up to `n` bytes at `offset`; fewer only at the end of the file.
  uint64_t readSome(uint64_t offset, void* dst, uint64_t n) const;
  /// Checks that the file's size at open is `size`, the size an earlier look at it found.
  void expectSize(uint64_t size) const;
  /// Checks that the file still has its size and modification time from open and nothing past
  /// that size: an IOError otherwise (truncated, grown or rewritten while it was read).
  void checkUnchanged() const;

private:
  [[noreturn]] void changed(const std::string& how) const;
  std::string context_;
  int fd_ = -1;
  uint64_t size_ = 0;
  int64_t mtimeSec_ = 0, mtimeNsec_ = 0;
};

/// The text of errno, for messages.
std::string errnoText();

/// Runs `fn` and returns its result, turning the standard library's exceptions into weft errors
/// naming `op`: out of memory is a ValueError, a failed system call (a thread that cannot start)
/// an IOError, and any other std::exception an internal error (it is weft's bug). Weft errors
/// pass unchanged. Wraps the readers and loaders, whose callers catch weft::Error only.
template <typename Fn> decltype(auto) convertStdExceptions(const char* op, Fn&& fn) {
  try {
    return fn();
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    WEFT_FAIL(Value, op, ": out of memory");
  } catch (const std::length_error&) {
    WEFT_FAIL(Value, op, ": out of memory (a size past what the C++ library can hold)");
  } catch (const std::system_error& e) {
    WEFT_FAIL(IO, op, ": ", e.what());
  } catch (const std::exception& e) {
    WEFT_FAIL(Internal, "internal error, please report: ", op, " threw ", e.what());
  }
}

} // namespace weft::detail
