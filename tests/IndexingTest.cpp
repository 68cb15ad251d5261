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

} // namespace
} // namespace weft::test
