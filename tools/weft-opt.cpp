// weft-opt: reads a graph in text form, verifies it, runs the passes named on the command line in
// order, and prints the result; with --split=S,G it then splits the result into the forward and
// the backward graph compile() runs (the last S arguments are the output gradients' seeds, the
// last G outputs the gradients) and prints both; with --lower it prints the runtime plan the
// result lowers to (steps, each fuse-pass kernel as one launch, and the memory plan) instead, and
// with --lower=interpret:K,... the plan where codegen failed kernels K.
// Used by the golden tests (lit + FileCheck).
#include "weft/ir/Lower.h"
#include "weft/ir/TextFormat.h"
#include "weft/ir/Verifier.h"
#include "weft/passes/Pass.h"
#include "weft/passes/Split.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

namespace {

int usage() {
  std::string names;
  for (const std::string& n : weft::passes::passNames())
    names += " --" + n;
  std::fprintf(stderr,
               "usage: weft-opt [passes...] [--split=SEEDS,GRADS | --lower[=interpret:K,...]] "
               "[file | -]\n"
               "  passes:%s\n"
               "  --lower=interpret:K,...: kernels K lowered as codegen failing them would be\n",
               names.c_str());
  return 2;
}

} // namespace

int main(int argc, char** argv) {
  weft::passes::PassManager pm;
  std::string path = "-";
  long seeds = -1, grads = -1; // --split
  bool lower = false;
  std::vector<long> interpreted; // --lower=interpret:K,...: kernels without code
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") return usage();
    if (arg == "--lower") {
      lower = true;
      continue;
    }
    if (arg.rfind("--lower=interpret:", 0) == 0) {
      lower = true;
      std::stringstream list(arg.substr(std::string("--lower=interpret:").size()));
      for (std::string k; std::getline(list, k, ',');) {
        char* end = nullptr;
        long v = std::strtol(k.c_str(), &end, 10);
        if (k.empty() || *end != '\0' || v < 0) return usage();
        interpreted.push_back(v);
      }
      continue;
    }
    if (arg.rfind("--split=", 0) == 0) {
      if (std::sscanf(arg.c_str(), "--split=%ld,%ld", &seeds, &grads) != 2 || seeds < 0 ||
          grads < 0)
        return usage();
    } else if (arg.rfind("--", 0) == 0) {
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
  if (lower && seeds >= 0) return usage(); // one result: a plan or two graphs
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
  if (lower) {
    // Each kernel of the fuse pass as one launch (of a table without code: nothing runs here),
    // or as interpreter steps where --lower=interpret: names it.
    const weft::ir::Graph& g = graph.value();
    std::vector<weft::ir::FusedKernel> fused;
    for (size_t k = 0; k < g.kernels().size(); ++k) {
      bool none = std::find(interpreted.begin(), interpreted.end(), static_cast<long>(k)) !=
                  interpreted.end();
      fused.push_back({g.kernels()[k], none ? -1 : static_cast<int32_t>(k)});
    }
    std::fputs(weft::ir::printPlan(g, weft::ir::lowerToPlan(g, fused)).c_str(), stdout);
    return 0;
  }
  if (seeds < 0) {
    std::fputs(weft::ir::printGraph(graph.value()).c_str(), stdout);
    return 0;
  }
  weft::ir::Graph& g = graph.value();
  auto s = static_cast<size_t>(seeds), n = static_cast<size_t>(grads);
  if (s > g.arguments().size() || n > g.outputs().size()) {
    std::fprintf(stderr,
                 "%s: error: --split=%zu,%zu: the graph has %zu arguments and %zu outputs\n",
                 path.c_str(), s, n, g.arguments().size(), g.outputs().size());
    return 1;
  }
  std::vector<weft::ir::ValueId> seedValues(g.arguments().end() - static_cast<long>(s),
                                            g.arguments().end());
  std::vector<weft::ir::ValueId> gradValues(g.outputs().end() - static_cast<long>(n),
                                            g.outputs().end());
  g.mutableOutputs().resize(g.outputs().size() - n);
  auto split = weft::passes::splitForwardBackward(g, seedValues, gradValues);
  if (!split) {
    std::fprintf(stderr, "%s: error: %s\n", path.c_str(), split.diagnostic().message.c_str());
    return 1;
  }
  std::fputs(weft::ir::printGraph(split.value().forward).c_str(), stdout);
  std::fputs(weft::ir::printGraph(split.value().backward).c_str(), stdout);
  return 0;
}
