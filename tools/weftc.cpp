// weftc: the ahead-of-time compiler. A program in text IR (a graph, as weft-opt reads and
// WEFT_DUMP_DIR writes) and the values of its state in a safetensors file go in; an artifact
// (.weft) with the program compiled for the named CPU targets comes out, for the runtime alone;
// or, for an output named .onnx, the program as an ONNX model (opset 17) for other runtimes.
//
//   weftc model.wir --state weights.safetensors -o model.weft [--target x86-64-v3 ...]
//   weftc model.wir --state weights.safetensors -o model.onnx
#include "weft/ir/TextFormat.h"
#include "weft/runtime/Artifact.h"
#include "weft/runtime/AtomicFile.h"

#include <weft/Onnx.h>

#include <weft/weft.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace weft;

const char* kUsage =
    "usage: weftc PROGRAM.wir -o OUT.weft [--state STATE.safetensors] [--target T ...]\n"
    "             [--program NAME]\n"
    "       weftc PROGRAM.wir -o OUT.onnx [--state STATE.safetensors]\n"
    "  PROGRAM.wir  a graph in text IR; its state inputs take the values of the tensors of\n"
    "               their names in --state\n"
    "  --target T   a CPU target, best first (x86-64-v4, x86-64-v3, x86-64 as the portable\n"
    "               fallback, a CPU LLVM knows, or host: the default); the runtime loads the\n"
    "               first code the machine runs\n"
    "  --program    the program's name in the artifact (default: forward)\n"
    "  OUT.onnx     writes the program as an ONNX model (opset 17), its state as initializers\n";

int run(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::fputs(kUsage, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  std::string input = args[0], out, stateFile, program = "forward";
  std::vector<std::string> targets;
  for (size_t i = 1; i < args.size(); ++i) {
    auto value = [&]() -> const std::string& {
      WEFT_CHECK(i + 1 < args.size(), Value, "weftc: ", args[i], " needs a value\n", kUsage);
      return args[++i];
    };
    if (args[i] == "-o") out = value();
    else if (args[i] == "--state") stateFile = value();
    else if (args[i] == "--target") targets.push_back(value());
    else if (args[i] == "--program") program = value();
    else WEFT_FAIL(Value, "weftc: unknown option '", args[i], "'\n", kUsage);
  }
  WEFT_CHECK(!out.empty(), Value, "weftc: no output file (-o)\n", kUsage);
  const size_t explicitTargets = targets.size();
  if (targets.empty()) targets.push_back("host");
  std::ifstream in(input);
  WEFT_CHECK(static_cast<bool>(in), IO, "weftc: cannot read '", input, "'");
  std::stringstream text;
  text << in.rdbuf();
  ir::Result<ir::Graph> graph = ir::parseGraph(text.str());
  WEFT_CHECK(static_cast<bool>(graph), Value, "weftc: '", input, "': ",
             graph ? "" : graph.diagnostic().message);
  // The state: each input's tensor, by name, of the graph's type.
  safetensors::TensorMap values;
  if (!stateFile.empty()) values = safetensors::load_file(stateFile);
  auto stateTensor = [&](const std::string& name, DType dtype, const Shape& shape) -> Tensor& {
    auto it = std::find_if(values.begin(), values.end(), [&](auto& e) { return e.first == name; });
    WEFT_CHECK(it != values.end(), Value, "weftc: the program reads state '", name, "' (",
               dtypeName(dtype), " ", shapeString(shape), "), which ",
               stateFile.empty() ? "no --state file gives" : "'" + stateFile + "' does not hold");
    WEFT_CHECK(it->second.dtype() == dtype && it->second.sizes() == shape, Value,
               "weftc: state '", name, "' is ", dtypeName(it->second.dtype()), " ",
               shapeString(it->second.sizes()), " in '", stateFile, "', but the program reads ",
               dtypeName(dtype), " ", shapeString(shape));
    it->second = it->second.contiguous();
    return it->second;
  };
  if (out.ends_with(".onnx")) {
    WEFT_CHECK(explicitTargets == 0, Value, "weftc: an ONNX model has no code for --target");
    const ir::Graph& g = graph.value();
    std::vector<Tensor> state;
    for (ir::ValueId v : g.state())
      state.push_back(stateTensor(g.value(v).name, g.type(v).dtype, g.type(v).shape));
    std::string bytes = onnx_model(g, state, OnnxOptions().graph_name(program));
    detail::AtomicFile file(out, "weftc: '" + out + "': ");
    file.write(bytes.data(), bytes.size());
    file.commit();
    std::printf("wrote %s: ONNX opset %lld, %zu nodes of weft IR, %zu bytes\n", out.c_str(),
                static_cast<long long>(kOnnxOpset), g.nodes().size(), bytes.size());
    return 0;
  }
  Executable exe = compile_graph(graph.value(), targets[0]);
  for (size_t t = 1; t < targets.size(); ++t)
    exe.addCodeFrom(compile_graph(graph.value(), targets[t]));
  std::vector<ArtifactTensor> state;
  std::vector<std::string> names;
  for (const ExecutableValue& v : exe.state) {
    Tensor& t = stateTensor(v.name, v.dtype, v.shape);
    state.push_back({v.name, v.dtype, v.shape, t.data_ptr()});
    names.push_back(v.name);
  }
  ArtifactProgram p{program, &exe, names};
  writeArtifact(out, std::span(&p, 1), state, "weftc " WEFT_VERSION_STRING);
  std::printf("wrote %s: program %s, %zu steps, %zu kernels, code for %zu target(s)\n", out.c_str(),
              program.c_str(), exe.plan.steps.size(), exe.plan.kernels.kernels.size(),
              exe.plan.kernels.code.size());
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
