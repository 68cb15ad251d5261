// Runs a saved executable and an exported artifact with the runtime alone (this program links
// weft_runtime, neither the compiler nor MLIR/LLVM) and checks they compute the JIT's outputs bit
// for bit.
// Usage: weft_aot_runner DIR (as weft_aot_writer left it)
#include "weft/runtime/Artifact.h"
#include "weft/runtime/Error.h"
#include "weft/runtime/Executable.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

namespace {

std::vector<uint8_t> readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  WEFT_CHECK(static_cast<bool>(in), IO, "cannot read ", path);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// Whether a library whose name contains `name` is mapped into this process.
bool mapped(const char* name) {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);)
    if (line.find(name) != std::string::npos) return true;
  return false;
}

} // namespace

int main(int argc, char** argv) try {
  using namespace weft;
  WEFT_CHECK(argc == 2, Value, "usage: weft_aot_runner DIR");
  std::string dir = argv[1];
  Executable exe = Executable::load(readFile(dir + "/mlp.wexe"));
  std::vector<uint8_t> inputs = readFile(dir + "/inputs.bin");
  std::vector<Buffer> args;
  size_t at = 0;
  for (const ExecutableValue& v : exe.arguments) {
    WEFT_CHECK(v.dtype == DType::Float32, Value, "expected float32 arguments");
    args.push_back(allocateBuffer(hal::cpu(), v.shape, v.dtype));
    size_t n = static_cast<size_t>(numel(v.shape)) * sizeof(float);
    WEFT_CHECK(at + n <= inputs.size(), IO, "inputs.bin is too short");
    std::memcpy(args.back().ref.data, inputs.data() + at, n);
    at += n;
  }
  std::vector<Buffer> out = exe.run(hal::cpu(), args, {});
  std::vector<uint8_t> expected = readFile(dir + "/expected.bin");
  size_t n = static_cast<size_t>(out.at(0).ref.numel()) * sizeof(float);
  WEFT_CHECK(n == expected.size(), Value, "output has ", n, " bytes, expected ", expected.size());
  int launches = 0;
  for (const PlanStep& s : exe.plan.steps)
    launches += s.kernel >= 0 ? 1 : 0;
  bool same = std::memcmp(out[0].ref.data, expected.data(), n) == 0;
  // The artifact, through a Session: its state read in place from the mapped file.
  std::shared_ptr<const Artifact> cnn = Artifact::open(dir + "/cnn.weft");
  Session session(cnn, "forward");
  std::vector<uint8_t> image = readFile(dir + "/cnn_inputs.bin");
  std::vector<uint8_t> want = readFile(dir + "/cnn_expected.bin"), got(want.size());
  auto bytesOf = [](const ExecutableValue& v) { return static_cast<size_t>(numel(v.shape)) * elementSize(v.dtype); };
  WEFT_CHECK(image.size() == bytesOf(session.arguments().at(0)), IO, "cnn_inputs.bin has the wrong size");
  WEFT_CHECK(want.size() == bytesOf(session.outputs().at(0)), IO, "cnn_expected.bin has the wrong size");
  const void* cnnIn[] = {image.data()};
  void* cnnOut[] = {got.data()};
  session.run(cnnIn, cnnOut);
  const Executable& forward = cnn->program("forward");
  bool sameCnn = got == want;
  std::printf("cnn.weft: %zu bytes, %zu state tensors, %zu steps; outputs %s\n",
              static_cast<size_t>(cnn->fileBytes()), cnn->state().size(),
              forward.plan.steps.size(), sameCnn ? "identical to the JIT's" : "DIFFER from the JIT's");
  same = same && sameCnn;
  bool compilerFree = !mapped("libLLVM") && !mapped("libMLIR") && !mapped("weft_codegen");
  std::printf("%zu steps, %d kernel launches from %zu bytes of code; outputs %s; compiler %s\n",
              exe.plan.steps.size(), launches,
              exe.plan.kernels.code.empty() ? 0 : exe.plan.kernels.code[0].bytes.size(),
              same ? "identical to the JIT's" : "DIFFER from the JIT's",
              compilerFree ? "not loaded" : "LOADED");
  return same && compilerFree && launches > 0 ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "weft_aot_runner: %s\n", e.what());
  return 1;
}
