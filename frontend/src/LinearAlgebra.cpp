// Products: outer, dot, mv, addmm, einsum, inner, vdot, ger, addmv, addr, baddbmm, addbmm and
// matrix_power on matmul; kron and cross elementwise.
#include "TensorImpl.h"
#include "weft/Autograd.h"
#include "weft/Functions.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>

namespace weft {

Tensor outer(const Tensor& a, const Tensor& b, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(a.defined() && b.defined(), Value, "outer: called with an undefined tensor");
  WEFT_CHECK(a.dim() == 1 && b.dim() == 1, Shape, "outer: expected 1-D arguments, got ",
             shapeString(a.sizes()), " and ", shapeString(b.sizes()));
  return a.unsqueeze(1) * b.unsqueeze(0);
}

Tensor dot(const Tensor& a, const Tensor& b, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(a.defined() && b.defined(), Value, "dot: called with an undefined tensor");
  WEFT_CHECK(a.dim() == 1 && b.dim() == 1, Shape, "dot: 1D tensors expected, but got ", a.dim(),
             "D and ", b.dim(), "D tensors");
  WEFT_CHECK(a.dtype() == b.dtype(), DType, "dot: expected both vectors to have same dtype, but ",
             "found ", dtypeName(a.dtype()), " and ", dtypeName(b.dtype()));
  WEFT_CHECK(a.size(0) == b.size(0), Shape, "dot: inconsistent tensor size, expected tensor [",
             a.size(0), "] and src [", b.size(0), "] to have the same number of elements, but got ",
             a.size(0), " and ", b.size(0), " elements respectively");
  return matmul(a, b);
}

Tensor mv(const Tensor& mat, const Tensor& vec, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(mat.defined() && vec.defined(), Value, "mv: called with an undefined tensor");
  WEFT_CHECK(mat.dim() == 2 && vec.dim() == 1, Shape, "mv: expected a matrix and a vector, got ",
             shapeString(mat.sizes()), " and ", shapeString(vec.sizes()));
  return matmul(mat, vec);
}

namespace {

/// beta * self + alpha * product (self broadcast to it, not read where beta is 0): addmm,
/// addmv, addr, baddbmm and addbmm.
Tensor scaledSum(const Tensor& self, Tensor product, Scalar beta, Scalar alpha, const char* op) {
  WEFT_CHECK(self.defined(), Value, op, ": called with an undefined tensor");
  WEFT_CHECK(self.dtype() == product.dtype(), DType, op, ": self and the product must have the ",
             "same dtype, got ", dtypeName(self.dtype()), " and ", dtypeName(product.dtype()));
  if (alpha.toDouble() != 1) product = product * alpha;
  (void)self.expand(product.sizes()); // self must broadcast to the product, read or not
  if (beta.toDouble() == 0) return product;
  return (beta.toDouble() == 1 ? self : self * beta) + product;
}

} // namespace

Tensor addmm(const Tensor& self, const Tensor& mat1, const Tensor& mat2, Scalar beta, Scalar alpha,
             std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(self.defined() && mat1.defined() && mat2.defined(), Value,
             "addmm: called with an undefined tensor");
  WEFT_CHECK(self.dtype() == mat1.dtype() && mat1.dtype() == mat2.dtype(), DType,
             "addmm: self and the matrices must have the same dtype, got ", dtypeName(self.dtype()),
             ", ", dtypeName(mat1.dtype()), " and ", dtypeName(mat2.dtype()));
  return scaledSum(self, mat1.mm(mat2), beta, alpha, "addmm");
}

namespace {

/// einsum's labels: letters 0..51 in ASCII order (A-Z, a-z), then one per ellipsis dim.
using Labels = std::vector<int>;
constexpr int kEllipsisLabel = 52;

int letterLabel(char c) {
  return c >= 'A' && c <= 'Z' ? c - 'A' : c >= 'a' && c <= 'z' ? 26 + (c - 'a') : -1;
}
char labelLetter(int l) {
  return static_cast<char>(l < 26 ? 'A' + l : 'a' + (l - 26));
}

/// One term of the equation: its letters, and where its ellipsis stands (-1: none).
struct Term {
  Labels letters;
  int ellipsisAt = -1;
};

Term parseTerm(std::string_view s, std::string_view equation) {
  Term t;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s.substr(i, 3) == "...") {
      WEFT_CHECK(t.ellipsisAt < 0, Value, "einsum: more than one ellipsis in a term of \"",
                 equation, "\"");
      t.ellipsisAt = static_cast<int>(t.letters.size());
      i += 2;
      continue;
    }
    int l = letterLabel(s[i]);
    WEFT_CHECK(l >= 0, Value, "einsum: invalid subscript '", s[i], "' in \"", equation,
               "\": subscripts are letters A-Z and a-z");
    t.letters.push_back(l);
  }
  return t;
}

/// The labels of a term whose ellipsis covers `covered` dims, right-aligned among `widest`.
Labels expandTerm(const Term& t, int64_t covered, int64_t widest) {
  Labels r(t.letters.begin(), t.letters.begin() + std::max(t.ellipsisAt, 0));
  for (int64_t k = 0; k < covered; ++k)
    r.push_back(kEllipsisLabel + static_cast<int>(widest - covered + k));
  if (t.ellipsisAt >= 0)
    r.insert(r.end(), t.letters.begin() + t.ellipsisAt, t.letters.end());
  else
    r = t.letters;
  return r;
}

struct Operand {
  Tensor value;
  Labels labels;
};

/// Sums the dims of `op` whose labels `keep` rejects.
void sumUnkept(Operand& op, const std::function<bool(int)>& keep) {
  Shape dims;
  Labels kept;
  for (size_t i = 0; i < op.labels.size(); ++i)
    if (keep(op.labels[i]))
      kept.push_back(op.labels[i]);
    else
      dims.push_back(static_cast<int64_t>(i));
  if (dims.empty()) return;
  op.value = op.value.sum(dims);
  op.labels = kept;
}

/// One operand's dims permuted into `order` (labels it has).
Tensor arrange(const Operand& op, const Labels& order) {
  Shape perm;
  for (int l : order)
    perm.push_back(std::find(op.labels.begin(), op.labels.end(), l) - op.labels.begin());
  return op.value.permute(perm);
}

} // namespace

Tensor einsum(std::string_view equation, const std::vector<Tensor>& operands,
              std::source_location loc) {
  CallSite cs(loc);
  std::string eq;
  for (char c : equation)
    if (c != ' ') eq.push_back(c);
  size_t arrow = eq.find("->");
  std::string_view lhs = std::string_view(eq).substr(0, arrow);
  std::vector<Term> terms;
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    terms.push_back(parseTerm(lhs.substr(start, comma - start), equation));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  WEFT_CHECK(terms.size() == operands.size(), Value, "einsum: \"", equation, "\" names ",
             terms.size(), " operands, but ", operands.size(), " were given");
  int64_t widest = 0;
  std::vector<int64_t> covered;
  for (size_t i = 0; i < terms.size(); ++i) {
    WEFT_CHECK(operands[i].defined(), Value, "einsum: operand ", i, " is an undefined tensor");
    auto letters = static_cast<int64_t>(terms[i].letters.size());
    const int64_t rank = operands[i].dim();
    WEFT_CHECK(terms[i].ellipsisAt >= 0 ? rank >= letters : rank == letters, Shape,
               "einsum: the term for operand ", i, " of \"", equation, "\" has ", letters,
               " subscripts", terms[i].ellipsisAt >= 0 ? " and an ellipsis" : "",
               ", but the operand has ", rank, " dims");
    covered.push_back(terms[i].ellipsisAt >= 0 ? rank - letters : 0);
    widest = std::max(widest, covered.back());
  }
  std::vector<Operand> ops;
  std::array<int, kEllipsisLabel> uses{};
  for (size_t i = 0; i < terms.size(); ++i) {
    ops.push_back({operands[i], expandTerm(terms[i], covered[i], widest)});
    for (int l : terms[i].letters)
      ++uses[static_cast<size_t>(l)];
  }
  Labels output;
  if (arrow == std::string::npos) { // the ellipsis dims, then the letters used once, sorted
    for (int64_t k = 0; k < widest; ++k)
      output.push_back(kEllipsisLabel + static_cast<int>(k));
    for (int l = 0; l < kEllipsisLabel; ++l)
      if (uses[static_cast<size_t>(l)] == 1) output.push_back(l);
  } else {
    Term out = parseTerm(std::string_view(eq).substr(arrow + 2), equation);
    output = expandTerm(out, out.ellipsisAt >= 0 ? widest : 0, widest);
    for (size_t i = 0; i < out.letters.size(); ++i) {
      int l = out.letters[i];
      WEFT_CHECK(uses[static_cast<size_t>(l)] > 0, Value, "einsum: output subscript '",
                 labelLetter(l), "' of \"", equation, "\" appears in no input");
      WEFT_CHECK(std::count(out.letters.begin(), out.letters.end(), l) == 1, Value,
                 "einsum: output subscript '", labelLetter(l), "' of \"", equation,
                 "\" appears more than once");
    }
  }
  auto inOutput = [&](int l) { return std::find(output.begin(), output.end(), l) != output.end(); };
  // Per operand: a label repeated in it takes the diagonal; a label no other operand and not the
  // output has is summed at once.
  for (size_t i = 0; i < ops.size(); ++i) {
    Operand& op = ops[i];
    for (bool again = true; again;) {
      again = false;
      for (size_t p = 0; p < op.labels.size() && !again; ++p)
        for (size_t q = p + 1; q < op.labels.size() && !again; ++q) {
          if (op.labels[p] != op.labels[q]) continue;
          WEFT_CHECK(op.value.size(static_cast<int64_t>(p)) ==
                         op.value.size(static_cast<int64_t>(q)),
                     Shape, "einsum: subscript repeated in operand ", i, " of \"", equation,
                     "\" labels dims of sizes ", op.value.size(static_cast<int64_t>(p)), " and ",
                     op.value.size(static_cast<int64_t>(q)));
          int l = op.labels[p];
          op.value = op.value.diagonal(0, static_cast<int64_t>(p), static_cast<int64_t>(q));
          op.labels.erase(op.labels.begin() + static_cast<std::ptrdiff_t>(q));
          op.labels.erase(op.labels.begin() + static_cast<std::ptrdiff_t>(p));
          op.labels.push_back(l);
          again = true;
        }
    }
    sumUnkept(op, [&](int l) {
      if (inOutput(l)) return true;
      for (size_t j = 0; j < ops.size(); ++j)
        if (j != i &&
            std::find(ops[j].labels.begin(), ops[j].labels.end(), l) != ops[j].labels.end())
          return true;
      return false;
    });
  }
  // Fold from the left: the pair's shared labels that a later operand or the output needs are
  // batch dims, the other shared ones are contracted (a matmul; without any, a broadcast product).
  Operand acc = ops[0];
  for (size_t i = 1; i < ops.size(); ++i) {
    Operand& next = ops[i];
    auto later = [&](int l) {
      if (inOutput(l)) return true;
      for (size_t j = i + 1; j < ops.size(); ++j)
        if (std::find(ops[j].labels.begin(), ops[j].labels.end(), l) != ops[j].labels.end())
          return true;
      return false;
    };
    auto has = [](const Operand& op, int l) {
      return std::find(op.labels.begin(), op.labels.end(), l) != op.labels.end();
    };
    sumUnkept(acc, [&](int l) { return later(l) || has(next, l); });
    sumUnkept(next, [&](int l) { return later(l) || has(acc, l); });
    Labels batch, contracted, aOnly, bOnly;
    std::vector<int64_t> sizeOf(static_cast<size_t>(kEllipsisLabel + widest), 1);
    for (size_t k = 0; k < acc.labels.size(); ++k) {
      int l = acc.labels[k];
      sizeOf[static_cast<size_t>(l)] = acc.value.size(static_cast<int64_t>(k));
      (has(next, l) ? (later(l) ? batch : contracted) : aOnly).push_back(l);
    }
    for (size_t k = 0; k < next.labels.size(); ++k) {
      int l = next.labels[k];
      int64_t n = next.value.size(static_cast<int64_t>(k));
      int64_t& s = sizeOf[static_cast<size_t>(l)];
      if (!has(acc, l)) {
        s = n;
        bOnly.push_back(l);
        continue;
      }
      WEFT_CHECK(s == n || s == 1 || n == 1, Shape, "einsum: a subscript of \"", equation,
                 "\" labels dims of sizes ", s, " and ", n, ", which do not broadcast");
      s = s == 1 ? n : s;
    }
    auto sizes = [&](const Labels& ls) {
      Shape r;
      for (int l : ls)
        r.push_back(sizeOf[static_cast<size_t>(l)]);
      return r;
    };
    auto product = [](const Shape& s) {
      int64_t p = 1;
      for (int64_t v : s)
        p *= v;
      return p;
    };
    Labels result = batch;
    result.insert(result.end(), aOnly.begin(), aOnly.end());
    result.insert(result.end(), bOnly.begin(), bOnly.end());
    Tensor value;
    if (contracted.empty()) { // a broadcast product: [batch, aOnly, 1...] * [batch, 1..., bOnly]
      Labels aOrder = batch, bOrder = batch;
      aOrder.insert(aOrder.end(), aOnly.begin(), aOnly.end());
      bOrder.insert(bOrder.end(), bOnly.begin(), bOnly.end());
      Tensor a = arrange(acc, aOrder), b = arrange(next, bOrder);
      Shape aShape = a.sizes(), bShape(b.sizes().begin(), b.sizes().begin() + batch.size());
      aShape.insert(aShape.end(), bOnly.size(), 1);
      bShape.insert(bShape.end(), aOnly.size(), 1);
      bShape.insert(bShape.end(), b.sizes().begin() + static_cast<std::ptrdiff_t>(batch.size()),
                    b.sizes().end());
      value = a.reshape(aShape) * b.reshape(bShape);
    } else { // [batch, M, K] @ [batch, K, N]
      Labels aOrder = batch, bOrder = batch;
      aOrder.insert(aOrder.end(), aOnly.begin(), aOnly.end());
      aOrder.insert(aOrder.end(), contracted.begin(), contracted.end());
      bOrder.insert(bOrder.end(), contracted.begin(), contracted.end());
      bOrder.insert(bOrder.end(), bOnly.begin(), bOnly.end());
      Tensor a = arrange(acc, aOrder), b = arrange(next, bOrder);
      const int64_t k = product(sizes(contracted));
      // A contracted dim of size 1 on one side broadcasts to the other's.
      Shape aFull(a.sizes().begin(), a.sizes().begin() + batch.size()), bFull;
      for (int l : aOnly)
        aFull.push_back(acc.value.size(std::find(acc.labels.begin(), acc.labels.end(), l) -
                                       acc.labels.begin()));
      for (int64_t s : sizes(contracted)) {
        aFull.push_back(s);
        bFull.push_back(s);
      }
      bFull.insert(bFull.begin(), b.sizes().begin(), b.sizes().begin() + batch.size());
      for (int l : bOnly)
        bFull.push_back(next.value.size(std::find(next.labels.begin(), next.labels.end(), l) -
                                        next.labels.begin()));
      a = a.expand(aFull);
      b = b.expand(bFull);
      Shape aMat(a.sizes().begin(), a.sizes().begin() + batch.size());
      Shape bMat(b.sizes().begin(), b.sizes().begin() + batch.size());
      aMat.insert(aMat.end(), {product(sizes(aOnly)), k});
      bMat.insert(bMat.end(), {k, product(sizes(bOnly))});
      value = matmul(a.reshape(aMat), b.reshape(bMat)).reshape(sizes(result));
    }
    acc = {value, result};
  }
  sumUnkept(acc, inOutput);
  return arrange(acc, output);
}

Tensor inner(const Tensor& a, const Tensor& b, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(a.defined() && b.defined(), Value, "inner: called with an undefined tensor");
  if (a.dim() == 0 || b.dim() == 0) return a * b;
  WEFT_CHECK(a.size(-1) == b.size(-1), Shape, "inner: the last dims must match, got ",
             shapeString(a.sizes()), " and ", shapeString(b.sizes()));
  Shape out(a.sizes().begin(), a.sizes().end() - 1);
  out.insert(out.end(), b.sizes().begin(), b.sizes().end() - 1);
  const int64_t k = a.size(-1);
  auto rowsOf = [](const Tensor& t) {
    return weft::numel(Shape(t.sizes().begin(), t.sizes().end() - 1));
  };
  return a.reshape({rowsOf(a), k}).matmul(b.reshape({rowsOf(b), k}).t()).reshape(out);
}

Tensor vdot(const Tensor& a, const Tensor& b, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(a.defined() && b.defined(), Value, "vdot: called with an undefined tensor");
  WEFT_CHECK(a.dim() == 1 && b.dim() == 1, Shape, "vdot: 1D tensors expected, but got ", a.dim(),
             "D and ", b.dim(), "D tensors");
  return dot(a, b);
}

Tensor kron(const Tensor& a, const Tensor& b, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(a.defined() && b.defined(), Value, "kron: called with an undefined tensor");
  const int64_t rank = std::max(a.dim(), b.dim());
  Shape as(static_cast<size_t>(rank - a.dim()), 1), bs(static_cast<size_t>(rank - b.dim()), 1);
  as.insert(as.end(), a.sizes().begin(), a.sizes().end());
  bs.insert(bs.end(), b.sizes().begin(), b.sizes().end());
  // a as [a0, 1, a1, 1, ...] times b as [1, b0, 1, b1, ...]: element (i, j) of each pair of dims
  // is a[i] * b[j], which the reshape lays out as block i, position j.
  Shape ai, bi, out;
  for (size_t d = 0; d < static_cast<size_t>(rank); ++d) {
    ai.insert(ai.end(), {as[d], 1});
    bi.insert(bi.end(), {1, bs[d]});
    std::optional<int64_t> size = checkedMul(as[d], bs[d]);
    WEFT_CHECK(size.has_value(), Value, "kron: the result's dim ", d, " is too large");
    out.push_back(*size);
  }
  return (a.reshape(ai) * b.reshape(bi)).reshape(out);
}

Tensor cross(const Tensor& a, const Tensor& b, std::optional<int64_t> dim,
             std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(a.defined() && b.defined(), Value, "cross: called with an undefined tensor");
  WEFT_CHECK(a.dim() == b.dim(), Shape,
             "cross: inputs must have the same number of dimensions, got ", a.dim(), " and ",
             b.dim());
  int64_t d = -1;
  if (dim) {
    d = wrapDim(*dim, a.dim(), "cross");
  } else { // the first dim of size 3 of the first input's own shape
    for (int64_t i = 0; i < a.dim() && d < 0; ++i)
      if (a.size(i) == 3) d = i;
    WEFT_CHECK(d >= 0, Shape, "cross: no dimension of size 3 in input of shape ",
               shapeString(a.sizes()));
  }
  WEFT_CHECK(a.size(d) == 3 && b.size(d) == 3, Shape, "cross: inputs dimension ", d,
             " must have length 3, got ", a.size(d), " and ", b.size(d));
  std::vector<Tensor> ab = broadcast_tensors({a, b});
  // c_i = a_(i+1) b_(i+2) - a_(i+2) b_(i+1), indices mod 3.
  return ab[0].roll(-1, d) * ab[1].roll(-2, d) - ab[0].roll(-2, d) * ab[1].roll(-1, d);
}

Tensor addmv(const Tensor& self, const Tensor& mat, const Tensor& vec, Scalar beta, Scalar alpha,
             std::source_location loc) {
  CallSite cs(loc);
  return scaledSum(self, mv(mat, vec), beta, alpha, "addmv");
}
Tensor addr(const Tensor& self, const Tensor& vec1, const Tensor& vec2, Scalar beta, Scalar alpha,
            std::source_location loc) {
  CallSite cs(loc);
  return scaledSum(self, outer(vec1, vec2), beta, alpha, "addr");
}
Tensor baddbmm(const Tensor& self, const Tensor& batch1, const Tensor& batch2, Scalar beta,
               Scalar alpha, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(batch1.defined() && batch2.defined(), Value,
             "baddbmm: called with an undefined tensor");
  return scaledSum(self, batch1.bmm(batch2), beta, alpha, "baddbmm");
}
Tensor addbmm(const Tensor& self, const Tensor& batch1, const Tensor& batch2, Scalar beta,
              Scalar alpha, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(batch1.defined() && batch2.defined(), Value,
             "addbmm: called with an undefined tensor");
  return scaledSum(self, batch1.bmm(batch2).sum({0}), beta, alpha, "addbmm");
}

Tensor matrix_power(const Tensor& x, int64_t n, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(x.defined(), Value, "matrix_power: called with an undefined tensor");
  WEFT_CHECK(x.dim() >= 2 && x.size(-1) == x.size(-2), Shape,
             "matrix_power: expected a tensor of square matrices, got shape ",
             shapeString(x.sizes()));
  WEFT_CHECK(n >= 0, Value, "matrix_power: negative powers need a matrix inverse, which weft ",
             "does not have; got n = ", n);
  if (n == 0)
    return eye(x.size(-1), std::nullopt, TensorOptions(x.dtype()).device(x.device()))
        .expand(x.sizes())
        .clone();
  Tensor result, power = x;
  for (int64_t m = n; m > 0; m >>= 1) { // binary powering: x^n = product of x^(2^i), bit i set
    if (m & 1) result = result.defined() ? result.matmul(power) : power;
    if (m > 1) power = power.matmul(power);
  }
  return n == 1 ? x.clone() : result;
}

Tensor Tensor::dist(const Tensor& other, double p, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("dist");
  WEFT_CHECK(other.defined(), Value, "dist: other is undefined");
  return autograd::name_grad_fn(sub(other).norm(p), "DistBackward0");
}

Tensor Tensor::cov(int64_t correction, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("cov");
  WEFT_CHECK(dim() <= 2, Shape, "cov(): expected input to have two or fewer dimensions but got an ",
             "input with ", dim(), " dimensions");
  Tensor x = floatingOrFloat32(dim() < 2 ? reshape({1, -1}) : *this);
  const int64_t observations = x.size(1);
  // Fewer observations than the correction: divided by 0 (inf and NaN), as PyTorch.
  const auto divisor = static_cast<double>(std::max<int64_t>(observations - correction, 0));
  Tensor centered = x - x.mean({1}, true);
  Tensor c = centered.matmul(centered.t()) / divisor;
  return dim() < 2 ? c.reshape({}) : c;
}

Tensor Tensor::corrcoef(std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("corrcoef");
  Tensor c = cov();
  if (c.dim() == 0) return c / c; // one variable: 1, or NaN
  Tensor stddev = c.diagonal().sqrt();
  c = c / stddev.reshape({-1, 1}) / stddev.reshape({1, -1});
  return c.clamp(-1.0, 1.0);
}

// ---- tensordot, pairwise distances, renorm ----

Tensor tensordot(const Tensor& a, const Tensor& b, const std::vector<int64_t>& dims_a,
                 const std::vector<int64_t>& dims_b, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(a.defined() && b.defined(), Value, "tensordot: called with an undefined tensor");
  WEFT_CHECK(dims_a.size() == dims_b.size(), Value,
             "tensordot: both dimension lists should have same length, got ", dims_a.size(),
             " and ", dims_b.size());
  Shape da = wrapDims(Shape(dims_a.begin(), dims_a.end()), a.dim(), "tensordot");
  Shape db = wrapDims(Shape(dims_b.begin(), dims_b.end()), b.dim(), "tensordot");
  int64_t inner = 1;
  for (size_t i = 0; i < da.size(); ++i) {
    WEFT_CHECK(a.size(da[i]) == b.size(db[i]), Shape,
               "tensordot: contracted dimensions need to "
               "match, but first has size ",
               a.size(da[i]), " in dim ", da[i], " and second has size ", b.size(db[i]), " in dim ",
               db[i]);
    WEFT_CHECK(std::count(da.begin(), da.end(), da[i]) == 1 &&
                   std::count(db.begin(), db.end(), db[i]) == 1,
               Value, "tensordot: a dim appears more than once in the list of dims");
    inner *= a.size(da[i]);
  }
  // a's free dims then its contracted ones, b's contracted ones then its free ones: one matmul
  // of [free a, inner] by [inner, free b].
  Shape pa, pb, out;
  int64_t outerA = 1, outerB = 1;
  for (int64_t d = 0; d < a.dim(); ++d)
    if (std::find(da.begin(), da.end(), d) == da.end()) {
      pa.push_back(d);
      out.push_back(a.size(d));
      outerA *= a.size(d);
    }
  pa.insert(pa.end(), da.begin(), da.end());
  pb.assign(db.begin(), db.end());
  for (int64_t d = 0; d < b.dim(); ++d)
    if (std::find(db.begin(), db.end(), d) == db.end()) {
      pb.push_back(d);
      out.push_back(b.size(d));
      outerB *= b.size(d);
    }
  DType t = promoteTypes(a.dtype(), b.dtype());
  Tensor m = a.to(t)
                 .permute(pa)
                 .reshape({outerA, inner})
                 .matmul(b.to(t).permute(pb).reshape({inner, outerB}));
  return m.reshape(out);
}
Tensor tensordot(const Tensor& a, const Tensor& b, int64_t dims, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(a.defined() && b.defined(), Value, "tensordot: called with an undefined tensor");
  WEFT_CHECK(dims >= 0 && dims <= a.dim() && dims <= b.dim(), Value,
             "tensordot: dims must be between 0 and both ranks, got ", dims, " for ranks ", a.dim(),
             " and ", b.dim());
  // a's last `dims` dims against b's first.
  std::vector<int64_t> da, db;
  for (int64_t i = 0; i < dims; ++i) {
    da.push_back(a.dim() - dims + i);
    db.push_back(i);
  }
  return tensordot(a, b, da, db);
}

Tensor cdist(const Tensor& x1, const Tensor& x2, double p, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(x1.defined() && x2.defined(), Value, "cdist: called with an undefined tensor");
  WEFT_CHECK(x1.dim() >= 2 && x2.dim() >= 2, Shape,
             "cdist only supports at least 2D tensors, X1 got: ", x1.dim(), "D, X2 got: ", x2.dim(),
             "D");
  WEFT_CHECK(x1.size(-1) == x2.size(-1), Shape,
             "cdist: X1 and X2 must have the same number of columns. X1: ", x1.size(-1),
             " X2: ", x2.size(-1));
  WEFT_CHECK(isFloating(x1.dtype()) && isFloating(x2.dtype()), DType,
             "cdist only supports floating-point dtypes, X1 got: ", dtypeName(x1.dtype()),
             ", X2 got: ", dtypeName(x2.dtype()));
  WEFT_CHECK(p >= 0, Value, "cdist only supports non-negative p values, got ", p);
  // Every pair's difference, [..., P, R, M], and its p-norm over M: exact (PyTorch's matmul form
  // for large p=2 inputs trades accuracy for memory).
  Tensor diff = x1.unsqueeze(-2) - x2.unsqueeze(-3);
  if (p == 0) return diff.ne(0).sum({-1}, false, diff.dtype()); // how many coordinates differ
  return diff.norm(p, {-1});
}

Tensor Tensor::renorm(double p, int64_t dim, double maxnorm, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("renorm");
  WEFT_CHECK(isFloating(dtype()), DType, "renorm: expected a floating-point input, got ",
             dtypeName(dtype()));
  WEFT_CHECK(p > 0, Value, "renorm: non-positive-norm not supported, got ", p);
  WEFT_CHECK(maxnorm >= 0, Value, "renorm: expected maxnorm to be >= 0 but got ", maxnorm);
  WEFT_CHECK(this->dim() > 1, Shape, "renorm: input needs at least 2 dimensions, got ", this->dim(),
             " dimensions");
  const int64_t d = wrapDim(dim, this->dim(), "renorm");
  Shape others;
  for (int64_t i = 0; i < this->dim(); ++i)
    if (i != d) others.push_back(i);
  // Each slice along `dim` whose norm exceeds maxnorm scaled down to it (with PyTorch's 1e-7).
  Tensor norms = norm(p, others, true);
  Tensor scale = where(norms.gt(maxnorm), maxnorm / (norms + 1e-7), ones_like(norms));
  return *this * scale;
}

// ---- inverse, determinants, solve ----

Tensor Tensor::inverse(std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("inverse");
  return dispatch(OpCode::Inverse, {*this});
}
Tensor Tensor::det(std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("det");
  return dispatch(OpCode::Det, {*this});
}
Tensor Tensor::logdet(std::source_location loc) const {
  CallSite cs(loc);
  auto [sign, logabs] = slogdet();
  // NaN for a negative determinant, -inf for a singular matrix, as PyTorch.
  return where(sign.lt(0), full({}, std::nan(""), logabs.dtype()), logabs);
}
std::pair<Tensor, Tensor> Tensor::slogdet(std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("slogdet");
  Tensor logabs = dispatch(OpCode::LogAbsDet, {*this});
  // The sign is det's, of each matrix scaled by |det|^(-1/n) so its determinant is +-1 (no
  // overflow or underflow); 0 for a singular matrix. It has no gradient.
  NoGradGuard noGrad;
  const int64_t n = size(-1);
  if (n == 0) return {ones_like(logabs), logabs};
  Shape s = logabs.sizes();
  s.insert(s.end(), {1, 1});
  Tensor scaled = *this / (logabs / static_cast<double>(n)).exp().reshape(s);
  Tensor sign = where(logabs.isinf(), zeros_like(logabs), scaled.det().sign());
  return {sign, logabs};
}
Tensor linalg_solve(const Tensor& a, const Tensor& b, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(a.defined() && b.defined(), Value, "linalg.solve: called with an undefined tensor");
  WEFT_CHECK(a.dim() >= 2, Shape, "linalg.solve: A must be batches of square matrices, got shape ",
             shapeString(a.sizes()));
  // B is a batch of vectors where it has one dim fewer than A (PyTorch's rule), else of matrices.
  const bool vector = b.dim() == 1 || (b.dim() == a.dim() - 1 &&
                                       b.sizes() == Shape(a.sizes().begin(), a.sizes().end() - 1));
  WEFT_CHECK(b.dim() >= 1 && b.size(vector ? -1 : -2) == a.size(-1), Shape,
             "linalg.solve: incompatible shapes of A and B for the equation AX = B (",
             shapeString(a.sizes()), " and ", shapeString(b.sizes()), ")");
  Tensor inv = a.inverse();
  return vector ? inv.matmul(b.unsqueeze(-1)).squeeze(-1) : inv.matmul(b);
}

// ---- Cholesky and symmetric eigendecomposition ----

Tensor Tensor::cholesky(bool upper, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("cholesky");
  Tensor l = dispatch(OpCode::Cholesky, {*this});
  return upper ? l.mT() : l;
}
Tensor linalg_cholesky(const Tensor& a, bool upper, std::source_location loc) {
  CallSite cs(loc);
  return a.cholesky(upper);
}
Tensor Tensor::cholesky_inverse(bool upper, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("cholesky_inverse");
  Tensor linv = (upper ? mT() : *this).inverse(); // A^-1 = L^-T L^-1
  return linv.mT().matmul(linv);
}
Tensor Tensor::cholesky_solve(const Tensor& factor, bool upper, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("cholesky_solve");
  WEFT_CHECK(factor.defined(), Value, "cholesky_solve: called with an undefined tensor");
  WEFT_CHECK(dim() >= 2 && factor.dim() >= 2, Shape,
             "cholesky_solve: b and the factor should have at least 2 dimensions, got ",
             shapeString(sizes()), " and ", shapeString(factor.sizes()));
  Tensor linv = (upper ? factor.mT() : factor).inverse();
  return linv.mT().matmul(linv.matmul(*this));
}

namespace {
/// The matrices linalg_eigh reads: `a`'s lower triangle, or for uplo "U" its upper (the lower of
/// its transpose).
Tensor eighInput(const Tensor& a, std::string_view uplo, const char* op) {
  WEFT_CHECK(a.defined(), Value, op, ": called with an undefined tensor");
  WEFT_CHECK(uplo == "L" || uplo == "U" || uplo == "l" || uplo == "u", Value, op,
             ": UPLO must be 'L' or 'U', got '", uplo, "'");
  return uplo == "U" || uplo == "u" ? a.mT() : a;
}
} // namespace

std::pair<Tensor, Tensor> linalg_eigh(const Tensor& a, std::string_view uplo,
                                      std::source_location loc) {
  CallSite cs(loc);
  Tensor x = eighInput(a, uplo, "linalg.eigh");
  return {matrix_op(OpCode::EighValues, x), matrix_op(OpCode::EighVectors, x)};
}
Tensor linalg_eigvalsh(const Tensor& a, std::string_view uplo, std::source_location loc) {
  CallSite cs(loc);
  return matrix_op(OpCode::EighValues, eighInput(a, uplo, "linalg.eigvalsh"));
}

// ---- QR, SVD, pseudo-inverse ----

std::pair<Tensor, Tensor> linalg_qr(const Tensor& a, std::string_view mode,
                                    std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(a.defined(), Value, "linalg.qr: called with an undefined tensor");
  WEFT_CHECK(mode == "reduced" || mode == "complete" || mode == "r", Value,
             "qr received unrecognized mode '", mode,
             "' but expected one of 'reduced' (default), 'r', or 'complete'");
  WEFT_CHECK(a.dim() >= 2, Shape, "linalg.qr: the input must have at least 2 dimensions, got ",
             shapeString(a.sizes()));
  WEFT_CHECK(mode != "complete" || a.size(-2) <= a.size(-1), Value,
             "linalg.qr: mode='complete' of a matrix with more rows than columns (", a.size(-2),
             " x ", a.size(-1), ") is not supported; use mode='reduced'");
  if (mode == "r") return {zeros({0}, a.dtype()), matrix_op(OpCode::QrR, a)};
  return {matrix_op(OpCode::QrQ, a), matrix_op(OpCode::QrR, a)};
}
std::pair<Tensor, Tensor> Tensor::qr(bool some, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("qr");
  return linalg_qr(*this, some ? "reduced" : "complete");
}

std::tuple<Tensor, Tensor, Tensor> linalg_svd(const Tensor& a, bool fullMatrices,
                                              std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(a.defined(), Value, "linalg.svd: called with an undefined tensor");
  WEFT_CHECK(a.dim() >= 2, Shape, "linalg.svd: the input must have at least 2 dimensions, got ",
             shapeString(a.sizes()));
  WEFT_CHECK(!fullMatrices || a.size(-2) == a.size(-1), Value,
             "linalg.svd: full_matrices=true of a non-square matrix (", a.size(-2), " x ",
             a.size(-1), ") is not supported; pass full_matrices=false for the reduced factors");
  return {matrix_op(OpCode::SvdU, a), matrix_op(OpCode::SvdS, a), matrix_op(OpCode::SvdVh, a)};
}
Tensor linalg_svdvals(const Tensor& a, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(a.defined(), Value, "linalg.svdvals: called with an undefined tensor");
  return matrix_op(OpCode::SvdS, a);
}
std::tuple<Tensor, Tensor, Tensor> Tensor::svd(bool some, bool computeUv,
                                               std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("svd");
  if (!computeUv) { // PyTorch's zero-filled U and V of the full shapes
    Tensor s = linalg_svdvals(*this);
    Shape u = sizes(), v = sizes();
    u.back() = size(-2);
    v[v.size() - 2] = size(-1);
    return {zeros(u, dtype()), s, zeros(v, dtype())};
  }
  auto [u, s, vh] = linalg_svd(*this, !some);
  return {u, s, vh.mT()};
}

namespace {
/// linalg_pinv as an autograd function: the forward through the SVD, the backward PyTorch's
/// pinv_backward, from A and A^+ alone (differentiating through the SVD would give NaN where a
/// singular value is cut to 0 or two are equal, the very matrices a pseudo-inverse is for).
struct Pinv : autograd::Function<Pinv> {
  static Tensor forward(autograd::AutogradContext* ctx, const Tensor& a, double tol) {
    auto [u, s, vh] = linalg_svd(a, false);
    Tensor cutoff = s.amax({-1}, true) * tol;
    Tensor inv = where(s.gt(cutoff), s.reciprocal(), zeros({}, a.dtype()));
    Tensor p = (vh.mT() * inv.unsqueeze(-2)).matmul(u.mT());
    ctx->save_for_backward({a, p});
    return p;
  }
  static std::vector<Tensor> backward(autograd::AutogradContext* ctx, std::vector<Tensor> g) {
    std::vector<Tensor> saved = ctx->get_saved_variables();
    const Tensor &a = saved[0], &p = saved[1], gh = g[0].mT(), ph = p.mT();
    if (a.size(-2) <= a.size(-1)) { // products of the smaller dimension
      Tensor k = gh.matmul(p), kph = k.matmul(ph);
      return {-(p.matmul(k)).mT() + kph - a.matmul(p).matmul(kph) +
              ph.matmul(p).matmul(gh - k.matmul(a))};
    }
    Tensor k = p.matmul(gh), phk = ph.matmul(k);
    return {-(k.matmul(p)).mT() + (gh - a.matmul(k)).matmul(p).matmul(ph) + phk -
            phk.matmul(p).matmul(a)};
  }
};
} // namespace

Tensor linalg_pinv(const Tensor& a, std::optional<double> rtol, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(a.defined(), Value, "linalg.pinv: called with an undefined tensor");
  WEFT_CHECK(a.dim() >= 2, Shape, "linalg.pinv: the input must have at least 2 dimensions, got ",
             shapeString(a.sizes()));
  WEFT_CHECK(a.dtype() == DType::Float32 || a.dtype() == DType::Float64, DType,
             "linalg.pinv: expected a float32 or float64 input, got ", dtypeName(a.dtype()));
  if (a.size(-2) == 0 || a.size(-1) == 0) return zeros(Shape(a.sizes()), a.dtype()).mT();
  // PyTorch's default tolerance: the machine epsilon times the larger dimension.
  return Pinv::apply(a, rtol.value_or(machineEpsilon(a.dtype()) *
                                      static_cast<double>(std::max(a.size(-2), a.size(-1)))));
}
Tensor Tensor::pinverse(double rcond, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("pinverse");
  return linalg_pinv(*this, rcond);
}

} // namespace weft
