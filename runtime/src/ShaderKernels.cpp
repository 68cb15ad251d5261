// The op table's kernels on a GPU device: each op becomes one per-op shader of its family
// (weft/runtime/Shaders.h) over an index space built here from its operands' shapes and strides,
// and the data movement ops (views copied, pad, cat, full) become copies and fills, which are Map
// shaders too. Nothing here knows Vulkan; the device records what it is given.
#include "ShaderDevice.h"

#include "weft/runtime/ConvGeometry.h"
#include "weft/runtime/Error.h"
#include "weft/runtime/Kernels.h"
#include "weft/runtime/View.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>

namespace weft::hal {
namespace {

ShaderDevice& deviceOf(const TensorRef& t) {
  WEFT_INTERNAL_ASSERT(t.buffer != nullptr, "a shader kernel's operand has no buffer");
  return static_cast<ShaderDevice&>(t.buffer->device());
}

/// The index space of one shader call and its parameters (Shaders.h's layout).
struct Space {
  Shape sizes;
  std::vector<Shape> strides;    // per operand, along `sizes`
  std::vector<int64_t> offsets;  // per operand, elements into its buffer
  int64_t line = 1;
  std::vector<int64_t> lineStrides; // per operand
  std::vector<int64_t> extra;

  explicit Space(Shape s, size_t operands)
      : sizes(std::move(s)), strides(operands, Shape(sizes.size(), 0)), offsets(operands, 0),
        lineStrides(operands, 0) {}

  int64_t count() const { return numel(sizes); }

  /// Merges neighbouring dims every operand walks as one, and drops dims of size 1 (not for
  /// families whose params name a dim).
  void collapse() {
    Shape s;
    std::vector<Shape> st(strides.size());
    for (size_t d = 0; d < sizes.size(); ++d) {
      if (sizes[d] == 1) continue;
      bool merge = !s.empty();
      for (size_t k = 0; k < strides.size() && merge; ++k)
        merge = st[k].back() == strides[k][d] * sizes[d];
      if (merge) {
        s.back() *= sizes[d];
        for (size_t k = 0; k < strides.size(); ++k)
          st[k].back() = strides[k][d];
        continue;
      }
      s.push_back(sizes[d]);
      for (size_t k = 0; k < strides.size(); ++k)
        st[k].push_back(strides[k][d]);
    }
    sizes = std::move(s);
    strides = std::move(st);
  }

  std::vector<int32_t> params(const char* op) const {
    WEFT_CHECK(sizes.size() <= static_cast<size_t>(kMaxShaderRank), Shape, op, ": tensors of ",
               sizes.size(), " dimensions are past what GPU kernels index (", kMaxShaderRank, ")");
    std::vector<int64_t> p{count(), static_cast<int64_t>(sizes.size())};
    p.insert(p.end(), sizes.begin(), sizes.end());
    for (size_t k = 0; k < strides.size(); ++k) {
      p.push_back(offsets[k]);
      p.insert(p.end(), strides[k].begin(), strides[k].end());
      // Every element an operand reaches must be addressable in 32 bits.
      int64_t reach = offsets[k] + (line - 1) * std::abs(lineStrides[k]);
      for (size_t d = 0; d < sizes.size(); ++d)
        reach += (sizes[d] - 1) * std::abs(strides[k][d]);
      WEFT_CHECK(reach < std::numeric_limits<int32_t>::max(), Value, op,
                 ": a tensor past 2^31 elements is not supported on GPU devices yet");
    }
    p.push_back(line);
    p.insert(p.end(), lineStrides.begin(), lineStrides.end());
    p.insert(p.end(), extra.begin(), extra.end());
    std::vector<int32_t> out;
    for (int64_t v : p) {
      WEFT_CHECK(v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max(),
                 Value, op, ": a size or stride past 2^31 is not supported on GPU devices yet");
      out.push_back(static_cast<int32_t>(v));
    }
    return out;
  }
};

/// `t`'s strides as read over `shape` (right-aligned; size-1 dims broadcast with stride 0).
Shape broadcastOver(const TensorRef& t, const Shape& shape) {
  Shape s(shape.size(), 0);
  const size_t lead = shape.size() - t.shape.size();
  for (size_t d = 0; d < t.shape.size(); ++d)
    s[lead + d] = t.shape[d] == 1 ? 0 : t.strides[d];
  return s;
}

/// A grid dimension that walks no loop of its own must cover everything in one dispatch.
void checkGrid(const char* op, int64_t count, int64_t perGroup) {
  WEFT_CHECK((count + perGroup - 1) / perGroup <= 65535, Value, op, ": ", count,
             " rows or columns are more than one GPU dispatch covers (", 65535 * perGroup, ")");
}

uint32_t groupsFor(int64_t count, int64_t perGroup) {
  return static_cast<uint32_t>(std::clamp<int64_t>((count + perGroup - 1) / perGroup, 1, 65535));
}

std::vector<DType> dtypesOf(std::span<const TensorRef> in, const TensorRef& out) {
  std::vector<DType> d;
  for (const TensorRef& t : in)
    d.push_back(t.dtype);
  d.push_back(out.dtype);
  return d;
}

std::vector<TensorRef> operandsOf(std::span<const TensorRef> in, const TensorRef& out) {
  std::vector<TensorRef> ops(in.begin(), in.end());
  ops.push_back(out);
  return ops;
}

/// Runs a shader over `space` (offsets filled from the operands here); returns the status.
std::optional<int64_t> run(ShaderFamily family, OpCode op, std::span<const TensorRef> operands,
                           std::vector<DType> dtypes, Space& space, std::array<uint32_t, 3> groups,
                           uint32_t workgroup = 256, uint32_t block = 0) {
  for (size_t k = 0; k < operands.size(); ++k)
    space.offsets[k] = shaderOffset(operands[k], opName(op));
  ShaderKey key{family, op, std::move(dtypes), workgroup, block};
  const std::vector<int32_t> params = space.params(std::string(opName(op)).c_str());
  return deviceOf(operands.back()).dispatch(key, params, operands, groups);
}

/// out = op(inputs) elementwise, inputs broadcast to out.
void map(OpCode op, std::span<const TensorRef> in, const TensorRef& out) {
  if (out.numel() == 0) return;
  Space s(out.shape, in.size() + 1);
  for (size_t k = 0; k < in.size(); ++k)
    s.strides[k] = broadcastOver(in[k], out.shape);
  s.strides.back() = out.strides;
  s.collapse();
  std::vector<TensorRef> ops = operandsOf(in, out);
  if (run(ShaderFamily::Map, op, ops, dtypesOf(in, out), s, {groupsFor(s.count(), 256), 1, 1}))
    WEFT_FAIL(Value, opName(op), ": integer division by zero"); // as the CPU kernel
}

/// The integer dtype of `t`'s width, whose copies move bits unchanged (float64 is copied so on
/// devices without float64 in shaders too).
DType bitsOf(DType t) {
  switch (elementSize(t)) {
  case 8:
    return DType::Int64;
  case 4:
    return DType::Int32;
  case 2:
    return DType::BFloat16; // read into the upper half of a float and written back: exact
  default:
    return DType::UInt8;
  }
}

void copyCastShader(const TensorRef& src, const TensorRef& dst) {
  if (src.dtype != dst.dtype) return map(OpCode::Cast, std::span(&src, 1), dst);
  TensorRef from = src, to = dst;
  from.dtype = to.dtype = bitsOf(src.dtype);
  map(OpCode::StopGradient, std::span(&from, 1), to);
}

/// `dst` filled with the bytes of one element of its dtype.
void fillBytes(const TensorRef& dst, const void* element) {
  if (dst.numel() == 0) return;
  Device& device = dst.buffer->device();
  const size_t size = elementSize(dst.dtype);
  std::shared_ptr<Storage> one = device.allocate(size);
  device.upload(element, *one, 0, size);
  TensorRef scalar = refInto(*one, 0, dst.dtype, dst.shape, Shape(dst.shape.size(), 0));
  map(OpCode::StopGradient, std::span(&scalar, 1), dst);
}

void fillShader(const TensorRef& dst, double value) {
  alignas(8) unsigned char element[8] = {};
  copyCast(TensorRef{&value, DType::Float64, {}, {}}, TensorRef{element, dst.dtype, {}, {}});
  fillBytes(dst, element);
}

/// The line layout of `in` along `dim` with `out`'s points over the other dims (out has the dim
/// too, of size 1 for reductions kept or not: `keep` inserts it).
Space lines(const TensorRef& in, const TensorRef& out, int64_t dim, bool outHasLine) {
  const auto d = static_cast<size_t>(dim);
  Shape sizes = in.shape;
  sizes[d] = 1;
  Space s(sizes, 2);
  s.strides[0] = in.strides;
  s.strides[0][d] = 0;
  Shape ostr = out.strides;
  if (!outHasLine) ostr.insert(ostr.begin() + dim, 0);
  s.strides[1] = ostr;
  s.strides[1][d] = 0;
  s.line = in.shape[d];
  s.lineStrides = {in.strides[d], outHasLine ? out.strides[d] : 0};
  return s;
}

/// `workgroup`: the invocations per point (a short line, such as split-K's parts, takes fewer).
void reduceKernel(OpCode op, std::span<const TensorRef> in, const TensorRef& out, const Attrs& at,
                  uint32_t workgroup = 256) {
  const TensorRef& x = in[0];
  Shape dims = at.ints("dims");
  const bool keepdim = at.b("keepdim");
  if (dims.empty())
    for (int64_t d = 0; d < x.dim(); ++d)
      dims.push_back(d);
  std::sort(dims.begin(), dims.end());
  // The kept dims index the points, the reduced ones one line: x's reduced dims, if they do not
  // walk as one, are first copied into a dense block [kept..., reduced...].
  Shape kept, keptStrides, outStrides, red, redStrides;
  int64_t od = 0;
  for (int64_t d = 0; d < x.dim(); ++d) {
    const bool r = std::binary_search(dims.begin(), dims.end(), d);
    if (r) {
      red.push_back(x.shape[d]);
      redStrides.push_back(x.strides[d]);
      if (keepdim) ++od;
    } else {
      kept.push_back(x.shape[d]);
      keptStrides.push_back(x.strides[d]);
      outStrides.push_back(out.strides[od++]);
    }
  }
  int64_t n = numel(red), lineStride = red.empty() ? 0 : redStrides.back();
  bool one = true;
  for (size_t i = 0; i + 1 < red.size(); ++i)
    one = one && (red[i] == 1 || redStrides[i] == redStrides[i + 1] * red[i + 1]);
  std::shared_ptr<Storage> dense;
  TensorRef src = x;
  if (!one) {
    Shape perm = kept;
    perm.insert(perm.end(), red.begin(), red.end());
    dense = x.buffer->device().allocate(static_cast<size_t>(numel(perm)) * elementSize(x.dtype));
    Shape permStrides = keptStrides;
    permStrides.insert(permStrides.end(), redStrides.begin(), redStrides.end());
    TensorRef view{nullptr, x.dtype, perm, permStrides, x.buffer, x.byteOffset};
    TensorRef to = refInto(*dense, 0, x.dtype, perm, contiguousStrides(perm));
    copyCastShader(view, to);
    src = to;
    const Shape denseStrides = contiguousStrides(perm);
    keptStrides = Shape(denseStrides.begin(), denseStrides.begin() + static_cast<int64_t>(kept.size()));
    lineStride = 1;
  }
  if (out.numel() == 0) return;
  // One workgroup of 256 per point (subgroups joined through workgroup memory). A line longer
  // than kChunk is split in chunks, each a point of its own, into partial results
  // (out's dtype) that a second pass reduces: every workgroup then walks at most kChunk elements
  // (lavapipe also stops loops past 65535 iterations).
  constexpr int64_t kChunk = 16 * 1024;
  Space s(kept, 2);
  s.strides = {keptStrides, outStrides};
  s.line = n;
  s.lineStrides = {lineStride, 0};
  if (n <= kChunk) {
    s.collapse();
    s.extra = {0, 0};
    const TensorRef ops[] = {src, out};
    run(ShaderFamily::Reduce, op, ops, {x.dtype, out.dtype}, s, {groupsFor(s.count(), 1), 1, 1},
        workgroup);
    return;
  }
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  Shape partialShape = kept;
  partialShape.push_back(chunks);
  std::shared_ptr<Storage> held = x.buffer->device().allocate(
      static_cast<size_t>(numel(partialShape)) * elementSize(out.dtype));
  TensorRef partial =
      refInto(*held, 0, out.dtype, partialShape, contiguousStrides(partialShape));
  Space first(partialShape, 2);
  first.strides[0] = keptStrides;
  first.strides[0].push_back(0); // the chunk dim: the shader reads it from the point's index
  first.strides[1] = partial.strides;
  first.line = n;
  first.lineStrides = {lineStride, 0};
  first.extra = {kChunk, chunks};
  const TensorRef ops1[] = {src, partial};
  run(ShaderFamily::Reduce, op, ops1, {x.dtype, out.dtype}, first,
      {groupsFor(first.count(), 1), 1, 1}, 256);
  // Then the partial results of each point, in order (sum of sums, product of products, ...).
  Space second(kept, 2);
  second.strides = {Shape(partial.strides.begin(), partial.strides.end() - 1), outStrides};
  second.line = chunks;
  second.lineStrides = {1, 0};
  second.collapse();
  second.extra = {0, 0};
  const TensorRef ops2[] = {partial, out};
  run(ShaderFamily::Reduce, op, ops2, {out.dtype, out.dtype}, second,
      {groupsFor(second.count(), 1), 1, 1}, 256);
}

void argReduceKernel(OpCode op, std::span<const TensorRef> in, const TensorRef& out,
                     const Attrs& at) {
  if (out.numel() == 0) return;
  Space s = lines(in[0], out, at.i("dim"), at.b("keepdim"));
  s.lineStrides[1] = 0;
  const TensorRef ops[] = {in[0], out};
  run(ShaderFamily::ArgReduce, op, ops, {in[0].dtype, out.dtype}, s,
      {groupsFor(s.count(), 256), 1, 1});
}

void lineKernel(ShaderFamily family, OpCode op, std::span<const TensorRef> in,
                const TensorRef& out, const Attrs& at) {
  if (out.numel() == 0) return;
  Space s = lines(in[0], out, at.i("dim"), true);
  const TensorRef ops[] = {in[0], out};
  // Normalize: a workgroup of 256 per line; scans: an invocation per line.
  run(family, op, ops, {in[0].dtype, out.dtype}, s,
      {groupsFor(s.count(), family == ShaderFamily::Normalize ? 1 : 256), 1, 1});
}

/// out = x gathered along `dim` at `index` (of out's shape).
void gatherInto(const char* op, const TensorRef& x, const TensorRef& index, const TensorRef& out,
                int64_t dim) {
  const auto d = static_cast<size_t>(dim);
  Space s(out.shape, 3);
  s.strides[0] = x.strides;
  s.strides[0][d] = 0;
  s.strides[1] = index.strides;
  s.strides[2] = out.strides;
  s.extra = {x.strides[d], x.shape[d]};
  s.collapse();
  const TensorRef ops[] = {x, index, out};
  if (auto bad = run(ShaderFamily::Gather, OpCode::Gather, ops, {x.dtype, DType::Int64, out.dtype},
                     s, {groupsFor(s.count(), 256), 1, 1}))
    kernels::outOfBounds(*bad, {x.shape[d], dim, op}, false);
}

/// out = self, with src[j] combined by `op` (scatter_add, scatter, scatter_prod/amax/amin) wherever
/// index[j] (along `dim`, of src's extent) names out's position; `name` is the op in errors.
void scatterInto(OpCode op, const char* name, const TensorRef& self, const TensorRef& index,
                 const TensorRef& src, const TensorRef& out, int64_t dim) {
  const auto d = static_cast<size_t>(dim);
  if (out.numel() == 0) return;
  Space s(out.shape, 4);
  s.strides[0] = self.strides;
  s.strides[1] = index.strides;
  s.strides[1][d] = 0;
  s.strides[2] = src.strides;
  s.strides[2][d] = 0;
  s.strides[3] = out.strides;
  s.line = index.shape[d];
  s.lineStrides = {0, index.strides[d], src.strides[d], 0};
  s.extra = {dim, out.shape[d]};
  s.extra.insert(s.extra.end(), index.shape.begin(), index.shape.end());
  const TensorRef ops[] = {self, index, src, out};
  if (auto bad = run(ShaderFamily::Scatter, op, ops, {self.dtype, DType::Int64, src.dtype, out.dtype},
                     s, {groupsFor(s.count(), 256), 1, 1}))
    kernels::outOfBounds(*bad, {out.shape[d], dim, name}, false);
}

/// out = self, with src's slices along `dim` added where the 1-d `index` names them, through the
/// index's stable ascending order (its argsort, made here): ShaderKey{Scatter, IndexAdd}, whose
/// points each add their matches in the index's order, as scatterInto does.
void sortedIndexAdd(const TensorRef& self, const TensorRef& index, const TensorRef& src,
                    const TensorRef& out, int64_t dim) {
  const auto d = static_cast<size_t>(dim);
  const int64_t n = index.numel();
  ShaderDevice& device = deviceOf(out);
  std::shared_ptr<Storage> held = device.allocate(static_cast<size_t>(n) * sizeof(int64_t));
  const TensorRef order = refInto(*held, 0, DType::Int64, {n}, {1});
  {
    Space s({n}, 2); // a point per element of the index: its place in the order
    s.strides[0] = {index.strides[0]};
    s.line = n;
    s.lineStrides = {index.strides[0], 1};
    s.extra = {0, 0, n};
    const TensorRef ops[] = {index, order};
    run(ShaderFamily::Sort, OpCode::ArgSort, ops, {DType::Int64, DType::Int64}, s,
        {groupsFor(n, 256), 1, 1});
  }
  Space s(out.shape, 5);
  s.strides[0] = self.strides;
  s.strides[3] = src.strides;
  s.strides[3][d] = 0;
  s.strides[4] = out.strides;
  s.line = n;
  s.lineStrides = {0, index.strides[0], 1, src.strides[d], 0};
  s.extra = {dim, out.shape[d]};
  s.extra.insert(s.extra.end(), out.shape.begin(), out.shape.end()); // every point is in
  const TensorRef ops[] = {self, index, order, src, out};
  if (auto bad = run(ShaderFamily::Scatter, OpCode::IndexAdd, ops,
                     {self.dtype, DType::Int64, DType::Int64, src.dtype, out.dtype}, s,
                     {groupsFor(s.count(), 256), 1, 1}))
    kernels::outOfBounds(*bad, {out.shape[d], dim, "index_add"}, false);
}

/// A 1-d index along `dim`, seen over `shape` (stride 0 elsewhere).
TensorRef indexAlong(const TensorRef& index, const Shape& shape, int64_t dim) {
  TensorRef v = index;
  v.shape = shape;
  v.strides = Shape(shape.size(), 0);
  v.strides[static_cast<size_t>(dim)] = index.strides.empty() ? 0 : index.strides[0];
  return v;
}

/// How many parts a floating GEMM of `blocks` workgroups splits its K into (split-K): a grid too
/// small to keep a GPU busy (a conv_weight_grad's few output blocks over a whole batch's K, a
/// matmul of one block) walks K in parallel parts of at least kMinPart, whose partial products a
/// reduction sums. (On the H200, Fashion-MNIST's eager epoch went from 22.0 to 4.3 s.)
int64_t splitsFor(int64_t blocks, int64_t k) {
  constexpr int64_t kBusy = 256, kMinPart = 256, kMostParts = 128;
  if (blocks * 2 >= kBusy) return 1;
  return std::clamp<int64_t>(std::min(kBusy / blocks, k / kMinPart), 1, kMostParts);
}

/// Runs a GEMM-shaped shader (the MatMul family) of C [m, n] = A [m, k] B [k, n] per batch point:
/// `describe(target)` gives its index space and parameters for output `target` (out, or the
/// split-K parts: float32 [splits, out's shape], summed into out afterwards).
void gemm(OpCode op, const TensorRef& a, const TensorRef& b, const TensorRef& out, int64_t m,
          int64_t n, int64_t k, const std::function<Space(const TensorRef& target)>& describe) {
  const bool blocked = blockedMatMul({ShaderFamily::MatMul, op, {out.dtype}});
  Space s = describe(out);
  const int64_t points = s.count();
  auto tilesOf = [&](int64_t side) {
    return ((n + side - 1) / side) * ((m + side - 1) / side) * points;
  };
  // A grid of fewer than 128 blocks of 128 x 128 (a 1024 x 1024 output: 64; a weight's gradient
  // [512, 512]), which leaves most of an H200's 132 compute units idle, computes 64 x 64 ones:
  // four times the workgroups. (On the H200: 1024^3 from 10.8 to 15.8 TFLOP/s.)
  const int64_t tile = !blocked                        ? 16
                       : tilesOf(kMatMulBlock) < 128 ? kMatMulSmallBlock
                                                     : kMatMulBlock;
  const std::string name(opName(op));
  checkGrid(name.c_str(), m, tile);
  checkGrid(name.c_str(), n, tile);
  const int64_t tiles = groupsFor(n, tile) * groupsFor(m, tile);
  // Only small outputs split: summing the parts costs a subgroup per output element (on the
  // H200, a 1024^3 matmul split 4 ways took 380 us, unsplit 202).
  constexpr int64_t kMostSplitOutput = 1 << 17;
  const int64_t splits =
      blocked && out.numel() <= kMostSplitOutput ? splitsFor(tiles * points, k) : 1;
  if (splits == 1) {
    s.extra.insert(s.extra.end(), {1, 0});
    const TensorRef ops[] = {a, b, out};
    run(ShaderFamily::MatMul, op, ops, {a.dtype, b.dtype, out.dtype}, s,
        {groupsFor(n, tile), groupsFor(m, tile), groupsFor(points, 1)}, 256,
        tile == kMatMulSmallBlock ? tile : 0);
    return;
  }
  const int64_t each = out.numel();
  std::shared_ptr<Storage> held = out.buffer->device().allocate(
      static_cast<size_t>(splits * each) * elementSize(DType::Float32));
  const TensorRef target =
      refInto(*held, 0, DType::Float32, out.shape, contiguousStrides(out.shape));
  s = describe(target);
  s.extra.insert(s.extra.end(), {splits, each});
  const TensorRef ops[] = {a, b, target};
  run(ShaderFamily::MatMul, op, ops, {a.dtype, b.dtype, DType::Float32}, s,
      {groupsFor(n, tile), groupsFor(m, tile), groupsFor(points * splits, 1)}, 256,
      tile == kMatMulSmallBlock ? tile : 0);
  Shape shape{splits}, strides{each};
  shape.insert(shape.end(), out.shape.begin(), out.shape.end());
  strides.insert(strides.end(), target.strides.begin(), target.strides.end());
  const TensorRef parts = refInto(*held, 0, DType::Float32, shape, strides);
  reduceKernel(OpCode::Sum, std::span(&parts, 1), out, Attrs{{"dims", Shape{0}}, {"keepdim", false}},
               32);
}

/// The strides of a batch of matrices `t` ([..., r, c]) over the batch dims `batch`.
Shape batchStrides(const TensorRef& t, const Shape& batch) {
  TensorRef lead = t;
  lead.shape.resize(t.shape.size() - 2);
  lead.strides.resize(t.strides.size() - 2);
  return broadcastOver(lead, batch);
}

void matmulKernel(std::span<const TensorRef> in, const TensorRef& out) {
  const TensorRef &a = in[0], &b = in[1];
  if (out.numel() == 0) return;
  const size_t r = out.shape.size();
  const int64_t m = out.shape[r - 2], n = out.shape[r - 1], k = a.shape.back();
  Shape batch(out.shape.begin(), out.shape.end() - 2);
  gemm(OpCode::MatMul, a, b, out, m, n, k, [&](const TensorRef& c) {
    Space s(batch, 3);
    s.strides = {batchStrides(a, batch), batchStrides(b, batch),
                 Shape(c.strides.begin(), c.strides.end() - 2)};
    s.collapse();
    const size_t ar = a.shape.size(), br = b.shape.size();
    s.extra = {m, n, k, a.strides[ar - 2], a.strides[ar - 1], b.strides[br - 2], b.strides[br - 1],
               c.strides[r - 2], c.strides[r - 1]};
    return s;
  });
}

/// The strides of a conv operand along (n, c, h, w) (or (o, c, kh, kw)); 0 along h for 1-d.
std::array<int64_t, 4> nchw(const TensorRef& t) {
  if (t.dim() == 3) return {t.strides[0], t.strides[1], 0, t.strides[2]};
  return {t.strides[0], t.strides[1], t.strides[2], t.strides[3]};
}

/// conv, conv_input_grad and conv_weight_grad as implicit GEMMs of the MatMul family
/// (Shaders.h): operand 0 is the one read through the window (x, or the output's gradient),
/// operand 1 the other.
void convKernel(OpCode op, std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  if (out.numel() == 0) return;
  const TensorRef &a = in[0], &b = in[1];
  ConvShape d = op == OpCode::Conv            ? convShape(a.shape, b.shape, at)
                : op == OpCode::ConvInputGrad ? convShape(at.ints("input_shape"), b.shape, at)
                                              : convShape(a.shape, at.ints("weight_shape"), at);
  // The output's (or its gradient's) spatial size as the tensor has it.
  const TensorRef& y = op == OpCode::Conv ? out : op == OpCode::ConvInputGrad ? a : b;
  d.oh = y.dim() == 3 ? 1 : y.shape[2];
  d.ow = y.shape.back();
  const std::array<int64_t, 4> s0 = nchw(a), s1 = nchw(b);
  int64_t m = 0, n = 0, k = 0;
  switch (op) {
  case OpCode::Conv:
    m = d.og(), n = d.oh * d.ow, k = d.cg() * d.kh * d.kw;
    break;
  case OpCode::ConvInputGrad:
    m = d.cg(), n = d.h * d.w, k = d.og() * d.kh * d.kw;
    break;
  default:
    m = d.og(), n = d.cg() * d.kh * d.kw, k = d.n * d.oh * d.ow;
  }
  gemm(op, a, b, out, m, n, k, [&](const TensorRef& c) {
    const std::array<int64_t, 4> so = nchw(c);
    Shape batch;
    std::vector<Shape> strides;
    switch (op) {
    case OpCode::Conv:
      batch = {d.n, d.groups};
      strides = {{s0[0], d.cg() * s0[1]}, {0, d.og() * s1[0]}, {so[0], d.og() * so[1]}};
      break;
    case OpCode::ConvInputGrad:
      batch = {d.n, d.groups};
      strides = {{s0[0], d.og() * s0[1]}, {0, d.og() * s1[0]}, {so[0], d.cg() * so[1]}};
      break;
    default:
      batch = {d.groups};
      strides = {{d.cg() * s0[1]}, {d.og() * s1[1]}, {d.og() * so[0]}};
    }
    Space s(batch, 3);
    s.strides = strides;
    s.extra = {m, n, k, d.cg(), d.h, d.w, d.oh, d.ow, d.kh, d.kw, d.sh, d.sw, d.ph, d.pw, d.dh, d.dw};
    for (const auto& st : {s0, s1, so})
      s.extra.insert(s.extra.end(), st.begin(), st.end());
    return s;
  });
}

void maxPoolArgmaxKernel(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  if (out.numel() == 0) return;
  const TensorRef& x = in[0];
  const auto &kk = at.ints("kernel_size"), &st = at.ints("stride"), &pd = at.ints("padding"),
             &dl = at.ints("dilation");
  const bool one = x.dim() == 3;
  const std::array<int64_t, 4> xs = nchw(x);
  Space s(out.shape, 2);
  s.strides[0] = Shape(out.shape.size(), 0);
  s.strides[0][0] = xs[0];
  s.strides[0][1] = xs[1];
  s.strides[1] = out.strides;
  s.extra = {one ? 1 : x.shape[2], x.shape.back(), one ? 1 : out.shape[2], out.shape.back(),
             one ? 1 : kk[0], kk.back(), one ? 1 : st[0], st.back(), one ? 0 : pd[0], pd.back(),
             one ? 1 : dl[0], dl.back(), xs[2], xs[3]};
  const TensorRef ops[] = {x, out};
  run(ShaderFamily::Pool, OpCode::MaxPoolArgmax, ops, {x.dtype, DType::Int64}, s,
      {groupsFor(s.count(), 256), 1, 1});
}

template <OpCode op> void shaderKernel(std::span<const TensorRef> in, const TensorRef& out,
                                       const Attrs& at) {
  const OpInfo& info = opInfo(op);
  switch (info.kind) {
  case OpKind::Cast:
  case OpKind::Identity:
    return copyCastShader(in[0], out);
  case OpKind::Unary:
  case OpKind::Binary:
  case OpKind::Where:
    return map(op, in, out);
  case OpKind::Reduce:
    return reduceKernel(op, in, out, at);
  case OpKind::ArgReduce:
    return argReduceKernel(op, in, out, at);
  case OpKind::Normalize:
    return lineKernel(op == OpCode::LogCumSumExp ? ShaderFamily::Scan : ShaderFamily::Normalize,
                      op, in, out, at);
  case OpKind::Scan:
  case OpKind::ArgScan:
    return lineKernel(ShaderFamily::Scan, op, in, out, at);
  case OpKind::Sort: {
    if (out.numel() == 0) return;
    const TensorRef& x = in[0];
    const int64_t dim = at.i("dim");
    const auto d = static_cast<size_t>(dim);
    Space s(x.shape, 2);
    s.strides[0] = x.strides;
    s.strides[1] = out.strides;
    s.strides[1][d] = 0;
    s.line = x.shape[d];
    s.lineStrides = {x.strides[d], out.strides[d]};
    s.extra = {dim, at.b("descending") ? 1 : 0};
    s.extra.insert(s.extra.end(), x.shape.begin(), x.shape.end());
    const TensorRef ops[] = {x, out};
    run(ShaderFamily::Sort, op, ops, {x.dtype, DType::Int64}, s, {groupsFor(s.count(), 256), 1, 1});
    return;
  }
  case OpKind::MatMul:
    return matmulKernel(in, out);
  case OpKind::Conv:
  case OpKind::ConvInputGrad:
  case OpKind::ConvWeightGrad:
    return convKernel(op, in, out, at);
  case OpKind::Pool:
    return maxPoolArgmaxKernel(in, out, at);
  case OpKind::Random: {
    if (out.numel() == 0) return;
    Space s(out.shape, 2);
    s.strides[1] = out.strides;
    s.collapse();
    const bool uniform = op == OpCode::Uniform;
    auto bits = [](double v) {
      const auto f = static_cast<float>(v);
      int32_t i = 0;
      std::memcpy(&i, &f, 4);
      return static_cast<int64_t>(i);
    };
    s.extra = {in[0].strides.empty() ? 1 : in[0].strides[0],
               bits(at.f(uniform ? "low" : "mean")), bits(at.f(uniform ? "high" : "std"))};
    const TensorRef ops[] = {in[0], out};
    run(ShaderFamily::Random, op, ops, {DType::Int64, out.dtype}, s,
        {groupsFor(s.count(), 256), 1, 1});
    return;
  }
  case OpKind::Gather:
    if (out.numel() == 0 && in[1].numel() == 0) return;
    return gatherInto("gather", in[0], in[1], out, at.i("dim"));
  case OpKind::IndexSelect: {
    const int64_t dim = at.i("dim");
    if (out.numel() == 0) return;
    return gatherInto("index_select", in[0], indexAlong(in[1], out.shape, dim), out, dim);
  }
  case OpKind::Scatter:
    return scatterInto(op,
                       op == OpCode::ScatterAdd ? "scatter_add"
                       : op == OpCode::Scatter  ? "scatter"
                                                : "scatter_reduce",
                       in[0], in[1], in[2], out, at.i("dim"));
  case OpKind::IndexAdd: {
    const int64_t dim = at.i("dim");
    const int64_t n = in[1].numel();
    // Each point scanning the whole index costs points x n; sorting it first n x n (the rank
    // sort's loop of n stays within what lavapipe runs), after which a point finds its matches
    // by binary search (an embedding's gradient: a few thousand tokens into [vocab, dim] rows).
    if (n > 0 && n < out.numel() && n <= 65535)
      return sortedIndexAdd(in[0], in[1], in[2], out, dim);
    return scatterInto(OpCode::ScatterAdd, "index_add", in[0], indexAlong(in[1], in[2].shape, dim),
                       in[2], out, dim);
  }
  case OpKind::CheckIndex: {
    if (out.numel() == 0) return;
    Space s(out.shape, 2);
    s.strides = {in[0].strides, out.strides};
    s.collapse();
    const int64_t size = at.i("size");
    const bool wrap = at.b("wrap");
    s.extra = {size, wrap ? 1 : 0};
    const TensorRef ops[] = {in[0], out};
    if (auto bad = run(ShaderFamily::CheckIndex, op, ops, {DType::Int64, DType::Int64}, s,
                       {groupsFor(s.count(), 256), 1, 1}))
      kernels::outOfBounds(*bad, {size, at.i("dim"), at.get<std::string>("op")}, wrap);
    return;
  }
  case OpKind::Reshape:
  case OpKind::Permute:
  case OpKind::Expand:
  case OpKind::Slice:
  case OpKind::Flip:
  case OpKind::Pad:
  case OpKind::Cat: // as on the CPU, over this device's copy and fill
    return kernels::movement(op, in, out, at, {&copyCastShader, &fillShader});
  case OpKind::Full: {
    if (const auto* i = std::get_if<int64_t>(&at.raw("value"))) {
      alignas(8) unsigned char element[8] = {};
      copyCast(TensorRef{const_cast<int64_t*>(i), DType::Int64, {}, {}},
               TensorRef{element, out.dtype, {}, {}});
      return fillBytes(out, element);
    }
    return fillShader(out, at.f("value"));
  }
  default:
    WEFT_FAIL(Internal, "no shader kernel for ", info.name);
  }
}

/// The LU, Cholesky and QR factorizations and what they give (Shaders.h's Factor family): a
/// workgroup per matrix, its factors in a work buffer; inverse's and cholesky's LAPACK info is
/// the CPU's error. (With several failing matrices in a batch, the info reported may be another
/// failing matrix's than the first's.)
template <OpCode Op>
void factorKernel(std::span<const TensorRef> in, const TensorRef& out, const Attrs&) {
  const TensorRef& x = in[0];
  const size_t r = x.shape.size();
  const int64_t m = x.shape[r - 2], n = x.shape[r - 1];
  const Shape batch(x.shape.begin(), x.shape.end() - 2);
  const int64_t count = numel(batch);
  if (out.numel() == 0) return;
  const bool qr = Op == OpCode::QrQ || Op == OpCode::QrR;
  const int64_t each = qr ? m * n + std::min(m, n) : Op == OpCode::Cholesky ? 1 : n * n;
  std::shared_ptr<Storage> work = out.buffer->device().allocate(
      static_cast<size_t>(std::max<int64_t>(1, count * each)) * elementSize(x.dtype));
  Shape workShape = batch;
  workShape.push_back(each);
  const TensorRef w = refInto(*work, 0, x.dtype, workShape, contiguousStrides(workShape));
  const bool scalar = Op == OpCode::Det || Op == OpCode::LogAbsDet; // out: [...batch]
  Space s(batch, 3);
  s.strides = {batchStrides(x, batch), Shape(w.strides.begin(), w.strides.end() - 1),
               scalar ? out.strides : batchStrides(out, batch)};
  s.collapse();
  const size_t o = out.shape.size();
  s.extra = {m, n, x.strides[r - 2], x.strides[r - 1], scalar ? 0 : out.strides[o - 2],
             scalar ? 0 : out.strides[o - 1]};
  const TensorRef ops[] = {x, w, out};
  const auto info = run(ShaderFamily::Factor, Op, ops, {x.dtype, x.dtype, out.dtype}, s,
                        {groupsFor(count, 1), 1, 1}, 64);
  if (info && Op == OpCode::Inverse) kernels::singularMatrix(*info);
  if (info && Op == OpCode::Cholesky) kernels::notPositiveDefinite(*info);
}

/// An op on the host's kernel: the operands are made dense on the device, downloaded, computed
/// by the CPU's kernel (its errors, signs and precision), and the result uploaded; each call
/// waits for the device. The rest of the Matrix kind runs so (the symmetric eigendecomposition
/// and the SVD, iterative algorithms whose vectors' signs are LAPACK's own, as MAGMA's hybrid
/// routines and PyTorch's MPS device do), and the float64 ops whose math functions Vulkan
/// computes in 32 bits only (deviceKernel). Their gradients' products run on the device.
template <OpCode Op>
void hostKernel(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  Device& host = cpu();
  Device& device = out.buffer->device();
  auto bytesOf = [](const TensorRef& t) {
    return std::max<size_t>(1, static_cast<size_t>(t.numel()) * elementSize(t.dtype));
  };
  std::vector<std::shared_ptr<Storage>> held;
  std::vector<TensorRef> hostIn;
  for (const TensorRef& x : in) {
    const size_t bytes = bytesOf(x);
    std::shared_ptr<Storage> dense = device.allocate(bytes), copy = host.allocate(bytes);
    if (x.numel() > 0)
      copyCastShader(x, refInto(*dense, 0, x.dtype, x.shape, contiguousStrides(x.shape)));
    transfer(*dense, 0, *copy, 0, bytes);
    hostIn.push_back(refInto(*copy, 0, x.dtype, x.shape, contiguousStrides(x.shape)));
    held.push_back(std::move(copy));
  }
  const size_t bytes = bytesOf(out);
  std::shared_ptr<Storage> result = host.allocate(bytes), dense = device.allocate(bytes);
  host.kernels().run(Op, hostIn, refInto(*result, 0, out.dtype, out.shape,
                                         contiguousStrides(out.shape)), at);
  transfer(*result, 0, *dense, 0, bytes);
  if (out.numel() > 0)
    copyCastShader(refInto(*dense, 0, out.dtype, out.shape, contiguousStrides(out.shape)), out);
}

template <OpCode Op> void matrixKernel(std::span<const TensorRef> in, const TensorRef& out,
                                       const Attrs& at) {
  if constexpr (Op == OpCode::Inverse || Op == OpCode::Det || Op == OpCode::LogAbsDet ||
                Op == OpCode::Cholesky || Op == OpCode::QrQ || Op == OpCode::QrR) {
    if (Op != OpCode::LogAbsDet || in[0].dtype != DType::Float64)
      return factorKernel<Op>(in, out, at);
  }
  hostKernel<Op>(in, out, at);
}

/// The shader a float64 op of the kinds computing math functions runs as, where a device may
/// have none (Vulkan's exp, log, sin and the like are 32-bit only; random draws are float32).
std::optional<ShaderKey> float64Shader(OpCode op, std::span<const TensorRef> in,
                                       const TensorRef& out) {
  const bool wide = out.dtype == DType::Float64 ||
                    std::any_of(in.begin(), in.end(),
                                [](const TensorRef& t) { return t.dtype == DType::Float64; });
  if (!wide) return std::nullopt;
  switch (opInfo(op).kind) {
  case OpKind::Unary:
  case OpKind::Binary:
    return ShaderKey{ShaderFamily::Map, op, dtypesOf(in, out)};
  case OpKind::Normalize:
    return ShaderKey{op == OpCode::LogCumSumExp ? ShaderFamily::Scan : ShaderFamily::Normalize, op,
                     {in[0].dtype, out.dtype}};
  case OpKind::Scan:
    return ShaderKey{ShaderFamily::Scan, op, {in[0].dtype, out.dtype}};
  case OpKind::Random:
    return ShaderKey{ShaderFamily::Random, op, {DType::Int64, out.dtype}};
  default:
    return std::nullopt;
  }
}

/// An op on the device's shaders, but a float64 one whose shader the device cannot make: that
/// runs on the host's kernel (its precision, its random numbers), as the rest of the Matrix kind.
template <OpCode Op>
void deviceKernel(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  if (auto key = float64Shader(Op, in, out); key && !deviceOf(out).shaderError(*key).empty())
    return hostKernel<Op>(in, out, at);
  shaderKernel<Op>(in, out, at);
}

template <OpCode Op> KernelFn kernelFor() {
  return opInfo(Op).kind == OpKind::Matrix ? &matrixKernel<Op> : &deviceKernel<Op>;
}

} // namespace

int64_t shaderOffset(const TensorRef& t, std::string_view op) {
  const auto size = static_cast<int64_t>(elementSize(t.dtype));
  const int64_t bytes = static_cast<int64_t>(t.buffer->offset()) + t.byteOffset;
  WEFT_INTERNAL_ASSERT(bytes % size == 0, "a tensor not aligned to its element size");
  // Shaders index in 32 bits: every element of a bound buffer must be addressable.
  WEFT_CHECK(static_cast<int64_t>(t.buffer->offset() + t.buffer->nbytes()) / size <
                 std::numeric_limits<int32_t>::max(),
             Value, op, ": a tensor past 2^31 elements is not supported on GPU devices yet");
  return bytes / size;
}

void fillShaderKernels(KernelRegistry& registry) {
#define WEFT_REGISTER(N) registry.set(OpCode::N, kernelFor<OpCode::N>());
#define WEFT_UNARY(N, s, d, low, k, v) WEFT_REGISTER(N)
#define WEFT_BINARY(N, s, r, api, low, k, va, vb) WEFT_REGISTER(N)
#define WEFT_OP(N, s, kind, n, v) WEFT_REGISTER(N)
#include "weft/runtime/Ops.inc"
#undef WEFT_UNARY
#undef WEFT_BINARY
#undef WEFT_OP
#undef WEFT_REGISTER
  registry.setCopyCast(&copyCastShader);
  registry.setFill(&fillShader);
}

} // namespace weft::hal
