// weft-opt: reads a program in text form (a graph; with --rows, the graph traced with the dynamic
// dimension at SIZE rows, then the one traced at PROBE rows), verifies it, runs the passes named
// on the command line in order (--pipeline: compile()'s, passes::compilePipeline), and prints the
// result: its graphs (the forward, and the backward after --split), which outputs hold the
// dynamic dimension after --mask-rows, and after --lower the runtime plan of each graph (steps,
// each fuse-pass kernel one launch of a table without code; with --lower=interpret:K,... kernels
// K lowered as codegen failing them would be), with the memory plan after --plan-memory. For
// --output-grads the gradients asked for are those of every output with respect to every
// floating argument and state; --seeds=S,G instead says the graph holds them already (its last S
// arguments are the seeds, its last G outputs the gradients). Used by the golden tests (lit +
// FileCheck).
#include "weft/codegen/Jit.h"
#include "weft/ir/Lower.h"
#include "weft/ir/TextFormat.h"
#include "weft/ir/Verifier.h"
#include "weft/passes/Pass.h"
#include "weft/passes/Program.h"

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
               "usage: weft-opt [--rows=SIZE,PROBE] [--seeds=SEEDS,GRADS] [--pipeline | "
               "passes...] [file | -]\n"
               "  passes:%s\n"
               "  --rows=SIZE,PROBE: the file holds two graphs, traced with SIZE and with PROBE\n"
               "    rows of a dynamic dimension (for --mask-rows)\n"
               "  --seeds=SEEDS,GRADS: the last SEEDS arguments are output gradients' seeds, the\n"
               "    last GRADS outputs the gradients (for --split)\n"
               "  --lower=interpret:K,...: lower, kernels K lowered as codegen failing them\n"
               "    would be (--lower: each kernel one launch of a table without code)\n",
               names.c_str());
  return 2;
}

/// Makes `p` a program that asks for gradients: with `seeds` >= 0 the graph holds them already
/// (its last `seeds` arguments and `grads` outputs), else output-grads appends those of every
/// output with respect to every floating argument and state.
bool askGradients(weft::passes::Program& p, long seeds, long grads, const std::string& path) {
  weft::ir::Graph& g = p.graph;
  if (seeds < 0) {
    p.differentiableOutputs = g.outputs().size();
    for (const auto* inputs : {&g.arguments(), &g.state()})
      for (weft::ir::ValueId v : *inputs)
        if (weft::isFloating(g.type(v).dtype)) p.wrt.push_back(v);
    return true;
  }
  auto s = static_cast<size_t>(seeds), n = static_cast<size_t>(grads);
  if (s > g.arguments().size() || n > g.outputs().size()) {
    std::fprintf(stderr,
                 "%s: error: --seeds=%zu,%zu: the graph has %zu arguments and %zu outputs\n",
                 path.c_str(), s, n, g.arguments().size(), g.outputs().size());
    return false;
  }
  p.seeds.assign(g.arguments().end() - static_cast<long>(s), g.arguments().end());
  p.grads.assign(g.outputs().end() - static_cast<long>(n), g.outputs().end());
  g.mutableOutputs().resize(g.outputs().size() - n);
  return true;
}

} // namespace

int main(int argc, char** argv) {
  // What remat and fuse ask: the CPU code generator's abilities (no code is generated here).
  auto target = std::make_shared<const weft::codegen::CpuTarget>();
  weft::passes::PassManager pm;
  std::string path = "-";
  long seeds = -1, grads = -1;    // --seeds
  long rows = -1, probeRows = -1; // --rows
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") return usage();
    if (arg.rfind("--lower=interpret:", 0) == 0) {
      std::vector<long> interpreted; // kernels lowered as if codegen had failed them
      std::stringstream list(arg.substr(std::string("--lower=interpret:").size()));
      for (std::string k; std::getline(list, k, ',');) {
        char* end = nullptr;
        long v = std::strtol(k.c_str(), &end, 10);
        if (k.empty() || *end != '\0' || v < 0) return usage();
        interpreted.push_back(v);
      }
      pm.add(weft::passes::createLower([interpreted](const weft::ir::Graph& g) {
        weft::passes::GeneratedKernels r; // a table without code: nothing runs here
        for (size_t k = 0; k < g.kernels().size(); ++k)
          r.kernelOf.push_back(
              std::count(interpreted.begin(), interpreted.end(), static_cast<long>(k)) > 0
                  ? -1
                  : static_cast<int32_t>(k));
        return weft::ir::Result<weft::passes::GeneratedKernels>(std::move(r));
      }));
      continue;
    }
    if (arg.rfind("--rows=", 0) == 0) {
      if (std::sscanf(arg.c_str(), "--rows=%ld,%ld", &rows, &probeRows) != 2 || rows <= 0 ||
          probeRows <= 0 || probeRows == rows)
        return usage();
    } else if (arg.rfind("--seeds=", 0) == 0) {
      if (std::sscanf(arg.c_str(), "--seeds=%ld,%ld", &seeds, &grads) != 2 || seeds < 0 ||
          grads < 0)
        return usage();
    } else if (arg == "--pipeline") {
      for (const std::string& name : weft::passes::compilePipeline())
        pm.add(weft::passes::createPass(name, target));
    } else if (arg.rfind("--", 0) == 0) {
      auto pass = weft::passes::createPass(arg.substr(2), target);
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
  // With --rows, the probe graph follows the first: it starts at the second line that starts a
  // graph.
  std::string all = text.str(), probeText;
  if (rows > 0) {
    size_t first = all.rfind("graph @", 0) == 0 ? 0 : all.find("\ngraph @");
    size_t second = first == std::string::npos ? first : all.find("\ngraph @", first + 1);
    if (second == std::string::npos) {
      std::fprintf(stderr, "%s: error: --rows: the file must hold two graphs\n", path.c_str());
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
  weft::passes::Program program;
  if (std::optional<weft::ir::Graph> graph = read(all))
    program.graph = std::move(*graph);
  else
    return 1;
  if (!askGradients(program, seeds, grads, path)) return 1;
  if (rows > 0) {
    std::optional<weft::ir::Graph> probe = read(probeText);
    if (!probe) return 1;
    program.probe = std::make_shared<weft::passes::Program>();
    program.probe->graph = std::move(*probe);
    if (!askGradients(*program.probe, seeds, grads, path)) return 1;
    program.rows = rows;
    program.probeRows = probeRows;
  }
  auto r = pm.run(program);
  if (!r) {
    std::fprintf(stderr, "%s: error: %s\n", path.c_str(), r.diagnostic().message.c_str());
    return 1;
  }
  std::fputs(weft::passes::printProgram(program).c_str(), stdout);
  return 0;
}
