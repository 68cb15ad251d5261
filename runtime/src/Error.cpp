// Throwing weft errors with the user's source line attached.
#include "weft/runtime/Error.h"

#include <string>

namespace weft {
namespace {
// The outermost call site of this thread: a copy in tSite, valid while tHasSite.
thread_local std::source_location tSite;
thread_local bool tHasSite = false;
} // namespace

CallSite::CallSite(std::source_location loc) : owner_(!tHasSite) {
  if (owner_) {
    tSite = loc;
    tHasSite = true;
  }
}

CallSite::~CallSite() {
  if (owner_) tHasSite = false;
}

std::string CallSite::describe() {
  if (!tHasSite || tSite.line() == 0) return "";
  return detail::concat(" (called from ", tSite.file_name(), ":", tSite.line(), ")");
}

const std::source_location* CallSite::current() {
  return tHasSite ? &tSite : nullptr;
}

void throwError(ErrorKind kind, const std::string& message) {
  std::string full = message + CallSite::describe();
  switch (kind) {
  case ErrorKind::Value:
    throw ValueError(full);
  case ErrorKind::Shape:
    throw ShapeError(full);
  case ErrorKind::DType:
    throw DTypeError(full);
  case ErrorKind::Device:
    throw DeviceError(full);
  case ErrorKind::Index:
    throw IndexError(full);
  case ErrorKind::IO:
    throw IOError(full);
  case ErrorKind::Internal:
    throw InternalError(full);
  }
  throw InternalError(full);
}

} // namespace weft
