// Throwing weft errors with the user's source line attached.
#include "weft/runtime/Error.h"

#include <string>

namespace weft {
namespace {
thread_local const std::source_location* tCallSite = nullptr;
} // namespace

CallSite::CallSite(std::source_location loc) : owner_(tCallSite == nullptr) {
  if (owner_) tCallSite = new std::source_location(loc);
}

CallSite::~CallSite() {
  if (owner_) {
    delete tCallSite;
    tCallSite = nullptr;
  }
}

std::string CallSite::describe() {
  if (tCallSite == nullptr || tCallSite->line() == 0) return "";
  return detail::concat(" (called from ", tCallSite->file_name(), ":", tCallSite->line(), ")");
}

const std::source_location* CallSite::current() {
  return tCallSite;
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
