// Random programs, compiled against eager: a seeded generator writes small programs over the tensor
// API (elementwise chains with broadcasting, reductions kept and dropped, softmax along any dim,
// matmuls, layer norms, transposes, slices, concatenations, in-place writes to intermediates,
// gathers, sorts, casts), and each runs eagerly and through compile(): without grad, with the
// gradients taken outside (eager autograd through the compiled backward), with the gradients taken
// inside (autograd::grad traced into the graph), and with a dynamic batch (three batch sizes of one
// bucket; a program that moves rows across the batch is an error then, which is fine). Programs
// may write their arguments in place (where no gradient is taken); the arguments after the call
// are compared too. What the
// fixed tests do not think of, this finds: a fusion, a pass or a kernel that computes another value
// than eager for some combination of ops, shapes and dtypes.
//
// Tolerance: a compiled program may sum in another order than eager (row kernels, split sums,
// generated GEMMs), and programs such as a layer norm of near-constant rows amplify rounding. So
// both the compiled and the eager result are compared with the same program run eagerly in float64
// (error: the largest absolute difference over the largest magnitude of the float64 result, at
// least 1), and the compiled error may be at most 30x the eager one plus 1e-5 in float32, 100x
// plus 1e-9 in float64: a wrong kernel is off by O(1), far beyond either.
#include "TestUtil.h"
#include "weft/weft.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

using namespace weft;

namespace {

struct Rng {
  std::mt19937_64 engine;
  explicit Rng(uint64_t seed) : engine(seed) {}
  int pick(int n) { return static_cast<int>(engine() % static_cast<uint64_t>(n)); }
  bool coin() { return pick(2) == 0; }
};

/// Whether `b` broadcasts to `a`'s shape (a binary op of the two has a's shape).
bool broadcastsTo(const Shape& b, const Shape& a) {
  if (b.size() > a.size()) return false;
  for (size_t i = 0; i < b.size(); ++i) {
    const int64_t x = a[a.size() - 1 - i], y = b[b.size() - 1 - i];
    if (y != x && y != 1) return false;
  }
  return true;
}

/// Whether `a` and `b` broadcast together.
bool broadcastable(const Shape& a, const Shape& b) {
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    const int64_t x = a[a.size() - 1 - i], y = b[b.size() - 1 - i];
    if (x != y && x != 1 && y != 1) return false;
  }
  return true;
}

/// One program of `seed`, over x [B, T, C], y [1, T, C] or [C], w [C, C + 3]: every step applies
/// an op to a value made so far. Its choices depend on the seed and on shapes only, so the traced
/// and the eager run make the same program (and a dynamic batch's sizes, where a choice depends on
/// the batch, make a different one, which compile() reports). `log` names the ops.
std::vector<Tensor> program(uint64_t seed, const Tensor& x, const Tensor& y, const Tensor& w,
                            std::string* log = nullptr) {
  Rng r(seed);
  std::vector<Tensor> pool = {x, y};
  auto note = [&](const std::string& s) {
    if (log != nullptr) *log += s + " ";
  };
  auto partnerOf = [&](const Tensor& a, bool sameShape) {
    std::vector<Tensor> ok;
    for (const Tensor& t : pool)
      if (sameShape ? broadcastsTo(t.sizes(), a.sizes()) : broadcastable(t.sizes(), a.sizes()))
        ok.push_back(t);
    return ok.empty() ? Tensor() : ok[static_cast<size_t>(r.pick(static_cast<int>(ok.size())))];
  };
  const int steps = 4 + r.pick(8);
  for (int s = 0; s < steps; ++s) {
    const Tensor a = pool[static_cast<size_t>(r.pick(static_cast<int>(pool.size())))];
    const auto rank = static_cast<int>(a.dim());
    const auto dimOf = [&] { return static_cast<int64_t>(r.pick(std::max(rank, 1))); };
    Tensor out = a;
    switch (r.pick(23)) {
    case 0: { // unary
      const char* names[] = {"tanh", "sigmoid", "relu", "gelu",       "exp",
                             "log",  "sqrt",    "sin",  "reciprocal", "neg"};
      const int k = r.pick(10);
      note(names[k]);
      switch (k) {
      case 0:
        out = a.tanh();
        break;
      case 1:
        out = a.sigmoid();
        break;
      case 2:
        out = a.relu();
        break;
      case 3:
        out = gelu(a, r.coin());
        break;
      case 4:
        out = (-a.abs()).exp();
        break;
      case 5:
        out = (a.abs() + 1).log();
        break;
      case 6:
        out = (a * a + 0.5).sqrt();
        break;
      case 7:
        out = a.sin();
        break;
      case 8:
        out = (a.abs() + 1).reciprocal();
        break;
      default:
        out = -a * 1.5;
        break;
      }
      break;
    }
    case 1:
    case 2: { // binary, broadcasting
      const Tensor b = partnerOf(a, false);
      const char* names[] = {"add", "sub", "mul", "div", "maximum", "where"};
      const int k = r.pick(6);
      note(names[k]);
      switch (k) {
      case 0:
        out = a + b;
        break;
      case 1:
        out = a - b;
        break;
      case 2:
        out = a * b;
        break;
      case 3:
        out = a / (b.abs() + 1);
        break;
      case 4:
        out = a.maximum(b);
        break;
      default:
        out = where(a > b, a, b * 0.5);
        break;
      }
      break;
    }
    case 3:
    case 4: { // reductions over some dims, kept or dropped
      if (rank == 0) break;
      Shape dims;
      for (int d = 0; d < rank; ++d)
        if (r.coin()) dims.push_back(r.coin() ? d : d - rank);
      if (dims.empty()) dims.push_back(rank - 1);
      const bool keep = r.pick(3) != 0;
      const int k = r.pick(3);
      note(std::string(k == 0   ? "sum"
                       : k == 1 ? "mean"
                                : "amax") +
           shapeString(dims) + (keep ? "k" : ""));
      out = k == 0 ? a.sum(dims, keep) : k == 1 ? a.mean(dims, keep) : a.amax(dims, keep);
      break;
    }
    case 5:
    case 6: { // softmax, the last dim more often
      if (rank == 0) break;
      const int64_t d = r.coin() ? -1 : dimOf();
      const bool log = r.coin();
      note(std::string(log ? "log_softmax" : "softmax") + std::to_string(d));
      out = log ? a.log_softmax(d) : a.softmax(d);
      break;
    }
    case 7:
    case 8: { // matmul by w, or of a by its own transpose (batched)
      if (rank >= 1 && a.size(-1) == w.size(0)) {
        note("matmul-w");
        out = matmul(a, w);
      } else if (rank >= 2) {
        note("matmul-aT");
        out = matmul(a, a.mT());
      }
      break;
    }
    case 9: { // layer norm (eps 0.1: near-constant rows do not amplify rounding)
      if (rank == 0) break;
      note("layer_norm");
      const Tensor m = a.mean({-1}, true), v = ((a - m) * (a - m)).mean({-1}, true);
      out = (a - m) / (v + 0.1).sqrt();
      break;
    }
    case 10: { // transpose (a strided view)
      if (rank < 2) break;
      const int64_t d0 = dimOf(), d1 = dimOf();
      note("transpose" + std::to_string(d0) + std::to_string(d1));
      out = a.transpose(d0, d1);
      break;
    }
    case 11: { // slice with a step, or narrow
      if (rank == 0) break;
      const int64_t d = dimOf();
      if (a.size(d) < 2) break;
      note("slice" + std::to_string(d));
      out = r.coin() ? a.slice(d, 0, std::nullopt, 2) : a.narrow(d, 1, a.size(d) - 1);
      break;
    }
    case 12: { // reshape
      note("flatten");
      out = rank < 2 ? a.reshape({-1}) : a.flatten(0, 1);
      break;
    }
    case 13: { // concatenation
      if (rank == 0) break;
      const int64_t d = dimOf();
      note("cat" + std::to_string(d));
      out = cat({a, a * 0.5}, d);
      break;
    }
    case 14: { // more elementwise
      const char* names[] = {"clamp", "pow", "square", "masked_fill", "clamp_min", "addcmul"};
      const int k = r.pick(6);
      note(names[k]);
      switch (k) {
      case 0:
        out = a.clamp(-0.5, 0.7);
        break;
      case 1:
        out = (a.abs() + 0.5).pow(1.5);
        break;
      case 2:
        out = a.square();
        break;
      case 3:
        out = a.masked_fill(a > 0.3, 0.25);
        break;
      case 4:
        out = a.clamp_min(0.1);
        break;
      default:
        out = a.addcmul(a, a.sigmoid(), 0.5);
        break;
      }
      break;
    }
    case 15: { // statistics along one dim
      if (rank == 0) break;
      const int64_t d = dimOf();
      const int k = r.pick(4);
      if (k == 0 && a.size(d) > 1) {
        note("var");
        out = a.var({d}, 1, r.coin());
      } else if (k == 1) {
        note("logsumexp");
        out = a.logsumexp({d}, r.coin());
      } else if (k == 2) {
        note("cumsum");
        out = a.cumsum(d);
      } else if (k == 3) {
        note("norm");
        out = a.norm(2, {d}, r.coin());
      }
      break;
    }
    case 16: { // broadcasting views
      const int k = r.pick(4);
      if (k == 0) {
        note("expand");
        Shape s = a.sizes();
        s.insert(s.begin(), 2);
        out = a.unsqueeze(0).expand(s) * 1.0;
      } else if (k == 1) {
        note("squeeze");
        out = a.squeeze();
      } else if (k == 2 && rank > 0) {
        note("flip");
        out = a.flip({dimOf()});
      } else if (rank > 0 && a.size(0) > 0) {
        note("select");
        out = a.select(0, a.size(0) - 1);
      }
      break;
    }
    case 17: { // in-place writes to an intermediate
      note("in-place");
      out = a * 1.25;
      out.mul_(0.5);
      if (Tensor b = partnerOf(out, true); b.defined()) out.add_(b);
      break;
    }
    case 18: { // argmax and gather
      if (rank == 0) break;
      note("gather");
      const int64_t d = dimOf();
      out = a.gather(d, a.argmax(d, true)) + a.amax({d}, true);
      break;
    }
    case 19: { // a cast and back
      note("cast");
      out = (a.to(kFloat32) * 0.75).to(a.dtype());
      break;
    }
    case 20: { // sorted values
      if (rank == 0) break;
      note("sort");
      out = a.sort(-1, r.coin()).first;
      break;
    }
    case 21: { // an in-place write to an argument (not one that requires grad: eager refuses)
      Tensor arg = r.coin() ? x : y;
      if (arg.requires_grad()) break;
      note("argument-write");
      if (r.coin())
        arg.mul_(0.75);
      else if (arg.dim() > 0 && arg.size(-1) > 1)
        arg.narrow(-1, 0, 1).fill_(0.5);
      out = arg * 1.0;
      break;
    }
    default: { // centre and scale by y (an affine norm's shape)
      if (rank == 0 || !broadcastsTo(y.sizes(), a.sizes())) break;
      note("affine");
      out = (a - a.mean({-1}, true)) * y + y;
      break;
    }
    }
    pool.push_back(out);
  }
  std::vector<Tensor> outs = {pool.back()};
  if (r.coin()) outs.push_back(pool[pool.size() / 2]);
  return outs;
}

/// How a program runs: without grad, with gradients outside or inside the function, or with a
/// dynamic batch (grad or not).
enum class Mode { NoGrad, GradOutside, GradInside, DynamicBatch };

/// The program's outputs, the inputs after it ran (it may write them) and, with gradients, the
/// gradient of each input (of sum(out * cot)).
struct Result {
  std::vector<Tensor> outs, grads, inputs;
};

using Program = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

/// The cotangent of output `o`: fixed values, the same wherever it is made.
Tensor cotangent(const Tensor& o) {
  return (arange(o.numel(), o.dtype()).reshape(o.sizes()) * 0.37).sin();
}

/// Runs `f` on fresh copies of `inputs` (requiring grad with `grad` or `inside`); with `grad`,
/// backward of sum(out * cotangent) outside.
Result evaluate(const Program& f, const std::vector<Tensor>& inputs, bool grad, bool inside) {
  std::vector<Tensor> in;
  for (const Tensor& t : inputs)
    in.push_back(t.detach().clone().requires_grad_(grad || inside));
  Result r;
  r.outs = f(in);
  if (grad) {
    Tensor loss = zeros({}, in[0].dtype());
    for (const Tensor& o : r.outs)
      loss = loss + (o * cotangent(o)).sum();
    loss.backward();
    for (const Tensor& t : in)
      r.grads.push_back(t.grad());
  }
  for (Tensor& o : r.outs)
    o = o.detach();
  for (const Tensor& t : in)
    r.inputs.push_back(t.detach());
  return r;
}

/// The program's outputs followed by the gradient of sum(out * cotangent) with respect to each
/// input, taken inside the function (Mode::GradInside).
std::vector<Tensor> withGradients(uint64_t seed, const std::vector<Tensor>& in) {
  std::vector<Tensor> outs = program(seed, in[0], in[1], in[2]);
  Tensor loss;
  for (const Tensor& o : outs) {
    Tensor term = (o * cotangent(o)).sum();
    loss = loss.defined() ? loss + term : term;
  }
  std::vector<Tensor> grads = autograd::grad({loss}, in, {}, std::nullopt, false, true);
  for (size_t i = 0; i < grads.size(); ++i)
    outs.push_back(grads[i].defined() ? grads[i] : zeros_like(in[i]));
  return outs;
}

/// The largest difference of `got` from `ref` over the largest magnitude of `ref` (at least 1);
/// NaN and infinities must match exactly. `where` says where the largest one is.
double relativeError(const Tensor& got, const Tensor& ref, std::string* where = nullptr) {
  if (!got.defined() || !ref.defined()) return got.defined() == ref.defined() ? 0 : HUGE_VAL;
  if (got.sizes() != ref.sizes()) return HUGE_VAL;
  const std::vector<double> g = got.to_vector<double>(), e = ref.to_vector<double>();
  double scale = 1, worst = 0;
  for (double v : e)
    if (std::isfinite(v)) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < g.size(); ++i) {
    double err = 0;
    if (std::isnan(g[i]) || std::isnan(e[i]))
      err = std::isnan(g[i]) && std::isnan(e[i]) ? 0 : HUGE_VAL;
    else if (std::isinf(g[i]) || std::isinf(e[i]))
      err = g[i] == e[i] ? 0 : HUGE_VAL;
    else
      err = std::abs(g[i] - e[i]) / scale;
    if (err > worst && where != nullptr)
      *where = "element " + std::to_string(i) + ": " + std::to_string(g[i]) + ", float64 eager " +
               std::to_string(e[i]);
    worst = std::max(worst, err);
  }
  return worst;
}

/// Runs programs [first, first + count) of `dtype` in every mode, at small random shapes or at
/// [16, 64, 128] (`large`: GEMMs big enough to be generated); adds to `kernels` how many
/// generated kernels their executables launch.
void checkPrograms(uint64_t first, uint64_t count, DType dtype, bool large, size_t& kernels) {
  for (uint64_t seed = first; seed < first + count; ++seed) {
    Rng r(seed * 7919 + 1);
    const auto mode = static_cast<Mode>(r.pick(4));
    // A dynamic batch of 7 or 8 rows (16 when large) is called with it and 1 and 2 rows fewer:
    // three sizes of one bucket, so the padded rows are masked on two of the calls. Its T and C
    // never equal a batch size (5 to 8): the program's choices depend on shapes (which values
    // broadcast together), and must not change with the batch.
    const bool dynamic = mode == Mode::DynamicBatch;
    const int64_t B = large     ? 16
                      : dynamic ? 7 + r.pick(2)
                                : 2 + r.pick(4),
                  T = large     ? 64
                      : dynamic ? 2 + r.pick(3)
                                : 1 + r.pick(9),
                  C = large     ? 128
                      : dynamic ? 9 + r.pick(4)
                                : 1 + r.pick(12);
    Generator g(seed);
    const Tensor x = randn({B, T, C}, kFloat64, g), w = randn({C, C + 3}, kFloat64, g);
    const Tensor y = r.coin() ? randn({1, T, C}, kFloat64, g) : randn({C}, kFloat64, g);
    const bool grad = mode == Mode::GradOutside || (mode == Mode::DynamicBatch && r.coin());
    Program eager = [seed](const std::vector<Tensor>& in) {
      return program(seed, in[0], in[1], in[2]);
    };
    if (mode == Mode::GradInside)
      eager = [seed](const std::vector<Tensor>& in) { return withGradients(seed, in); };
    CompileOptions options;
    if (mode == Mode::DynamicBatch) options.dynamic_dim(0, {0});
    auto compiled = compile(
        [&](const Tensor& a, const Tensor& b, const Tensor& c) {
          return eager({a, b, c});
        },
        options);
    const Program viaCompiled = [&](const std::vector<Tensor>& in) {
      return compiled(in[0], in[1], in[2]);
    };
    std::string ops;
    (void)program(seed, x.clone(), y.clone(), w, &ops); // it may write its arguments
    const std::string what = "program " + std::to_string(seed) + " (" +
                             std::string(dtypeName(dtype)) + ", B" + std::to_string(B) + " T" +
                             std::to_string(T) + " C" + std::to_string(C) + ", mode " +
                             std::to_string(static_cast<int>(mode)) + "): " + ops;
    // Without a dynamic batch: two calls of one executable. With one: 1 and 2 fewer rows too.
    const int calls = mode == Mode::DynamicBatch ? 3 : 2;
    for (int call = 0; call < calls; ++call) {
      std::vector<Tensor> in64 = {x, y, w};
      if (call > 0 && mode == Mode::DynamicBatch)
        in64[0] = x.narrow(0, 0, std::max<int64_t>(1, B - call));
      std::vector<Tensor> in;
      for (const Tensor& t : in64)
        in.push_back(t.to(dtype));
      const bool inside = mode == Mode::GradInside;
      const Result ref = evaluate(eager, in64, grad, inside);
      const Result same = evaluate(eager, in, grad, inside);
      Result got;
      try {
        got = evaluate(viaCompiled, in, grad, inside);
      } catch (const Error& e) {
        // A program that moves rows across the batch, or whose ops depend on the batch size,
        // cannot take a dynamic batch: compile() says so. Any other error is a failure.
        ASSERT_EQ(mode, Mode::DynamicBatch) << what << ": " << e.what();
        ASSERT_NE(std::string(e.what()).find("dynamic_dim"), std::string::npos) << e.what();
        break;
      }
      ASSERT_EQ(got.outs.size(), ref.outs.size()) << what;
      auto check = [&](const Tensor& c, const Tensor& e, const Tensor& f, const std::string& name) {
        std::string where;
        const double errCompiled = relativeError(c, f, &where), errEager = relativeError(e, f);
        const double allowed = dtype == kFloat64 ? 1e-9 + 100 * errEager : 1e-5 + 30 * errEager;
        EXPECT_LE(errCompiled, allowed)
            << what << ", call " << call << ", " << name << " at " << where << " (eager in "
            << dtypeName(dtype) << ": " << errEager << ")";
      };
      for (size_t i = 0; i < ref.outs.size(); ++i)
        check(got.outs[i], same.outs[i], ref.outs[i], "output " + std::to_string(i));
      for (size_t i = 0; i < ref.grads.size(); ++i)
        check(got.grads[i], same.grads[i], ref.grads[i], "gradient of input " + std::to_string(i));
      for (size_t i = 0; i < ref.inputs.size(); ++i)
        check(got.inputs[i], same.inputs[i], ref.inputs[i],
              "input " + std::to_string(i) + " after");
      if (::testing::Test::HasFailure()) return;
    }
    kernels += compiled.compiled().num_kernels();
  }
}

// Seeds and counts: each suite runs in a few seconds with the kernel cache cold. Every program
// compiles (a program of interpreter steps only is rare): the kernel counts check that generated
// code ran at all.

TEST(RandomPrograms, Float64CompiledEqualsEager) {
  size_t kernels = 0;
  checkPrograms(0, 150, kFloat64, false, kernels);
  EXPECT_GT(kernels, 50u);
}

TEST(RandomPrograms, Float32CompiledEqualsEager) {
  size_t kernels = 0;
  checkPrograms(1000, 150, kFloat32, false, kernels);
  EXPECT_GT(kernels, 50u);
}

TEST(RandomPrograms, LargeFloat32WithGeneratedGemmsEqualsEager) {
  setenv("WEFT_GEMM", "generated", 1); // every float32 GEMM large enough runs generated code
  size_t kernels = 0;
  checkPrograms(2000, 40, kFloat32, true, kernels);
  unsetenv("WEFT_GEMM");
  EXPECT_GT(kernels, 10u);
}

} // namespace
