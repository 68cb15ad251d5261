// weft-opt: reads a graph in text form, verifies it, runs the passes named on the command line in
// order, and prints the result. Used by the golden tests (lit + FileCheck).
#include "weft/ir/TextFormat.h"
#include "weft/ir/Verifier.h"
#include "weft/passes/Pass.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

namespace {

int usage() {
  std::string names;
  for (const std::string& n : weft::passes::passNames())
    names += " --" + n;
  std::fprintf(stderr, "usage: weft-opt [passes...] [file | -]\n  passes:%s\n", names.c_str());
  return 2;
}

} // namespace

int main(int argc, char** argv) {
  weft::passes::PassManager pm;
  std::string path = "-";
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") return usage();
    if (arg.rfind("--", 0) == 0) {
      auto pass = weft::passes::createPass(arg.substr(2));
      if (!pass) {
        std::fprintf(stderr, "weft-opt: unknown pass '%s'\n", arg.c_str());
        return usage();
      }
      pm.add(std::move(pass));
    } else {
      path = arg;
    }
  }
  std::stringstream text;
  if (path == "-") {
    text << std::cin.rdbuf();
  } else {
    std::ifstream in(path);
    if (!in) {
      std::fprintf(stderr, "weft-opt: cannot open '%s'\n", path.c_str());
      return 1;
    }
    text << in.rdbuf();
  }
  auto graph = weft::ir::parseGraph(text.str());
  if (!graph) {
    std::fprintf(stderr, "%s:%s\n", path.c_str(), graph.diagnostic().message.c_str());
    return 1;
  }
  std::vector<weft::ir::Diagnostic> problems = weft::ir::verify(graph.value());
  for (const auto& d : problems)
    std::fprintf(stderr, "%s: error: %s\n", path.c_str(), d.message.c_str());
  if (!problems.empty()) return 1;
  auto r = pm.run(graph.value());
  if (!r) {
    std::fprintf(stderr, "%s: error: %s\n", path.c_str(), r.diagnostic().message.c_str());
    return 1;
  }
  std::fputs(weft::ir::printGraph(graph.value()).c_str(), stdout);
  return 0;
}
