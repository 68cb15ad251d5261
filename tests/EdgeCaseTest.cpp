// Every op of the table below on 0-d, empty, NaN/Inf and huge inputs, eagerly and compiled: each
// gives PyTorch's result (reference/edge_cases.txt, made once by reference/edge_cases.py) or,
// where PyTorch raises, a weft::Error, never a crash or another exception.
#include "TestUtil.h"

#include <cmath>
#include <map>
#include <set>

namespace weft::test {
namespace {

using Outputs = std::vector<Tensor>;
using OpFn = std::function<Outputs(const Tensor&)>;

/// What an op does with its input's elements. Reduction: its work grows with the number of
/// elements even when its result is small (reductions, scans, sorts, contractions, split).
enum class Kind { Elementwise, Pairwise, Reduction, Movement, Indexing };

struct EdgeOp {
  Kind kind;
  OpFn fn;
  bool readsValues = false; ///< data-dependent shape: compiled with specialize_on_values
};

template <typename F> OpFn one(F f) {
  return [f](const Tensor& x) { return Outputs{f(x)}; };
}
template <typename F> OpFn two(F f) {
  return [f](const Tensor& x) {
    auto [a, b] = f(x);
    return Outputs{a, b};
  };
}
/// A binary op on every pair of the input's elements: x as a column against x as a row.
template <typename F> OpFn outer(F f) {
  return [f](const Tensor& x) { return Outputs{f(x.reshape({-1, 1}), x.reshape({1, -1}))}; };
}
Shape reversedDims(const Tensor& x) {
  Shape d;
  for (int64_t i = x.dim() - 1; i >= 0; --i)
    d.push_back(i);
  return d;
}

/// The ops, named as in reference/edge_cases.py and meaning the same PyTorch call.
const std::map<std::string, EdgeOp>& edgeOps() {
  using K = Kind;
  static const std::map<std::string, EdgeOp> ops = {
      {"neg", {K::Elementwise, one([](const Tensor& x) { return x.neg(); })}},
      {"abs", {K::Elementwise, one([](const Tensor& x) { return x.abs(); })}},
      {"sign", {K::Elementwise, one([](const Tensor& x) { return x.sign(); })}},
      {"exp", {K::Elementwise, one([](const Tensor& x) { return x.exp(); })}},
      {"log", {K::Elementwise, one([](const Tensor& x) { return x.log(); })}},
      {"log1p", {K::Elementwise, one([](const Tensor& x) { return x.log1p(); })}},
      {"expm1", {K::Elementwise, one([](const Tensor& x) { return x.expm1(); })}},
      {"sqrt", {K::Elementwise, one([](const Tensor& x) { return x.sqrt(); })}},
      {"rsqrt", {K::Elementwise, one([](const Tensor& x) { return x.rsqrt(); })}},
      {"sin", {K::Elementwise, one([](const Tensor& x) { return x.sin(); })}},
      {"cos", {K::Elementwise, one([](const Tensor& x) { return x.cos(); })}},
      {"tanh", {K::Elementwise, one([](const Tensor& x) { return x.tanh(); })}},
      {"sigmoid", {K::Elementwise, one([](const Tensor& x) { return x.sigmoid(); })}},
      {"erf", {K::Elementwise, one([](const Tensor& x) { return x.erf(); })}},
      {"reciprocal", {K::Elementwise, one([](const Tensor& x) { return x.reciprocal(); })}},
      {"floor", {K::Elementwise, one([](const Tensor& x) { return x.floor(); })}},
      {"ceil", {K::Elementwise, one([](const Tensor& x) { return x.ceil(); })}},
      {"round", {K::Elementwise, one([](const Tensor& x) { return x.round(); })}},
      {"relu", {K::Elementwise, one([](const Tensor& x) { return x.relu(); })}},
      {"gelu", {K::Elementwise, one([](const Tensor& x) { return gelu(x); })}},
      {"gelu_tanh", {K::Elementwise, one([](const Tensor& x) { return gelu(x, true); })}},
      {"logical_not", {K::Elementwise, one([](const Tensor& x) { return x.logical_not(); })}},
      {"clamp", {K::Elementwise, one([](const Tensor& x) { return x.clamp(-1, 2); })}},
      {"clamp_min", {K::Elementwise, one([](const Tensor& x) { return x.clamp(0.5); })}},
      {"clamp_max",
       {K::Elementwise, one([](const Tensor& x) { return x.clamp(std::nullopt, 1); })}},
      {"square", {K::Elementwise, one([](const Tensor& x) { return x.pow(2); })}},
      {"pow_half", {K::Elementwise, one([](const Tensor& x) { return x.pow(0.5); })}},
      {"affine", {K::Elementwise, one([](const Tensor& x) { return x * 2 + 1; })}},
      {"div_scalar", {K::Elementwise, one([](const Tensor& x) { return x / 0.5; })}},
      {"rdiv_scalar", {K::Elementwise, one([](const Tensor& x) { return 1 / x; })}},
      {"to_int64", {K::Elementwise, one([](const Tensor& x) { return x.to(kInt64); })}},
      {"to_int32", {K::Elementwise, one([](const Tensor& x) { return x.to(kInt32); })}},
      {"to_uint8", {K::Elementwise, one([](const Tensor& x) { return x.to(kUInt8); })}},
      {"to_bool", {K::Elementwise, one([](const Tensor& x) { return x.to(kBool); })}},
      {"to_float32", {K::Elementwise, one([](const Tensor& x) { return x.to(kFloat32); })}},
      {"masked_fill",
       {K::Elementwise, one([](const Tensor& x) { return x.masked_fill(x > 0, 7.0); })}},
      {"where_sign", {K::Elementwise, one([](const Tensor& x) { return where(x > 0, x, -x); })}},
      {"add", {K::Pairwise, outer([](const Tensor& a, const Tensor& b) { return a + b; })}},
      {"sub", {K::Pairwise, outer([](const Tensor& a, const Tensor& b) { return a - b; })}},
      {"mul", {K::Pairwise, outer([](const Tensor& a, const Tensor& b) { return a * b; })}},
      {"div", {K::Pairwise, outer([](const Tensor& a, const Tensor& b) { return a / b; })}},
      {"pow", {K::Pairwise, outer([](const Tensor& a, const Tensor& b) { return pow(a, b); })}},
      {"maximum",
       {K::Pairwise, outer([](const Tensor& a, const Tensor& b) { return maximum(a, b); })}},
      {"minimum",
       {K::Pairwise, outer([](const Tensor& a, const Tensor& b) { return minimum(a, b); })}},
      {"eq", {K::Pairwise, outer([](const Tensor& a, const Tensor& b) { return a == b; })}},
      {"ne", {K::Pairwise, outer([](const Tensor& a, const Tensor& b) { return a != b; })}},
      {"lt", {K::Pairwise, outer([](const Tensor& a, const Tensor& b) { return a < b; })}},
      {"le", {K::Pairwise, outer([](const Tensor& a, const Tensor& b) { return a <= b; })}},
      {"gt", {K::Pairwise, outer([](const Tensor& a, const Tensor& b) { return a > b; })}},
      {"ge", {K::Pairwise, outer([](const Tensor& a, const Tensor& b) { return a >= b; })}},
      {"logical_and",
       {K::Pairwise, outer([](const Tensor& a, const Tensor& b) { return a.logical_and(b); })}},
      {"logical_or",
       {K::Pairwise, outer([](const Tensor& a, const Tensor& b) { return a.logical_or(b); })}},
      {"logical_xor",
       {K::Pairwise, outer([](const Tensor& a, const Tensor& b) { return a.logical_xor(b); })}},
      {"where_max",
       {K::Pairwise, outer([](const Tensor& a, const Tensor& b) { return where(a > b, a, b); })}},
      {"sum", {K::Reduction, one([](const Tensor& x) { return x.sum(); })}},
      {"sum0", {K::Reduction, one([](const Tensor& x) { return x.sum({0}); })}},
      {"sum_1k", {K::Reduction, one([](const Tensor& x) { return x.sum({-1}, true); })}},
      {"mean", {K::Reduction, one([](const Tensor& x) { return x.mean(); })}},
      {"mean0", {K::Reduction, one([](const Tensor& x) { return x.mean({0}); })}},
      {"prod", {K::Reduction, one([](const Tensor& x) { return x.prod(); })}},
      {"prod0", {K::Reduction, one([](const Tensor& x) { return x.prod(0); })}},
      {"amax", {K::Reduction, one([](const Tensor& x) { return x.amax(); })}},
      {"amax0", {K::Reduction, one([](const Tensor& x) { return x.amax({0}); })}},
      {"amin_1", {K::Reduction, one([](const Tensor& x) { return x.amin({-1}); })}},
      {"max", {K::Reduction, one([](const Tensor& x) { return x.max(); })}},
      {"min", {K::Reduction, one([](const Tensor& x) { return x.min(); })}},
      {"max0", {K::Reduction, two([](const Tensor& x) { return x.max(0); })}},
      {"min_1k", {K::Reduction, two([](const Tensor& x) { return x.min(-1, true); })}},
      {"argmax", {K::Reduction, one([](const Tensor& x) { return x.argmax(); })}},
      {"argmax0", {K::Reduction, one([](const Tensor& x) { return x.argmax(0); })}},
      {"argmin_1", {K::Reduction, one([](const Tensor& x) { return x.argmin(-1); })}},
      {"var", {K::Reduction, one([](const Tensor& x) { return x.var(); })}},
      {"var0", {K::Reduction, one([](const Tensor& x) { return x.var({0}); })}},
      {"std_1", {K::Reduction, one([](const Tensor& x) { return x.std({-1}); })}},
      {"logsumexp0", {K::Reduction, one([](const Tensor& x) { return x.logsumexp({0}); })}},
      {"logsumexp_1", {K::Reduction, one([](const Tensor& x) { return x.logsumexp({-1}); })}},
      {"cumsum0", {K::Reduction, one([](const Tensor& x) { return x.cumsum(0); })}},
      {"cumsum_1", {K::Reduction, one([](const Tensor& x) { return x.cumsum(-1); })}},
      {"cumprod0", {K::Reduction, one([](const Tensor& x) { return x.cumprod(0); })}},
      {"histc",
       {K::Reduction, one([](const Tensor& x) { return x.nan_to_num(5.0).histc(4, -1, 2); })}},
      {"histc_own",
       {K::Reduction, one([](const Tensor& x) { return x.nan_to_num(5.0, 6.0, -6.0).histc(3); })}},
      {"cumprod_1", {K::Reduction, one([](const Tensor& x) { return x.cumprod(-1); })}},
      {"cummax0", {K::Reduction, two([](const Tensor& x) { return x.cummax(0); })}},
      {"cummin_1", {K::Reduction, two([](const Tensor& x) { return x.cummin(-1); })}},
      {"logcumsumexp0", {K::Reduction, one([](const Tensor& x) { return x.logcumsumexp(0); })}},
      {"logcumsumexp_1", {K::Reduction, one([](const Tensor& x) { return x.logcumsumexp(-1); })}},
      {"sort0", {K::Reduction, two([](const Tensor& x) { return x.sort(0); })}},
      {"sort_desc", {K::Reduction, two([](const Tensor& x) { return x.sort(-1, true); })}},
      {"argsort0", {K::Reduction, one([](const Tensor& x) { return x.argsort(0); })}},
      {"topk1", {K::Reduction, two([](const Tensor& x) { return x.topk(1, 0); })}},
      {"softmax0", {K::Reduction, one([](const Tensor& x) { return x.softmax(0); })}},
      {"softmax_1", {K::Reduction, one([](const Tensor& x) { return x.softmax(-1); })}},
      {"log_softmax_1", {K::Reduction, one([](const Tensor& x) { return x.log_softmax(-1); })}},
      {"flip0", {K::Movement, one([](const Tensor& x) { return x.flip({0}); })}},
      {"flip_all", {K::Movement, one([](const Tensor& x) { return x.flip(reversedDims(x)); })}},
      {"transpose", {K::Movement, one([](const Tensor& x) { return x.transpose(0, -1); })}},
      {"t", {K::Movement, one([](const Tensor& x) { return x.t(); })}},
      {"squeeze", {K::Movement, one([](const Tensor& x) { return x.squeeze(); })}},
      {"squeeze0", {K::Movement, one([](const Tensor& x) { return x.squeeze(0); })}},
      {"unsqueeze0", {K::Movement, one([](const Tensor& x) { return x.unsqueeze(0); })}},
      {"flatten", {K::Movement, one([](const Tensor& x) { return x.flatten(); })}},
      {"reshape", {K::Movement, one([](const Tensor& x) { return x.reshape({-1}); })}},
      {"view", {K::Movement, one([](const Tensor& x) { return x.view({-1}); })}},
      {"permute", {K::Movement, one([](const Tensor& x) { return x.permute(reversedDims(x)); })}},
      {"expand", {K::Movement, one([](const Tensor& x) {
                    Shape s = x.sizes();
                    s.insert(s.begin(), 2);
                    return x.expand(s);
                  })}},
      {"slice_step",
       {K::Movement, one([](const Tensor& x) { return x.slice(0, 1, std::nullopt, 2); })}},
      {"narrow", {K::Movement, one([](const Tensor& x) { return x.narrow(0, 0, 1); })}},
      {"select", {K::Movement, one([](const Tensor& x) { return x.select(0, -1); })}},
      {"chunk", {K::Movement, [](const Tensor& x) { return chunk(x, 2, 0); }}},
      {"split", {K::Reduction, [](const Tensor& x) { return split(x, 1, 0); }}},
      {"cat", {K::Movement, one([](const Tensor& x) {
                 return cat({x, x}, 0);
               })}},
      {"stack", {K::Movement, one([](const Tensor& x) {
                   return stack({x, x}, 0);
                 })}},
      {"pad", {K::Movement, one([](const Tensor& x) {
                 return pad(x, {1, 1});
               })}},
      {"gather0",
       {K::Indexing, one([](const Tensor& x) { return x.gather(0, zeros(x.sizes(), kInt64)); })}},
      {"scatter_add0", {K::Indexing, one([](const Tensor& x) {
                          return x.scatter_add(0, zeros(x.sizes(), kInt64), x);
                        })}},
      {"index_select0",
       {K::Indexing, one([](const Tensor& x) { return x.index_select(0, tensor({0})); })}},
      {"index_add0", {K::Indexing, one([](const Tensor& x) {
                        return x.index_add(0, tensor({0}), x.narrow(0, 0, 1));
                      })}},
      {"mask", {K::Indexing, one([](const Tensor& x) { return x.index({x > 0}); }), true}},
      {"nonzero", {K::Indexing, one([](const Tensor& x) { return nonzero(x); }), true}},
      {"matmul", {K::Reduction, one([](const Tensor& x) {
                    return x.dim() == 2 ? x.matmul(x.t()) : x.matmul(x);
                  })}},
      {"mm", {K::Reduction, one([](const Tensor& x) {
                return x.reshape({1, -1}).mm(x.reshape({-1, 1}));
              })}},
      {"index_put", {K::Indexing, one([](const Tensor& x) {
                       Tensor y = x.clone();
                       return y.index_put_({tensor({0})}, scalar_tensor(5.0, kFloat64));
                     })}},
      {"clone", {K::Elementwise, one([](const Tensor& x) { return x.clone(); })}},
      {"contiguous", {K::Movement, one([](const Tensor& x) { return x.contiguous(); })}},
      {"detach", {K::Movement, one([](const Tensor& x) { return x.detach(); })}},
      {"conv1d", {K::Reduction, one([](const Tensor& x) {
                    return conv1d(x.reshape({1, 1, -1}), full({1, 1, 1}, 0.5, kFloat64));
                  })}},
      {"max_pool1d", {K::Reduction, one([](const Tensor& x) {
                        return max_pool1d(x.reshape({1, 1, -1}), 1);
                      })}},
      {"avg_pool1d", {K::Reduction, one([](const Tensor& x) {
                        return avg_pool1d(x.reshape({1, 1, -1}), 1);
                      })}},
      {"embedding", {K::Indexing, one([](const Tensor& x) {
                       return embedding(x.reshape({-1, 1}), tensor({0, 0}));
                     })}},
      // composites: shapes
      {"view_as", {K::Movement, one([](const Tensor& x) { return x.view_as(x.reshape({-1})); })}},
      {"broadcast_to", {K::Movement, one([](const Tensor& x) {
                          Shape s = x.sizes();
                          s.insert(s.begin(), 2);
                          return x.broadcast_to(s);
                        })}},
      {"swapaxes", {K::Movement, one([](const Tensor& x) { return x.swapaxes(0, -1); })}},
      {"movedim", {K::Movement, one([](const Tensor& x) { return x.movedim(0, -1); })}},
      {"movedim2", {K::Movement, one([](const Tensor& x) { return x.movedim({0, 1}, {-1, 0}); })}},
      {"unbind", {K::Reduction, [](const Tensor& x) { return x.unbind(0); }}},
      {"unbind_1", {K::Reduction, [](const Tensor& x) { return x.unbind(-1); }}},
      {"repeat", {K::Movement, one([](const Tensor& x) {
                    return x.repeat(Shape(static_cast<size_t>(x.dim() + 1), 2));
                  })}},
      {"tile", {K::Movement, one([](const Tensor& x) { return x.tile({2}); })}},
      {"repeat_interleave",
       {K::Movement, one([](const Tensor& x) { return x.repeat_interleave(2); })}},
      {"repeat_interleave0",
       {K::Movement, one([](const Tensor& x) { return x.repeat_interleave(2, 0); })}},
      {"roll", {K::Movement, one([](const Tensor& x) { return x.roll(3); })}},
      {"roll0", {K::Movement, one([](const Tensor& x) { return x.roll(-1, 0); })}},
      {"roll2", {K::Movement, one([](const Tensor& x) { return x.roll({1, 5}, {0, -1}); })}},
      {"diagonal", {K::Movement, one([](const Tensor& x) { return x.diagonal(); })}},
      {"diagonal_off", {K::Movement, one([](const Tensor& x) { return x.diagonal(1, -1, 0); })}},
      {"diagonal_neg", {K::Movement, one([](const Tensor& x) { return x.diagonal(-1); })}},
      {"diag", {K::Movement, one([](const Tensor& x) { return x.diag(); })}},
      {"diag1", {K::Movement, one([](const Tensor& x) { return x.diag(1); })}},
      {"diag_neg", {K::Movement, one([](const Tensor& x) { return x.diag(-2); })}},
      {"trace", {K::Reduction, one([](const Tensor& x) { return x.trace(); })}},
      {"take_along_dim", {K::Reduction, one([](const Tensor& x) {
                            return x.take_along_dim(x.argsort(-1), -1);
                          })}},
      {"take_along_dim_flat", {K::Reduction, one([](const Tensor& x) {
                                 return x.take_along_dim(x.flatten().argsort());
                               })}},
      {"take_along_dim_bcast", {K::Indexing, one([](const Tensor& x) {
                                  return x.take_along_dim(
                                      zeros(Shape(static_cast<size_t>(x.dim()), 1), kInt64), 0);
                                })}},
      {"masked_select",
       {K::Indexing, one([](const Tensor& x) { return x.masked_select(x > 0); }), true}},
      {"broadcast_tensors", {K::Movement, [](const Tensor& x) {
                               Shape s(static_cast<size_t>(x.dim()) + 1, 1);
                               s[0] = 3;
                               return broadcast_tensors({x.unsqueeze(0), zeros(s, kFloat64)});
                             }}},
      {"meshgrid", {K::Movement, [](const Tensor& x) {
                      return meshgrid({x.flatten(), x.flatten().slice(0, 0, 2)}, "ij");
                    }}},
      {"meshgrid_xy", {K::Movement, [](const Tensor& x) {
                         return meshgrid({x.flatten(), x.flatten().slice(0, 0, 3)}, "xy");
                       }}},
      // composites: products
      {"outer_flat", {K::Pairwise, one([](const Tensor& x) {
                        return outer(x.flatten(), x.flatten());
                      })}},
      {"dot", {K::Reduction, one([](const Tensor& x) { return dot(x.flatten(), x.flatten()); })}},
      {"mv", {K::Reduction, one([](const Tensor& x) {
                return x.reshape({1, -1}).mv(x.flatten());
              })}},
      {"addmm", {K::Pairwise, one([](const Tensor& x) {
                   return x.reshape({-1, 1}).addmm(x.reshape({-1, 1}), x.reshape({1, -1}), 0.5, 2);
                 })}},
      {"addmm_beta0", {K::Pairwise, one([](const Tensor& x) {
                         return x.reshape({-1, 1}).addmm(x.reshape({-1, 1}), x.reshape({1, -1}),
                                                         0);
                       })}},
      {"einsum_outer", {K::Pairwise, one([](const Tensor& x) {
                          return einsum("i,j->ij", {x.flatten(), x.flatten()});
                        })}},
      {"einsum_mm", {K::Reduction, one([](const Tensor& x) {
                       return einsum("ij,kj->ik", {x.reshape({1, -1}), x.reshape({1, -1})});
                     })}},
      {"einsum_batch",
       {K::Reduction, one([](const Tensor& x) { return einsum("bij,bkj->bki", {x, x}); })}},
      {"einsum_implicit",
       {K::Reduction, one([](const Tensor& x) { return einsum("bij,bkj", {x, x}); })}},
      {"einsum_ellipsis",
       {K::Reduction, one([](const Tensor& x) { return einsum("...i,...i->...", {x, x}); })}},
      {"einsum_sum0", {K::Reduction, one([](const Tensor& x) { return einsum("i...->...", {x}); })}},
      {"einsum_diag", {K::Pairwise, one([](const Tensor& x) {
                         return einsum("ii->i", {outer(x.flatten(), x.flatten())});
                       })}},
      {"einsum_three", {K::Reduction, one([](const Tensor& x) {
                          Tensor f = x.flatten();
                          return einsum("i,j,k->", {f, f, f});
                        })}},
      {"einsum_chain", {K::Reduction, one([](const Tensor& x) {
                          return einsum("ij,jk,kl->il",
                                        {x.reshape({-1, 1}), x.reshape({1, -1}), x.reshape({-1, 1})});
                        })}},
      // composites: elementwise and reductions
      {"atan2", {K::Pairwise, outer([](const Tensor& a, const Tensor& b) { return a.atan2(b); })}},
      {"logaddexp",
       {K::Pairwise, outer([](const Tensor& a, const Tensor& b) { return logaddexp(a, b); })}},
      {"isclose", {K::Pairwise, outer([](const Tensor& a, const Tensor& b) {
                     return isclose(a, b, 0.5, 0.1);
                   })}},
      {"isclose_nan", {K::Elementwise, one([](const Tensor& x) {
                         return isclose(x, x * 1.0000001, 1e-5, 1e-8, true);
                       })}},
      {"allclose", {K::Reduction, one([](const Tensor& x) {
                      return scalar_tensor(allclose(x, x + 1e-9));
                    }),
                    true}},
      {"equal", {K::Reduction, one([](const Tensor& x) {
                   return scalar_tensor(equal(x, x.clone()));
                 }),
                 true}},
      {"frac", {K::Elementwise, one([](const Tensor& x) { return x.frac(); })}},
      {"type_as", {K::Elementwise, one([](const Tensor& x) {
                     return x.type_as(zeros({1}, kFloat32));
                   })}},
      {"new_full", {K::Movement, one([](const Tensor& x) { return x.new_full({2, 3}, 1.5); })}},
      {"nansum", {K::Reduction, one([](const Tensor& x) { return x.nansum(); })}},
      {"nansum0", {K::Reduction, one([](const Tensor& x) { return x.nansum({0}); })}},
      {"count_nonzero", {K::Reduction, one([](const Tensor& x) { return x.count_nonzero(); })}},
      {"count_nonzero0",
       {K::Reduction, one([](const Tensor& x) { return x.count_nonzero({0}); })}},
      {"median", {K::Reduction, one([](const Tensor& x) { return x.median(); })}},
      {"median0", {K::Reduction, two([](const Tensor& x) { return x.median(0); })}},
      {"median_1k", {K::Reduction, two([](const Tensor& x) { return x.median(-1, true); })}},
      // composites: aliases
      {"absolute", {K::Elementwise, one([](const Tensor& x) { return x.absolute(); })}},
      {"arccos", {K::Elementwise, one([](const Tensor& x) { return x.arccos(); })}},
      {"arcsinh", {K::Elementwise, one([](const Tensor& x) { return x.arcsinh(); })}},
      {"negative", {K::Elementwise, one([](const Tensor& x) { return x.negative(); })}},
      {"fix", {K::Elementwise, one([](const Tensor& x) { return x.fix(); })}},
      {"sgn", {K::Elementwise, one([](const Tensor& x) { return x.sgn(); })}},
      {"clip", {K::Elementwise, one([](const Tensor& x) { return x.clip(-1, 2); })}},
      {"true_divide",
       {K::Pairwise, outer([](const Tensor& a, const Tensor& b) { return a.true_divide(b); })}},
      {"deg2rad", {K::Elementwise, one([](const Tensor& x) { return x.deg2rad(); })}},
      {"rad2deg", {K::Elementwise, one([](const Tensor& x) { return x.rad2deg(); })}},
      // composites: shapes
      {"fliplr", {K::Movement, one([](const Tensor& x) { return x.fliplr(); })}},
      {"flipud", {K::Movement, one([](const Tensor& x) { return x.flipud(); })}},
      {"rot90", {K::Movement, one([](const Tensor& x) { return x.rot90(); })}},
      {"rot90_2", {K::Movement, one([](const Tensor& x) { return x.rot90(2, {0, -1}); })}},
      {"rot90_neg", {K::Movement, one([](const Tensor& x) { return x.rot90(-1, {1, 0}); })}},
      {"ravel", {K::Movement, one([](const Tensor& x) { return x.ravel(); })}},
      {"tensor_split", {K::Movement, [](const Tensor& x) { return x.tensor_split(3); }}},
      {"tensor_split_idx",
       {K::Movement, [](const Tensor& x) { return x.tensor_split(std::vector<int64_t>{1, 5}, -1); }}},
      {"tensor_split_unordered", {K::Movement, [](const Tensor& x) {
         return x.tensor_split(std::vector<int64_t>{1, 5, 2, -9, 8}, -1);
       }}},
      {"hsplit", {K::Movement, [](const Tensor& x) { return x.hsplit(2); }}},
      {"vsplit_idx",
       {K::Movement, [](const Tensor& x) { return x.vsplit(std::vector<int64_t>{1}); }}},
      {"diff", {K::Movement, one([](const Tensor& x) { return x.diff(); })}},
      {"diff2", {K::Movement, one([](const Tensor& x) { return x.diff(2, 0); })}},
      {"diff_prepend",
       {K::Movement, one([](const Tensor& x) { return x.diff(1, 0, x.narrow(0, 0, 1)); })}},
      {"take", {K::Indexing, one([](const Tensor& x) { return x.take(tensor({0, -1})); })}},
      {"diag_embed", {K::Movement, one([](const Tensor& x) { return x.diag_embed(); })}},
      {"diag_embed_off",
       {K::Movement, one([](const Tensor& x) { return x.diag_embed(1, 0, -1); })}},
      // composites: products
      {"inner", {K::Reduction, one([](const Tensor& x) { return x.inner(x); })}},
      {"vdot", {K::Reduction, one([](const Tensor& x) { return x.flatten().vdot(x.flatten()); })}},
      {"kron", {K::Movement, one([](const Tensor& x) {
                  return x.kron(from_vector(std::vector<double>{1.0, -2.0}, {1, 2}));
                })}},
      {"cross", {K::Elementwise, one([](const Tensor& x) { return x.cross(x.flip({-1})); })}},
      {"erfc", {K::Elementwise, one([](const Tensor& x) { return x.erfc(); })}},
      {"greater",
       {K::Pairwise, outer([](const Tensor& a, const Tensor& b) { return a.greater(b); })}},
      {"less_equal",
       {K::Pairwise, outer([](const Tensor& a, const Tensor& b) { return a.less_equal(b); })}},
      {"not_equal",
       {K::Pairwise, outer([](const Tensor& a, const Tensor& b) { return a.not_equal(b); })}},
      {"angle", {K::Elementwise, one([](const Tensor& x) { return x.angle(); })}},
      {"isposinf", {K::Elementwise, one([](const Tensor& x) { return x.isposinf(); })}},
      {"isneginf", {K::Elementwise, one([](const Tensor& x) { return x.isneginf(); })}},
      {"isreal", {K::Elementwise, one([](const Tensor& x) { return x.isreal(); })}},
      {"conj", {K::Elementwise, one([](const Tensor& x) { return x.conj(); })}},
      {"dist", {K::Reduction, one([](const Tensor& x) {
                  return x.dist(x.dim() > 0 ? x.flip({0}) : x * 2);
                })}},
      {"dist_inf", {K::Reduction, one([](const Tensor& x) {
                      return x.dist(ones_like(x), std::numeric_limits<double>::infinity());
                    })}},
      {"cov", {K::Reduction, one([](const Tensor& x) { return x.cov(); })}},
      {"cov0", {K::Reduction, one([](const Tensor& x) { return x.cov(0); })}},
      {"corrcoef", {K::Reduction, one([](const Tensor& x) { return x.corrcoef(); })}},
      {"prelu", {K::Elementwise, one([](const Tensor& x) {
                   return x.prelu(from_vector(std::vector<double>{0.25}, {1}));
                 })}},
      {"diagflat", {K::Movement, one([](const Tensor& x) { return x.diagflat(); })}},
      {"diagflat_off", {K::Movement, one([](const Tensor& x) { return x.diagflat(-1); })}},
      {"mH", {K::Movement, one([](const Tensor& x) { return x.mH(); })}},
      {"sum_to_size", {K::Reduction, one([](const Tensor& x) {
                         return x.sum_to_size(Shape(static_cast<size_t>(std::max<int64_t>(x.dim(), 1)), 1));
                       })}},
      {"slice_scatter", {K::Movement, one([](const Tensor& x) {
                           if (x.dim() == 0) return x;
                           Tensor src = x.narrow(0, 0, (x.size(0) + 1) / 2) * 3;
                           return x.slice_scatter(src, 0, 0, std::nullopt, 2);
                         })}},
      {"select_scatter", {K::Movement, one([](const Tensor& x) {
                            return x.select_scatter(x.select(0, -1) * 2, 0, 0);
                          })}},
      {"diagonal_scatter", {K::Movement, one([](const Tensor& x) {
                              return x.diagonal_scatter(x.diagonal() * -1);
                            })}},
      {"addmv", {K::Reduction, one([](const Tensor& x) {
                   return ones({1}, kFloat64).addmv(x.reshape({1, -1}), x.flatten(), 0.5, 2);
                 })}},
      {"addr", {K::Reduction, one([](const Tensor& x) {
                  return ones({1}, kFloat64).addr(x.flatten(), x.flatten(), 2);
                })}},
      {"baddbmm", {K::Reduction, one([](const Tensor& x) {
                     return ones({1}, kFloat64)
                         .baddbmm(x.reshape({1, 1, -1}), x.reshape({1, -1, 1}), 1, 0.5);
                   })}},
      {"matrix_power", {K::Reduction, one([](const Tensor& x) {
                          return outer(x.flatten(), x.flatten()).matrix_power(3);
                        })}},
      // composites: reductions
      {"nanmean", {K::Reduction, one([](const Tensor& x) { return x.nanmean(); })}},
      {"nanmean0", {K::Reduction, one([](const Tensor& x) { return x.nanmean({0}); })}},
      {"msort", {K::Reduction, one([](const Tensor& x) { return x.msort(); })}},
      {"kthvalue", {K::Reduction, two([](const Tensor& x) { return x.kthvalue(2, 0); })}},
      // composites: indexing and in-place forms (on a clone, so the gradient reaches x)
      {"index_fill",
       {K::Indexing, one([](const Tensor& x) { return x.index_fill(0, tensor({0, -1}), -1.5); })}},
      {"index_copy", {K::Indexing, one([](const Tensor& x) {
                        return x.index_copy(0, tensor({0}), x.narrow(0, 0, 1) * 2);
                      })}},
      {"pow_", {K::Elementwise, one([](const Tensor& x) { return x.clone().pow_(2); })}},
      {"clamp_min_", {K::Elementwise, one([](const Tensor& x) { return x.clone().clamp_min_(0.5); })}},
      {"lerp_", {K::Elementwise, one([](const Tensor& x) { return x.clone().lerp_(x * 2, 0.25); })}},
      {"addcmul_",
       {K::Elementwise, one([](const Tensor& x) { return x.clone().addcmul_(x, x, 0.5); })}},
      {"addcdiv_", {K::Elementwise, one([](const Tensor& x) {
                      return x.clone().addcdiv_(x, x * x + 1, -2);
                    })}},
      {"index_add_", {K::Indexing, one([](const Tensor& x) {
                        return x.clone().index_add_(0, tensor({0}), x.narrow(0, 0, 1));
                      })}},
      // composites: more elementwise
      {"hypot", {K::Pairwise, outer([](const Tensor& a, const Tensor& b) { return a.hypot(b); })}},
      {"fmax", {K::Pairwise, outer([](const Tensor& a, const Tensor& b) { return a.fmax(b); })}},
      {"fmin", {K::Pairwise, outer([](const Tensor& a, const Tensor& b) { return a.fmin(b); })}},
      {"float_power", {K::Elementwise, one([](const Tensor& x) { return x.float_power(3); })}},
      {"logaddexp2",
       {K::Pairwise, outer([](const Tensor& a, const Tensor& b) { return a.logaddexp2(b); })}},
      {"ldexp", {K::Pairwise, outer([](const Tensor& a, const Tensor& b) { return a.ldexp(b); })}},
      {"sinc", {K::Elementwise, one([](const Tensor& x) { return x.sinc(); })}},
      {"logit", {K::Elementwise, one([](const Tensor& x) { return x.logit(); })}},
      {"logit_eps", {K::Elementwise, one([](const Tensor& x) { return x.logit(0.25); })}},
      {"xlogy", {K::Pairwise, outer([](const Tensor& a, const Tensor& b) { return a.xlogy(b); })}},
      {"lgamma", {K::Elementwise, one([](const Tensor& x) { return x.lgamma(); })}},
      {"erfinv", {K::Elementwise, one([](const Tensor& x) { return x.erfinv(); })}},
      {"xlog1py",
       {K::Pairwise, outer([](const Tensor& a, const Tensor& b) { return a.xlog1py(b); })}},
      {"signbit", {K::Elementwise, one([](const Tensor& x) { return x.signbit(); })}},
      {"copysign",
       {K::Pairwise, outer([](const Tensor& a, const Tensor& b) { return a.copysign(b); })}},
      {"quantile", {K::Reduction, one([](const Tensor& x) { return x.quantile(0.3); })}},
      {"quantile0", {K::Reduction, one([](const Tensor& x) { return x.quantile(0.75, 0, true); })}},
      {"quantile_nearest",
       {K::Reduction, one([](const Tensor& x) { return x.quantile(0.5, -1, false, "nearest"); })}},
      {"quantile_midpoint",
       {K::Reduction, one([](const Tensor& x) { return x.quantile(0.4, 0, false, "midpoint"); })}},
  };
  return ops;
}

// ---- the reference ----

struct Case {
  std::string op, input;
  bool error = false;
  std::vector<ReferenceTensor> outputs;
  std::optional<std::vector<double>> grad; // of sum(output0 * w); none: not differentiable
};

std::vector<Case> loadCases() {
  std::vector<Case> cases;
  for (const std::vector<std::string>& f : readReferenceLines(WEFT_EDGE_CASES)) {
    Case c{f.at(0), f.at(1), f.at(2) == "error"};
    if (!c.error) {
      for (const std::string& out : splitOn(f.at(3), ';'))
        c.outputs.push_back(parseReferenceTensor(out));
      if (f.at(4) != "-") c.grad = parseValues(f.at(4));
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

const std::vector<Case>& cases() {
  static const std::vector<Case> all = loadCases();
  return all;
}

Tensor input(const std::string& name) {
  double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  std::vector<double> specials{nan, inf, -inf, 0.0, -0.0, 1.5, -2.0, 3.0};
  if (name == "scalar") return scalar_tensor(2.5, kFloat64);
  if (name == "scalar_nan") return scalar_tensor(nan, kFloat64);
  if (name == "specials") return from_vector(specials);
  if (name == "specials2d") return from_vector(specials, {2, 4});
  if (name == "ties") return from_vector(std::vector<double>{3, 1, 3, -1, -1, 2}, {2, 3});
  if (name == "empty") return zeros({0}, kFloat64);
  if (name == "empty30") return zeros({3, 0}, kFloat64);
  if (name == "empty03") return zeros({0, 3}, kFloat64);
  if (name == "cube")
    return ((arange(24, kFloat64) * 7).remainder(24) - 11.5).div(8).reshape({2, 3, 4});
  ADD_FAILURE() << "unknown input " << name;
  return {};
}

/// Runs `f`, recording the weft::Error it throws; any other exception fails the test.
template <typename F> bool throwsWeftError(F f, std::string& message) {
  try {
    f();
    return false;
  } catch (const Error& e) {
    message = e.what();
    return true;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "a non-weft exception left weft: " << e.what();
    return true;
  }
}

bool differentiable(const Tensor& t) {
  return t.is_floating_point() && t.requires_grad();
}

/// The gradient the reference computes: of sum(output0 * w) with respect to `x`.
Tensor gradientOf(const OpFn& op, const Tensor& x) {
  Tensor y = op(x)[0];
  Tensor g =
      autograd::grad({(y * referenceWeights(y)).sum()}, {x}, {}, std::nullopt, false, true)[0];
  return g.defined() ? g : zeros_like(x);
}

TEST(EdgeCases, TheTableAndTheReferenceListTheSameOps) {
  std::set<std::string> referenced;
  for (const Case& c : cases())
    referenced.insert(c.op);
  for (const auto& [name, op] : edgeOps())
    EXPECT_TRUE(referenced.count(name)) << name << " has no reference results";
  for (const std::string& name : referenced)
    EXPECT_TRUE(edgeOps().count(name)) << name << " is not in the test's table";
  EXPECT_GE(cases().size(), 1500u);
}

TEST(EdgeCases, EagerGivesPyTorchsResultOrAWeftError) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.op + " on " + c.input);
    const OpFn& op = edgeOps().at(c.op).fn;
    Tensor x = input(c.input).requires_grad_();
    std::string message;
    Outputs out;
    if (throwsWeftError([&] { out = op(x); }, message)) {
      EXPECT_TRUE(c.error) << "PyTorch gives a result, weft raised: " << message;
      continue;
    }
    EXPECT_FALSE(c.error) << "PyTorch raises, weft returned a result";
    if (c.error) continue;
    EXPECT_TRUE(sameAsReference(out, c.outputs));
    EXPECT_EQ(!out.empty() && differentiable(out[0]), c.grad.has_value());
    if (c.grad && differentiable(out[0])) {
      EXPECT_TRUE(sameReferenceValues(gradientOf(op, x).to_vector<double>(), *c.grad))
          << "gradient";
    }
  }
}

/// Compiled: per input, one compiled function runs every op PyTorch accepts there and returns all
/// their outputs, and another their gradients (autograd::grad inside the function); ops PyTorch
/// rejects are compiled one by one and must raise a weft::Error.
TEST(EdgeCases, CompiledGivesPyTorchsResultOrAWeftError) {
  std::map<std::string, std::vector<const Case*>> byInput;
  for (const Case& c : cases())
    byInput[c.input].push_back(&c);
  for (const auto& [name, all] : byInput) {
    SCOPED_TRACE("input " + name);
    Tensor x = input(name);
    std::vector<const Case*> ok, diff;
    for (const Case* c : all) {
      const EdgeOp& op = edgeOps().at(c->op);
      CompileOptions options;
      if (op.readsValues) options.specialize_on_values();
      if (c->error || op.readsValues) { // alone
        SCOPED_TRACE(c->op);
        auto f = compile([&](const Tensor& t) { return op.fn(t); }, options);
        std::string message;
        Outputs out;
        bool raised = throwsWeftError([&] { out = f(x); }, message);
        EXPECT_EQ(raised, c->error) << message;
        if (!raised && !c->error) {
          EXPECT_TRUE(sameAsReference(out, c->outputs));
        }
        continue;
      }
      ok.push_back(c);
      if (c->grad) diff.push_back(c);
    }
    std::vector<size_t> counts; // outputs per op, as traced
    auto forward = compile([&](const Tensor& t) {
      Outputs all;
      counts.clear();
      for (const Case* c : ok) {
        Outputs mine = edgeOps().at(c->op).fn(t);
        counts.push_back(mine.size());
        all.insert(all.end(), mine.begin(), mine.end());
      }
      return all;
    });
    Outputs out = forward(x);
    size_t k = 0;
    for (size_t i = 0; i < ok.size(); ++i) {
      SCOPED_TRACE(ok[i]->op);
      auto first = out.begin() + static_cast<ptrdiff_t>(k);
      k += counts[i];
      EXPECT_TRUE(
          sameAsReference(Outputs(first, out.begin() + static_cast<ptrdiff_t>(k)), ok[i]->outputs));
    }
    auto gradients = compile([&](const Tensor& t) {
      Outputs grads;
      for (const Case* c : diff)
        grads.push_back(gradientOf(edgeOps().at(c->op).fn, t));
      return grads;
    });
    Outputs grads = gradients(x);
    for (size_t i = 0; i < diff.size(); ++i) {
      SCOPED_TRACE(diff[i]->op);
      EXPECT_TRUE(sameReferenceValues(grads[i].to_vector<double>(), *diff[i]->grad)) << "gradient";
    }
  }
}

/// A huge input (2^60 float32 elements as a view of one): ops that would make a tensor that
/// large raise a weft::Error (out of memory or too large) at once; views give the right shape.
/// Ops whose work grows with the elements are left out: summing 2^60 elements (or splitting them
/// into 2^60 tensors) is legal, only endless.
constexpr int64_t kHuge = int64_t{1} << 60;

TEST(EdgeCases, HugeInputsGiveAWeftErrorOrAView) {
  Tensor x = ones({1}).expand({kHuge});
  for (const auto& [name, op] : edgeOps()) {
    if (op.kind == Kind::Reduction || op.readsValues) continue;
    SCOPED_TRACE(name);
    for (bool compiled : {false, true}) {
      Outputs out;
      std::string message;
      bool raised = throwsWeftError(
          [&] {
            if (compiled)
              out = compile([&](const Tensor& t) { return op.fn(t); })(x);
            else
              out = op.fn(x);
          },
          message);
      if (raised) continue;
      for (const Tensor& o : out)
        EXPECT_LE(o.numel(), 2 * kHuge) << "an implausible result shape";
    }
  }
  // Shapes given as numbers overflow or exceed memory: errors, eagerly and compiled.
  std::vector<std::pair<const char*, OpFn>> makers = {
      {"zeros", one([](const Tensor&) {
         return zeros({kHuge, kHuge});
       })},
      {"full", one([](const Tensor&) {
         return full({kHuge, 16}, 1.0);
       })},
      {"rand", one([](const Tensor&) {
         return rand({kHuge, kHuge});
       })},
      {"reshape", one([](const Tensor& t) {
         return t.reshape({kHuge, kHuge, 0});
       })},
      {"expand", one([](const Tensor& t) {
         return t.expand({kHuge, kHuge});
       })},
      {"pad", one([](const Tensor& t) {
         return pad(t, {kHuge * 4, kHuge * 4});
       })},
      {"one_hot", one([](const Tensor&) {
         return one_hot(tensor({0, 1}), kHuge * 4);
       })},
      {"arange", one([](const Tensor&) { return arange(0, kHuge * 4); })},
      {"eye", one([](const Tensor&) { return eye(kHuge, kHuge); })},
  };
  for (const auto& [name, op] : makers) {
    SCOPED_TRACE(name);
    std::string message;
    EXPECT_TRUE(throwsWeftError([&] { (void)op(ones({2})); }, message));
    EXPECT_TRUE(throwsWeftError(
        [&] { (void)compile([&](const Tensor& t) { return op(t); })(ones({2})); }, message));
  }
}

} // namespace
} // namespace weft::test
