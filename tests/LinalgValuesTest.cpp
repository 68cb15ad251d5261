// torch.linalg's composites against PyTorch 1.13's own numbers (kept here, so the suite needs no
// PyTorch): norms, rank, condition number, triangular and least-squares solves, multi_dot,
// tensorinv, tensorsolve and vecdot; their gradients, and compiled as eager.
#include "TestUtil.h"
#include "weft/weft.h"

#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <vector>

namespace weft::test {
namespace {

/// `t` is `expected` within 1e-12 relative, 1e-13 absolute: float64 composites of LAPACK results,
/// whose last bits depend on the order of the products (PyTorch's trsm and gelsy against weft's
/// inverse and pseudo-inverse).
::testing::AssertionResult near(const Tensor& t, const std::vector<double>& expected) {
  return allClose(t.to_vector<double>(), expected, 1e-12, 1e-13);
}

TEST(Linalg, NormsRankAndConditionAsPyTorch) {
  const double inf = std::numeric_limits<double>::infinity();
  Tensor a = tensor({2.0, -1.0, 0.5, 0.3, 1.5, -2.0, 1.0, 0.25, 3.0}, kFloat64).reshape({3, 3});
  Tensor b3 = stack({a, a * 0.5 + eye(3, std::nullopt, kFloat64)});
  Tensor v = tensor({3.0, -4.0, 0.0, 1.5}, kFloat64);
  const std::vector<std::pair<double, double>> vectorNorms = {
      {2, 5.220153254455275},   {1, 8.5},   {inf, 4.0}, {-inf, 0.0}, {0, 3.0},
      {3.5, 4.401514953069443}, {-1.5, 0.0}};
  for (auto [ord, expected] : vectorNorms)
    EXPECT_TRUE(near(linalg_vector_norm(v, ord), {expected})) << ord;
  Tensor rows = linalg_vector_norm(a, 2, {1}, true);
  EXPECT_EQ(rows.sizes(), Shape({3, 1}));
  EXPECT_TRUE(near(rows, {2.29128784747792, 2.5179356624028344, 3.17214438511238}));
  EXPECT_TRUE(near(linalg_matrix_norm(a), {4.653224688320993}));
  EXPECT_TRUE(near(linalg_matrix_norm(a, "nuc"), {7.461020569955834}));
  const std::vector<std::pair<double, double>> matrixNorms = {{2, 3.905082795910772},
                                                              {-2, 1.5773677521286418},
                                                              {1, 5.5},
                                                              {-1, 2.75},
                                                              {inf, 4.25},
                                                              {-inf, 3.5}};
  for (auto [ord, expected] : matrixNorms)
    EXPECT_TRUE(near(linalg_matrix_norm(a, ord), {expected})) << ord;
  EXPECT_TRUE(near(linalg_matrix_norm(b3, 1, {2, 0}), {3.5, 3.8, 4.25}));
  Tensor nuc = linalg_matrix_norm(b3, "nuc", {0, 2}, true);
  EXPECT_EQ(nuc.sizes(), Shape({1, 3, 1}));
  EXPECT_TRUE(near(nuc, {3.4349043622057067, 3.803912417923333, 4.317369316239791}));
  EXPECT_TRUE(near(linalg_norm(a), {4.653224688320993}));
  EXPECT_TRUE(near(linalg_norm(v, 3), {4.552874245617287}));
  EXPECT_TRUE(near(linalg_norm(a, "nuc"), {7.461020569955834}));
  EXPECT_TRUE(near(linalg_norm(a, inf), {4.25}));
  EXPECT_TRUE(near(linalg_norm(b3, std::nullopt, {1}),
                   {2.2561028345356955, 1.8200274723201295, 3.640054944640259, 2.0670026608594387,
                    1.824314939915803, 2.704163456597992}));

  Tensor rank2 = tensor({1.0, 2.0, 3.0, 2.0, 4.0, 6.0, 1.0, 0.0, 1.0}, kFloat64).reshape({3, 3});
  auto rank = [](const Tensor& t) { return t.to_vector<int64_t>(); };
  EXPECT_EQ(linalg_matrix_rank(a).dtype(), kInt64);
  EXPECT_EQ(rank(linalg_matrix_rank(a)), std::vector<int64_t>{3});
  EXPECT_EQ(rank(linalg_matrix_rank(rank2)), std::vector<int64_t>{2});
  EXPECT_EQ(rank(linalg_matrix_rank(rank2.to(kFloat32))), std::vector<int64_t>{2});
  EXPECT_EQ(rank(linalg_matrix_rank(a, 2.5)), std::vector<int64_t>{1});
  EXPECT_EQ(rank(linalg_matrix_rank(a, std::nullopt, 0.5)), std::vector<int64_t>{2});
  EXPECT_EQ(rank(linalg_matrix_rank(a + a.mT(), std::nullopt, std::nullopt, true)),
            std::vector<int64_t>{3});
  EXPECT_EQ(rank(linalg_matrix_rank(b3)), (std::vector<int64_t>{3, 3}));

  EXPECT_TRUE(near(linalg_cond(a), {2.4756958487587326}));
  EXPECT_TRUE(near(linalg_cond(a, "fro"), {3.956431241116225}));
  EXPECT_TRUE(near(linalg_cond(a, "nuc"), {10.41155283992358}));
  const std::vector<std::pair<double, double>> conds = {
      {1, 4.569230769230769},   {-1, 1.9630769230769232},  {2, 2.4756958487587326},
      {-2, 0.4039268396000184}, {inf, 4.3764102564102565}, {-inf, 1.7876923076923077}};
  for (auto [p, expected] : conds)
    EXPECT_TRUE(near(linalg_cond(a, p), {expected})) << p;

  // Errors, not crashes.
  EXPECT_THROW((void)linalg_matrix_norm(a, 3.0), ValueError);
  EXPECT_THROW((void)linalg_matrix_norm(a, "max"), ValueError);
  EXPECT_THROW((void)linalg_matrix_norm(a, "fro", {1, 1}), ValueError);
  EXPECT_THROW((void)linalg_matrix_norm(v), ShapeError);
  EXPECT_THROW((void)linalg_norm(b3, 2.0), ValueError);
  EXPECT_THROW((void)linalg_vector_norm(zeros({0}, kFloat64), -inf), ValueError);
  EXPECT_THROW((void)linalg_vector_norm(zeros({0}, kFloat64), inf), ValueError);
  EXPECT_THROW((void)linalg_vector_norm(zeros({2, 0}, kFloat64), -1.5, {1}), ValueError);
  EXPECT_EQ(linalg_vector_norm(zeros({0, 3}, kFloat64), -inf, {1}).sizes(), Shape({0}));
  EXPECT_EQ(rank(linalg_matrix_rank(rank2, 0.0)), std::vector<int64_t>{2}); // atol 0: default rtol
  EXPECT_THROW((void)linalg_vector_norm(tensor({1, 2}), 2), DTypeError);
  EXPECT_THROW((void)linalg_matrix_rank(tensor({1, 2, 3, 4}).reshape({2, 2})), DTypeError);
}

TEST(Linalg, SolvesAndProductsAsPyTorch) {
  Tensor a = tensor({2.0, -1.0, 0.5, 0.3, 1.5, -2.0, 1.0, 0.25, 3.0}, kFloat64).reshape({3, 3});
  Tensor tall = tensor({1.0, 2.0, 3.0, -1.0, 0.5, 0.5}, kFloat64).reshape({3, 2});
  Tensor wide = tensor({0.5, -1.0, 2.0, 1.5, 0.25, -0.75}, kFloat64).reshape({2, 3});
  Tensor b = tensor({1.0, -2.0, 0.5, 3.0, 2.0, 1.0}, kFloat64).reshape({3, 2});
  EXPECT_TRUE(near(linalg_solve_triangular(a, b, true),
                   {0.9444444444444444, 0.13888888888888884, 1.222222222222222, 2.444444444444444,
                    0.6666666666666666, 0.3333333333333333}));
  EXPECT_TRUE(
      near(linalg_solve_triangular(a, b, false), {0.5, -1.0, 0.2333333333333333, 2.1999999999999997,
                                                  0.4805555555555555, 0.4833333333333334}));
  EXPECT_TRUE(near(
      linalg_solve_triangular(a, b.mT(), true, false),
      {0.5, 0.6666666666666666, 1.0277777777777777, -1.0, 1.3333333333333333, 1.3888888888888886}));
  EXPECT_TRUE(
      near(linalg_solve_triangular(a, b, false, true, true), {1.0, -2.0, 0.2, 3.6, 0.95, 2.1}));
  auto [x, copy] = b.triangular_solve(a);
  EXPECT_TRUE(near(x, {0.9444444444444444, 0.13888888888888884, 1.222222222222222,
                       2.444444444444444, 0.6666666666666666, 0.3333333333333333}));
  EXPECT_EQ(copy.to_vector<double>(), a.to_vector<double>());
  EXPECT_TRUE(
      near(b.triangular_solve(a, false, true, true).first, {-1.0, -3.825, 0.0, 2.75, 2.0, 1.0}));

  // lstsq: the solution, and what each driver reports besides.
  const std::vector<double> solution = {0.38028169014084523, 0.6478873239436624, 0.5305164319248826,
                                        -1.1455399061032865};
  LstsqResult r = linalg_lstsq(tall, b);
  EXPECT_TRUE(near(r.solution, solution));
  EXPECT_EQ(r.residuals.numel(), 0);
  EXPECT_EQ(r.rank.to_vector<int64_t>(), std::vector<int64_t>{2});
  EXPECT_EQ(r.singular_values.numel(), 0);
  r = linalg_lstsq(tall, b, std::nullopt, "gelsd");
  EXPECT_TRUE(near(r.solution, solution));
  EXPECT_TRUE(near(r.residuals, {2.592723004694835, 1.6948356807511733}));
  EXPECT_TRUE(near(r.singular_values, {3.2187072913248316, 2.267139910277344}));
  r = linalg_lstsq(tall, b, std::nullopt, "gels");
  EXPECT_TRUE(near(r.residuals, {2.592723004694835, 1.6948356807511733}));
  EXPECT_EQ(r.rank.numel(), 0);
  r = linalg_lstsq(wide, b.narrow(0, 0, 2));
  EXPECT_TRUE(near(r.solution, {0.5055432372505543, 1.3658536585365852, -0.1751662971175168,
                                0.43902439024390294, 0.2860310421286032, -1.1219512195121957}));
  EXPECT_EQ(r.residuals.numel(), 0);
  Tensor rank2 = tensor({1.0, 2.0, 3.0, 2.0, 4.0, 6.0, 1.0, 0.0, 1.0}, kFloat64).reshape({3, 3});
  r = linalg_lstsq(rank2, b, std::nullopt, "gelss");
  EXPECT_TRUE(allClose(r.solution.to_vector<double>(),
                       {1.6000000000000005, 0.7000000000000015, -1.2, -0.40000000000000113,
                        0.40000000000000024, 0.30000000000000027},
                       1e-12, 1e-12));
  EXPECT_EQ(r.rank.to_vector<int64_t>(), std::vector<int64_t>{2});
  EXPECT_EQ(r.residuals.numel(), 0); // not of full rank

  EXPECT_TRUE(
      near(linalg_multi_dot({a, tall, wide}),
           {7.5, 2.0625, -5.4375, -0.95, -4.2749999999999995, 9.025, 6.5, -2.4375, 4.0625}));
  Tensor vec = tensor({3.0, -4.0, 0.0}, kFloat64);
  Tensor rowTimes = linalg_multi_dot({vec, a, tall});
  EXPECT_EQ(rowTimes.sizes(), Shape({2}));
  EXPECT_TRUE(near(rowTimes, {-17.45, 23.35}));
  EXPECT_TRUE(near(linalg_vecdot(a, a.mT()), {4.2, 1.45, 9.0}));

  Tensor m6 = arange(36, kFloat64).reshape({6, 6}).sin() + eye(6, std::nullopt, kFloat64) * 3;
  Tensor inv = linalg_tensorinv(m6.reshape({6, 2, 3}), 1);
  EXPECT_EQ(inv.sizes(), Shape({2, 3, 6}));
  EXPECT_TRUE(
      near(inv.reshape({6, 6}).matmul(m6), eye(6, std::nullopt, kFloat64).to_vector<double>()));
  EXPECT_EQ(linalg_tensorinv(m6.reshape({2, 3, 6})).sizes(), Shape({6, 2, 3}));
  EXPECT_TRUE(near(linalg_tensorsolve(m6.reshape({6, 2, 3}), arange(6, kFloat64)),
                   {0.3112410822076859, 0.5374830994986396, 0.7474626634560755, 0.9510060646296712,
                    1.158452294606608, 1.3798294478690882}));

  EXPECT_THROW((void)linalg_lstsq(tall, b, std::nullopt, "gelsx"), ValueError);
  EXPECT_THROW((void)linalg_lstsq(tall, b.narrow(0, 0, 2)), ShapeError);
  EXPECT_THROW((void)linalg_multi_dot({a}), ValueError);
  EXPECT_THROW((void)linalg_multi_dot({a, wide}), ShapeError);
  EXPECT_THROW((void)linalg_solve_triangular(tall, b, true), ShapeError);
  EXPECT_THROW((void)linalg_tensorinv(m6.reshape({4, 9}), 1), ValueError);
}

TEST(Linalg, NormAndSolveGradientsAsPyTorch) {
  const double inf = std::numeric_limits<double>::infinity();
  Tensor a = tensor({2.0, -1.0, 0.5, 0.3, 1.5, -2.0, 1.0, 0.25, 3.0}, kFloat64).reshape({3, 3});
  Tensor tall = tensor({1.0, 2.0, 3.0, -1.0, 0.5, 0.5}, kFloat64).reshape({3, 2});
  Tensor b = tensor({1.0, -2.0, 0.5, 3.0, 2.0, 1.0}, kFloat64).reshape({3, 2});
  Tensor v = tensor({3.0, -4.0, 0.0, 1.5}, kFloat64);
  // d(sum of f(inputs)) / d(each input), PyTorch 1.13's numbers.
  auto grads = [](const std::function<Tensor(const std::vector<Tensor>&)>& f,
                  std::vector<Tensor> inputs) {
    for (Tensor& t : inputs)
      t = t.clone().requires_grad_(true);
    f(inputs).sum().backward();
    std::vector<Tensor> g;
    for (const Tensor& t : inputs)
      g.push_back(t.grad());
    return g;
  };
  EXPECT_TRUE(near(grads([](auto& x) { return linalg_matrix_norm(x[0], "nuc"); }, {a})[0],
                   {0.884407254070809, -0.4621412245000436, -0.06518663639529058,
                    0.3673528868480977, 0.7754472531329842, -0.5135498166029056,
                    0.28788133922034626, 0.4302406840666161, 0.8555800887717002}));
  EXPECT_TRUE(near(grads([](auto& x) { return linalg_matrix_norm(x[0], 2); }, {a})[0],
                   {0.11798345402239106, -0.0864519570090946, 0.3194957670744169,
                    -0.179428072670339, 0.13147528315094908, -0.4858860099282623,
                    0.2581176804454196, -0.18913481384364034, 0.6989751825177771}));
  EXPECT_TRUE(near(grads([](auto& x) { return linalg_matrix_norm(x[0], 1); }, {a})[0],
                   {0, 0, 1, 0, 0, -1, 0, 0, 1}));
  EXPECT_TRUE(near(grads([](auto& x) { return linalg_vector_norm(x[0], 3.5); }, {v})[0],
                   {0.3835285361061225, -0.7873077460009703, 0.0, 0.0677989071647972}));
  EXPECT_TRUE(near(
      grads([](auto& x) { return linalg_vector_norm(x[0] + 0.5, -1.5); }, {v})[0],
      {0.0054407119209284515, -0.0054407119209284515, 0.7053437641981388, 0.022041992631191838}));
  EXPECT_TRUE(
      near(grads([&](auto& x) { return linalg_vector_norm(x[0], inf); }, {v})[0], {0, -1, 0, 0}));
  Tensor weights = tensor({1.0, 2.0, 3.0, 4.0, 5.0, 6.0}, kFloat64).reshape({3, 2});
  auto tri =
      grads([&](auto& x) { return linalg_solve_triangular(x[0], x[1], true) * weights; }, {a, b});
  EXPECT_TRUE(
      near(tri[0], {-0.611111111111111, -3.0555555555555554, -0.6666666666666666, 0.0,
                    -10.999999999999998, -2.6666666666666665, 0.0, 0.0, -3.4444444444444438}));
  EXPECT_TRUE(near(tri[1], {0.5, 1.0, 2.333333333333333, 3.333333333333333, 3.1388888888888884,
                            4.055555555555555}));
  auto unit = grads([](auto& x) { return linalg_solve_triangular(x[0], x[1], false, false, true); },
                    {a, b.mT()});
  EXPECT_TRUE(near(unit[0], {0, 0, 0, -2.75, 0, 0, -3.0, -2.0999999999999996, 0}));
  EXPECT_TRUE(near(unit[1], {1.0, 0.7, -0.17500000000000004, 1.0, 0.7, -0.17500000000000004}));
  auto ls = grads([](auto& x) { return linalg_lstsq(x[0], x[1]).solution; }, {tall, b});
  EXPECT_TRUE(near(ls[0], {-0.6305627190372282, 0.15852233904207702, -0.15764067975930746,
                           0.03963058476051934, 0.15063148846128424, 0.6752187617095372}));
  EXPECT_TRUE(near(ls[1], {0.5258215962441315, 0.5258215962441315, 0.131455399061033,
                           0.131455399061033, 0.15962441314553985, 0.15962441314553985}));
  EXPECT_TRUE(near(grads([](auto& x) { return linalg_cond(x[0]); }, {a})[0],
                   {0.16415480225614754, 0.26179028257054243, 0.2552200013247396,
                    -0.4312625198916728, -1.041610622332051, -0.49518744133105325,
                    -0.09792089815161624, -1.0466261850730307, 0.28895597620640767}));

  // Compiled, each gives eager's value and gradient.
  expectCompiledAsEager([](const Tensor& x) { return linalg_matrix_norm(x, "nuc"); }, a);
  expectCompiledAsEager([](const Tensor& x) { return linalg_vector_norm(x, -1.5); }, v + 0.5);
  expectCompiledAsEager([&](const Tensor& x) { return linalg_solve_triangular(x, b, false).sum(); },
                        a);
  expectCompiledAsEager([&](const Tensor& x) { return linalg_lstsq(x, b).solution.sum(); }, tall);
  expectCompiledAsEager([](const Tensor& x) { return linalg_multi_dot({x, x, x}).sum(); }, a);
}

} // namespace
} // namespace weft::test
