// A recurrent network on the adding problem (Hochreiter & Schmidhuber, 1997): each input is a
// sequence of (value, marker) pairs with values uniform in [0, 1) and exactly two markers set;
// the target is the sum of the two marked values. Predicting the mean scores an MSE of 1/6
// (0.1667); the task is solved when the test MSE is below 0.01, which needs the network to carry
// information across the whole sequence. A GRU or LSTM with a compiled train step.
#include "ExampleUtil.h"

using namespace weft;

namespace {

const char* kUsage =
    "usage: sequence_rnn [--cell gru|lstm] [--length T] [--epochs N] [--eager] [--device D]\n"
    "                    [--hidden N] [--batch N] [--lr X]\n"
    "Trains a GRU (or LSTM) on the adding problem and prints the test MSE against 1/6, the\n"
    "error of predicting the mean; below 0.01 the task is solved.\n"
    "  --cell C      gru (default: solves it in 3 epochs) or lstm (slower to leave the plateau)\n"
    "  --length T    sequence length (default 40)\n"
    "  --epochs N    passes over the 20,000 training sequences (default 5)\n"
    "  --eager       run the train step eagerly instead of compiled\n"
    "  --device D    where to train: cpu, or vulkan (vulkan:1, ...)\n"
    "  --hidden N    hidden size (default 64); --batch N (default 64); --lr X (default 3e-3)\n";

struct Args {
  std::string cell = "gru", device = "cpu";
  int64_t length = 40, epochs = 5, hidden = 64, batch = 64;
  double lr = 3e-3;
  bool eager = false;
};

/// `n` sequences of length `t`: inputs (n, t, 2) and targets (n, 1).
data::TensorDataset addingProblem(int64_t n, int64_t t, Generator& gen) {
  Tensor values = rand({n, t}, kFloat32, gen);
  // Two distinct marked positions per sequence: one in each half, as in the original task.
  Tensor first = randint(0, t / 2, {n, 1}, kInt64, gen);
  Tensor second = randint(t / 2, t, {n, 1}, kInt64, gen);
  Tensor markers = zeros({n, t}).scatter(1, first, ones({n, 1})).scatter(1, second, ones({n, 1}));
  Tensor x = stack({values, markers}, 2);
  Tensor y = (values * markers).sum({1}, true);
  return data::TensorDataset(x, y);
}

/// A recurrent layer read at the last step, then a linear head.
class AdderImpl : public nn::Module {
public:
  explicit AdderImpl(const Args& a) : lstm(a.cell == "lstm") {
    auto options = nn::RecurrentOptions(2, a.hidden).batch_first(true);
    if (lstm)
      rnn = register_module("rnn", nn::LSTM(options));
    else
      gru = register_module("rnn", nn::GRU(options));
    head = register_module("head", nn::Linear(a.hidden, 1));
  }
  Tensor forward(const Tensor& x) {
    Tensor y = lstm ? std::get<0>(rnn(x)) : std::get<0>(gru(x));
    return head(y.select(1, -1));
  }
  bool lstm;
  nn::LSTM rnn = nullptr;
  nn::GRU gru = nullptr;
  nn::Linear head = nullptr;
};
WEFT_MODULE(Adder);

double testMse(Adder& model, data::DataLoader& test) {
  model->eval();
  NoGradGuard guard;
  double sum = 0;
  int64_t n = 0;
  for (data::Example<>& b : test) {
    const Device on = model->head->weight.device();
    sum += nn::functional::mse_loss(model(b.data.to(on)), b.target.to(on), nn::kSum)
               .item<double>();
    n += b.target.size(0);
  }
  model->train();
  return sum / static_cast<double>(n);
}

int run(int argc, char** argv) {
  Args a;
  examples::Options opts("sequence_rnn", kUsage);
  opts.value("--cell", a.cell)
      .value("--length", a.length)
      .value("--epochs", a.epochs)
      .flag("--eager", a.eager)
      .value("--device", a.device)
      .value("--hidden", a.hidden)
      .value("--batch", a.batch)
      .value("--lr", a.lr)
      .parse(argc, argv);
  if (a.cell != "lstm" && a.cell != "gru") opts.fail("--cell must be gru or lstm");
  const Device on = opts.device(a.device);
  if (a.length < 2 || a.epochs < 1 || a.hidden < 1 || a.batch < 1)
    opts.fail("--length must be >= 2, --epochs, --hidden and --batch >= 1");

  manual_seed(0);
  Generator gen(1);
  auto train = std::make_shared<data::TensorDataset>(addingProblem(20000, a.length, gen));
  auto test = std::make_shared<data::TensorDataset>(addingProblem(2000, a.length, gen));
  data::DataLoader loader(
      train, data::DataLoaderOptions(static_cast<size_t>(a.batch)).shuffle().seed(2).drop_last());
  data::DataLoader testLoader(test, data::DataLoaderOptions(500));

  Adder model(a);
  model->to(on);
  optim::Adam opt(model->parameters(), optim::AdamOptions(a.lr));
  optim::CosineAnnealingLR schedule(opt, a.epochs * static_cast<int64_t>(loader.size()), a.lr / 20);
  auto step = [&](const Tensor& x, const Tensor& y) {
    Tensor loss = nn::functional::mse_loss(model(x), y);
    loss.backward();
    nn::utils::clip_grad_norm_(model->parameters(), 1.0);
    opt.step();
    opt.zero_grad();
    return loss;
  };
  CompiledFn<Tensor(const Tensor&, const Tensor&)> compiled =
      compile(step, CompileOptions().device(on));

  std::printf("weft: adding problem, sequences of %lld, %s with %lld hidden units, %s train step, "
              "on %s\n",
              static_cast<long long>(a.length), a.cell.c_str(), static_cast<long long>(a.hidden),
              a.eager ? "eager" : "compiled",
              on.is_cpu() ? (std::to_string(getNumThreads()) + " threads").c_str()
                          : hal::device(on).limits().name.c_str());
  std::printf("predicting the mean: test MSE %.4f; solved below 0.0100\n", 1.0 / 6.0);
  double mse = 0;
  for (int64_t epoch = 1; epoch <= a.epochs; ++epoch) {
    examples::Stopwatch clock;
    double sum = 0;
    size_t batches = 0;
    for (data::Example<>& b : loader) {
      const Tensor x = b.data.to(on), y = b.target.to(on);
      Tensor loss = a.eager ? step(x, y) : compiled(x, y);
      schedule.step();
      sum += loss.item<double>();
      if (++batches % 20 == 0 || batches == loader.size())
        examples::progress("epoch " + std::to_string(epoch), batches, loader.size(),
                           sum / static_cast<double>(batches),
                           static_cast<double>(batches * static_cast<size_t>(a.batch)) /
                               clock.seconds(),
                           "sequences");
    }
    mse = testMse(model, testLoader);
    std::printf("\nepoch %lld: train MSE %.4f, test MSE %.4f, %.1f s\n",
                static_cast<long long>(epoch), sum / static_cast<double>(batches), mse,
                clock.seconds());
  }
  if (!a.eager)
    std::printf("compiled step: %zu compilations, last took %.0f ms\n",
                compiled.compiled().num_compiled(), compiled.compiled().compile_ms());
  std::printf("test MSE: %.4f (%s)\n", mse, mse < 0.01 ? "solved" : "not solved");
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  return examples::guardedMain([&] { return run(argc, argv); });
}
