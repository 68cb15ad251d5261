// The per-op compute shaders a GPU device runs for the op table's kernels, as the runtime asks
// codegen's SPIR-V path for them. The runtime names a shader by its family, op and dtypes and
// fills its parameters; codegen (the only room with MLIR) generates it once per device target,
// caches it on disk and hands back SPIR-V. Both sides follow the layout below, so a shader serves
// every shape and stride: nothing in it is specialised to one call.
//
// Every shader has binding 0: the parameters, 32-bit integers; then one storage buffer per
// operand (the inputs, then the output, in the key's dtypes), each bound whole and read at element
// offsets. Index arithmetic is 32-bit: an operand past 2^31 elements is refused by the device.
//
// The index space (all families but MatMul): `count` points, each an index into `rank` (<= 8)
// dims of `sizes`; operand k sits at offset[k] + sum(index[d] * strides[k][d]) elements.
//   p[0] = count, p[1] = rank, p[2 .. 2+rank) = sizes,
//   then per operand k: offset[k], strides[k][0 .. rank),
//   then the line: its length n and per operand k its stride along the line, lineStrides[k],
//   then what the family adds.
// Families:
//   Map:      out = op(inputs) at each point (Unary, Binary, Cast, Identity, Where); n = 1. An
//             integer fmod or floor_divide records a zero divisor in the status buffer (as Gather).
//   Reduce:   out at each point = sum/prod/amax/amin over its line of input 0: a workgroup per
//             point, its invocations' results joined with subgroup operations. Extra p: a chunk
//             length and count (0, 0: whole lines), for lines split into chunks, each a point
//             (the index space's last dim) whose partial result a second pass reduces.
//   ArgReduce: out (int64) = the line position of the max/min (the first NaN, else the first of
//             ties), as PyTorch's.
//   Normalize: softmax or log_softmax along each line (out's line stride too): a workgroup per
//             line.
//   Scan:     cumsum, cumprod, logcumsumexp, cum_argmax or cum_argmin along each line.
//   Gather:   operands x, index (int64), out: out = x at the point's offset plus
//             index * xDimStride; extra p: xDimStride, xDimSize. An index out of range is clamped,
//             and recorded in the status buffer (the last binding: [bad, value lo, value hi]).
//   Scatter:  operands self, index (int64), src, out: out = self combined (added, replaced,
//             multiplied, the larger or smaller kept: the op), over its line j in order, with
//             src[j] where index[j] equals the point's coordinate along `dim`; extra p: dim, dimSize,
//             then per dim the index's extent (points past it get nothing). Status as Gather.
//   CheckIndex: out = index, wrapped by size if asked; extra p: size, wrap. Status as Gather.
//   MatMul:   out[b] = a[b] @ b[b] over a batch index space: the points are the batch (their
//             strides per operand as above), then p: M, N, K, a's row and column strides, b's,
//             out's. Tiled through workgroup shared memory. The convolutions (conv,
//             conv_input_grad, conv_weight_grad) are this family too, as implicit GEMMs over their
//             operands (no column matrix is written): p: M, N, K, then the geometry (channels per
//             group, h, w, oh, ow, kh, kw, the strides, pads and dilations along h and w), then
//             the strides (n, c, h, w) of operand 0, operand 1 and the output. Both end with
//             split-K's: the parts K is walked in and the elements between parts' outputs (1, 0:
//             unsplit); z walks (batch point, part) pairs.
//   Random:   uniform / normal from Philox 4x32-10 as the CPU draws them (the same numbers for a
//             seed, to float32 rounding): operands the key (int64 [seed, offset]) and out; extra
//             p: the key's stride, the two parameters as float32 bits.
//   Sort:     argsort (int64), an invocation per element placing its index where the stable sort
//             puts it; the points cover the whole input (out's strides 0 along the line's dim,
//             the line: its length and strides); extra p: dim, descending, then the shape.
//   Factor:   the LU, Cholesky and Householder QR factorizations and what they give (inverse,
//             det, logabsdet, cholesky, qr_q, qr_r), a workgroup per matrix: operands x, work
//             (the factors: n * n for LU, m * n plus min(m, n) reflector scales for QR, per
//             point), out; the points are the batch; extra p: m, n, x's row and column strides,
//             out's (0, 0 for det and logabsdet). inverse and cholesky record LAPACK's `info`
//             (a zero pivot, a minor not positive-definite) in the status buffer.
//   Pool:     max_pool's argmax (int64: iy * w + ix) per output point; extra p: h, w, oh, ow, kh,
//             kw, strides, pads, dilations, then x's strides along h and w.
#pragma once

#include "weft/runtime/DType.h"
#include "weft/runtime/OpTable.h"

#include <cstdint>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace weft::hal {

enum class ShaderFamily : uint8_t {
  Map,
  Reduce,
  ArgReduce,
  Normalize,
  Scan,
  Gather,
  Scatter,
  CheckIndex,
  MatMul,
  Pool,
  Random,
  Sort,
  Factor
};

/// Which shader: its family, the op it computes, its operands' dtypes (inputs, then the output)
/// and its workgroup size (a device's subgroup size for Reduce, 256 otherwise).
struct ShaderKey {
  ShaderFamily family = ShaderFamily::Map;
  OpCode op = OpCode::StopGradient;
  std::vector<DType> dtypes;
  uint32_t workgroupSize = 256;
  /// A blocked matmul's (blockedMatMul) output block side: kMatMulBlock, or kMatMulSmallBlock
  /// for a grid too small to fill the GPU with those (0: kMatMulBlock).
  uint32_t block = 0;
  /// Whether the shader writes the status buffer (Gather, Scatter, CheckIndex, the integer
  /// divisions fmod and floor_divide for a zero divisor, inverse and cholesky for their info).
  bool hasStatus() const {
    return family == ShaderFamily::Gather || family == ShaderFamily::Scatter ||
           family == ShaderFamily::CheckIndex || integerDivision() ||
           (family == ShaderFamily::Factor && (op == OpCode::Inverse || op == OpCode::Cholesky));
  }
  bool integerDivision() const {
    return family == ShaderFamily::Map && (op == OpCode::Fmod || op == OpCode::FloorDivide) &&
           !dtypes.empty() && !isFloating(dtypes.back());
  }
  /// "map add float32,float32->float32 wg256" (" b64" after a small-block matmul's): the
  /// cache's key and what errors name.
  std::string str() const;
  bool operator==(const ShaderKey&) const = default;
};

/// A floating matmul or convolution computes 128 x 128 blocks of its output per workgroup (of
/// 16 x 16 invocations, in float32 registers), or 64 x 64 ones where 128s would leave a GPU
/// idle; integer and float64 ones 16 x 16 tiles.
inline constexpr int64_t kMatMulBlock = 128, kMatMulSmallBlock = 64;
inline bool blockedMatMul(const ShaderKey& key) {
  return key.family == ShaderFamily::MatMul && isFloating(key.dtypes.back()) &&
         key.dtypes.back() != DType::Float64; // float64 keeps float64 registers: 16 x 16 tiles
}

/// The most dims an index space has.
inline constexpr int kMaxShaderRank = 8;

/// SPIR-V for a shader, or why there is none.
struct ShaderCode {
  std::vector<uint32_t> words;
  std::string error;
};

/// Whether `words` look like a SPIR-V module (its magic number and a whole header).
inline bool isSpirv(const std::vector<uint32_t>& words) {
  return words.size() >= 5 && words[0] == 0x07230203u;
}

/// The format of a code object holding a compiled program's fused kernels for the GPU devices
/// (CodeObject::format), its target the device's CodeObject target it was built for.
inline constexpr const char* kSpirvKernelsFormat = "spirv-kernels";

/// One fused kernel in such an object: its name (the kernel table's symbol), how many storage
/// buffers it binds (binding 0: int32 parameters, each operand's offset in elements into its
/// buffer; then its inputs and its outputs), its workgroup size along x, and its SPIR-V, whose
/// entry point is "main". It walks the `KernelInfo::rows` points of its group's shape.
struct SpirvKernel {
  std::string symbol;
  uint32_t bindings = 0, workgroupSize = 0;
  std::vector<uint32_t> words;
};
/// The bytes of a "spirv-kernels" code object holding `kernels`.
std::vector<uint8_t> packSpirvKernels(std::span<const SpirvKernel> kernels);
/// The kernels `bytes` hold: a DeviceError saying what is wrong where they are cut short, a
/// count or size runs past them, or a kernel is not SPIR-V or binds no buffer.
std::vector<SpirvKernel> unpackSpirvKernels(std::span<const uint8_t> bytes);
/// What a SPIR-V CodeObject target lists after `prefix`: its capabilities for "caps=", its
/// extensions for "exts=".
std::set<std::string> targetList(const std::string& target, std::string_view prefix);
/// Why a device whose CodeObject target is `device` cannot run code built for `code` (a
/// capability or extension the code needs that the device lacks), or "".
std::string spirvTargetMismatch(const std::string& code, const std::string& device);

/// What makes shaders for the GPU devices: codegen installs it when it loads. `compile` returns
/// the shader `key` for a device whose CodeObject target is `target`; `cacheDir` names where devices
/// keep their pipeline caches ("": nowhere).
struct ShaderSource {
  ShaderCode (*compile)(const ShaderKey& key, const std::string& target) = nullptr;
  std::string (*cacheDir)() = nullptr;
};
void setShaderSource(const ShaderSource& source);
ShaderSource shaderSource();

/// One compiled shader as a pack holds it: its key's name (ShaderKey::str()), the target it was
/// compiled for, its SPIR-V.
struct PackedShader {
  std::string key, target;
  std::vector<uint32_t> words;
};
/// Writes a shader pack: the shaders a program needs, compiled ahead of time, for a process
/// without a compiler (an IOError where the file cannot be written).
void writeShaderPack(const std::string& path, const std::vector<PackedShader>& shaders);
/// Makes the pack at `path` the shader source (an IOError where it cannot be read or is not a
/// pack): a device takes a shader compiled for a target whose capabilities it has; a shader the
/// pack lacks is a DeviceError naming it.
void useShaderPack(const std::string& path);

} // namespace weft::hal
