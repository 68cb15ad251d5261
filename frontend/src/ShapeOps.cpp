// Shape composites built from views and copies: view_as, broadcast_to, movedim, unbind, repeat,
// tile, repeat_interleave, roll, diagonal, diag, trace, take_along_dim, masked_select,
// broadcast_tensors, meshgrid, fliplr/flipud, rot90, ravel, tensor_split and h/v/dsplit, diff,
// take and diag_embed. Each is a few primitives, so autograd and compile() see those.
#include "TensorImpl.h"
#include "weft/Functions.h"
#include "weft/Indexing.h"
#include "weft/ir/Types.h"
#include "weft/runtime/VjpRules.h"

#include <algorithm>
#include <limits>

namespace weft {
namespace {

Shape broadcastAll(const std::vector<Shape>& shapes, const char* op) {
  Shape r = shapes.empty() ? Shape{} : shapes[0];
  for (const Shape& s : shapes) {
    auto b = ir::broadcastShapes(r, s, op);
    WEFT_CHECK(static_cast<bool>(b), Shape, op, ": shapes ", shapeString(r), " and ",
               shapeString(s), " cannot be broadcast together");
    r = b.value();
  }
  return r;
}

/// Wrapped dims of `dims` for a tensor of rank `rank`, each at most once.
Shape uniqueDims(const Shape& dims, int64_t rank, const char* op, const char* what) {
  Shape r = wrapDims(dims, rank, op);
  for (size_t i = 0; i < r.size(); ++i)
    WEFT_CHECK(std::find(r.begin(), r.begin() + static_cast<std::ptrdiff_t>(i), r[i]) ==
                   r.begin() + static_cast<std::ptrdiff_t>(i),
               Value, op, ": repeated dim in ", what);
  return r;
}

} // namespace

Tensor Tensor::view_as(const Tensor& other, std::source_location loc) const {
  CallSite cs(loc);
  WEFT_CHECK(other.defined(), Value, "view_as: other is an undefined tensor");
  return view(other.sizes());
}
Tensor Tensor::reshape_as(const Tensor& other, std::source_location loc) const {
  CallSite cs(loc);
  WEFT_CHECK(other.defined(), Value, "reshape_as: other is an undefined tensor");
  return reshape(other.sizes());
}

Tensor Tensor::movedim(IntArrayRef source, IntArrayRef destination,
                       std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("movedim");
  WEFT_CHECK(source.size() == destination.size(), Value,
             "movedim: Invalid source or destination dims: source (", shapeString(source),
             " dims) should contain the same number of dims as destination (",
             shapeString(destination), " dims)");
  const int64_t n = dim();
  Shape src = uniqueDims(source, n, "movedim", "source"),
        dst = uniqueDims(destination, n, "movedim", "destination");
  if (n == 0) return *this;
  Shape perm(static_cast<size_t>(n), -1);
  std::vector<bool> moved(static_cast<size_t>(n), false);
  for (size_t i = 0; i < src.size(); ++i) {
    perm[static_cast<size_t>(dst[i])] = src[i];
    moved[static_cast<size_t>(src[i])] = true;
  }
  int64_t next = 0; // the dims not moved fill the free places in order
  for (int64_t& p : perm) {
    if (p >= 0) continue;
    while (moved[static_cast<size_t>(next)])
      ++next;
    p = next++;
  }
  return permute(perm);
}
Tensor Tensor::movedim(int64_t source, int64_t destination, std::source_location loc) const {
  CallSite cs(loc);
  return movedim(Shape{source}, Shape{destination});
}

std::vector<Tensor> Tensor::unbind(int64_t d, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("unbind");
  WEFT_CHECK(dim() > 0, Index, "unbind: dimension specified as ", d,
             " but tensor has no dimensions");
  d = wrapDim(d, dim(), "unbind");
  std::vector<Tensor> parts;
  for (int64_t i = 0; i < size(d); ++i)
    parts.push_back(select(d, i));
  return parts;
}

Tensor Tensor::repeat(IntArrayRef repeats, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("repeat");
  WEFT_CHECK(static_cast<int64_t>(repeats.size()) >= dim(), Value,
             "repeat: number of dimensions of repeat dims (", repeats.size(),
             ") can not be smaller than number of dimensions of tensor (", dim(), ")");
  for (int64_t r : repeats)
    WEFT_CHECK(r >= 0, Value, "repeat: repeats cannot be negative, got ", shapeString(repeats));
  // Each dim i of size s becomes (1, s), is expanded to (r, s), copied (a new tensor, as in
  // PyTorch, even where every r is 1) and folded to r * s.
  Shape lifted, expanded, result;
  const size_t lead = repeats.size() - static_cast<size_t>(dim());
  for (size_t i = 0; i < repeats.size(); ++i) {
    int64_t s = i < lead ? 1 : sizes()[i - lead];
    std::optional<int64_t> size = checkedMul(repeats[i], s);
    WEFT_CHECK(size.has_value(), Value, "repeat: ", repeats[i], " repeats of a dim of size ", s,
               " overflow");
    lifted.insert(lifted.end(), {1, s});
    expanded.insert(expanded.end(), {repeats[i], s});
    result.push_back(*size);
  }
  return weft::reshape(weft::reshape(*this, lifted).expand(expanded).clone(), result);
}
Tensor Tensor::tile(IntArrayRef dims, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("tile");
  while (static_cast<int64_t>(dims.size()) < dim())
    dims.insert(dims.begin(), 1);
  return repeat(dims);
}

Tensor Tensor::repeat_interleave(int64_t repeats, std::optional<int64_t> d,
                                 std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("repeat_interleave");
  WEFT_CHECK(repeats >= 0, Value, "repeat_interleave: repeats can not be negative, got ", repeats);
  WEFT_CHECK(!d || dim() > 0, Index, "repeat_interleave: dimension specified as ", d.value_or(0),
             " but tensor has no dimensions");
  Tensor x = d ? *this : flatten();
  int64_t at = d ? wrapDim(*d, x.dim(), "repeat_interleave") : 0;
  if (x.dim() == 0) x = x.reshape({1});
  Shape s = x.sizes();
  s.insert(s.begin() + at + 1, repeats);
  return x.unsqueeze(at + 1).expand(s).clone().flatten(at, at + 1); // a new tensor, as PyTorch
}

Tensor Tensor::roll(IntArrayRef shifts, IntArrayRef dims, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("roll");
  if (dims.empty()) {
    WEFT_CHECK(shifts.size() == 1, Value, "roll: without dims, shifts must have one value, got ",
               shapeString(shifts));
    return flatten().roll(shifts, {0}).view(sizes());
  }
  WEFT_CHECK(shifts.size() == dims.size(), Value, "roll: shifts (", shapeString(shifts),
             ") and dims (", shapeString(dims), ") must have the same number of values");
  WEFT_CHECK(dim() > 0, Index, "roll: dims given for a 0-dim tensor");
  Tensor x = *this;
  bool moved = false;
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrapDim(dims[i], dim(), "roll");
    int64_t n = x.size(d);
    if (n == 0) continue;
    int64_t s = ((shifts[i] % n) + n) % n;
    if (s == 0) continue;
    x = cat({x.narrow(d, n - s, s), x.narrow(d, 0, n - s)}, d);
    moved = true;
  }
  return moved ? x : x.clone(); // a new tensor, as PyTorch, even where nothing moves
}
Tensor Tensor::roll(int64_t shift, std::optional<int64_t> d, std::source_location loc) const {
  CallSite cs(loc);
  return d ? roll(Shape{shift}, Shape{*d}) : roll(Shape{shift}, Shape{});
}

Tensor Tensor::diagonal(int64_t offset, int64_t dim1, int64_t dim2,
                        std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("diagonal");
  WEFT_CHECK(dim() >= 2, Index, "diagonal: expected a tensor of at least 2 dims, got ",
             shapeString(sizes()));
  int64_t d1 = wrapDim(dim1, dim(), "diagonal"), d2 = wrapDim(dim2, dim(), "diagonal");
  WEFT_CHECK(d1 != d2, Value, "diagonal: dimensions cannot be identical ", dim1, ", ", dim2);
  // The plane's dims go last; its rows of m elements, flattened, hold the diagonal every m + 1.
  Shape perm;
  for (int64_t d = 0; d < dim(); ++d)
    if (d != d1 && d != d2) perm.push_back(d);
  perm.insert(perm.end(), {d1, d2});
  Tensor planes = permute(perm);
  const int64_t n = size(d1), m = size(d2);
  const int64_t len =
      std::max<int64_t>(0, offset >= 0 ? std::min(n, m - offset) : std::min(n + offset, m));
  Tensor flat = planes.flatten(-2);
  if (len == 0) return flat.narrow(-1, 0, 0);
  const int64_t start = offset >= 0 ? offset : -offset * m;
  return flat.slice(-1, start, start + (len - 1) * (m + 1) + 1, m + 1);
}

Tensor Tensor::diag(int64_t k, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("diag");
  WEFT_CHECK(dim() == 1 || dim() == 2, Shape, "diag: supports 1-D or 2-D tensors, got ", dim(),
             "-D");
  if (dim() == 2) {
    WEFT_CHECK(k >= 0 ? k <= size(1) : k >= -size(0), Index, "diag: offset ", k,
               " is out of range for a matrix of shape ", shapeString(sizes()));
    return diagonal(k).clone(); // a new tensor, as PyTorch's diag
  }
  WEFT_CHECK(k > -(int64_t{1} << 31) && k < (int64_t{1} << 31), Value, "diag: offset ", k,
             " makes a matrix too large to make");
  // v_i goes to row i (+|k| below the diagonal), column i (+k above): flat position i (n + 1)
  // plus the start, so each element followed by n zeros, shifted by the start, is the matrix.
  const int64_t len = size(0), n = len + std::abs(k);
  WEFT_CHECK(n < (int64_t{1} << 31), Value, "diag: a ", n, " x ", n,
             " matrix is too large to make");
  const int64_t start = k >= 0 ? k : -k * n;
  Tensor flat = weft::pad(unsqueeze(1), {0, n}).flatten();
  const int64_t have = start + len * (n + 1);
  flat = weft::pad(flat, {start, std::max<int64_t>(0, n * n - have)});
  return flat.narrow(0, 0, n * n).view({n, n});
}

Tensor Tensor::trace(std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("trace");
  WEFT_CHECK(dim() == 2, Shape, "trace: expected a matrix, got ", shapeString(sizes()));
  return diagonal().sum();
}

Tensor Tensor::take_along_dim(const Tensor& indices, std::optional<int64_t> d,
                              std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("take_along_dim");
  WEFT_CHECK(indices.defined(), Value, "take_along_dim: indices is an undefined tensor");
  WEFT_CHECK(indices.dtype() == DType::Int64, DType,
             "take_along_dim: dtype of indices should be Long but got ",
             dtypeName(indices.dtype()));
  // Checked here, so that an error names take_along_dim (no negative index, as PyTorch's).
  if (!d)
    return flatten().gather(0, check_index(indices.flatten(), numel(), 0, false, "take_along_dim"));
  WEFT_CHECK(dim() == indices.dim(), Shape,
             "take_along_dim: input and indices should have the same number of dimensions, but "
             "got ",
             dim(), " dimensions and ", indices.dim(), " dimensions");
  WEFT_CHECK(dim() > 0, Index, "take_along_dim: dimension specified as ", *d,
             " but tensor has no dimensions");
  int64_t at = wrapDim(*d, dim(), "take_along_dim");
  // Broadcast in every dim but `at`, where each keeps its own size.
  Shape self = sizes(), idx = indices.sizes();
  self[static_cast<size_t>(at)] = 1;
  idx[static_cast<size_t>(at)] = 1;
  Shape common = broadcastAll({self, idx}, "take_along_dim");
  Shape selfShape = common, idxShape = common;
  selfShape[static_cast<size_t>(at)] = size(at);
  idxShape[static_cast<size_t>(at)] = indices.size(at);
  Tensor checked = check_index(indices, size(at), at, false, "take_along_dim");
  return expand(selfShape).gather(at, checked.expand(idxShape));
}

Tensor Tensor::masked_select(const Tensor& mask, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("masked_select");
  WEFT_CHECK(mask.defined() && mask.dtype() == DType::Bool, DType,
             "masked_select: expected a bool mask, got ",
             mask.defined() ? dtypeName(mask.dtype()) : "an undefined tensor");
  Shape common = broadcastAll({sizes(), mask.sizes()}, "masked_select");
  return expand(common).index({mask.expand(common)});
}

std::vector<Tensor> broadcast_tensors(const std::vector<Tensor>& tensors,
                                      std::source_location loc) {
  CallSite cs(loc);
  std::vector<Shape> shapes;
  for (const Tensor& t : tensors) {
    WEFT_CHECK(t.defined(), Value, "broadcast_tensors: called with an undefined tensor");
    shapes.push_back(t.sizes());
  }
  Shape common = broadcastAll(shapes, "broadcast_tensors");
  std::vector<Tensor> r;
  for (const Tensor& t : tensors)
    r.push_back(t.expand(common));
  return r;
}

std::vector<Tensor> meshgrid(const std::vector<Tensor>& tensors, std::string_view indexing,
                             std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(indexing == "ij" || indexing == "xy", Value,
             "meshgrid: indexing must be \"ij\" or \"xy\", got \"", indexing, "\"");
  WEFT_CHECK(!tensors.empty(), Value, "meshgrid: expects a non-empty list of tensors");
  Shape shape;
  for (const Tensor& t : tensors) {
    WEFT_CHECK(t.defined() && t.dim() <= 1, Shape, "meshgrid: expects 0-D or 1-D tensors, got ",
               t.defined() ? shapeString(t.sizes()) : "an undefined tensor");
    WEFT_CHECK(t.dtype() == tensors[0].dtype(), DType,
               "meshgrid: expects all tensors to have the same dtype");
    shape.push_back(t.numel());
  }
  // "xy": the first two inputs index the second and first dims.
  const bool swap = indexing == "xy" && tensors.size() >= 2;
  auto place = [&](size_t i) { return swap && i < 2 ? 1 - i : i; };
  if (swap) std::swap(shape[0], shape[1]);
  std::vector<Tensor> grids;
  for (size_t i = 0; i < tensors.size(); ++i) {
    Shape lifted(shape.size(), 1);
    lifted[place(i)] = shape[place(i)];
    grids.push_back(tensors[i].reshape(lifted).expand(shape));
  }
  return grids;
}

Tensor Tensor::fliplr(std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("fliplr");
  WEFT_CHECK(dim() >= 2, Shape, "fliplr: input must be >= 2-d, got shape ", shapeString(sizes()));
  return flip({1});
}
Tensor Tensor::flipud(std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("flipud");
  WEFT_CHECK(dim() >= 1, Shape, "flipud: input must be >= 1-d, got shape ", shapeString(sizes()));
  return flip({0});
}

Tensor Tensor::rot90(int64_t k, IntArrayRef dims, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("rot90");
  WEFT_CHECK(dims.size() == 2, Value,
             "rot90: expected total rotation dims == 2, but got dims = ", dims.size());
  WEFT_CHECK(dim() >= 2, Shape, "rot90: expected total dims >= 2, but got total dims = ", dim());
  Shape d = uniqueDims(dims, dim(), "rot90", "dims");
  switch (((k % 4) + 4) % 4) { // a quarter turn: columns reversed, then the two dims swapped
  case 1:
    return flip({d[1]}).transpose(d[0], d[1]);
  case 2:
    return flip({d[0], d[1]});
  case 3:
    return flip({d[0]}).transpose(d[0], d[1]);
  default:
    return clone();
  }
}

std::vector<Tensor> Tensor::tensor_split(int64_t sections, int64_t d,
                                         std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("tensor_split");
  WEFT_CHECK(dim() >= 1, Shape, "tensor_split: expected at least a 1-dimensional tensor, but got ",
             "a tensor with 0 dims");
  WEFT_CHECK(sections > 0, Value, "tensor_split: number of sections must be larger than 0, got ",
             sections);
  const int64_t at = wrapDim(d, dim(), "tensor_split"), n = size(at);
  std::vector<Tensor> parts;
  for (int64_t i = 0, start = 0; i < sections; ++i) {
    const int64_t length = n / sections + (i < n % sections ? 1 : 0);
    parts.push_back(narrow(at, start, length));
    start += length;
  }
  return parts;
}
std::vector<Tensor> Tensor::tensor_split(const std::vector<int64_t>& indices, int64_t d,
                                         std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("tensor_split");
  WEFT_CHECK(dim() >= 1, Shape, "tensor_split: expected at least a 1-dimensional tensor, but got ",
             "a tensor with 0 dims");
  const int64_t at = wrapDim(d, dim(), "tensor_split"), n = size(at);
  // Part i is the slice [indices[i - 1], indices[i]), each bound as in a Python slice (past the
  // end: the end; negative: from the end), empty where the bounds decrease.
  auto bound = [n](int64_t v) {
    return std::clamp(v < 0 ? std::max(v, -n) + n : v, int64_t{0}, n);
  };
  std::vector<Tensor> parts;
  for (size_t i = 0; i <= indices.size(); ++i) {
    const int64_t from = i == 0 ? 0 : bound(indices[i - 1]);
    const int64_t end = i < indices.size() ? bound(indices[i]) : n;
    parts.push_back(narrow(at, from, std::max(end - from, int64_t{0})));
  }
  return parts;
}

namespace {

/// The dim hsplit/vsplit/dsplit (`op`) split along, checking the rank they need and, for
/// `sections`, that it divides the dim.
int64_t directionalSplitDim(const Tensor& x, const char* op, int64_t minRank, int64_t d,
                            std::optional<int64_t> sections) {
  WEFT_CHECK(x.defined(), Value, op, ": called with an undefined tensor");
  WEFT_CHECK(x.dim() >= minRank, Shape, op, " requires a tensor with at least ", minRank,
             " dimension", minRank == 1 ? "" : "s", ", but got a tensor with ", x.dim(),
             " dimensions");
  if (sections) {
    WEFT_CHECK(*sections > 0 && x.size(d) % *sections == 0, Value, op,
               " attempted to split along dimension ", d, ", but the size of the dimension ",
               x.size(d), " is not divisible by the split_size ", *sections);
  }
  return d;
}

} // namespace

std::vector<Tensor> Tensor::hsplit(int64_t sections, std::source_location loc) const {
  CallSite cs(loc);
  const int64_t d = dim() == 1 ? 0 : 1;
  return tensor_split(sections, directionalSplitDim(*this, "hsplit", 1, d, sections));
}
std::vector<Tensor> Tensor::hsplit(const std::vector<int64_t>& indices,
                                   std::source_location loc) const {
  CallSite cs(loc);
  const int64_t d = dim() == 1 ? 0 : 1;
  return tensor_split(indices, directionalSplitDim(*this, "hsplit", 1, d, std::nullopt));
}
std::vector<Tensor> Tensor::vsplit(int64_t sections, std::source_location loc) const {
  CallSite cs(loc);
  return tensor_split(sections, directionalSplitDim(*this, "vsplit", 2, 0, sections));
}
std::vector<Tensor> Tensor::vsplit(const std::vector<int64_t>& indices,
                                   std::source_location loc) const {
  CallSite cs(loc);
  return tensor_split(indices, directionalSplitDim(*this, "vsplit", 2, 0, std::nullopt));
}
std::vector<Tensor> Tensor::dsplit(int64_t sections, std::source_location loc) const {
  CallSite cs(loc);
  return tensor_split(sections, directionalSplitDim(*this, "dsplit", 3, 2, sections));
}
std::vector<Tensor> Tensor::dsplit(const std::vector<int64_t>& indices,
                                   std::source_location loc) const {
  CallSite cs(loc);
  return tensor_split(indices, directionalSplitDim(*this, "dsplit", 3, 2, std::nullopt));
}

Tensor Tensor::diff(int64_t n, int64_t d, const Tensor& prepend, const Tensor& append,
                    std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("diff");
  WEFT_CHECK(dim() >= 1, Shape, "diff: expects input to be at least one-dimensional");
  WEFT_CHECK(n >= 0, Value, "diff: order must be non-negative but got ", n);
  const int64_t at = wrapDim(d, dim(), "diff");
  Tensor x = *this;
  for (const Tensor* side : {&prepend, &append}) {
    if (!side->defined()) continue;
    WEFT_CHECK(side->dim() == dim(), Shape, "diff: expects prepend or append to be the same ",
               "dimension as input");
  }
  if (prepend.defined() || append.defined()) {
    std::vector<Tensor> parts;
    if (prepend.defined()) parts.push_back(prepend);
    parts.push_back(x);
    if (append.defined()) parts.push_back(append);
    x = cat(parts, at);
  }
  if (n == 0) return x.is_same(*this) ? clone() : x; // a new tensor, as PyTorch's
  for (int64_t i = 0; i < n; ++i) {
    const int64_t len = x.size(at);
    if (len == 0) break;
    Tensor later = x.narrow(at, 1, len - 1), earlier = x.narrow(at, 0, len - 1);
    x = x.dtype() == DType::Bool ? later.logical_xor(earlier) : later - earlier;
  }
  return x;
}

Tensor Tensor::take(const Tensor& index, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("take");
  WEFT_CHECK(index.defined() && index.dtype() == DType::Int64, DType,
             "take: expected a long tensor for index, but got ",
             index.defined() ? dtypeName(index.dtype()) : "an undefined tensor");
  // Negative indices count from the end, as PyTorch's.
  Tensor at = check_index(index.flatten(), numel(), -1, true, "take");
  return reshape({-1}).index_select(0, at).reshape(index.sizes());
}

Tensor Tensor::diag_embed(int64_t offset, int64_t dim1, int64_t dim2,
                          std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("diag_embed");
  WEFT_CHECK(dim() >= 1, Shape, "diag_embed: expected a tensor of at least 1 dimension");
  const int64_t rank = dim() + 1;
  const int64_t d1 = wrapDim(dim1, rank, "diag_embed"), d2 = wrapDim(dim2, rank, "diag_embed");
  WEFT_CHECK(d1 != d2, Value, "diag_embed: diagonal dimensions cannot be identical ", dim1, ", ",
             dim2);
  const int64_t n = size(-1), k = std::abs(offset);
  WEFT_CHECK(k <= std::numeric_limits<int64_t>::max() / 2 - n, Value, "diag_embed: offset ", offset,
             " is too large");
  // [..., n, n] with x[..., i] at (i, i), then shifted to (i, i + offset) by padding.
  Tensor square = where(eye(n, std::nullopt, TensorOptions(DType::Bool).device(device())),
                        unsqueeze(-1), zeros({}, dtype()));
  if (k > 0) square = offset > 0 ? pad(square, {k, 0, 0, k}) : pad(square, {0, k, k, 0});
  return square.movedim({rank - 2, rank - 1}, {d1, d2});
}

Tensor Tensor::slice_scatter(const Tensor& src, int64_t d, std::optional<int64_t> start,
                             std::optional<int64_t> end, int64_t step,
                             std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("slice_scatter");
  WEFT_CHECK(src.defined(), Value, "slice_scatter: src is undefined");
  WEFT_CHECK(dim() > 0, Index, "slice_scatter: cannot slice a 0-d tensor");
  WEFT_CHECK(step > 0, Value, "slice_scatter: slice step must be positive, got ", step);
  const int64_t at = wrapDim(d, dim(), "slice_scatter"), n = size(at);
  auto bound = [n](std::optional<int64_t> v, int64_t fallback) {
    if (!v) return fallback;
    return std::clamp<int64_t>(*v < 0 ? *v + n : *v, 0, n);
  };
  const int64_t b = bound(start, 0), e = std::max(b, bound(end, n));
  Shape expected = sizes();
  expected[static_cast<size_t>(at)] = e == b ? 0 : 1 + (e - b - 1) / step;
  WEFT_CHECK(src.sizes() == expected, Shape, "slice_scatter: expected src to have a size equal to ",
             "the slice of self. src size = ", shapeString(src.sizes()),
             ", slice size = ", shapeString(expected));
  return index_copy(at, arange(b, e, step, TensorOptions(DType::Int64).device(device())),
                    src.to(dtype()));
}

Tensor Tensor::select_scatter(const Tensor& src, int64_t d, int64_t index,
                              std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("select_scatter");
  WEFT_CHECK(src.defined(), Value, "select_scatter: src is undefined");
  WEFT_CHECK(dim() > 0, Index, "select_scatter: cannot select from a 0-d tensor");
  const int64_t at = wrapDim(d, dim(), "select_scatter"), n = size(at);
  WEFT_CHECK(index >= -n && index < n, Index, "select_scatter: index ", index,
             " out of range for tensor of size ", shapeString(sizes()), " at dimension ", at);
  return slice_scatter(src.unsqueeze(at), at, index < 0 ? index + n : index,
                       (index < 0 ? index + n : index) + 1);
}

Tensor Tensor::diagonal_scatter(const Tensor& src, int64_t offset, int64_t dim1, int64_t dim2,
                                std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("diagonal_scatter");
  WEFT_CHECK(src.defined(), Value, "diagonal_scatter: src is undefined");
  Tensor diag = diagonal(offset, dim1, dim2);
  WEFT_CHECK(src.sizes() == diag.sizes(), Shape,
             "diagonal_scatter: expected src to have a size equal to the diagonal of self. src "
             "size = ",
             shapeString(src.sizes()), ", diagonal size = ", shapeString(diag.sizes()));
  // The two dims last and flattened: the diagonal's elements are the positions
  // (i + r0) * cols + i + c0, where index_copy writes src (differentiably in both).
  const int64_t d1 = wrapDim(dim1, dim(), "diagonal_scatter"),
                d2 = wrapDim(dim2, dim(), "diagonal_scatter");
  Tensor moved = movedim({d1, d2}, {-2, -1});
  const int64_t rows = moved.size(-2), cols = moved.size(-1);
  const int64_t r0 = std::max<int64_t>(-offset, 0), c0 = std::max<int64_t>(offset, 0);
  const int64_t length = diag.size(-1);
  Tensor at = arange(0, length, 1, TensorOptions(DType::Int64).device(device())) * (cols + 1) +
              (r0 * cols + c0);
  Shape flat = moved.sizes();
  flat.pop_back();
  flat.back() = rows * cols;
  Tensor written = moved.reshape(flat).index_copy(-1, at, src.to(dtype()));
  return written.reshape(moved.sizes()).movedim({-2, -1}, {d1, d2});
}

Tensor Tensor::sum_to_size(IntArrayRef shape, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("sum_to_size");
  bool fits = shape.size() <= static_cast<size_t>(dim());
  for (size_t i = 0; fits && i < shape.size(); ++i) {
    const int64_t have = size(static_cast<int64_t>(dim() - shape.size() + i));
    fits = shape[i] == have || shape[i] == 1;
  }
  WEFT_CHECK(fits, Shape, "sum_to_size: size {", shapeString(shape),
             "} is not expandable to size {", shapeString(sizes()), "}.");
  return rules::sum_to(*this, shape);
}

Tensor Tensor::diagflat(int64_t offset, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("diagflat");
  return flatten().diag(offset);
}

namespace {
/// adjoint() and mH: the last two dims swapped (0-d: the tensor itself, as PyTorch 1.13).
Tensor lastTwoSwapped(const Tensor& x, const char* what) {
  WEFT_CHECK(x.defined(), Value, what, ": called on an undefined tensor");
  if (x.dim() == 0) return x;
  WEFT_CHECK(x.dim() >= 2, Shape, what, " is only supported on matrices or batches of matrices. ",
             "Got ", x.dim(), "-D tensor.");
  return x.transpose(-2, -1);
}
} // namespace
Tensor Tensor::adjoint(std::source_location loc) const {
  CallSite cs(loc);
  return lastTwoSwapped(*this, "tensor.adjoint()");
}
Tensor Tensor::mH(std::source_location loc) const {
  CallSite cs(loc);
  return lastTwoSwapped(*this, "tensor.mH");
}

// ---- stacking, block diagonals, products of sets, sliding windows ----

namespace {
/// `t` with at least `rank` dims, as torch.atleast_1d/2d/3d place them: a 1-D [n] is [1, n], a
/// 2-D [m, n] as a 3-D is [m, n, 1], and a 1-D as a 3-D is [1, n, 1].
Tensor atLeast(const Tensor& t, int64_t rank, const char* op) {
  WEFT_CHECK(t.defined(), Value, op, ": called with an undefined tensor");
  const Shape& s = t.sizes();
  switch (std::min<int64_t>(t.dim(), rank)) {
  case 0:
    return t.reshape(Shape(static_cast<size_t>(rank), 1));
  case 1:
    return rank == 1 ? t : rank == 2 ? t.reshape({1, s[0]}) : t.reshape({1, s[0], 1});
  case 2:
    return rank == 2 ? t : t.reshape({s[0], s[1], 1});
  default:
    return t;
  }
}
std::vector<Tensor> allAtLeast(const std::vector<Tensor>& ts, int64_t rank, const char* op) {
  WEFT_CHECK(!ts.empty(), Value, op, ": expects a non-empty list of tensors");
  std::vector<Tensor> r;
  for (const Tensor& t : ts)
    r.push_back(atLeast(t, rank, op));
  return r;
}
} // namespace

Tensor atleast_1d(const Tensor& x, std::source_location loc) {
  CallSite cs(loc);
  return atLeast(x, 1, "atleast_1d");
}
Tensor atleast_2d(const Tensor& x, std::source_location loc) {
  CallSite cs(loc);
  return atLeast(x, 2, "atleast_2d");
}
Tensor atleast_3d(const Tensor& x, std::source_location loc) {
  CallSite cs(loc);
  return atLeast(x, 3, "atleast_3d");
}

Tensor hstack(const std::vector<Tensor>& tensors, std::source_location loc) {
  CallSite cs(loc);
  std::vector<Tensor> ts = allAtLeast(tensors, 1, "hstack");
  return cat(ts, ts[0].dim() == 1 ? 0 : 1);
}
Tensor vstack(const std::vector<Tensor>& tensors, std::source_location loc) {
  CallSite cs(loc);
  return cat(allAtLeast(tensors, 2, "vstack"), 0);
}
Tensor row_stack(const std::vector<Tensor>& tensors, std::source_location loc) {
  CallSite cs(loc);
  return vstack(tensors);
}
Tensor dstack(const std::vector<Tensor>& tensors, std::source_location loc) {
  CallSite cs(loc);
  return cat(allAtLeast(tensors, 3, "dstack"), 2);
}
Tensor column_stack(const std::vector<Tensor>& tensors, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(!tensors.empty(), Value, "column_stack: expects a non-empty list of tensors");
  std::vector<Tensor> columns;
  for (const Tensor& t : tensors) {
    WEFT_CHECK(t.defined(), Value, "column_stack: called with an undefined tensor");
    columns.push_back(t.dim() <= 1 ? t.reshape({t.numel(), 1}) : t);
  }
  return cat(columns, 1);
}

Tensor block_diag(const std::vector<Tensor>& tensors, std::source_location loc) {
  CallSite cs(loc);
  std::vector<Tensor> blocks;
  int64_t width = 0;
  for (const Tensor& t : tensors) {
    WEFT_CHECK(t.defined(), Value, "block_diag: called with an undefined tensor");
    WEFT_CHECK(t.dim() <= 2, Shape,
               "block_diag: input tensors must have 2 or fewer dimensions, got ",
               shapeString(t.sizes()));
    blocks.push_back(atLeast(t, 2, "block_diag"));
    width += blocks.back().size(1);
  }
  if (blocks.empty()) return zeros({1, 0});
  DType t = blocks[0].dtype();
  for (const Tensor& b : blocks)
    t = promoteTypes(t, b.dtype());
  // Each block padded with zeros to the full width at its columns, the rows stacked.
  std::vector<Tensor> rows;
  int64_t at = 0;
  for (const Tensor& b : blocks) {
    const int64_t cols = b.size(1);
    rows.push_back(pad(b.to(t), {at, width - at - cols}));
    at += cols;
  }
  return cat(rows, 0);
}

Tensor cartesian_prod(const std::vector<Tensor>& tensors, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(!tensors.empty(), Value, "cartesian_prod: expects a non-empty list of tensors");
  for (const Tensor& t : tensors)
    WEFT_CHECK(t.defined() && t.dim() == 1, Shape, "cartesian_prod: expects 1-D tensors, got ",
               t.defined() ? shapeString(t.sizes()) : "an undefined tensor");
  if (tensors.size() == 1) return tensors[0].clone();
  std::vector<Tensor> columns;
  for (const Tensor& g : meshgrid(tensors, "ij"))
    columns.push_back(g.reshape({-1}));
  return stack(columns, 1);
}

Tensor Tensor::unfold(int64_t d, int64_t size, int64_t step, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("unfold");
  if (dim() == 0) return reshape({1}).unfold(wrapDim(d, 1, "unfold"), size, step).reshape({size});
  d = wrapDim(d, dim(), "unfold");
  const int64_t n = sizes()[static_cast<size_t>(d)];
  WEFT_CHECK(size >= 0, Value, "unfold: size is ", size, " but must be >= 0");
  WEFT_CHECK(size <= n, Value, "unfold: maximum size for tensor at dimension ", d, " is ", n,
             " but size is ", size);
  WEFT_CHECK(step > 0, Value, "unfold: step is ", step, " but must be > 0");
  // Window w's element j is element w * step + j of `d`: one index_select of every window's
  // elements, then `d` split into (windows, size) and the size moved last.
  const int64_t windows = (n - size) / step + 1;
  const TensorOptions on = TensorOptions(kInt64).device(device());
  Tensor index =
      (arange(windows, on).mul(step).unsqueeze(1) + arange(size, on).unsqueeze(0)).reshape({-1});
  Shape split = sizes();
  split[static_cast<size_t>(d)] = windows;
  split.insert(split.begin() + d + 1, size);
  return index_select(d, index).reshape(split).movedim(d + 1, -1);
}

Tensor Tensor::narrow_copy(int64_t dim, int64_t start, int64_t length,
                           std::source_location loc) const {
  CallSite cs(loc);
  return narrow(dim, start, length).clone();
}

} // namespace weft
