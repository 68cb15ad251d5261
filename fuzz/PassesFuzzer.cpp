// libFuzzer target for the pass pipeline compile() runs: any graph that parses and verifies goes
// through simplify, fold, cse and dce (verified after each) to a graph that verifies or to a
// diagnostic, never a crash, undefined behaviour or an escaping exception; the result prints and
// parses back to the same text.
#include "weft/ir/TextFormat.h"
#include "weft/ir/Verifier.h"
#include "weft/passes/Pass.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto graph = weft::ir::parseGraph(text);
  if (!graph || !weft::ir::verify(graph.value()).empty()) return 0;
  weft::passes::PassManager pm;
  for (const char* name : {"simplify", "fold", "simplify", "cse", "dce"})
    pm.add(weft::passes::createPass(name));
  if (!pm.run(graph.value())) return 0;
  std::string printed = weft::ir::printGraph(graph.value());
  auto again = weft::ir::parseGraph(printed);
  if (!again || weft::ir::printGraph(again.value()) != printed) __builtin_trap();
  return 0;
}
