// A small GPT-like character model trained on the fortunes that Debian's fortunes-min ships:
// token and position embeddings, pre-norm transformer blocks with causal self-attention, and a
// byte-level head, trained with a compiled train step (forward, backward, AdamW). It prints the
// unigram entropy of the text (what a model that ignores context can reach) next to its training
// and validation loss, and samples text as it learns.
#include "ExampleUtil.h"

#include <cmath>

using namespace weft;

namespace {

const char* kUsage =
    "usage: char_transformer [--steps N] [--eager] [--device D] [--corpus FILE]...\n"
    "                        [--block N] [--batch N] [--dim N] [--layers N] [--heads N] [--lr X]\n"
    "                        [--sample N]\n"
    "Trains a GPT-like character model on text files (default: the fortunes of fortunes-min) and\n"
    "prints its loss against the unigram entropy, with samples as it learns.\n"
    "  --steps N     train steps (default 1000, about 5 minutes on 2 cores)\n"
    "  --eager       run the train step eagerly instead of compiled\n"
    "  --device D    where to train: cpu, or vulkan (vulkan:1, ...)\n"
    "  --corpus F    a text file (repeatable; default /usr/share/games/fortunes/{fortunes,\n"
    "                literature,riddles})\n"
    "  --block N     context length in bytes (default 64)\n"
    "  --batch N     sequences per step (default 32)\n"
    "  --dim N       model width (default 128); --layers N (default 3); --heads N (default 4)\n"
    "  --lr X        peak learning rate (default 2e-3)\n"
    "  --sample N    bytes sampled at each report (default 120)\n";

struct Args {
  int64_t steps = 1000, block = 64, batch = 32, dim = 128, layers = 3, heads = 4, sample = 120;
  double lr = 2e-3;
  bool eager = false;
  std::string device = "cpu";
};

/// Token and position embeddings, pre-norm transformer blocks with a causal mask, a final norm
/// and a linear head over the 256 byte values.
class GptImpl : public nn::Module {
public:
  explicit GptImpl(const Args& a) : block(a.block) {
    tok = register_module("tok", nn::Embedding(256, a.dim));
    pos = register_module("pos", nn::Embedding(a.block, a.dim));
    for (int64_t i = 0; i < a.layers; ++i) {
      layers.emplace_back(nn::TransformerEncoderLayerOptions(a.dim, a.heads)
                              .dim_feedforward(4 * a.dim)
                              .dropout(0.1)
                              .activation("gelu")
                              .batch_first(true)
                              .norm_first(true));
      blocks->push_back(layers.back());
    }
    register_module("blocks", blocks);
    norm = register_module("norm", nn::LayerNorm(nn::LayerNormOptions({a.dim})));
    head = register_module("head", nn::Linear(a.dim, 256));
  }
  /// Byte indices (batch, t <= block) to logits (batch, t, 256).
  Tensor forward(const Tensor& idx) {
    int64_t t = idx.size(1);
    Tensor x = tok(idx) + pos(arange(t, TensorOptions(kInt64).device(idx.device())));
    for (nn::TransformerEncoderLayer& layer : layers)
      x = layer->forward(x, {}, {}, /*is_causal=*/true);
    return head(norm(x));
  }
  int64_t block;
  nn::Embedding tok = nullptr, pos = nullptr;
  nn::ModuleList blocks;
  std::vector<nn::TransformerEncoderLayer> layers; // the blocks, typed
  nn::LayerNorm norm = nullptr;
  nn::Linear head = nullptr;
};
WEFT_MODULE(Gpt);

/// Entropy in nats of the byte frequencies of `tokens`: the loss of the best context-free model.
double unigramEntropy(const Tensor& tokens) {
  std::vector<double> count(256, 0.0);
  for (int64_t b : tokens.to(kInt64).to_vector<int64_t>())
    count[static_cast<size_t>(b)] += 1;
  double n = static_cast<double>(tokens.numel()), h = 0;
  for (double c : count)
    if (c > 0) h -= c / n * std::log(c / n);
  return h;
}

/// Mean cross-entropy over `batches` batches of the validation loader, in eval mode.
double validate(Gpt& model, data::DataLoader& loader, int64_t batches) {
  model->eval();
  NoGradGuard guard;
  double sum = 0;
  int64_t n = 0;
  for (data::Example<>& b : loader) {
    const Device on = model->head->weight.device();
    sum += nn::functional::cross_entropy(model(b.data.to(on)).flatten(0, 1),
                                         b.target.to(on).flatten())
               .item<double>();
    if (++n == batches) break;
  }
  model->train();
  return sum / static_cast<double>(std::max<int64_t>(n, 1));
}

/// `length` bytes sampled after `prompt` at temperature 0.8.
std::string sample(Gpt& model, const std::string& prompt, int64_t length, Generator& gen) {
  model->eval();
  NoGradGuard guard;
  std::vector<int64_t> ids(prompt.begin(), prompt.end());
  for (int64_t i = 0; i < length; ++i) {
    size_t from = ids.size() > static_cast<size_t>(model->block) ? ids.size() - model->block : 0;
    std::vector<int64_t> ctx(ids.begin() + static_cast<std::ptrdiff_t>(from), ids.end());
    Tensor logits = model(from_vector(ctx, {1, static_cast<int64_t>(ctx.size())})
                              .to(model->head->weight.device()))
                        .select(1, static_cast<int64_t>(ctx.size()) - 1)
                        .cpu()
                        .to(kFloat64);
    std::vector<double> p = (logits * (1.0 / 0.8)).softmax(-1).to_vector<double>();
    double u = rand({}, kFloat64, gen).item<double>(), acc = 0;
    int64_t next = 255;
    for (size_t k = 0; k < p.size(); ++k)
      if ((acc += p[k]) >= u) {
        next = static_cast<int64_t>(k);
        break;
      }
    ids.push_back(next);
  }
  model->train();
  std::string text(ids.begin(), ids.end());
  for (char& c : text)
    if (c == '\n' || c == '\t') c = ' ';
  return text;
}

int run(int argc, char** argv) {
  Args a;
  std::vector<std::string> corpus;
  examples::Options opts("char_transformer", kUsage);
  opts.value("--steps", a.steps)
      .flag("--eager", a.eager)
      .value("--device", a.device)
      .value("--block", a.block)
      .value("--batch", a.batch)
      .value("--dim", a.dim)
      .value("--layers", a.layers)
      .value("--heads", a.heads)
      .value("--lr", a.lr)
      .value("--sample", a.sample)
      .values("--corpus", corpus)
      .parse(argc, argv);
  const Device on = opts.device(a.device);
  if (a.steps < 1 || a.block < 2 || a.batch < 1 || a.dim < 1 || a.layers < 1 || a.heads < 1 ||
      a.sample < 0)
    opts.fail("--steps, --batch, --dim, --layers and --heads must be >= 1, --block >= 2, "
              "--sample >= 0");
  if (corpus.empty())
    for (const char* f : {"fortunes", "literature", "riddles"})
      corpus.push_back(std::string("/usr/share/games/fortunes/") + f);

  manual_seed(0);
  Tensor text = data::read_bytes(corpus);
  int64_t n = text.numel(), split = n * 9 / 10;
  WEFT_CHECK(split > 4 * (a.block + 1), Value, "char_transformer: the corpus (", n,
             " bytes) is too small for --block ", a.block);
  Tensor trainText = text.narrow(0, 0, split), valText = text.narrow(0, split, n - split);
  double entropy = unigramEntropy(trainText);
  // Every window start is an example: random windows, as nanoGPT draws them.
  auto trainSet = std::make_shared<data::TextDataset>(trainText, a.block, 1);
  auto valSet = std::make_shared<data::TextDataset>(valText, a.block, a.block);
  data::DataLoader loader(trainSet, data::DataLoaderOptions(static_cast<size_t>(a.batch))
                                        .shuffle()
                                        .seed(1)
                                        .drop_last()
                                        .workers(1));
  data::DataLoader val(valSet, data::DataLoaderOptions(static_cast<size_t>(a.batch)));

  Gpt model(a);
  model->to(on);
  optim::AdamW opt(model->parameters(), optim::AdamWOptions(a.lr).weight_decay(0.01));
  optim::OneCycleLR schedule(opt, a.lr, a.steps, 0.1);
  auto step = [&](const Tensor& x, const Tensor& y) {
    Tensor loss = nn::functional::cross_entropy(model(x).flatten(0, 1), y.flatten());
    loss.backward();
    nn::utils::clip_grad_norm_(model->parameters(), 1.0);
    opt.step();
    opt.zero_grad();
    return loss;
  };
  CompiledFn<Tensor(const Tensor&, const Tensor&)> compiled =
      compile(step, CompileOptions().device(on));

  int64_t params = 0;
  for (const Tensor& p : model->parameters())
    params += p.numel();
  std::printf("weft: char transformer, %lld parameters, %lld train / %lld validation bytes, %s "
              "train step on %s\n",
              static_cast<long long>(params), static_cast<long long>(split),
              static_cast<long long>(n - split), a.eager ? "eager" : "compiled",
              on.is_cpu() ? (std::to_string(getNumThreads()) + " threads").c_str()
                          : hal::device(on).limits().name.c_str());
  std::printf("unigram entropy of the training text: %.4f nats/byte (the loss of a model that "
              "ignores context)\n",
              entropy);
  Generator sampler(7);
  examples::Stopwatch clock;
  double recent = 0, lastVal = 0;
  int64_t done = 0, recentCount = 0, every = std::max<int64_t>(a.steps / 5, 1);
  while (done < a.steps) {
    for (data::Example<>& b : loader) {
      const Tensor x = b.data.to(on), y = b.target.to(on);
      Tensor loss = a.eager ? step(x, y) : compiled(x, y);
      schedule.step();
      recent += loss.item<double>();
      ++recentCount;
      ++done;
      if (done % 10 == 0)
        examples::progress("train", static_cast<size_t>(done), static_cast<size_t>(a.steps),
                           recent / static_cast<double>(recentCount),
                           static_cast<double>(done * a.batch * a.block) / clock.seconds(),
                           "tokens");
      if (done % every == 0 || done == a.steps) {
        lastVal = validate(model, val, 20);
        std::printf("\nstep %lld: train loss %.4f, validation loss %.4f, unigram entropy %.4f "
                    "(%.0f s)\n  sample: %s\n",
                    static_cast<long long>(done), recent / static_cast<double>(recentCount),
                    lastVal, entropy, clock.seconds(), sample(model, "The ", a.sample, sampler).c_str());
        recent = 0;
        recentCount = 0;
      }
      if (done == a.steps) break;
    }
  }
  if (!a.eager)
    std::printf("compiled step: %zu compilations, last took %.0f ms\n",
                compiled.compiled().num_compiled(), compiled.compiled().compile_ms());
  std::printf("validation loss: %.4f nats/byte, unigram entropy %.4f (%.0f%% of it)\n", lastVal,
              entropy, 100.0 * lastVal / entropy);
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  return examples::guardedMain([&] { return run(argc, argv); });
}
