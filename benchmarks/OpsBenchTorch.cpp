// The LibTorch side of weft-bench-ops: the same ops on the same tiny tensors (see OpsBench.h).
#include "OpsBench.h"

#include <torch/torch.h>

namespace bench {

std::vector<OpCost> torchOps(int threads, int iterations) {
  at::set_num_threads(threads);
  torch::manual_seed(1);
  torch::Tensor a = torch::randn({16}), b = torch::randn({16});
  torch::Tensor m = torch::randn({4, 4}), n = torch::randn({4, 4});
  torch::Tensor ga = a.clone().requires_grad_(), gb = b.clone().requires_grad_();
  torch::Tensor acc = torch::zeros({16});
  return timeOps(a, b, m, n, ga, gb, acc, iterations);
}

} // namespace bench
