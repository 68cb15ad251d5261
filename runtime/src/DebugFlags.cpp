// Reading the WEFT_* environment variables.
#include "weft/runtime/DebugFlags.h"

#include "weft/runtime/Error.h"

#include <cstdlib>

namespace weft {

std::optional<std::string> debugFlag(std::string_view name) {
  bool known = false;
#define WEFT_X(flag, doc) known = known || name == #flag;
  WEFT_DEBUG_FLAGS(WEFT_X)
#undef WEFT_X
  WEFT_INTERNAL_ASSERT(known, "undeclared debug flag ", name, ": add it to DebugFlags.h");
  const char* v = std::getenv(std::string(name).c_str());
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

std::string debugFlagsHelp() {
  std::string s;
#define WEFT_X(flag, doc) s += std::string(#flag) + "  " + doc + "\n";
  WEFT_DEBUG_FLAGS(WEFT_X)
#undef WEFT_X
  return s;
}

} // namespace weft
