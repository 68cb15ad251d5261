// libFuzzer target for the safetensors reader (weft/runtime/SafetensorsFormat.h), which checkpoints
// and artifacts' state go through: any bytes give a validated header whose tensors lie inside the
// data, or a weft::Error; never a crash, undefined behaviour or a hang.
#include "weft/runtime/Error.h"
#include "weft/runtime/SafetensorsFormat.h"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace f = weft::safetensors::format;
  try {
    const std::string ctx = "fuzz: ";
    const uint64_t n = f::headerLength(data, size, ctx);
    f::Header h = f::parseHeader(std::string_view(reinterpret_cast<const char*>(data) + 8, n),
                                 size - 8 - n, ctx);
    for (const f::Entry& e : h.entries) {
      if (e.end > size - 8 - n || e.begin > e.end) __builtin_trap(); // validated: inside the data
      f::checkBools(e, data + 8 + n + e.begin, ctx);
    }
  } catch (const weft::Error&) {
  }
  return 0;
}
