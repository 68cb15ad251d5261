// libFuzzer target for the pass pipeline compile() runs (passes::compilePipeline): any graph that
// parses and verifies goes through every pass (verified after each) to a graph that verifies or
// to a diagnostic, never a crash, undefined behaviour or an escaping exception; the result prints
// and parses back to the same text (its kernels found again by fusing the parsed graph).
#include "weft/codegen/Jit.h"
#include "weft/ir/TextFormat.h"
#include "weft/ir/Verifier.h"
#include "weft/passes/Pass.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto target = std::make_shared<const weft::codegen::CpuTarget>();
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto graph = weft::ir::parseGraph(text);
  if (!graph || !weft::ir::verify(graph.value()).empty()) return 0;
  weft::passes::PassManager pm;
  for (const std::string& name : weft::passes::compilePipeline())
    pm.add(weft::passes::createPass(name, target));
  if (!pm.run(graph.value())) return 0;
  std::string printed = weft::ir::printGraph(graph.value());
  auto again = weft::ir::parseGraph(printed);
  if (!again) __builtin_trap();
  // The kernels print as comments, which the parser skips: fusing the parsed graph finds them.
  if (!weft::passes::createPass("fuse", target)->run(again.value())) __builtin_trap();
  if (weft::ir::printGraph(again.value()) != printed) __builtin_trap();
  return 0;
}
