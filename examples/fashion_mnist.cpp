// The main example: a small CNN trained on Fashion-MNIST (Debian's dataset-fashion-mnist) with a
// compiled train step (forward, backward, AdamW and zero_grad traced once into one executable),
// evaluated on the test set after every epoch; writes a checkpoint (safetensors), an SVG plot of
// the training loss every 20 steps and the test accuracy per epoch, and the trained model exported
// for deployment (an artifact the runtime alone runs: weft-run, weft_rt.h, examples/serve).
#include "ExampleUtil.h"

#include <weft/Onnx.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

using namespace weft;

namespace {

struct Args {
  int epochs = 5;
  bool eager = false;
  bool augment = false;
  int64_t width = 1;
  std::string data = "/usr/share/datasets/fashion-mnist";
  std::string out = "fashion_mnist";
  int64_t batch = 128;
  double lr = 3e-3;
  int64_t images = 0; // train and test on the first N images of each set (0: all)
};

const char* kUsage =
    "usage: fashion_mnist [--epochs N] [--augment] [--width N] [--device D] [--eager]\n"
    "                     [--data DIR] [--out PREFIX] [--batch N] [--lr X] [--images N]\n"
    "Trains a CNN on Fashion-MNIST with a compiled train step and prints the test accuracy.\n"
    "  --epochs N    epochs to train (default 5: 91.8%, 2.5 minutes on 2 cores)\n"
    "  --augment     random 2-pixel shifts and mirror images of the training images\n"
    "  --width N     multiplies the model's channels and hidden units (default 1)\n"
    "                (the longer run: --epochs 20 --width 2 --augment)\n"
    "  --device D    where to train: cpu, or vulkan (vulkan:1, ...)\n"
    "  --eager       run the train step eagerly instead of compiled\n"
    "  --data DIR    the dataset (default /usr/share/datasets/fashion-mnist)\n"
    "  --out PREFIX  writes PREFIX.safetensors (checkpoint), PREFIX.svg (loss and accuracy)\n"
    "                PREFIX.weft (the model for deployment, batches of 1 to 64 images) and\n"
    "                PREFIX.onnx (the model as ONNX, any batch)\n"
    "  --images N    only the first N images of each set (a quick run)\n";

/// Two conv-BN-ReLU-pool stages and a two-layer head; `width` multiplies every layer's size.
nn::Sequential makeModel(int64_t width) {
  int64_t c1 = 16 * width, c2 = 32 * width, hidden = 128 * width;
  return nn::Sequential(
      nn::Conv2d(nn::Conv2dOptions(1, c1, 3).padding(1).bias(false)), nn::BatchNorm2d(c1),
      nn::ReLU(), nn::MaxPool2d(2), nn::Conv2d(nn::Conv2dOptions(c1, c2, 3).padding(1).bias(false)),
      nn::BatchNorm2d(c2), nn::ReLU(), nn::MaxPool2d(2), nn::Flatten(),
      nn::Linear(c2 * 7 * 7, hidden), nn::ReLU(), nn::Dropout(0.2), nn::Linear(hidden, 10));
}

/// Test accuracy in percent, evaluated in batches with the model in eval mode.
double evaluate(nn::Sequential& model, data::DataLoader& test, const Device& device) {
  model->eval();
  NoGradGuard guard;
  int64_t correct = 0, total = 0;
  for (data::Example<>& b : test) {
    correct +=
        (model(b.data.to(device)).argmax(1) == b.target.to(device)).sum().item<int64_t>();
    total += b.target.size(0);
  }
  model->train();
  return 100.0 * static_cast<double>(correct) / static_cast<double>(total);
}

/// Points of one curve.
struct Curve {
  std::vector<double> x, y;
};

/// The training loss as plotted: at each logged step, the mean loss of the steps since the last.
struct LossCurve : Curve {
  double sum = 0;
  size_t count = 0;
  void add(double loss) {
    sum += loss;
    ++count;
  }
  void log(size_t step) {
    x.push_back(static_cast<double>(step));
    y.push_back(sum / static_cast<double>(count));
    sum = 0;
    count = 0;
  }
};

/// An axis's range and the spacing of its ticks.
struct Axis {
  double lo, hi, step;
};

/// A round tick step (1, 2 or 5 times a power of ten; whole if `whole`) giving about `ticks`
/// intervals, and the range widened to whole steps around [lo, hi].
Axis niceAxis(double lo, double hi, int ticks, bool whole) {
  if (hi - lo < 1e-9) { // one point, or a flat curve: a small range around it
    double pad = std::max(std::abs(lo) * 0.01, whole ? 1.0 : 1e-3);
    lo -= pad;
    hi += pad;
  }
  double raw = (hi - lo) / ticks, magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double ratio = raw / magnitude;
  double step = (ratio <= 1 ? 1 : ratio <= 2 ? 2 : ratio <= 5 ? 5 : 10) * magnitude;
  if (whole) step = std::max(step, 1.0);
  return {std::floor(lo / step) * step, std::ceil(hi / step) * step, step};
}

/// A tick's label with as many decimals as the step needs (0.2 -> one, 0.05 -> two).
std::string tickLabel(double value, double step) {
  int decimals = step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", decimals, std::abs(value) < step * 1e-6 ? 0.0 : value);
  return text;
}

/// Where a panel lies in the SVG and what it is called.
struct Panel {
  double left, top, width, height;
  const char *title, *xLabel, *yLabel, *color;
};

/// One line chart: title, axes with ticks, tick labels and names, a light grid, and the curve's
/// points joined by lines. The x axis counts from 0 in whole numbers (steps, epochs).
void writePanel(std::ostream& f, const Panel& p, const Curve& c) {
  Axis ax = niceAxis(0, *std::max_element(c.x.begin(), c.x.end()), 6, true);
  Axis ay = niceAxis(*std::min_element(c.y.begin(), c.y.end()),
                     *std::max_element(c.y.begin(), c.y.end()), 5, false);
  double x0 = p.left + 64, y0 = p.top + p.height - 48, w = p.width - 94, h = p.height - 90;
  auto px = [&](double x) { return x0 + w * (x - ax.lo) / (ax.hi - ax.lo); };
  auto py = [&](double y) { return y0 - h * (y - ay.lo) / (ay.hi - ay.lo); };
  f << "<text x='" << x0 + w / 2 << "' y='" << p.top + 22
    << "' text-anchor='middle' font-size='15' font-weight='bold'>" << p.title << "</text>\n";
  for (double t = ax.lo; t <= ax.hi + ax.step / 2; t += ax.step)
    f << "<line x1='" << px(t) << "' y1='" << y0 - h << "' x2='" << px(t) << "' y2='" << y0 + 5
      << "' stroke='#ddd'/><line x1='" << px(t) << "' y1='" << y0 << "' x2='" << px(t) << "' y2='"
      << y0 + 5 << "' stroke='#000'/><text x='" << px(t) << "' y='" << y0 + 19
      << "' text-anchor='middle'>" << tickLabel(t, ax.step) << "</text>\n";
  for (double t = ay.lo; t <= ay.hi + ay.step / 2; t += ay.step)
    f << "<line x1='" << x0 - 5 << "' y1='" << py(t) << "' x2='" << x0 + w << "' y2='" << py(t)
      << "' stroke='#ddd'/><line x1='" << x0 - 5 << "' y1='" << py(t) << "' x2='" << x0 << "' y2='"
      << py(t) << "' stroke='#000'/><text x='" << x0 - 8 << "' y='" << py(t) + 4
      << "' text-anchor='end'>" << tickLabel(t, ay.step) << "</text>\n";
  f << "<polyline fill='none' stroke='#000' points='" << x0 << "," << y0 - h << " " << x0 << ","
    << y0 << " " << x0 + w << "," << y0 << "'/>\n<text x='" << x0 + w / 2 << "' y='" << y0 + 38
    << "' text-anchor='middle'>" << p.xLabel << "</text>\n<text transform='translate("
    << p.left + 16 << "," << y0 - h / 2 << ") rotate(-90)' text-anchor='middle'>" << p.yLabel
    << "</text>\n<polyline fill='none' stroke-width='1.5' stroke='" << p.color << "' points='";
  for (size_t i = 0; i < c.x.size(); ++i)
    f << px(c.x[i]) << "," << py(c.y[i]) << " ";
  f << "'/>\n";
  double radius = c.x.size() > 100 ? 1.2 : 2.5; // hundreds of points would hide the line
  for (size_t i = 0; i < c.x.size(); ++i) {
    f << "<circle cx='" << px(c.x[i]) << "' cy='" << py(c.y[i]) << "' r='" << radius << "' fill='"
      << p.color << "'/>\n";
    if (c.x.size() <= 12) // few points (epochs): each carries its value
      f << "<text x='" << px(c.x[i]) << "' y='" << py(c.y[i]) - 8
        << "' text-anchor='middle' stroke='white' stroke-width='3' paint-order='stroke' fill='"
        << p.color << "'>" << tickLabel(c.y[i], 0.01) << "</text>\n";
  }
}

/// What ran, in one line: the plot's caption.
std::string describe(const Args& args) {
  char text[160];
  std::snprintf(text, sizeof text,
                "weft fashion_mnist: CNN of width %lld, batch %lld, AdamW lr %g (one-cycle), "
                "%s train step%s",
                static_cast<long long>(args.width), static_cast<long long>(args.batch), args.lr,
                args.eager ? "eager" : "compiled", args.augment ? ", augmented images" : "");
  return text;
}

/// Training loss per logged step and test accuracy per epoch, side by side in one SVG under a
/// caption that says what ran.
void writePlot(const std::string& path, const std::string& caption, const Curve& loss,
               const Curve& accuracy, int stepsPerLog) {
  std::ofstream f(path);
  f << "<svg xmlns='http://www.w3.org/2000/svg' width='960' height='400' font-family='sans-serif' "
       "font-size='12'>\n<rect width='960' height='400' fill='white'/>\n<text x='480' y='18' "
       "text-anchor='middle' fill='#444'>"
    << caption << "</text>\n";
  std::string lossTitle = "Training loss (mean per " + std::to_string(stepsPerLog) + " steps)";
  writePanel(f, {0, 20, 480, 380, lossTitle.c_str(), "step", "cross-entropy loss", "#c03"}, loss);
  writePanel(f,
             {480, 20, 480, 380, "Test accuracy after each epoch", "epoch", "accuracy (%)", "#06c"},
             accuracy);
  f << "</svg>\n";
}

int run(int argc, char** argv) {
  Args args;
  std::string device = "cpu";
  examples::Options opts("fashion_mnist", kUsage);
  opts.value("--epochs", args.epochs)
      .flag("--eager", args.eager)
      .flag("--augment", args.augment)
      .value("--width", args.width)
      .value("--device", device)
      .value("--data", args.data)
      .value("--out", args.out)
      .value("--batch", args.batch)
      .value("--lr", args.lr)
      .value("--images", args.images)
      .parse(argc, argv);
  const Device on = opts.device(device);
  if (args.epochs < 1 || args.batch < 1 || args.width < 1 || args.images < 0)
    opts.fail("--epochs, --batch and --width must be >= 1, --images >= 0");
  manual_seed(0);
  // The first --images images of a set (all of them by default).
  auto firstImages = [&](const data::FashionMNIST& set) {
    const int64_t all = set.images().size(0);
    const int64_t n = args.images > 0 ? std::min(args.images, all) : all;
    return std::make_shared<data::TensorDataset>(set.images().narrow(0, 0, n),
                                                 set.targets().narrow(0, 0, n));
  };
  auto train = firstImages(data::FashionMNIST(args.data, true));
  auto testSet = firstImages(data::FashionMNIST(args.data, false));
  data::DataLoaderOptions trainOptions = data::DataLoaderOptions(static_cast<size_t>(args.batch))
                                             .shuffle()
                                             .seed(1)
                                             .drop_last()
                                             .workers(1);
  if (args.augment) // shifts of up to 2 pixels and mirror images: less overfitting in long runs
    trainOptions.transform(data::RandomCrop(28, 2)).transform(data::RandomHorizontalFlip());
  data::DataLoader loader(train, trainOptions.transform(data::Normalize({0.2860}, {0.3530})));
  data::DataLoader test(testSet, data::DataLoaderOptions(1000).workers(1).transform(
                                     data::Normalize({0.2860}, {0.3530})));
  nn::Sequential model = makeModel(args.width);
  model->to(on);
  optim::AdamW opt(model->parameters(), optim::AdamWOptions(args.lr).weight_decay(1e-4));
  opt.init_state(); // its state made now: the compiled step reads it from its first trace
  optim::OneCycleLR schedule(opt, args.lr, args.epochs * static_cast<int64_t>(loader.size()));

  auto step = [&](const Tensor& x, const Tensor& y) {
    Tensor loss = nn::functional::cross_entropy(model(x), y);
    loss.backward();
    opt.step();
    opt.zero_grad();
    return loss;
  };
  // On a GPU the compiled step's ops run as the device's shaders, one per op, from one plan.
  CompiledFn<Tensor(const Tensor&, const Tensor&)> compiled =
      compile(step, CompileOptions().device(on));

  std::printf("weft: Fashion-MNIST, %zu train / %zu test images, %s train step on %s\n",
              train->size().value(), testSet->size().value(), args.eager ? "eager" : "compiled",
              on.is_cpu() ? ("cpu, " + std::to_string(getNumThreads()) + " threads").c_str()
                          : hal::device(on).limits().name.c_str());
  const int kLogEvery = 20; // steps between progress lines and plotted loss points
  LossCurve losses;
  Curve accuracies;
  double accuracy = 0;
  for (int epoch = 1; epoch <= args.epochs; ++epoch) {
    examples::Stopwatch clock;
    double sum = 0;
    size_t batches = 0;
    for (data::Example<>& b : loader) {
      const Tensor x = b.data.to(on), y = b.target.to(on);
      Tensor loss = args.eager ? step(x, y) : compiled(x, y);
      schedule.step();
      double value = loss.item<double>();
      sum += value;
      losses.add(value);
      if (++batches % kLogEvery != 0 && batches != loader.size()) continue;
      losses.log(static_cast<size_t>(epoch - 1) * loader.size() + batches);
      examples::progress("epoch " + std::to_string(epoch), batches, loader.size(),
                         sum / static_cast<double>(batches),
                         static_cast<double>(batches * static_cast<size_t>(args.batch)) /
                             clock.seconds(),
                         "samples");
    }
    double secs = clock.seconds();
    accuracy = evaluate(model, test, on);
    accuracies.x.push_back(epoch);
    accuracies.y.push_back(accuracy);
    std::printf("\nepoch %d: train loss %.4f, test accuracy %.2f%%, %.1f s\n", epoch,
                sum / static_cast<double>(batches), accuracy, secs);
  }
  if (!args.eager)
    std::printf("compiled step: %zu compilations, last took %.0f ms\n",
                compiled.compiled().num_compiled(), compiled.compiled().compile_ms());
  // Everything a run needs to continue: see weft/Checkpoint.h.
  Checkpoint()
      .set("model", model->state_dict())
      .set("optimizer", opt.state_dict())
      .set("scheduler", schedule.state_dict())
      .set(loader)
      .set(default_generator())
      .save(args.out + ".safetensors", {{"epochs", std::to_string(args.epochs)}});
  writePlot(args.out + ".svg", describe(args), losses, accuracies, kLogEvery);
  // For deployment: the trained model's inference, for batches of 1 to 64 images, which the
  // runtime alone runs (weft-run, weft_rt.h, examples/serve).
  model->to(Device::cpu());
  examples::Stopwatch exportClock;
  export_model(model, {zeros({1, 1, 28, 28})}, args.out + ".weft",
               ExportOptions()
                   .dynamic_dim(0)
                   .buckets({1, 2, 4, 8, 16, 32, 64})
                   .input_names({"image"})
                   .output_names({"logits"}));
  // And as ONNX, for other runtimes (onnxruntime, TensorRT), for any number of images.
  export_onnx(model, {zeros({1, 1, 28, 28})}, args.out + ".onnx",
              OnnxOptions().dynamic_dim(0).input_names({"image"}).output_names({"logits"}));
  std::printf("wrote %s.safetensors, %s.svg, %s.weft and %s.onnx (exported in %.1f s)\n",
              args.out.c_str(), args.out.c_str(), args.out.c_str(), args.out.c_str(),
              exportClock.seconds());
  std::printf("test accuracy: %.2f%%\n", accuracy);
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  return examples::guardedMain([&] { return run(argc, argv); });
}
