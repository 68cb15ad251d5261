// weft-opt: reads a graph in text form, verifies it, runs the passes named on the command line in
// order, and prints the result; with --split=S,G it then splits the result into the forward and
// the backward graph compile() runs (the last S arguments are the output gradients' seeds, the
// last G outputs the gradients) and prints both; with --mask-rows=SIZE,PROBE it first masks the
// padded rows of a dynamic dimension (the file holds the graph traced with SIZE rows, then the one
// traced with PROBE rows; see passes::maskPaddedRows) and prints which outputs hold the dimension;
// with --lower it prints the runtime plan the
// result lowers to (steps, each fuse-pass kernel as one launch, and the memory plan) instead, and
// with --lower=interpret:K,... the plan where codegen failed kernels K.
// Used by the golden tests (lit + FileCheck).
#include "weft/ir/Lower.h"
#include "weft/ir/TextFormat.h"
#include "weft/ir/Verifier.h"
#include "weft/passes/PaddedRows.h"
#include "weft/passes/Pass.h"
#include "weft/passes/Split.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>

namespace {

int usage() {
  std::string names;
  for (const std::string& n : weft::passes::passNames())
    names += " --" + n;
  std::fprintf(stderr,
               "usage: weft-opt [--mask-rows=SIZE,PROBE] [passes...] [--split=SEEDS,GRADS | "
               "--lower[=interpret:K,...]] [file | -]\n"
               "  passes:%s\n"
               "  --mask-rows=SIZE,PROBE: the file holds two graphs, traced with SIZE and with\n"
               "    PROBE rows of a dynamic dimension; the first is masked (padded rows)\n"
               "  --lower=interpret:K,...: kernels K lowered as codegen failing them would be\n",
               names.c_str());
  return 2;
}

} // namespace

int main(int argc, char** argv) {
  weft::passes::PassManager pm;
  std::string path = "-";
  long seeds = -1, grads = -1;        // --split
  long maskSize = -1, maskProbe = -1; // --mask-rows
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
    if (arg.rfind("--mask-rows=", 0) == 0) {
      if (std::sscanf(arg.c_str(), "--mask-rows=%ld,%ld", &maskSize, &maskProbe) != 2 ||
          maskSize <= 0 || maskProbe <= 0 || maskProbe == maskSize)
        return usage();
    } else if (arg.rfind("--split=", 0) == 0) {
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
  // With --mask-rows, the probe graph follows the first: it starts at the second line that
  // starts a graph.
  std::string all = text.str(), probeText;
  if (maskSize > 0) {
    size_t first = all.rfind("graph @", 0) == 0 ? 0 : all.find("\ngraph @");
    size_t second = first == std::string::npos ? first : all.find("\ngraph @", first + 1);
    if (second == std::string::npos) {
      std::fprintf(stderr, "%s: error: --mask-rows: the file must hold two graphs\n", path.c_str());
      return 1;
    }
    probeText = all.substr(second + 1);
    all.resize(second + 1);
  }
  // Parses and verifies one graph of the file.
  auto read = [&](const std::string& source) -> std::optional<weft::ir::Graph> {
    auto parsed = weft::ir::parseGraph(source);
    if (!parsed) {
      std::fprintf(stderr, "%s:%s\n", path.c_str(), parsed.diagnostic().message.c_str());
      return std::nullopt;
    }
    std::vector<weft::ir::Diagnostic> problems = weft::ir::verify(parsed.value());
    for (const auto& d : problems)
      std::fprintf(stderr, "%s: error: %s\n", path.c_str(), d.message.c_str());
    if (!problems.empty()) return std::nullopt;
    return std::move(parsed.value());
  };
  std::optional<weft::ir::Graph> graph = read(all);
  if (!graph) return 1;
  std::string axes; // --mask-rows: the outputs holding the dynamic dimension
  if (maskSize > 0) {
    std::optional<weft::ir::Graph> probe = read(probeText);
    if (!probe) return 1;
    weft::passes::PaddedTrace trace;
    trace.graph = &*graph;
    trace.probe = &*probe;
    trace.size = maskSize;
    trace.probeSize = maskProbe;
    auto masked = weft::passes::maskPaddedRows(trace); // arguments: found by the probe
    if (!masked) {
      std::fprintf(stderr, "%s: error: %s\n", path.c_str(), masked.diagnostic().message.c_str());
      return 1;
    }
    graph = std::move(masked.value().graph);
    const auto& outputs = masked.value().outputs;
    for (size_t i = 0; i < outputs.size(); ++i)
      axes += "// output " + std::to_string(i) +
              (outputs[i]
                   ? ": rows along axis " + std::to_string(outputs[i]->axis) +
                         (outputs[i]->factor > 1 ? " (x" + std::to_string(outputs[i]->factor) + ")"
                                                 : "")
                   : ": no dynamic dimension") +
              "\n";
  }
  auto r = pm.run(*graph);
  if (!r) {
    std::fprintf(stderr, "%s: error: %s\n", path.c_str(), r.diagnostic().message.c_str());
    return 1;
  }
  if (lower) {
    // Each kernel of the fuse pass as one launch (of a table without code: nothing runs here),
    // or as interpreter steps where --lower=interpret: names it.
    const weft::ir::Graph& g = *graph;
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
    std::fputs((weft::ir::printGraph(*graph) + axes).c_str(), stdout);
    return 0;
  }
  weft::ir::Graph& g = *graph;
  auto s = static_cast<size_t>(seeds), n = static_cast<size_t>(grads);
  // After --mask-rows the last argument is the valid-row mask; the seeds come before it, as in
  // compile() (which masks after appending the output gradients).
  const size_t after = maskSize > 0 ? 1 : 0;
  if (s + after > g.arguments().size() || n > g.outputs().size()) {
    std::fprintf(stderr,
                 "%s: error: --split=%zu,%zu: the graph has %zu arguments and %zu outputs\n",
                 path.c_str(), s, n, g.arguments().size(), g.outputs().size());
    return 1;
  }
  std::vector<weft::ir::ValueId> seedValues(g.arguments().end() - static_cast<long>(s + after),
                                            g.arguments().end() - static_cast<long>(after));
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
