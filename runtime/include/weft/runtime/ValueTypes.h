// Static value types of the IR (dtype + shape) and diagnostics, the compiler rooms' error values.
#pragma once

#include "weft/runtime/DType.h"
#include "weft/runtime/Error.h"
#include "weft/runtime/TensorRef.h"

#include <string>
#include <utility>
#include <variant>

namespace weft {

/// The static type of an SSA value.
struct TensorType {
  DType dtype = DType::Float32;
  Shape shape;
  bool operator==(const TensorType&) const = default;
};

/// "float32[2, 3]".
std::string typeString(const TensorType& t);

/// A problem found by a compiler room: what kind of mistake, and the message.
struct Diagnostic {
  ErrorKind kind = ErrorKind::Value;
  std::string message;
};

/// A value or the diagnostic that explains why there is none. The compiler rooms never throw.
template <typename T> class Result {
public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT: implicit, like llvm::Expected
  Result(Diagnostic diag) : v_(std::move(diag)) {} // NOLINT
  explicit operator bool() const { return v_.index() == 0; }
  const T& value() const { return std::get<0>(v_); }
  T& value() { return std::get<0>(v_); }
  const Diagnostic& diagnostic() const { return std::get<1>(v_); }

private:
  std::variant<T, Diagnostic> v_;
};

/// Builds a Diagnostic of `kind` from the pieces of a message.
template <typename... Args> Diagnostic diag(ErrorKind kind, const Args&... args) {
  return Diagnostic{kind, detail::concat(args...)};
}

/// The broadcast of two shapes (PyTorch rules), or a diagnostic naming `op`.
Result<Shape> broadcastShapes(const Shape& a, const Shape& b, std::string_view op);

} // namespace weft
