// A first weft program: a model, an eager train step, the same step compiled, a checkpoint.
#include <weft/weft.h>

#include <cmath>
#include <cstdio>

using namespace weft;

int main() {
  manual_seed(0);
  nn::Sequential model(nn::Linear(8, 32), nn::ReLU(), nn::Linear(32, 3));
  optim::Adam opt(model->parameters(), optim::AdamOptions(1e-2));
  auto step = [&](const Tensor& x, const Tensor& y) { // plain eager code: runs op by op
    Tensor loss = nn::functional::cross_entropy(model(x), y);
    loss.backward();
    opt.step();
    opt.zero_grad();
    return loss;
  };
  Tensor x = randn({64, 8}), y = randint(0, 3, {64});
  step(x, y); // the first step makes Adam's state, so the checkpoint below holds all of it

  Checkpoint checkpoint; // what a run needs to continue; add the loader and the random stream
  checkpoint.set("model", model->state_dict()).set("optimizer", opt.state_dict());
  checkpoint.save("first.safetensors");
  float eager[5], compiled[5];
  for (float& loss : eager)
    loss = step(x, y).item<float>();

  checkpoint = Checkpoint::load("first.safetensors"); // back to where the eager steps began
  model->load_state_dict(checkpoint.get("model"));
  opt.load_state_dict(checkpoint.get("optimizer"));
  auto compiledStep = compile(step); // traced on its first call, then run as an optimized graph
  for (float& loss : compiled)
    loss = compiledStep(x, y).item<float>();

  bool agree = true; // generated kernels may add in another order than eager: allow 1e-4
  for (int i = 0; i < 5; ++i) {
    std::printf("step %d: eager loss %.6f, compiled %.6f\n", i + 2, eager[i], compiled[i]);
    agree = agree && std::abs(eager[i] - compiled[i]) <= 1e-4f * eager[i];
  }
  return agree ? 0 : 1;
}
