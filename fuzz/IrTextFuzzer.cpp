// libFuzzer target for the IR text form: any text given to the parser and the verifier yields a
// graph or a diagnostic, never a crash, a hang, undefined behaviour or an escaping exception; and a
// graph that verifies prints and parses back to the same text.
#include "weft/ir/TextFormat.h"
#include "weft/ir/Verifier.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto graph = weft::ir::parseGraph(text);
  if (!graph || !weft::ir::verify(graph.value()).empty()) return 0;
  std::string printed = weft::ir::printGraph(graph.value());
  auto again = weft::ir::parseGraph(printed);
  if (!again || weft::ir::printGraph(again.value()) != printed) __builtin_trap();
  return 0;
}
