// weft's error types, the user-error and internal-invariant checks, and the caller's source line.
#pragma once

#include <source_location>
#include <sstream>
#include <stdexcept>
#include <string>

namespace weft {

/// What kind of user mistake an error reports; each kind has its own exception class.
enum class ErrorKind { Value, Shape, DType, Device, Index, IO, Internal };

/// The base of every error weft throws. `what()` is the full message.
class Error : public std::runtime_error {
public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  /// Which kind of mistake this is.
  ErrorKind kind() const { return kind_; }

private:
  ErrorKind kind_;
};

/// A value or option outside what the op accepts.
class ValueError : public Error {
public:
  explicit ValueError(const std::string& m) : Error(ErrorKind::Value, m) {}
};
/// Shapes that do not fit together (broadcasting, matmul, views).
class ShapeError : public Error {
public:
  explicit ShapeError(const std::string& m) : Error(ErrorKind::Shape, m) {}
};
/// A dtype the op does not support, or dtypes that do not fit together.
class DTypeError : public Error {
public:
  explicit DTypeError(const std::string& m) : Error(ErrorKind::DType, m) {}
};
/// Tensors on different or unavailable devices.
class DeviceError : public Error {
public:
  explicit DeviceError(const std::string& m) : Error(ErrorKind::Device, m) {}
};
/// An index or dimension out of range.
class IndexError : public Error {
public:
  explicit IndexError(const std::string& m) : Error(ErrorKind::Index, m) {}
};
/// A file that cannot be read or written, or has the wrong format.
class IOError : public Error {
public:
  explicit IOError(const std::string& m) : Error(ErrorKind::IO, m) {}
};
/// A broken invariant inside weft: a bug to report, never the user's fault.
class InternalError : public Error {
public:
  explicit InternalError(const std::string& m) : Error(ErrorKind::Internal, m) {}
};

/// Throws the exception class for `kind` with `message`, followed by the caller's source line.
[[noreturn]] void throwError(ErrorKind kind, const std::string& message);

/// Records the user's call site for the duration of a public API call. Only the outermost
/// guard on a thread counts, so a public function calling another keeps the user's line.
class CallSite {
public:
  explicit CallSite(std::source_location loc);
  ~CallSite();
  CallSite(const CallSite&) = delete;
  CallSite& operator=(const CallSite&) = delete;
  /// " (called from file:line)" for the current outermost call site, or "" when none is known.
  static std::string describe();
  /// The current outermost call site, if any. The slot is the thread's and the next outermost
  /// CallSite reuses it: copy the value, don't keep the pointer.
  static const std::source_location* current();

private:
  bool owner_;
};

namespace detail {
template <typename... Args> std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
} // namespace detail

} // namespace weft

/// The source location parameter every named public function takes last.
#define WEFT_LOC std::source_location loc = std::source_location::current()

/// Throws a user error of `kind` (an ErrorKind enumerator name) unless `cond` holds.
#define WEFT_CHECK(cond, kind, ...)                                                                \
  do {                                                                                             \
    if (!(cond)) [[unlikely]]                                                                      \
      ::weft::throwError(::weft::ErrorKind::kind, ::weft::detail::concat(__VA_ARGS__));            \
  } while (false)

/// Throws a user error of `kind` unconditionally.
#define WEFT_FAIL(kind, ...)                                                                       \
  ::weft::throwError(::weft::ErrorKind::kind, ::weft::detail::concat(__VA_ARGS__))

/// Checks an internal invariant: failure is weft's bug and says so.
#define WEFT_INTERNAL_ASSERT(cond, ...)                                                            \
  do {                                                                                             \
    if (!(cond)) [[unlikely]]                                                                      \
      ::weft::throwError(::weft::ErrorKind::Internal,                                              \
                         ::weft::detail::concat("internal error, please report: ", #cond, " at ",  \
                                                __FILE__, ":", __LINE__,                           \
                                                ". " __VA_OPT__(, ) __VA_ARGS__));                 \
  } while (false)
