// Uses weft through the umbrella header: trains one step and checks the gradient.
#include <weft/weft.h>

#include <cstdio>

int main() {
  using namespace weft;
  Tensor w = ones({3}).requires_grad_();
  (w * tensor({1.0, 2.0, 3.0})).sum().backward();
  bool ok = w.grad().to_vector<float>() == std::vector<float>{1, 2, 3};
  std::printf("consumer: gradient %s\n", ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
