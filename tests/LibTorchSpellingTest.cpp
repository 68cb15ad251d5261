// Small programs written in LibTorch's C++ spelling (written here, not copied), one per thing a
// ported program needed: each must compile and do what LibTorch does, so the spellings stay.
#include "TestUtil.h"

#include <cstdint>
#include <vector>

namespace weft::test {
namespace {

TEST(LibTorchSpelling, SizesFromOneIntegerAListOrAVector) {
  int64_t n = 4;
  Tensor a = randn(3), b = ones(n), c = zeros({2, 3}), d = full(2, 1.5);
  EXPECT_EQ(a.sizes(), (Shape{3}));
  EXPECT_EQ(b.sizes(), (Shape{4}));
  EXPECT_EQ(d.to_vector<double>(), (std::vector<double>{1.5, 1.5}));
  std::vector<int64_t> sizes{3, 2};
  EXPECT_EQ(weft::empty(sizes).sizes(), (Shape{3, 2}));
  EXPECT_EQ(c.reshape(-1).sizes(), (Shape{6}));
  EXPECT_EQ(c.view(-1).sizes(), (Shape{6}));
  EXPECT_EQ(c.view(sizes).sizes(), (Shape{3, 2}));
  EXPECT_EQ(c.permute({1, 0}).sizes(), (Shape{3, 2}));
  EXPECT_EQ(b.expand({2, 4}).sizes(), (Shape{2, 4}));
  EXPECT_EQ(b.repeat(2).sizes(), (Shape{8}));
  EXPECT_EQ(c.new_zeros(5).sizes(), (Shape{5}));
  Tensor r = randint(10, {100});
  EXPECT_EQ(r.dtype(), kInt64);
  EXPECT_GE(r.min().item<int64_t>(), 0);
  EXPECT_LT(r.max().item<int64_t>(), 10);
  EXPECT_EQ(rand({2, 2}, kFloat64).dtype(), kFloat64);
  // A shape can be written as a Shape or as LibTorch's IntArrayRef.
  IntArrayRef s = {2, 2};
  EXPECT_EQ(ones(s).numel(), 4);
}

} // namespace
} // namespace weft::test
