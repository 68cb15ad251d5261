// The C++ wrapper (weft_rt.hpp) over the C API, linking libweft_rt alone: the exported CNN train
// step (cnn_train.weft, as weft_aot_writer left it), opened from memory, trains 8 steps on the
// writer's batches and saves its state as safetensors (which ctest compares byte for byte with
// the state 8 steps compiled in-process leave); the CNN exported with a dynamic batch runs 3
// images in its bucket of 4; failures are weft_rt::Errors with the status.
// Usage: weft_rt_cpp_test DIR OUT.safetensors
#include "weft_rt.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

namespace {

int failures = 0;
void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "weft_rt_cpp_test: %s\n", what);
    ++failures;
  }
}

std::vector<char> readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

} // namespace

int main(int argc, char** argv) try {
  if (argc != 3) {
    std::fprintf(stderr, "usage: weft_rt_cpp_test DIR OUT.safetensors\n");
    return 2;
  }
  const std::string dir = argv[1];
  std::vector<char> file = readFile(dir + "/cnn_train.weft");
  // 64-byte aligned, as an artifact read in place must be.
  std::unique_ptr<void, void (*)(void*)> aligned(std::aligned_alloc(64, (file.size() + 63) / 64 * 64),
                                                 std::free);
  std::memcpy(aligned.get(), file.data(), file.size());
  weft_rt::Artifact model = weft_rt::Artifact::open_memory(aligned.get(), file.size());
  check(model.programs() == std::vector<std::string>{"train_step"}, "the program is train_step");
  weft_rt::Session session(model, "train_step");
  std::vector<weft_rt::ValueInfo> args = session.arguments();
  check(args.size() == 2 && args[0].name == "image" && args[1].dtype == WEFT_INT64,
        "the arguments are image and label");
  bool lr = false;
  for (const weft_rt::ValueInfo& v : session.state())
    lr = lr || (v.name == "optimizer.param_groups.0.lr" && v.dtype == WEFT_FLOAT64);
  check(lr, "the learning rate is named state");
  std::vector<char> data = readFile(dir + "/cnn_train_data.bin");
  const size_t imageBytes = args[0].nbytes, labelBytes = args[1].nbytes;
  check(data.size() == 4 * (imageBytes + labelBytes), "four batches of data");
  float loss = 0, first = 0;
  for (int i = 0; i < 8; ++i) {
    const char* image = data.data() + (i % 4) * imageBytes;
    const char* label = data.data() + 4 * imageBytes + (i % 4) * labelBytes;
    session.run({image, label}, {&loss});
    if (i == 0) first = loss;
  }
  check(loss < first, "the loss falls");
  session.save(argv[2]);
  // Errors: a status and a message, as exceptions.
  try {
    session.run({data.data()}, {&loss});
    check(false, "a wrong argument count throws");
  } catch (const weft_rt::Error& e) {
    check(e.status() == WEFT_VALUE_ERROR, "a wrong argument count is a value error");
  }
  try {
    weft_rt::Artifact::open(dir + "/nonexistent.weft");
    check(false, "a missing file throws");
  } catch (const weft_rt::Error& e) {
    check(e.status() == WEFT_IO_ERROR && std::strstr(e.what(), "cannot open") != nullptr,
          "a missing file is an IO error naming why");
  }
  try {
    weft_rt::Artifact::open_memory(static_cast<char*>(aligned.get()) + 1, file.size() - 1);
    check(false, "misaligned bytes throw");
  } catch (const weft_rt::Error& e) {
    check(std::strstr(e.what(), "64-byte aligned") != nullptr, "misaligned bytes are refused");
  }
  // The CNN exported for 1 to 4 images: 3 images run in the bucket of 4 and give the static
  // program's logits (another compilation: to 1e-5).
  weft_rt::Session dynamic(weft_rt::Artifact::open(dir + "/cnn_dynamic.weft"), "forward");
  check(dynamic.buckets() == std::vector<int64_t>{1, 2, 4} && dynamic.dynamic_dim() == 0,
        "the dynamic CNN has buckets 1, 2, 4 along dimension 0");
  std::vector<char> images = readFile(dir + "/cnn_inputs.bin");
  std::vector<char> expected = readFile(dir + "/cnn_expected.bin");
  std::vector<float> logits(expected.size() / sizeof(float));
  check(images.size() == 3 * 64 * sizeof(float) && logits.size() == 30, "3 images, 30 logits");
  dynamic.run({images.data()}, {logits.data()}, 3);
  for (size_t i = 0; i < logits.size(); ++i) {
    float want;
    std::memcpy(&want, expected.data() + i * sizeof(float), sizeof want);
    if (std::abs(logits[i] - want) > 1e-5f + 1e-5f * std::abs(want)) {
      check(false, "3 images in the bucket of 4 give the static program's logits");
      break;
    }
  }
  std::printf("weft_rt_cpp_test: loss %.4f -> %.4f, %d failures\n", first, loss, failures);
  return failures == 0 ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "weft_rt_cpp_test: %s\n", e.what());
  return 1;
}
