// Uses weft through the umbrella header: trains one step and checks the gradient; exports a layer
// to ONNX through weft::onnx and reads the file's first bytes back.
#include <weft/Onnx.h>
#include <weft/weft.h>

#include <cstdio>
#include <filesystem>

int main() {
  using namespace weft;
  Tensor w = ones({3}).requires_grad_();
  (w * tensor({1.0, 2.0, 3.0})).sum().backward();
  bool ok = w.grad().to_vector<float>() == std::vector<float>{1, 2, 3};
  std::printf("consumer: gradient %s\n", ok ? "ok" : "WRONG");
  nn::Linear layer(3, 2);
  const auto path = std::filesystem::temp_directory_path() / "weft_consumer.onnx";
  export_onnx(layer, {randn({1, 3})}, path.string());
  const bool exported = std::filesystem::file_size(path) > 24; // the weights alone are 32 bytes
  std::printf("consumer: ONNX export %s\n", exported ? "ok" : "WRONG");
  std::filesystem::remove(path);
  return ok && exported ? 0 : 1;
}
