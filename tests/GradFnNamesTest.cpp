// grad_fn names as PyTorch 1.13 gives them (reference/grad_fn_names.txt, made once by
// reference/grad_fn_names.py): a composite's result shows the composite's name (mean() gives
// "MeanBackward0", though its last primitive is a division).
#include "TestUtil.h"

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

namespace weft::test {
namespace {

namespace F = nn::functional;

/// The cases, named and computed as in reference/grad_fn_names.py.
std::map<std::string, std::function<Tensor()>> cases() {
  Generator g(0);
  Tensor x = randn({2, 3}, {}, g).requires_grad_(), m = randn({3, 4}, {}, g).requires_grad_();
  Tensor b = randn({4}, {}, g).requires_grad_(), v = randn({3}, {}, g).requires_grad_();
  Tensor img = randn({1, 2, 4, 4}, {}, g).requires_grad_();
  Tensor w = randn({3, 2, 3, 3}, {}, g).requires_grad_();
  Tensor b3 = randn({2, 3, 4}, {}, g).requires_grad_();
  Tensor t = tensor({0, 2});
  return {
      {"add", [=] { return x + x; }},
      {"add_scalar", [=] { return x + 1; }},
      {"sub", [=] { return x - x; }},
      {"rsub_scalar", [=] { return 1 - x; }},
      {"mul", [=] { return x * x; }},
      {"div", [=] { return x / 2; }},
      {"neg", [=] { return -x; }},
      {"pow_scalar", [=] { return x.pow(2); }},
      {"pow_tensor", [=] { return x.pow(x); }},
      {"exp", [=] { return x.exp(); }},
      {"log", [=] { return x.abs().log(); }},
      {"sqrt", [=] { return x.abs().sqrt(); }},
      {"abs", [=] { return x.abs(); }},
      {"relu", [=] { return x.relu(); }},
      {"sigmoid", [=] { return x.sigmoid(); }},
      {"tanh", [=] { return x.tanh(); }},
      {"sum", [=] { return x.sum(); }},
      {"sum_dim", [=] { return x.sum(1); }},
      {"mean", [=] { return x.mean(); }},
      {"mean_dim", [=] { return x.mean(1); }},
      {"var", [=] { return x.var(); }},
      {"std", [=] { return x.std(); }},
      {"amax", [=] { return x.amax(1); }},
      {"max", [=] { return x.max(); }},
      {"max_dim", [=] { return x.max(1).first; }},
      {"prod", [=] { return x.prod(); }},
      {"cumsum", [=] { return x.cumsum(1); }},
      {"logsumexp", [=] { return x.logsumexp(1); }},
      {"softmax", [=] { return x.softmax(1); }},
      {"log_softmax", [=] { return x.log_softmax(1); }},
      {"matmul_2d", [=] { return x.matmul(m); }},
      {"mm", [=] { return x.mm(m); }},
      {"matmul_1d", [=] { return v.matmul(v); }},
      {"matmul_3d",
       [=] {
         return b3.matmul(randn({4, 2}));
       }},
      {"bmm", [=] { return b3.bmm(b3.transpose(1, 2)); }},
      {"linear", [=] { return F::linear(x, m.t(), b); }},
      {"linear_nobias", [=] { return F::linear(x, m.t()); }},
      {"view", [=] { return x.view(6); }},
      {"reshape", [=] { return x.reshape(6); }},
      {"transpose", [=] { return x.transpose(0, 1); }},
      {"t", [=] { return x.t(); }},
      {"permute",
       [=] {
         return x.permute({1, 0});
       }},
      {"unsqueeze", [=] { return x.unsqueeze(0); }},
      {"squeeze", [=] { return x.unsqueeze(0).squeeze(); }},
      {"squeeze_dim", [=] { return x.unsqueeze(0).squeeze(0); }},
      {"flatten", [=] { return x.flatten(); }},
      {"select", [=] { return x.select(0, 1); }},
      {"index_int", [=] { return x[1]; }},
      {"narrow", [=] { return x.narrow(1, 0, 2); }},
      {"slice", [=] { return x.slice(1, 1); }},
      {"expand",
       [=] {
         return v.expand({2, 3});
       }},
      {"cat",
       [=] {
         return cat({x, x});
       }},
      {"stack",
       [=] {
         return stack({x, x});
       }},
      {"clone", [=] { return x.clone(); }},
      {"to_double", [=] { return x.to(kFloat64); }},
      {"contiguous_t", [=] { return x.t().contiguous(); }},
      {"clamp", [=] { return x.clamp(-1, 1); }},
      {"clamp_min", [=] { return x.clamp(0); }},
      {"where", [=] { return where(x > 0, x, x * 2); }},
      {"gather",
       [=] {
         return x.gather(1, t.view({1, 2}).expand({2, 2}));
       }},
      {"index_select", [=] { return x.index_select(1, t); }},
      {"index_tensor",
       [=] {
         return x.index({tensor({1, 0})});
       }},
      {"masked_fill", [=] { return x.masked_fill(x > 0, 0.0); }},
      {"mse_loss", [=] { return F::mse_loss(x, x.detach() * 2); }},
      {"l1_loss", [=] { return F::l1_loss(x, x.detach() * 2); }},
      {"cross_entropy", [=] { return F::cross_entropy(x, t); }},
      {"nll_loss", [=] { return F::nll_loss(x.log_softmax(1), t); }},
      {"bce",
       [=] {
         return F::binary_cross_entropy(x.sigmoid(), ones({2, 3}));
       }},
      {"bce_logits",
       [=] {
         return F::binary_cross_entropy_with_logits(x, ones({2, 3}));
       }},
      {"smooth_l1", [=] { return F::smooth_l1_loss(x, x.detach() * 2); }},
      {"gelu", [=] { return F::gelu(x); }},
      {"silu", [=] { return F::silu(x); }},
      {"leaky_relu", [=] { return F::leaky_relu(x); }},
      {"elu", [=] { return F::elu(x); }},
      {"softplus", [=] { return F::softplus(x); }},
      {"hardtanh", [=] { return F::hardtanh(x); }},
      {"relu6", [=] { return F::relu6(x); }},
      {"logsigmoid", [=] { return F::logsigmoid(x); }},
      {"layer_norm", [=] { return F::layer_norm(x, {3}); }},
      {"batch_norm", [=] { return F::batch_norm(x, {}, {}, {}, {}, true); }},
      {"conv2d", [=] { return F::conv2d(img, w); }},
      {"max_pool2d", [=] { return F::max_pool2d(img, 2); }},
      {"avg_pool2d", [=] { return F::avg_pool2d(img, 2); }},
      {"adaptive_avg_pool2d", [=] { return F::adaptive_avg_pool2d(img, 1); }},
      {"dropout", [=] { return F::dropout(x, 0.5, true); }},
      {"embedding", [=] { return F::embedding(t, m); }},
      {"norm", [=] { return x.norm(); }},
      {"dist", [=] { return x.dist(x * 2); }},
      {"cosine_similarity", [=] { return F::cosine_similarity(x, x * 2); }},
      {"normalize", [=] { return F::normalize(x); }},
      {"mish", [=] { return F::mish(x); }},
      {"hardswish", [=] { return F::hardswish(x); }},
      {"hardsigmoid", [=] { return F::hardsigmoid(x); }},
      {"selu", [=] { return F::selu(x); }},
      {"celu", [=] { return F::celu(x); }},
      {"softsign", [=] { return F::softsign(x); }},
      {"tanhshrink", [=] { return F::tanhshrink(x); }},
      {"softshrink", [=] { return F::softshrink(x); }},
      {"hardshrink", [=] { return F::hardshrink(x); }},
      {"glu", [=] { return F::glu(m); }},
      {"threshold", [=] { return F::threshold(x, 0.1, 2.0); }},
      {"huber", [=] { return F::huber_loss(x, x.detach() * 2); }},
      {"group_norm", [=] { return F::group_norm(img, 2); }},
      {"conv1d", [=] { return F::conv1d(img.select(2, 0), w.select(2, 0)); }},
      {"pixel_shuffle",
       [=] {
         return F::pixel_shuffle(img.reshape({1, 8, 2, 2}), 2);
       }},
      {"prelu", [=] { return F::prelu(x, tensor({0.25})); }},
  };
}

std::map<std::string, std::string> reference() {
  std::ifstream in(WEFT_GRAD_FN_NAMES);
  std::map<std::string, std::string> names;
  for (std::string line; std::getline(in, line);)
    if (auto bar = line.find('|'); bar != std::string::npos)
      names[line.substr(0, bar)] = line.substr(bar + 1);
  return names;
}

TEST(GradFnNames, AsPyTorch) {
  std::map<std::string, std::string> want = reference();
  auto all = cases();
  ASSERT_EQ(want.size(), all.size()) << "the table and grad_fn_names.py list different cases";
  for (const auto& [name, fn] : all) {
    ASSERT_TRUE(want.count(name)) << name << " is not in grad_fn_names.txt";
    Tensor y = fn();
    ASSERT_TRUE(y.grad_fn() != nullptr) << name;
    EXPECT_EQ(y.grad_fn()->name(), want[name]) << name;
  }
}

} // namespace
} // namespace weft::test
