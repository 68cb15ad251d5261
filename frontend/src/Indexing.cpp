// Tensor::index and index_put_: basic indexing as views, advanced indexing through gather-like ops;
// index_fill, index_copy, scatter_reduce and index_reduce.
#include "weft/Indexing.h"
#include "InPlace.h"
#include "TensorImpl.h"
#include "Trace.h"
#include "weft/Functions.h"
#include "weft/ir/Types.h"

#include <limits>

namespace weft {

indexing::TensorIndex::TensorIndex(const char* s, std::source_location loc)
    : value(EllipsisIndex{}) {
  CallSite cs(loc);
  WEFT_CHECK(s != nullptr && std::string(s) == "...", Value,
             "index: the only string index is \"...\", got \"", s ? s : "null", "\"");
}

namespace {

using indexing::TensorIndex;

/// Whether an index tensor is a mask: bool, or uint8 as LibTorch still takes it.
bool isMask(const Tensor& t) {
  return t.dtype() == DType::Bool || t.dtype() == DType::UInt8;
}

/// Number of source dims an index entry consumes.
int64_t consumed(const TensorIndex& ix) {
  if (std::holds_alternative<int64_t>(ix.value) ||
      std::holds_alternative<indexing::Slice>(ix.value))
    return 1;
  if (const Tensor* t = std::get_if<Tensor>(&ix.value))
    return t->defined() && isMask(*t) ? t->dim() : 1;
  return 0;
}

struct Advanced {
  int64_t dim;       // in the tensor after basic indexing
  Tensor index;      // int64, any shape
  int64_t sourceDim; // the dim of the indexed tensor it indexes, as errors name it
  bool fromMask;     // a mask's nonzero positions: in bounds already
};

/// Applies the basic (view) part of `indices`; collects tensor indices for the advanced part.
Tensor applyBasic(const Tensor& self, const std::vector<TensorIndex>& indices,
                  std::vector<Advanced>& adv) {
  int64_t used = 0;
  size_t ellipses = 0;
  for (const auto& ix : indices) {
    used += consumed(ix);
    ellipses += std::holds_alternative<indexing::EllipsisIndex>(ix.value) ? 1 : 0;
  }
  WEFT_CHECK(ellipses <= 1, Index, "index: an index can only have a single ellipsis ('...')");
  WEFT_CHECK(used <= self.dim(), Index, "index: too many indices for tensor of dimension ",
             self.dim(), " (got ", used, ")");
  Tensor r = self;
  int64_t d = 0, source = 0; // dims of r and of self
  for (const auto& ix : indices) {
    if (const int64_t* i = std::get_if<int64_t>(&ix.value)) {
      r = r.select(d, *i);
      ++source;
    } else if (const auto* s = std::get_if<indexing::Slice>(&ix.value)) {
      r = r.slice(d, s->start, s->stop, s->step);
      ++d;
      ++source;
    } else if (std::holds_alternative<indexing::NoneIndex>(ix.value)) {
      r = r.unsqueeze(d);
      ++d;
    } else if (std::holds_alternative<indexing::EllipsisIndex>(ix.value)) {
      d += self.dim() - used;
      source += self.dim() - used;
    } else if (const bool* b = std::get_if<bool>(&ix.value)) {
      r = r.unsqueeze(d);
      if (!*b) r = r.slice(d, 0, 0);
      ++d;
    } else {
      Tensor t = std::get<Tensor>(ix.value);
      WEFT_CHECK(t.defined(), Index, "index: an index tensor is undefined");
      if (isMask(t)) {
        if (t.dtype() == DType::UInt8) t = t != 0;
        // A mask over the next t.dim() dims becomes one integer index per dim.
        for (int64_t k = 0; k < t.dim(); ++k)
          WEFT_CHECK(t.size(k) == r.size(d + k), Index, "index: the shape of the mask ",
                     shapeString(t.sizes()), " at index ", k,
                     " does not match the shape of the indexed tensor ", shapeString(r.sizes()),
                     " at index ", d + k);
        Tensor nz = nonzero(t);
        for (int64_t k = 0; k < t.dim(); ++k)
          adv.push_back({d + k, nz.select(1, k), source + k, true});
        if (t.dim() == 0) { // a 0-dim mask acts like a bool scalar: a new dim, kept or emptied
          r = r.unsqueeze(d);
          adv.push_back({d, zeros({nz.size(0)}, DType::Int64), source, true});
          ++d;
        }
        d += t.dim();
        source += t.dim();
      } else {
        WEFT_CHECK(t.dtype() == DType::Int64 || t.dtype() == DType::Int32, Index,
                   "index: tensors used as indices must be long, int, byte or bool tensors, got ",
                   dtypeName(t.dtype()));
        adv.push_back({d, t.to(DType::Int64), source, false});
        ++d;
        ++source;
      }
    }
  }
  return r;
}

/// Advanced indexing on `x`: broadcast the index tensors, turn them into one flat index into the
/// indexed dims, and gather with index_select. Result dims follow NumPy's placement rule. Each
/// index is checked and wrapped (negative ones count from the end) as `op`'s.
Tensor applyAdvanced(const Tensor& x, const std::vector<Advanced>& adv, const char* op) {
  Shape bshape = adv[0].index.sizes();
  for (const auto& a : adv) {
    auto b = ir::broadcastShapes(bshape, a.index.sizes(), "index");
    WEFT_CHECK(static_cast<bool>(b), Index,
               "index: shape mismatch: indexing tensors could not be broadcast together ",
               "with shapes ", shapeString(bshape), " and ", shapeString(a.index.sizes()));
    bshape = b.value();
  }
  bool adjacent = true;
  for (size_t i = 1; i < adv.size(); ++i)
    adjacent = adjacent && adv[i].dim == adv[i - 1].dim + 1;
  // Move indexed dims to the front, in order; the rest keep their order.
  Shape perm, rest;
  std::vector<bool> isAdv(static_cast<size_t>(x.dim()), false);
  for (const auto& a : adv) {
    perm.push_back(a.dim);
    isAdv[static_cast<size_t>(a.dim)] = true;
  }
  for (int64_t d = 0; d < x.dim(); ++d)
    if (!isAdv[static_cast<size_t>(d)]) {
      perm.push_back(d);
      rest.push_back(x.size(d));
    }
  Tensor moved = x.permute(perm);
  // A result without elements reads no index, as PyTorch's (but an empty dim has no valid index).
  const bool readsNone = numel(rest) == 0;
  Tensor flat;
  int64_t stride = 1;
  for (size_t i = adv.size(); i-- > 0;) {
    int64_t n = x.size(adv[i].dim);
    Tensor ix = adv[i].index;
    if (readsNone && n > 0)
      ix = zeros_like(ix);
    else if (!adv[i].fromMask)
      ix = check_index(ix, n, adv[i].sourceDim, true, op);
    flat = flat.defined() ? flat + ix * stride : ix * stride;
    stride *= n;
  }
  Shape collapsed{stride};
  collapsed.insert(collapsed.end(), rest.begin(), rest.end());
  Tensor picked = index_select(moved.reshape(collapsed), 0, flat.expand(bshape).reshape({-1}));
  Shape outShape = bshape;
  outShape.insert(outShape.end(), rest.begin(), rest.end());
  Tensor out = picked.reshape(outShape);
  int64_t first = adv[0].dim;
  if (adjacent && first > 0) { // NumPy: adjacent advanced dims stay where they were
    Shape p;
    int64_t nb = static_cast<int64_t>(bshape.size());
    for (int64_t d = 0; d < first; ++d)
      p.push_back(nb + d);
    for (int64_t d = 0; d < nb; ++d)
      p.push_back(d);
    for (int64_t d = nb + first; d < out.dim(); ++d)
      p.push_back(d);
    out = out.permute(p);
  }
  return out;
}

/// self indexed by `indices`; `op` names the op in errors (index, index_put_).
Tensor indexImpl(const Tensor& self, const std::vector<TensorIndex>& indices,
                 const char* op = "index") {
  WEFT_CHECK(self.defined(), Value, op, ": called on an undefined tensor");
  std::vector<Advanced> adv;
  Tensor r = applyBasic(self, indices, adv);
  if (adv.empty()) return r;
  return autograd::name_grad_fn(applyAdvanced(r, adv, op), "IndexBackward0", r);
}

} // namespace

Tensor Tensor::index(std::initializer_list<indexing::TensorIndex> indices,
                     std::source_location loc) const {
  CallSite cs(loc);
  return indexImpl(*this, std::vector<TensorIndex>(indices));
}

Tensor Tensor::index(const std::vector<indexing::TensorIndex>& indices,
                     std::source_location loc) const {
  CallSite cs(loc);
  return indexImpl(*this, indices);
}

// An operator takes no location: an unknown one (line 0) keeps the ops below from naming theirs.
Tensor Tensor::operator[](int64_t index) const {
  CallSite cs{std::source_location{}};
  return select(0, index);
}
Tensor Tensor::operator[](const Tensor& index) const {
  CallSite cs{std::source_location{}};
  return indexImpl(*this, {TensorIndex(index)});
}

Tensor& Tensor::index_put_(const std::vector<indexing::TensorIndex>& indices, const Tensor& values,
                           bool accumulate, std::source_location loc) {
  CallSite cs(loc);
  checkDefined("index_put_");
  checkWritable(*this, "index_put_");
  WEFT_CHECK(values.defined(), Value, "index_put_: values is an undefined tensor");
  // Find the flat positions the index selects by indexing a tensor of positions, then scatter
  // (or, accumulating, add: repeated positions add up).
  Tensor positions = arange(numel(), TensorOptions(kInt64).device(device())).reshape(sizes());
  Tensor where = indexImpl(positions, indices, "index_put_");
  Tensor v = values.to(dtype());
  auto b = ir::broadcastShapes(v.sizes(), where.sizes(), "index_put_");
  WEFT_CHECK(static_cast<bool>(b) && b.value() == where.sizes(), Shape,
             "index_put_: shape mismatch: value tensor of shape ", shapeString(values.sizes()),
             " cannot be broadcast to indexing result of shape ", shapeString(where.sizes()));
  bool record = is_grad_enabled() && (requires_grad() || values.requires_grad());
  Tensor flatSelf = (record ? clone() : *this).reshape({-1}); // never save memory copy_ overwrites
  Tensor at = where.reshape({-1}), flatValues = v.expand(where.sizes()).reshape({-1});
  Tensor updated = accumulate ? flatSelf.index_add(0, at, flatValues)
                              : weft::scatter(flatSelf, 0, at, flatValues);
  return copy_(updated.reshape(sizes()));
}

Tensor& Tensor::index_put_(const std::vector<indexing::TensorIndex>& indices, Scalar value,
                           std::source_location loc) {
  CallSite cs(loc);
  checkDefined("index_put_");
  return index_put_(indices, scalar_tensor(value, dtype()));
}

// ---- index_fill and index_copy: slices along one dim, picked by an index ----

namespace {

/// A bool mask of `x`'s dim `dim`, true at each of `index`'s positions (int64 or int32, negative
/// counting from the end, as PyTorch's index_fill), shaped to broadcast against `x`.
Tensor indexMask(const Tensor& x, int64_t dim, const Tensor& index, const char* op) {
  WEFT_CHECK(x.defined(), Value, op, ": called on an undefined tensor");
  WEFT_CHECK(index.defined() && (index.dtype() == DType::Int64 || index.dtype() == DType::Int32),
             DType, op, ": expected an int64 or int32 index");
  WEFT_CHECK(index.dim() <= 1, Shape, op, ": index should have dimension 1 or 0, got ",
             index.dim());
  const int64_t d = wrapDim(dim, x.dim(), op), n = x.dim() == 0 ? 1 : x.size(d);
  Tensor i = index.reshape({-1}).to(DType::Int64);
  // A tensor without elements reads no index, as PyTorch's (but an empty dim has no valid one).
  Tensor mask = zeros({n}, DType::Bool);
  if (x.numel() > 0 || n == 0)
    mask = mask.scatter(0, check_index(i, n, d, true, op), ones({i.numel()}, DType::Bool));
  Shape shape(static_cast<size_t>(x.dim()), 1);
  if (x.dim() > 0) shape[static_cast<size_t>(d)] = n;
  return mask.reshape(shape);
}

} // namespace

Tensor Tensor::index_fill(int64_t dim, const Tensor& index, Scalar value,
                          std::source_location loc) const {
  CallSite cs(loc);
  return where(indexMask(*this, dim, index, "index_fill"), full({}, value, dtype()), *this);
}
namespace {
/// index_copy's and index_reduce's index spread over the source's shape: slice i of `source`
/// along `dim` goes to slice index[i] of `self` (0-dim tensors as 1-element vectors), checked as
/// `op`'s. Unless `checksEmpty` (index_reduce), a `self` without elements reads no index, as
/// PyTorch's index_copy (but an empty dim has no valid one).
struct SpreadIndex {
  Tensor self, source, index;
  int64_t dim;
};
SpreadIndex spreadIndex(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                        const char* op, bool checksEmpty) {
  WEFT_CHECK(source.defined() && source.dtype() == self.dtype(), DType, op,
             ": self and source must have the same dtype");
  WEFT_CHECK(index.defined() && index.dtype() == DType::Int64, DType, op,
             ": expected an int64 index");
  WEFT_CHECK(index.dim() <= 1, Shape, op, ": index should have dimension 1 or 0, got ",
             index.dim());
  SpreadIndex r;
  r.dim = wrapDim(dim, std::max<int64_t>(self.dim(), 1), op);
  r.self = self.dim() == 0 ? self.reshape({1}) : self;
  r.source = source.dim() == 0 ? source.reshape({1}) : source;
  WEFT_CHECK(r.source.dim() == r.self.dim() && r.source.size(r.dim) == index.numel(), Shape, op,
             ": source of shape ", shapeString(source.sizes()), " does not fit ", index.numel(),
             " indices along dim ", r.dim, " of ", shapeString(self.sizes()));
  Shape along(static_cast<size_t>(r.source.dim()), 1);
  along[static_cast<size_t>(r.dim)] = index.numel();
  const int64_t size = r.self.size(r.dim);
  Tensor flat = index.reshape({-1});
  if (checksEmpty || self.numel() > 0 || size == 0)
    flat = check_index(flat, size, r.dim, false, op);
  r.index = flat.reshape(along).expand(r.source.sizes());
  return r;
}
} // namespace

Tensor Tensor::index_copy(int64_t at, const Tensor& index, const Tensor& source,
                          std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("index_copy");
  // Slice i of source scattered to position index[i] (with duplicates, one of them).
  SpreadIndex s = spreadIndex(*this, at, index, source, "index_copy", false);
  Tensor r = s.self.scatter(s.dim, s.index, s.source);
  return dim() == 0 ? r.reshape({}) : r;
}
namespace {
/// The value reduction `reduce` starts from in dtype `t`: 0 (sum, mean), 1 (prod), the lowest
/// value (amax) or the highest (amin).
Scalar reductionIdentity(std::string_view reduce, DType t) {
  if (reduce == "prod") return 1;
  if (reduce != "amax" && reduce != "amin") return 0;
  const bool low = reduce == "amax";
  if (isFloating(t))
    return low ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  return low ? lowestInteger(t) : highestInteger(t);
}
} // namespace

Tensor check_index(const Tensor& index, int64_t size, int64_t dim, bool wrap, const char* op) {
  WEFT_CHECK(index.defined() && index.dtype() == DType::Int64, DType, op,
             ": expected an int64 index, got ",
             index.defined() ? dtypeName(index.dtype()) : "an undefined tensor");
  return dispatch(OpCode::CheckIndex, {index},
                  Attrs{{"size", size}, {"dim", dim}, {"wrap", wrap}, {"op", std::string(op)}});
}

namespace {
/// scatter_reduce of `self` along `at` (a valid dim) by an index already checked, its arguments
/// too: scatter_reduce's and index_reduce's shared body.
Tensor scatterReduce(const Tensor& self, int64_t at, const Tensor& index, const Tensor& src,
                     std::string_view reduce, bool include_self) {
  Tensor start = self;
  if (!include_self) // each target reached starts from the reduction's identity
    start = start.scatter(
        at, index, fullOf(index.sizes(), reductionIdentity(reduce, self.dtype()), self.dtype()));
  if (reduce == "sum") return start.scatter_add(at, index, src);
  if (reduce == "mean") {
    // The sum over the count of what reached each target (itself included where it counts);
    // integers divide rounding down, as PyTorch's.
    Tensor sums = start.scatter_add(at, index, src);
    Tensor counts = (include_self ? ones_like(start) : zeros_like(start))
                        .scatter_add(at, index, fullOf(index.sizes(), 1, self.dtype()));
    Tensor safe = counts.clamp_min(1);
    Tensor mean = isFloating(self.dtype()) ? sums / safe : sums.div(safe, "floor");
    return where(counts.eq(0), self, mean);
  }
  const OpCode op = reduce == "prod"   ? OpCode::ScatterProd
                    : reduce == "amax" ? OpCode::ScatterAmax
                                       : OpCode::ScatterAmin;
  return scatter_op(op, start, at, index, src);
}
} // namespace

Tensor Tensor::scatter_reduce(int64_t d, const Tensor& index, const Tensor& src,
                              std::string_view reduce, bool include_self,
                              std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("scatter_reduce");
  WEFT_CHECK(index.defined() && src.defined(), Value,
             "scatter_reduce: called with an undefined tensor");
  WEFT_CHECK(reduce == "sum" || reduce == "prod" || reduce == "mean" || reduce == "amax" ||
                 reduce == "amin",
             Value, "reduce argument must be either sum, prod, mean, amax or amin, got ", reduce);
  WEFT_CHECK(src.dtype() == dtype(), DType,
             "scatter_reduce(): Expected self.dtype to be equal to src.dtype, got ",
             dtypeName(dtype()), " and ", dtypeName(src.dtype()));
  const int64_t at = wrapDim(d, std::max<int64_t>(dim(), 1), "scatter_reduce");
  Tensor ix = check_index(index, dim() == 0 ? 1 : size(at), at, false, "scatter_reduce");
  return scatterReduce(*this, at, ix, src, reduce, include_self);
}
Tensor scatter_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                      std::string_view reduce, bool include_self, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(x.defined(), Value, "scatter_reduce: called with an undefined tensor");
  return x.scatter_reduce(dim, index, src, reduce, include_self);
}
Tensor& Tensor::scatter_reduce_(int64_t dim, const Tensor& index, const Tensor& src,
                                std::string_view reduce, bool include_self,
                                std::source_location loc) {
  CallSite cs(loc);
  return assignInPlace(
      *this, inPlaceSource(*this, src).scatter_reduce(dim, index, src, reduce, include_self),
      "scatter_reduce_");
}

Tensor Tensor::index_reduce(int64_t d, const Tensor& index, const Tensor& source,
                            std::string_view reduce, bool include_self,
                            std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("index_reduce");
  WEFT_CHECK(reduce == "prod" || reduce == "mean" || reduce == "amax" || reduce == "amin", Value,
             "index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got ",
             reduce, ".");
  // Slice i of source reduced into slice index[i]: a scatter_reduce with the index spread.
  SpreadIndex s = spreadIndex(*this, d, index, source, "index_reduce", true);
  Tensor r = scatterReduce(s.self, s.dim, s.index, s.source, reduce, include_self);
  return dim() == 0 ? r.reshape({}) : r;
}
Tensor index_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source,
                    std::string_view reduce, bool include_self, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(x.defined(), Value, "index_reduce: called with an undefined tensor");
  return x.index_reduce(dim, index, source, reduce, include_self);
}
Tensor& Tensor::index_reduce_(int64_t dim, const Tensor& index, const Tensor& source,
                              std::string_view reduce, bool include_self,
                              std::source_location loc) {
  CallSite cs(loc);
  return assignInPlace(
      *this, inPlaceSource(*this, source).index_reduce(dim, index, source, reduce, include_self),
      "index_reduce_");
}

Tensor Tensor::masked_scatter(const Tensor& mask, const Tensor& source,
                              std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("masked_scatter");
  WEFT_CHECK(mask.defined() && source.defined(), Value,
             "masked_scatter: called with an undefined tensor");
  WEFT_CHECK(mask.dtype() == DType::Bool, DType, "masked_scatter: expected a bool mask, got ",
             dtypeName(mask.dtype()));
  WEFT_CHECK(source.dtype() == dtype(), DType,
             "masked_scatter: expected self and source to have same dtypes but got ",
             dtypeName(dtype()), " and ", dtypeName(source.dtype()));
  Tensor m = mask.expand(sizes());
  // The k-th true element (row-major) takes source's element k.
  Tensor position = m.reshape({-1}).to(DType::Int64).cumsum(0) - 1;
  const int64_t available = source.numel();
  if (currentTrace() == nullptr) // the mask's values: checked eagerly (a trace would read them)
    WEFT_CHECK(position.numel() == 0 || position.max().item<int64_t>() < available, Value,
               "masked_scatter: expected source to have at least as many elements as ones in "
               "mask (",
               available, ")");
  if (available == 0) return where(m, *this, *this); // no true element: a copy
  Tensor picked =
      source.reshape({-1}).index_select(0, position.clamp(0, available - 1)).reshape(sizes());
  return where(m, picked, *this);
}
Tensor& Tensor::masked_scatter_(const Tensor& mask, const Tensor& source,
                                std::source_location loc) {
  CallSite cs(loc);
  checkDefined("masked_scatter_");
  return assignInPlace(*this, inPlaceSource(*this, source).masked_scatter(mask, source),
                       "masked_scatter_");
}

Tensor Tensor::index_put(const std::vector<indexing::TensorIndex>& indices, const Tensor& values,
                         bool accumulate, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("index_put");
  Tensor r = clone();
  r.index_put_(indices, values, accumulate);
  return r;
}
Tensor Tensor::index_put(const std::vector<indexing::TensorIndex>& indices, Scalar value,
                         std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("index_put");
  Tensor r = clone();
  r.index_put_(indices, value);
  return r;
}

Tensor Tensor::put(const Tensor& index, const Tensor& source, bool accumulate,
                   std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("put");
  WEFT_CHECK(index.defined() && source.defined(), Value, "put: called with an undefined tensor");
  WEFT_CHECK(index.dtype() == DType::Int64, DType, "put: expected an int64 index, got ",
             dtypeName(index.dtype()));
  WEFT_CHECK(source.dtype() == dtype(), DType,
             "put: expected self and source to have same dtypes but got ", dtypeName(dtype()),
             " and ", dtypeName(source.dtype()));
  WEFT_CHECK(index.numel() == source.numel(), Shape,
             "put: expected source and index to have the same number of elements, but got ",
             source.numel(), " and ", index.numel());
  // Negative indices count from the end, as PyTorch's.
  Tensor at = check_index(index.reshape({-1}), numel(), -1, true, "put");
  Tensor flat = reshape({-1}), values = source.reshape({-1});
  Tensor r = accumulate ? flat.index_add(0, at, values) : flat.scatter(0, at, values);
  return r.reshape(sizes());
}
Tensor& Tensor::put_(const Tensor& index, const Tensor& source, bool accumulate,
                     std::source_location loc) {
  CallSite cs(loc);
  checkDefined("put_");
  return assignInPlace(*this, inPlaceSource(*this, source).put(index, source, accumulate), "put_");
}

} // namespace weft
