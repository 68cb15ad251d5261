// Creation kernels: full, and random numbers where element i of a draw at `offset` under `seed` is
// a pure function of (seed, offset, i); the draw's key input holds (seed, offset).
#include "Loops.h"
#include "weft/runtime/Kernels.h"
#include "weft/runtime/Philox.h"

#include <cmath>
#include <cstring>

namespace weft::kernels {
namespace {

/// Philox words for element `i`: counter = (i, offset), key = seed.
inline std::array<uint32_t, 4> wordsFor(int64_t i, uint64_t seed, uint64_t offset) {
  auto u = static_cast<uint64_t>(i);
  return philox4x32({static_cast<uint32_t>(u), static_cast<uint32_t>(u >> 32),
                     static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32)},
                    {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
}

template <typename Sample>
void generate(const TensorRef& key, const TensorRef& out, Sample sample) {
  WEFT_INTERNAL_ASSERT(out.isContiguous() && key.dtype == DType::Int64 && key.numel() == 2);
  const auto* k = static_cast<const char*>(key.data);
  int64_t words[2];
  for (int j = 0; j < 2; ++j) // the key may be strided
    std::memcpy(&words[j], k + j * key.strides[0] * 8, 8);
  auto seed = static_cast<uint64_t>(words[0]), offset = static_cast<uint64_t>(words[1]);
  visitDType(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<ComputeType<T>, float> || std::is_same_v<T, double>) {
      T* o = out.ptr<T>();
      parallelFor(out.numel(), 4096, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i)
          o[i] = convert<T>(sample(wordsFor(i, seed, offset), std::is_same_v<T, double>));
      });
    } else {
      WEFT_INTERNAL_ASSERT(false, "random kernel called with dtype ", dtypeName(out.dtype));
    }
  });
}

} // namespace

void Full(std::span<const TensorRef>, const TensorRef& out, const Attrs& at) {
  if (const auto* i = std::get_if<int64_t>(&at.raw("value"))) {
    int64_t v = *i; // integers fill exactly, also past 2^53
    copyCast(TensorRef{&v, DType::Int64, out.shape, Shape(out.shape.size(), 0)}, out);
    return;
  }
  fill(out, at.f("value"));
}

void Uniform(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  double low = at.f("low"), high = at.f("high");
  generate(in[0], out, [=](const std::array<uint32_t, 4>& w, bool dbl) {
    // (0, 1] -> [low, high): 1 - u lies in [0, 1).
    double u = dbl ? uniformFromBits(w[0], w[1]) : static_cast<double>(uniformFromBits(w[0]));
    return low + (high - low) * (1.0 - u);
  });
}

void Normal(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  double mean = at.f("mean"), stddev = at.f("std");
  generate(in[0], out, [=](const std::array<uint32_t, 4>& w, bool dbl) {
    // Box-Muller on two uniforms in (0, 1]; log(u1) is finite.
    double u1 = dbl ? uniformFromBits(w[0], w[1]) : static_cast<double>(uniformFromBits(w[0]));
    double u2 = dbl ? uniformFromBits(w[2], w[3]) : static_cast<double>(uniformFromBits(w[1]));
    return mean + stddev * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  });
}

} // namespace weft::kernels
