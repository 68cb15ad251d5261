// LibTorch-style indexing: integers, slices, None, Ellipsis, bools, masks and integer tensors.
#include "TestUtil.h"

namespace weft::test {
namespace {

using namespace weft::indexing;
std::vector<double> vals(const Tensor& t) {
  return t.to_vector<double>();
}

TEST(Indexing, BasicIndexingMakesViews) {
  Tensor x = arange(24).reshape({2, 3, 4});
  Tensor a = x.index({1, Slice(0, 3, 2), Slice(std::nullopt, std::nullopt, 3)});
  EXPECT_EQ(a.sizes(), (Shape{2, 2}));
  EXPECT_EQ(vals(a), (std::vector<double>{12, 15, 20, 23}));
  EXPECT_EQ(a.data_ptr(), x.index({1}).data_ptr());
  EXPECT_EQ(x.index({"...", 0}).sizes(), (Shape{2, 3}));
  EXPECT_EQ(x.index({None, Ellipsis, None}).sizes(), (Shape{1, 2, 3, 4, 1}));
  EXPECT_EQ(x.index({-1, -1, -1}).item<int64_t>(), 23);
  EXPECT_EQ(x.index({Slice(-1)}).sizes(), (Shape{1, 3, 4}));
  EXPECT_EQ(x.index({true}).sizes(), (Shape{1, 2, 3, 4}));
  EXPECT_EQ(x.index({false}).sizes(), (Shape{0, 2, 3, 4}));
}

TEST(Indexing, AdvancedIndexingFollowsNumPyPlacement) {
  Tensor x = arange(24).reshape({2, 3, 4});
  Tensor idx = tensor({2, 0});
  EXPECT_EQ(vals(x.index({0, idx})), (std::vector<double>{8, 9, 10, 11, 0, 1, 2, 3}));
  // Adjacent advanced indices stay in place: result [2, 2] from dims 1 and 2.
  Tensor r = x.index({Slice(), tensor({0, 2}), tensor({1, 3})});
  EXPECT_EQ(r.sizes(), (Shape{2, 2}));
  EXPECT_EQ(vals(r), (std::vector<double>{1, 11, 13, 23}));
  // Separated advanced indices go first.
  Tensor s = x.index({tensor({1, 0}), Slice(), tensor({0, 3})});
  EXPECT_EQ(s.sizes(), (Shape{2, 3}));
  EXPECT_EQ(vals(s), (std::vector<double>{12, 16, 20, 3, 7, 11}));
  // Broadcasting index tensors and negative indices.
  Tensor b = x.index({tensor({0, 1}).unsqueeze(1), 0, tensor({-1, 0})});
  EXPECT_EQ(b.sizes(), (Shape{2, 2}));
  EXPECT_EQ(vals(b), (std::vector<double>{3, 0, 15, 12}));
}

TEST(Indexing, BooleanMasks) {
  Tensor x = arange(6).reshape({2, 3});
  EXPECT_EQ(vals(x.index({x > 2})), (std::vector<double>{3, 4, 5}));
  EXPECT_EQ(x.index({tensor({false, true})}).sizes(), (Shape{1, 3}));
  EXPECT_EQ(vals(x.index({Slice(), tensor({true, false, true})})),
            (std::vector<double>{0, 2, 3, 5}));
}

TEST(Indexing, IndexPut) {
  Tensor x = zeros({2, 3});
  x.index_put_({Slice(), 1}, 5.0);
  EXPECT_EQ(vals(x), (std::vector<double>{0, 5, 0, 0, 5, 0}));
  x.index_put_({x > 1}, tensor({7.0, 8.0}));
  EXPECT_EQ(vals(x), (std::vector<double>{0, 7, 0, 0, 8, 0}));
  x.index_put_({tensor({0, 1}), tensor({2, 0})}, tensor({1.0, 2.0}));
  EXPECT_EQ(vals(x), (std::vector<double>{0, 7, 1, 2, 8, 0}));
}

TEST(Indexing, GradientsFlowThroughIndexing) {
  Tensor x = arange(6).to(kFloat64).reshape({2, 3}).requires_grad_();
  Tensor y = x.index({Slice(), tensor({0, 2, 0})}).sum() + x.index({1, Slice(1)}).sum() * 10;
  y.backward();
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{2, 0, 1, 2, 10, 11}));
}

TEST(Indexing, IndexPutAccumulateAddsRepeatedPositions) {
  // Values and gradients of (y * w).sum() as PyTorch 1.13 gives them for
  // x.index_put((tensor([0, 1, 0]), tensor([2, 0, -1])), v, accumulate=...): (0, 2) is written
  // twice (-1 is the last column).
  Tensor w = from_vector(std::vector<double>{1, -2, 3, 0.5, 5, -1}, {2, 3});
  std::vector<TensorIndex> twice{tensor({0, 1, 0}), tensor({2, 0, -1})};
  Tensor x = arange(6).to(kFloat64).reshape({2, 3}).requires_grad_();
  Tensor v = from_vector(std::vector<double>{1, 2, 4}).requires_grad_();
  Tensor y = x.index_put(twice, v, true);
  EXPECT_EQ(vals(y), (std::vector<double>{0, 1, 7, 5, 4, 5}));
  (y * w).sum().backward();
  EXPECT_EQ(vals(x.grad()), vals(w));
  EXPECT_EQ(vals(v.grad()), (std::vector<double>{3, 0.5, 3}));
  // Without accumulate the positions written lose their gradient to x; v's reach both writes.
  x.mutable_grad() = Tensor();
  v.mutable_grad() = Tensor();
  (x.index_put(twice, v) * w).sum().backward();
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{1, -2, 0, 0, 5, -1}));
  EXPECT_EQ(vals(v.grad()), (std::vector<double>{3, 0.5, 3}));
  // Whole rows, broadcast values: row 1 (also as -2) three times.
  Tensor u = from_vector(std::vector<double>{1, 2, 3}).requires_grad_();
  Tensor rows = x.detach().index_put({tensor({1, 1, -2})}, u, true);
  EXPECT_EQ(vals(rows), (std::vector<double>{1, 3, 5, 5, 8, 11}));
  (rows * w).sum().backward();
  EXPECT_EQ(vals(u.grad()), (std::vector<double>{2, 8, 1}));
  // A mask and a scalar; integers; in place.
  Tensor mask = tensor({true, false, true, false, false, true}).reshape({2, 3});
  EXPECT_EQ(vals(zeros({2, 3}).index_put({mask}, scalar_tensor(2.0), true)),
            (std::vector<double>{2, 0, 2, 0, 0, 2}));
  Tensor counts = zeros({4}, kInt64);
  counts.index_put_({tensor({1, 1, 3, 1})}, tensor({1, 2, 3, 4}), true);
  EXPECT_EQ(vals(counts), (std::vector<double>{0, 7, 0, 3}));
}

TEST(Indexing, IndexPutAccumulateCompilesAsEager) {
  Tensor w = from_vector(std::vector<double>{1, -2, 3, 0.5, 5, -1}, {2, 3});
  auto loss = [w](const Tensor& x, const Tensor& v) {
    return (x.index_put({tensor({0, 1, 0}), tensor({2, 0, -1})}, v, true) * w).sum();
  };
  auto run = [&](auto f) {
    Tensor x = arange(6).to(kFloat64).reshape({2, 3}).requires_grad_();
    Tensor v = from_vector(std::vector<double>{1, 2, 4}).requires_grad_();
    Tensor l = f(x, v);
    l.backward();
    return std::vector<std::vector<double>>{vals(l), vals(x.grad()), vals(v.grad())};
  };
  auto compiled = compile(loss);
  EXPECT_EQ(run(compiled), run(loss));
  EXPECT_EQ(compiled.compiled().num_compiled(), 1u);
}

} // namespace
} // namespace weft::test
