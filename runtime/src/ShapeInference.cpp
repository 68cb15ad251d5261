// Shape and dtype inference, one function per op kind.
#include "weft/runtime/ShapeInference.h"

#include "weft/runtime/AttrSchema.h"

#include "weft/runtime/ConvGeometry.h"

#include <algorithm>

namespace weft {
namespace {

using In = std::span<const TensorType>;

std::string dt(DType t) {
  return std::string(dtypeName(t));
}

/// A diagnostic unless 0 <= d < rank. (A 0-d tensor has no dimension: the frontend runs ops along
/// "dimension 0 of a scalar" on its one-element 1-d view.)
std::optional<Diagnostic> checkDim(std::string_view op, int64_t d, size_t rank) {
  if (d < 0 || d >= static_cast<int64_t>(rank))
    return diag(ErrorKind::Index, op, ": dimension ", d, " is out of range for a tensor of rank ",
                rank);
  return std::nullopt;
}

Result<TensorType> unary(std::string_view op, const OpInfo& info, In in) {
  DType t = in[0].dtype;
  switch (info.unaryDomain) {
  case UnaryDomain::Float:
    if (!isFloating(t))
      return diag(ErrorKind::DType, op, ": expected a floating-point input, got ", dt(t));
    return in[0];
  case UnaryDomain::Numeric:
    if (t == DType::Bool) return diag(ErrorKind::DType, op, ": not supported for bool tensors");
    return in[0];
  case UnaryDomain::Logical:
    return TensorType{DType::Bool, in[0].shape};
  case UnaryDomain::Bitwise:
    if (isFloating(t))
      return diag(ErrorKind::DType, op, ": expected an integer or bool input, got ", dt(t));
    return in[0];
  }
  return in[0];
}

Result<TensorType> binary(std::string_view op, const OpInfo& info, In in) {
  if (in[0].dtype != in[1].dtype)
    return diag(ErrorKind::DType, op, ": inputs must have one dtype, got ", dt(in[0].dtype),
                " and ", dt(in[1].dtype));
  auto shape = broadcastShapes(in[0].shape, in[1].shape, op);
  if (!shape) return shape.diagnostic();
  DType t = in[0].dtype;
  switch (info.binaryResult) {
  case BinaryResult::Same:
    if (t == DType::Bool) return diag(ErrorKind::DType, op, ": not supported for bool tensors");
    return TensorType{t, shape.value()};
  case BinaryResult::Float:
    if (!isFloating(t))
      return diag(ErrorKind::DType, op, ": expected floating-point inputs, got ", dt(t));
    return TensorType{t, shape.value()};
  case BinaryResult::Bool:
    return TensorType{DType::Bool, shape.value()};
  case BinaryResult::Bitwise:
    if (isFloating(t))
      return diag(ErrorKind::DType, op, ": expected integer or bool inputs, got ", dt(t));
    return TensorType{t, shape.value()};
  case BinaryResult::Integer:
    if (isFloating(t) || t == DType::Bool)
      return diag(ErrorKind::DType, op, ": expected integer inputs, got ", dt(t));
    return TensorType{t, shape.value()};
  }
  return TensorType{t, shape.value()};
}

Result<TensorType> where(std::string_view op, In in) {
  if (in[0].dtype != DType::Bool)
    return diag(ErrorKind::DType, op, ": condition must be bool, got ", dt(in[0].dtype));
  if (in[1].dtype != in[2].dtype)
    return diag(ErrorKind::DType, op, ": values must have one dtype, got ", dt(in[1].dtype),
                " and ", dt(in[2].dtype));
  auto s = broadcastShapes(in[0].shape, in[1].shape, op);
  if (!s) return s.diagnostic();
  auto s2 = broadcastShapes(s.value(), in[2].shape, op);
  if (!s2) return s2.diagnostic();
  return TensorType{in[1].dtype, s2.value()};
}

Result<TensorType> reduce(std::string_view op, In in, const Attrs& at) {
  const Shape& shape = in[0].shape;
  Shape seen(shape.size(), 0); // a Shape: no allocation up to rank 6
  for (int64_t d : at.ints("dims")) {
    if (auto e = checkDim(op, d, shape.size())) return *e;
    if (seen[static_cast<size_t>(d)])
      return diag(ErrorKind::Value, op, ": dimension ", d, " appears more than once");
    seen[static_cast<size_t>(d)] = 1;
  }
  bool all = at.ints("dims").empty();
  bool keep = at.b("keepdim");
  Shape out;
  for (size_t d = 0; d < shape.size(); ++d) {
    bool r = all || seen[d];
    if (r && (op == "amax" || op == "amin") && shape[d] == 0)
      return diag(ErrorKind::Value, op, ": cannot reduce over dimension ", d,
                  " of size 0 (no identity)");
    if (!r)
      out.push_back(shape[d]);
    else if (keep)
      out.push_back(1);
  }
  return TensorType{in[0].dtype, out};
}

Result<TensorType> argReduce(std::string_view op, In in, const Attrs& at) {
  int64_t d = at.i("dim");
  if (auto e = checkDim(op, d, in[0].shape.size())) return *e;
  Shape out = in[0].shape;
  if (out[d] == 0)
    return diag(ErrorKind::Value, op, ": cannot take the ", op, " of an empty dimension ", d);
  if (at.b("keepdim"))
    out[d] = 1;
  else
    out.erase(out.begin() + d);
  return TensorType{DType::Int64, out};
}

Result<TensorType> alongDim(std::string_view op, In in, const Attrs& at, DType result) {
  if (auto e = checkDim(op, at.i("dim"), in[0].shape.size())) return *e;
  return TensorType{result, in[0].shape};
}

Result<TensorType> reshape(std::string_view op, In in, const Attrs& at) {
  const Shape& s = at.ints("shape");
  if (!byteSize(s, in[0].dtype))
    return diag(ErrorKind::Shape, op, ": invalid shape ", shapeString(s),
                " (a negative size, or more elements than fit in memory)");
  if (numel(s) != numel(in[0].shape))
    return diag(ErrorKind::Shape, op, ": shape ", shapeString(s), " is invalid for input of shape ",
                shapeString(in[0].shape), " (", numel(s), " vs ", numel(in[0].shape), " elements)");
  return TensorType{in[0].dtype, s};
}

Result<TensorType> permute(std::string_view op, In in, const Attrs& at) {
  const auto& dims = at.ints("dims");
  const Shape& shape = in[0].shape;
  if (dims.size() != shape.size())
    return diag(ErrorKind::Shape, op, ": got ", dims.size(), " dims for a tensor of rank ",
                shape.size());
  Shape seen(shape.size(), 0); // a Shape: no allocation up to rank 6
  Shape out;
  for (int64_t d : dims) {
    if (auto e = checkDim(op, d, shape.size())) return *e;
    if (seen[static_cast<size_t>(d)])
      return diag(ErrorKind::Value, op, ": dimension ", d, " repeats in ", shapeString(dims));
    seen[static_cast<size_t>(d)] = 1;
    out.push_back(shape[d]);
  }
  return TensorType{in[0].dtype, out};
}

Result<TensorType> expand(std::string_view op, In in, const Attrs& at) {
  const Shape &to = at.ints("shape"), &from = in[0].shape;
  if (to.size() < from.size())
    return diag(ErrorKind::Shape, op, ": cannot expand ", shapeString(from),
                " to fewer dimensions ", shapeString(to));
  size_t lead = to.size() - from.size();
  for (size_t d = 0; d < to.size(); ++d) {
    if (to[d] < 0)
      return diag(ErrorKind::Shape, op, ": invalid size ", to[d], " in ", shapeString(to));
    if (d >= lead && from[d - lead] != to[d] && from[d - lead] != 1)
      return diag(ErrorKind::Shape, op, ": cannot expand ", shapeString(from), " to ",
                  shapeString(to), ": dimension ", d, " has size ", from[d - lead], ", not 1 or ",
                  to[d]);
  }
  return TensorType{in[0].dtype, to};
}

Result<TensorType> slice(std::string_view op, In in, const Attrs& at) {
  int64_t d = at.i("dim"), start = at.i("start"), end = at.i("end"), step = at.i("step");
  if (auto e = checkDim(op, d, in[0].shape.size())) return *e;
  int64_t n = in[0].shape[d];
  if (step <= 0) return diag(ErrorKind::Value, op, ": step must be positive, got ", step);
  if (start < 0 || start > n || end < start || end > n)
    return diag(ErrorKind::Index, op, ": range [", start, ", ", end,
                ") is out of bounds for dimension ", d, " of size ", n);
  Shape out = in[0].shape;
  out[d] = sliceLength(start, end, step);
  return TensorType{in[0].dtype, out};
}

Result<TensorType> flip(std::string_view op, In in, const Attrs& at) {
  for (int64_t d : at.ints("dims"))
    if (auto e = checkDim(op, d, in[0].shape.size())) return *e;
  return in[0];
}

Result<TensorType> pad(std::string_view op, In in, const Attrs& at) {
  const auto& pads = at.ints("pads");
  const Shape& s = in[0].shape;
  if (pads.size() != 2 * s.size())
    return diag(ErrorKind::Value, op, ": expected ", 2 * s.size(),
                " padding values for a tensor of rank ", s.size(), ", got ", pads.size());
  Shape out = s;
  for (size_t d = 0; d < s.size(); ++d) {
    auto lo = checkedAdd(s[d], pads[2 * d]);
    auto size = lo ? checkedAdd(*lo, pads[2 * d + 1]) : std::nullopt;
    if (!size)
      return diag(ErrorKind::Shape, op, ": padding ", shapeString(pads), " of ", shapeString(s),
                  " overflows dimension ", d);
    out[d] = *size;
    if (out[d] < 0)
      return diag(ErrorKind::Shape, op, ": padding ", shapeString(pads), " makes dimension ", d,
                  " of ", shapeString(s), " negative");
  }
  return TensorType{in[0].dtype, out};
}

Result<TensorType> cat(std::string_view op, In in, const Attrs& at) {
  if (in.empty()) return diag(ErrorKind::Value, op, ": expected a non-empty list of tensors");
  int64_t d = at.i("dim");
  // Legacy 1-D empty tensors are ignored, as in torch.cat.
  const TensorType* ref = nullptr;
  for (const auto& t : in)
    if (!(t.shape.size() == 1 && t.shape[0] == 0)) {
      ref = &t;
      break;
    }
  if (ref == nullptr) return in[0];
  if (ref->shape.empty())
    return diag(ErrorKind::Shape, op, ": zero-dimensional tensors cannot be concatenated");
  if (auto e = checkDim(op, d, ref->shape.size())) return *e;
  Shape out = ref->shape;
  out[d] = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const auto& t = in[i];
    if (t.shape.size() == 1 && t.shape[0] == 0) continue;
    if (t.dtype != ref->dtype)
      return diag(ErrorKind::DType, op, ": tensors must have one dtype, got ", dt(ref->dtype),
                  " and ", dt(t.dtype), " (tensor ", i, ")");
    if (t.shape.size() != ref->shape.size())
      return diag(ErrorKind::Shape, op, ": tensor ", i, " has rank ", t.shape.size(), ", expected ",
                  ref->shape.size());
    for (size_t k = 0; k < t.shape.size(); ++k)
      if (static_cast<int64_t>(k) != d && t.shape[k] != ref->shape[k])
        return diag(ErrorKind::Shape, op, ": sizes must match except in dimension ", d, ": tensor ",
                    i, " has shape ", shapeString(t.shape), ", tensor 0 has ",
                    shapeString(ref->shape));
    auto size = checkedAdd(out[d], t.shape[d]);
    if (!size) return diag(ErrorKind::Shape, op, ": the result is too large along dimension ", d);
    out[d] = *size;
  }
  return TensorType{ref->dtype, out};
}

/// The result of linear-algebra op `op` on a batch of matrices `x`: square ones for all but the
/// QR and SVD factors, which are reduced (k = min(m, n)).
Result<TensorType> matrixOp(std::string_view name, OpCode op, const TensorType& x) {
  const Shape& s = x.shape;
  if (s.size() < 2)
    return diag(ErrorKind::Shape, name,
                ": a tensor of matrices [..., m, n] is expected, got shape ", shapeString(s));
  if (x.dtype != DType::Float32 && x.dtype != DType::Float64)
    return diag(ErrorKind::DType, name, ": expected a float32 or float64 input, got ", dt(x.dtype));
  const int64_t m = s[s.size() - 2], n = s[s.size() - 1], k = std::min(m, n);
  Shape batch(s.begin(), s.end() - 2), r = batch;
  auto square = [&](Shape result) -> Result<TensorType> {
    if (m != n)
      return diag(ErrorKind::Shape, name,
                  ": a tensor of square matrices [..., n, n] is expected, got shape ",
                  shapeString(s));
    return TensorType{x.dtype, std::move(result)};
  };
  switch (op) {
  case OpCode::Inverse:
  case OpCode::Cholesky:
  case OpCode::EighVectors:
    return square(s);
  case OpCode::EighValues: // one per row
    r.push_back(n);
    return square(r);
  case OpCode::Det:
  case OpCode::LogAbsDet: // one per matrix
    return square(batch);
  case OpCode::QrQ:
  case OpCode::SvdU:
    r.insert(r.end(), {m, k});
    return TensorType{x.dtype, r};
  case OpCode::QrR:
  case OpCode::SvdVh:
    r.insert(r.end(), {k, n});
    return TensorType{x.dtype, r};
  case OpCode::SvdS:
    r.push_back(k);
    return TensorType{x.dtype, r};
  default:
    return diag(ErrorKind::Internal, name, " is not a linear-algebra op of the table");
  }
}

Result<TensorType> matmul(std::string_view op, In in) {
  const Shape &a = in[0].shape, &b = in[1].shape;
  if (in[0].dtype != in[1].dtype)
    return diag(ErrorKind::DType, op, ": inputs must have one dtype, got ", dt(in[0].dtype),
                " and ", dt(in[1].dtype));
  if (in[0].dtype == DType::Bool)
    return diag(ErrorKind::DType, op, ": not supported for bool tensors");
  if (a.size() < 2 || b.size() < 2)
    return diag(ErrorKind::Shape, op, ": expected inputs of rank >= 2, got ", shapeString(a),
                " and ", shapeString(b));
  if (a.back() != b[b.size() - 2])
    return diag(ErrorKind::Shape, op, ": shapes ", shapeString(a), " and ", shapeString(b),
                " cannot be multiplied (", a[a.size() - 2], "x", a.back(), " and ", b[b.size() - 2],
                "x", b.back(), ")");
  auto batch = broadcastShapes(Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2), op);
  if (!batch) return batch.diagnostic();
  Shape out = batch.value();
  out.push_back(a[a.size() - 2]);
  out.push_back(b.back());
  return TensorType{in[0].dtype, out};
}

/// Checks convolution geometry: input (N, C, *S), weight (O, C/groups, *K); returns the output.
Result<TensorType> convGeometry(std::string_view op, const TensorType& xt, const Shape& w,
                                const Attrs& at) {
  const Shape& x = xt.shape;
  if (!isFloating(xt.dtype))
    return diag(ErrorKind::DType, op, ": expected a floating-point input, got ", dt(xt.dtype));
  if (x.size() != 3 && x.size() != 4)
    return diag(ErrorKind::Shape, op, ": expected a 3-D (N, C, L) or 4-D (N, C, H, W) input, got ",
                shapeString(x));
  if (w.size() != x.size())
    return diag(ErrorKind::Shape, op, ": weight ", shapeString(w), " must have the input's rank ",
                x.size());
  size_t sp = x.size() - 2;
  int64_t groups = at.i("groups");
  const auto &st = at.ints("stride"), &pd = at.ints("padding"), &dl = at.ints("dilation");
  if (st.size() != sp || pd.size() != sp || dl.size() != sp)
    return diag(ErrorKind::Value, op, ": stride, padding and dilation need ", sp, " values each");
  if (groups <= 0 || w[0] % groups != 0)
    return diag(ErrorKind::Value, op, ": ", w[0],
                " output channels are not divisible by groups=", groups);
  if (checkedMul(w[1], groups) != x[1])
    return diag(ErrorKind::Shape, op, ": input ", shapeString(x), " has ", x[1],
                " channels, but weight ", shapeString(w), " with groups=", groups, " expects ",
                w[1], " x ", groups);
  Shape out{x[0], w[0]};
  for (size_t i = 0; i < sp; ++i) {
    if (st[i] <= 0 || dl[i] <= 0 || pd[i] < 0)
      return diag(ErrorKind::Value, op,
                  ": stride and dilation must be positive and padding non-negative");
    if (!windowFits(x[2 + i], w[2 + i], pd[i], dl[i]))
      return diag(ErrorKind::Value, op, ": padding ", pd[i], " or dilation ", dl[i],
                  " is too large");
    int64_t o = windowOutputSize(x[2 + i], w[2 + i], st[i], pd[i], dl[i]);
    if (o <= 0)
      return diag(ErrorKind::Shape, op, ": kernel ", shapeString(Shape(w.begin() + 2, w.end())),
                  " with dilation ", shapeString(dl), " is larger than the padded input ",
                  shapeString(x));
    out.push_back(o);
  }
  return TensorType{xt.dtype, out};
}

Result<TensorType> conv(std::string_view op, OpKind kind, In in, const Attrs& at) {
  if (in[0].dtype != in[1].dtype)
    return diag(ErrorKind::DType, op, ": inputs must have one dtype, got ", dt(in[0].dtype),
                " and ", dt(in[1].dtype));
  if (kind == OpKind::Conv) return convGeometry(op, in[0], in[1].shape, at);
  if (kind == OpKind::ConvInputGrad) { // (grad_out, weight) -> input
    TensorType x{in[0].dtype, at.ints("input_shape")};
    auto y = convGeometry(op, x, in[1].shape, at);
    if (!y) return y;
    if (y.value().shape != in[0].shape)
      return diag(ErrorKind::Shape, op, ": gradient ", shapeString(in[0].shape),
                  " does not match the output shape ", shapeString(y.value().shape));
    return x;
  }
  TensorType w{in[0].dtype, at.ints("weight_shape")}; // (input, grad_out) -> weight
  auto y = convGeometry(op, in[0], w.shape, at);
  if (!y) return y;
  if (y.value().shape != in[1].shape)
    return diag(ErrorKind::Shape, op, ": gradient ", shapeString(in[1].shape),
                " does not match the output shape ", shapeString(y.value().shape));
  return w;
}

std::optional<Diagnostic> checkIndexTensor(std::string_view op, const TensorType& index) {
  if (index.dtype != DType::Int64)
    return diag(ErrorKind::DType, op, ": index must be int64, got ", dt(index.dtype));
  return std::nullopt;
}

Result<TensorType> gather(std::string_view op, In in, const Attrs& at) {
  const Shape &x = in[0].shape, &ix = in[1].shape;
  int64_t d = at.i("dim");
  if (auto e = checkIndexTensor(op, in[1])) return *e;
  if (auto e = checkDim(op, d, x.size())) return *e;
  if (x.size() != ix.size())
    return diag(ErrorKind::Shape, op, ": index ", shapeString(ix),
                " must have the rank of the input ", shapeString(x));
  for (size_t k = 0; k < x.size(); ++k)
    if (static_cast<int64_t>(k) != d && ix[k] > x[k])
      return diag(ErrorKind::Shape, op, ": index ", shapeString(ix), " is larger than input ",
                  shapeString(x), " in dimension ", k);
  return TensorType{in[0].dtype, ix};
}

Result<TensorType> scatter(std::string_view op, In in, const Attrs& at) {
  const Shape &self = in[0].shape, &ix = in[1].shape, &src = in[2].shape;
  int64_t d = at.i("dim");
  if (auto e = checkIndexTensor(op, in[1])) return *e;
  if (auto e = checkDim(op, d, self.size())) return *e;
  if (in[0].dtype != in[2].dtype)
    return diag(ErrorKind::DType, op, ": self and src must have one dtype, got ", dt(in[0].dtype),
                " and ", dt(in[2].dtype));
  if (self.size() != ix.size() || src.size() != ix.size())
    return diag(ErrorKind::Shape, op, ": self ", shapeString(self), ", index ", shapeString(ix),
                " and src ", shapeString(src), " must have one rank");
  for (size_t k = 0; k < ix.size(); ++k)
    if (ix[k] > src[k] || (static_cast<int64_t>(k) != d && ix[k] > self[k]))
      return diag(ErrorKind::Shape, op, ": index ", shapeString(ix), " is larger than src ",
                  shapeString(src), " or self ", shapeString(self), " in dimension ", k);
  return in[0];
}

Result<TensorType> indexSelect(std::string_view op, In in, const Attrs& at) {
  int64_t d = at.i("dim");
  if (auto e = checkIndexTensor(op, in[1])) return *e;
  if (auto e = checkDim(op, d, in[0].shape.size())) return *e;
  if (in[1].shape.size() > 1)
    return diag(ErrorKind::Shape, op, ": index must be 1-D, got ", shapeString(in[1].shape));
  Shape out = in[0].shape;
  out[d] = numel(in[1].shape);
  return TensorType{in[0].dtype, out};
}

Result<TensorType> indexAdd(std::string_view op, In in, const Attrs& at) {
  auto sel = indexSelect(op, in.first(2), at);
  if (!sel) return sel;
  if (in[2].dtype != in[0].dtype)
    return diag(ErrorKind::DType, op, ": self and source must have one dtype, got ",
                dt(in[0].dtype), " and ", dt(in[2].dtype));
  if (in[2].shape != sel.value().shape)
    return diag(ErrorKind::Shape, op, ": source ", shapeString(in[2].shape), " must have shape ",
                shapeString(sel.value().shape));
  return in[0];
}

Result<TensorType> checkIndex(std::string_view op, In in, const Attrs& at) {
  if (auto e = checkIndexTensor(op, in[0])) return *e;
  if (at.i("size") < 0)
    return diag(ErrorKind::Value, op, ": the indexed size must not be negative, got ",
                at.i("size"));
  return in[0];
}

Result<TensorType> pool(std::string_view op, In in, const Attrs& at) {
  const Shape& x = in[0].shape;
  if (x.size() != 3 && x.size() != 4)
    return diag(ErrorKind::Shape, op, ": expected a 3-D (N, C, L) or 4-D (N, C, H, W) input, got ",
                shapeString(x));
  if (in[0].dtype == DType::Bool)
    return diag(ErrorKind::DType, op, ": not supported for bool tensors");
  size_t sp = x.size() - 2;
  const auto &k = at.ints("kernel_size"), &st = at.ints("stride"), &pd = at.ints("padding"),
             &dl = at.ints("dilation");
  if (k.size() != sp || st.size() != sp || pd.size() != sp || dl.size() != sp)
    return diag(ErrorKind::Value, op, ": kernel_size, stride, padding and dilation need ", sp,
                " values each");
  Shape out{x[0], x[1]};
  for (size_t i = 0; i < sp; ++i) {
    if (k[i] <= 0 || st[i] <= 0 || dl[i] <= 0 || pd[i] < 0)
      return diag(ErrorKind::Value, op,
                  ": kernel size, stride and dilation must be positive, padding non-negative");
    if (pd[i] > k[i] / 2)
      return diag(ErrorKind::Value, op, ": padding ", pd[i],
                  " must be at most half the kernel size ", k[i]);
    if (!windowFits(x[2 + i], k[i], pd[i], dl[i]))
      return diag(ErrorKind::Value, op, ": padding ", pd[i], " or dilation ", dl[i],
                  " is too large");
    int64_t o = windowOutputSize(x[2 + i], k[i], st[i], pd[i], dl[i], at.b("ceil_mode"));
    if (o <= 0)
      return diag(ErrorKind::Shape, op, ": window ", shapeString(k),
                  " is larger than the padded input ", shapeString(x));
    out.push_back(o);
  }
  return TensorType{DType::Int64, out};
}

Result<TensorType> full(std::string_view op, const Attrs& at) {
  for (int64_t s : at.ints("shape"))
    if (s < 0)
      return diag(ErrorKind::Shape, op, ": invalid size ", s, " in ",
                  shapeString(at.ints("shape")));
  DType t = at.dtype("dtype");
  // The value must convert to the dtype without overflow (an int64 value into int64 always does).
  bool exact = std::holds_alternative<int64_t>(at.raw("value")) && t == DType::Int64;
  if (!exact && !fitsDType(at.number("value"), t))
    return diag(ErrorKind::Value, op, ": value ", at.number("value"), " cannot be converted to ",
                dt(t), " without overflow");
  return TensorType{t, at.ints("shape")};
}

Result<TensorType> random(std::string_view op, std::span<const TensorType> in, const Attrs& at) {
  if (in[0].dtype != DType::Int64 || in[0].shape != Shape{2})
    return diag(ErrorKind::Value, op, ": expected a key of int64 [2] (seed, offset), got ",
                dt(in[0].dtype), shapeString(in[0].shape));
  DType t = at.dtype("dtype");
  if (!isFloating(t))
    return diag(ErrorKind::DType, op, ": expected a floating-point dtype, got ", dt(t));
  for (int64_t s : at.ints("shape"))
    if (s < 0)
      return diag(ErrorKind::Shape, op, ": invalid size ", s, " in ",
                  shapeString(at.ints("shape")));
  return TensorType{t, at.ints("shape")};
}

Result<TensorType> inferKind(const OpInfo& info, std::span<const TensorType> in, const Attrs& at) {
  std::string_view name = info.name;
  switch (info.kind) {
  case OpKind::Unary:
    return unary(name, info, in);
  case OpKind::Binary:
    return binary(name, info, in);
  case OpKind::Cast:
    return TensorType{at.dtype("dtype"), in[0].shape};
  case OpKind::Identity:
    return in[0];
  case OpKind::Where:
    return where(name, in);
  case OpKind::Reduce:
    return reduce(name, in, at);
  case OpKind::ArgReduce:
    return argReduce(name, in, at);
  case OpKind::Scan:
    return alongDim(name, in, at, in[0].dtype);
  case OpKind::ArgScan:
    return alongDim(name, in, at, DType::Int64);
  case OpKind::Normalize:
    if (!isFloating(in[0].dtype))
      return diag(ErrorKind::DType, name, ": expected a floating-point input, got ",
                  dt(in[0].dtype));
    return alongDim(name, in, at, in[0].dtype);
  case OpKind::Sort:
    return alongDim(name, in, at, DType::Int64);
  case OpKind::Reshape:
    return reshape(name, in, at);
  case OpKind::Permute:
    return permute(name, in, at);
  case OpKind::Expand:
    return expand(name, in, at);
  case OpKind::Slice:
    return slice(name, in, at);
  case OpKind::Flip:
    return flip(name, in, at);
  case OpKind::Pad:
    return pad(name, in, at);
  case OpKind::Cat:
    return cat(name, in, at);
  case OpKind::MatMul:
    return matmul(name, in);
  case OpKind::Matrix:
    return matrixOp(name, info.code, in[0]);
  case OpKind::Conv:
  case OpKind::ConvInputGrad:
  case OpKind::ConvWeightGrad:
    return conv(name, info.kind, in, at);
  case OpKind::Gather:
    return gather(name, in, at);
  case OpKind::Scatter:
    return scatter(name, in, at);
  case OpKind::IndexSelect:
    return indexSelect(name, in, at);
  case OpKind::IndexAdd:
    return indexAdd(name, in, at);
  case OpKind::CheckIndex:
    return checkIndex(name, in, at);
  case OpKind::Pool:
    return pool(name, in, at);
  case OpKind::Full:
    return full(name, at);
  case OpKind::Random:
    return random(name, in, at);
  }
  return diag(ErrorKind::Internal, name, ": no shape inference for this op kind");
}

} // namespace

Result<TensorType> inferType(OpCode op, std::span<const TensorType> in, const Attrs& at) {
  const OpInfo& info = opInfo(op);
  if (info.numInputs >= 0 && static_cast<int>(in.size()) != info.numInputs)
    return diag(ErrorKind::Value, info.name, ": expected ", info.numInputs, " inputs, got ",
                in.size());
  if (auto bad = checkAttrs(op, at)) return *bad;
  auto type = inferKind(info, in, at);
  if (type && !byteSize(type.value().shape, type.value().dtype))
    return diag(ErrorKind::Shape, info.name, ": the result ", dt(type.value().dtype), " ",
                shapeString(type.value().shape), " has more elements than fit in memory");
  return type;
}

} // namespace weft
