// Artifacts (.weft): export_model() writes one that the runtime's Artifact opens and runs as the
// in-process compilation does, its state named as the module names it; damaged, truncated and
// hostile files are IOErrors; a writer killed mid-write leaves the previous file whole.
#include "TestUtil.h"

#include <weft/weft.h>

#include "weft/runtime/Artifact.h"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

using namespace weft;
using test::has;
using test::messageOf;
namespace fs = std::filesystem;

namespace {

std::string tempPath(const std::string& name) {
  return test::tempPath("weft_artifact_", name);
}

std::vector<uint8_t> readBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void writeBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

/// Runs program `name` of `a` on the CPU through a Session (its state read in place).
std::vector<Tensor> runArtifact(std::shared_ptr<const Artifact> a, const std::string& name,
                                const std::vector<Tensor>& args) {
  Session session(std::move(a), name);
  std::vector<Tensor> dense, out;
  std::vector<const void*> in;
  std::vector<void*> outs;
  for (const Tensor& x : args) {
    dense.push_back(x.contiguous());
    in.push_back(dense.back().data_ptr());
  }
  for (const ExecutableValue& v : session.outputs()) {
    out.push_back(empty(v.shape, v.dtype));
    outs.push_back(out.back().data_ptr());
  }
  session.run(in, outs);
  return out;
}

struct Mlp : nn::Module {
  Mlp() {
    fc1 = register_module("fc1", nn::Linear(6, 16));
    norm = register_module("norm", nn::BatchNorm1d(16));
    fc2 = register_module("fc2", nn::Linear(16, 3));
  }
  Tensor forward(const Tensor& x) { return fc2->forward(norm->forward(fc1->forward(x)).relu()); }
  nn::Linear fc1 = nullptr, fc2 = nullptr;
  nn::BatchNorm1d norm = nullptr;
};

} // namespace

TEST(Artifact, AnExportedModelRunsWithTheRuntimeAsItsCompilationDoes) {
  manual_seed(3);
  auto model = std::make_shared<Mlp>();
  model->train();
  Tensor x = randn({5, 6});
  const std::string path = tempPath("mlp.weft");
  export_model(*model, [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{model->forward(in[0])};
  }, {x}, path);
  EXPECT_TRUE(model->is_training()); // restored after export's eval mode
  Tensor want;
  {
    NoGradGuard noGrad;
    model->eval();
    auto forward = compile([&](const Tensor& in) { return model->forward(in); });
    want = forward(x);
  }
  std::shared_ptr<const Artifact> a = Artifact::open(path);
  EXPECT_EQ(a->programNames(), std::vector<std::string>{"forward"});
  EXPECT_NE(a->producer().find("weft"), std::string::npos);
  EXPECT_NE(a->program("forward").ir.find("matmul"), std::string::npos); // the text IR is kept
  std::vector<Tensor> got = runArtifact(a, "forward", {x});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].to_vector<float>(), want.to_vector<float>()); // bit for bit
  // Eval mode: the running statistics, not the batch's.
  EXPECT_TRUE(allclose(got[0], model->forward(x), 1e-5, 1e-6));
  // Its state under the module's names, equal to the module's tensors.
  safetensors::TensorMap state = load_state(path);
  std::map<std::string, Tensor> byName(state.begin(), state.end());
  for (const auto& [name, p] : model->named_parameters()) {
    ASSERT_TRUE(byName.count(name)) << name;
    EXPECT_TRUE(equal(byName[name], p)) << name;
  }
  EXPECT_TRUE(byName.count("norm.running_mean"));
  EXPECT_TRUE(has(messageOf([&] { (void)a->program("train_step"); }), "has no program 'train_step'"));
  fs::remove(path);
}

TEST(Artifact, AModuleHolderExportsItsForward) {
  manual_seed(4);
  nn::Sequential net(nn::Linear(4, 8), nn::Tanh(), nn::Linear(8, 2));
  Tensor x = randn({3, 4});
  const std::string path = tempPath("seq.weft");
  export_model(net, {x}, path,
               ExportOptions().program("predict").input_names({"features"}).output_names({"logits"}));
  EXPECT_THROW(export_model(net, {x}, path, ExportOptions().input_names({"a", "b"})), ValueError);
  std::shared_ptr<const Artifact> a = Artifact::open(path);
  EXPECT_EQ(a->program("predict").arguments.at(0).name, "features");
  EXPECT_EQ(a->program("predict").outputs.at(0).name, "logits");
  Tensor want;
  {
    NoGradGuard noGrad;
    want = net->forward(x);
  }
  EXPECT_TRUE(allclose(runArtifact(a, "predict", {x})[0], want, 1e-5, 1e-6));
  EXPECT_EQ(a->stateNames("predict").size(), 4u); // two weights, two biases
  fs::remove(path);
}

TEST(Artifact, DamagedTruncatedAndHostileFilesAreIOErrors) {
  manual_seed(5);
  nn::Sequential net(nn::Linear(3, 4), nn::ReLU());
  const std::string path = tempPath("good.weft"), bad = tempPath("bad.weft");
  export_model(net, {randn({2, 3})}, path);
  const std::vector<uint8_t> good = readBytes(path);
  ASSERT_GT(good.size(), 128u);
  auto expectIOError = [&](const std::vector<uint8_t>& bytes, const std::string& why) {
    writeBytes(bad, bytes);
    try {
      (void)Artifact::open(bad);
      ADD_FAILURE() << why << ": opened";
    } catch (const IOError&) {
    } catch (const std::exception& e) {
      ADD_FAILURE() << why << ": " << e.what();
    }
  };
  // Every truncation.
  for (size_t n = 0; n < good.size(); n += 1 + n / 64)
    expectIOError(std::vector<uint8_t>(good.begin(), good.begin() + static_cast<ptrdiff_t>(n)),
                  "truncated to " + std::to_string(n));
  // A flipped byte in the header, the manifest (its checksum) or the state's header.
  const uint64_t stateOffset = [&] {
    uint64_t v = 0;
    std::memcpy(&v, good.data() + 40, 8);
    return v;
  }();
  for (size_t at : {size_t{0}, size_t{8}, size_t{16}, size_t{24}, size_t{40}, size_t{48},
                    size_t{64}, size_t{70}, static_cast<size_t>(stateOffset),
                    static_cast<size_t>(stateOffset + 9), static_cast<size_t>(stateOffset + 20)}) {
    std::vector<uint8_t> flipped = good;
    flipped[at] ^= 0x5A;
    expectIOError(flipped, "byte " + std::to_string(at) + " flipped");
  }
  // A newer format version is named as such.
  std::vector<uint8_t> newer = good;
  newer[8] += 1;
  writeBytes(bad, newer);
  EXPECT_TRUE(has(messageOf([&] { (void)Artifact::open(bad); }), "newer weft"));
  // Not a file, no file.
  EXPECT_THROW((void)Artifact::open(fs::temp_directory_path().string()), IOError);
  EXPECT_THROW((void)Artifact::open(tempPath("missing.weft")), IOError);
  // The good file still opens.
  EXPECT_EQ(Artifact::open(path)->programNames().size(), 1u);
  fs::remove(path);
  fs::remove(bad);
}

TEST(Artifact, TheWriterChecksWhatItWrites) {
  Executable e; // reads its state and computes nothing
  e.state = {{"w", DType::Float32, {2}}};
  e.plan.numSlots = 1;
  e.plan.stateSlots = {0};
  const float w[2] = {1, 2};
  ArtifactTensor t{"w", DType::Float32, {2}, w};
  const std::string path = tempPath("writer.weft");
  ArtifactProgram unnamed{"p", &e, {}};
  EXPECT_THROW(writeArtifact(path, std::span(&unnamed, 1), std::span(&t, 1), "test"), ValueError);
  ArtifactProgram wrongName{"p", &e, {"v"}};
  EXPECT_THROW(writeArtifact(path, std::span(&wrongName, 1), std::span(&t, 1), "test"), ValueError);
  ArtifactTensor wrongShape{"w", DType::Float32, {1, 2}, w};
  ArtifactProgram p{"p", &e, {"w"}};
  EXPECT_THROW(writeArtifact(path, std::span(&p, 1), std::span(&wrongShape, 1), "test"),
               ValueError);
  EXPECT_FALSE(fs::exists(path));
  writeArtifact(path, std::span(&p, 1), std::span(&t, 1), "test");
  std::shared_ptr<const Artifact> a = Artifact::open(path);
  EXPECT_EQ(std::memcmp(a->findState("w")->data, w, sizeof w), 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a->findState("w")->data) % 64, 0u); // mapped, aligned
  fs::remove(path);
}

TEST(Artifact, AWriterKilledMidWriteLeavesThePreviousFileWhole) {
  nn::Sequential net(nn::Linear(3, 2));
  const std::string path = tempPath("killed.weft");
  export_model(net, {randn({1, 3})}, path);
  const std::vector<uint8_t> before = readBytes(path);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) { // writes 256 MiB of state over the file, too long to finish before the kill
    try {
      Executable e;
      e.state = {{"big", DType::UInt8, {1 << 28}}};
      std::vector<uint8_t> big(size_t{1} << 28, 7);
      ArtifactTensor t{"big", DType::UInt8, {1 << 28}, big.data()};
      ArtifactProgram p{"p", &e, {"big"}};
      writeArtifact(path, std::span(&p, 1), std::span(&t, 1), "killed");
    } catch (...) {
      ::_exit(2);
    }
    ::_exit(0);
  }
  // Kill it once its temporary file holds data.
  const std::string dir = fs::path(path).parent_path().string(), prefix = fs::path(path).filename().string() + ".tmp.";
  bool writing = false;
  for (int i = 0; i < 2000 && !writing; ++i) {
    for (const auto& entry : fs::directory_iterator(dir))
      if (entry.path().filename().string().rfind(prefix, 0) == 0 && entry.file_size() > 0)
        writing = true;
    if (!writing) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(writing) << "the writer never started writing";
  EXPECT_TRUE(WIFSIGNALED(status)) << "the writer finished before it was killed";
  EXPECT_EQ(readBytes(path), before);
  EXPECT_EQ(Artifact::open(path)->programNames(), std::vector<std::string>{"forward"});
  for (const auto& entry : fs::directory_iterator(dir)) // the killed writer's leftover
    if (entry.path().filename().string().rfind(prefix, 0) == 0) fs::remove(entry.path());
  fs::remove(path);
}
