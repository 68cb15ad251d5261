// Helpers shared by the tests: closeness checks, finite-difference gradient checks, temporary
// files and error expectations.
#pragma once

#include <gtest/gtest.h>
#include <weft/weft.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <typeinfo>
#include <vector>

#include <unistd.h>

namespace weft::test {

/// A path in the temporary directory that no other test process uses:
/// <tmp>/<prefix><pid>_<name>.
inline std::string tempPath(const std::string& prefix, const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          (prefix + std::to_string(::getpid()) + "_" + name))
      .string();
}

/// Checks |actual - expected| <= atol + rtol * |expected| elementwise (NaNs and infinities must
/// match).
inline ::testing::AssertionResult allClose(const std::vector<double>& actual,
                                           const std::vector<double>& expected, double rtol,
                                           double atol) {
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure() << "size " << actual.size() << " vs " << expected.size();
  for (size_t i = 0; i < actual.size(); ++i) {
    double a = actual[i], e = expected[i];
    if (std::isnan(e) && std::isnan(a)) continue;
    // An infinity only matches itself (rtol * inf would let any finite value pass).
    bool close = std::isinf(e) ? a == e : std::fabs(a - e) <= atol + rtol * std::fabs(e);
    if (!close)
      return ::testing::AssertionFailure() << "element " << i << ": " << a << " vs expected " << e
                                           << " (rtol " << rtol << ", atol " << atol << ")";
  }
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult allClose(const Tensor& actual, const Tensor& expected,
                                           double rtol, double atol) {
  if (actual.sizes() != expected.sizes())
    return ::testing::AssertionFailure()
           << "shape " << shapeString(actual.sizes()) << " vs " << shapeString(expected.sizes());
  return allClose(actual.to_vector<double>(), expected.to_vector<double>(), rtol, atol);
}

/// The bytes of an IDX file (MNIST's format): the header for element `type` and `dims`, then
/// `payload`.
inline std::string idxBytes(unsigned char type, const std::vector<uint32_t>& dims,
                            const std::string& payload) {
  std::string s{'\0', '\0', static_cast<char>(type), static_cast<char>(dims.size())};
  for (uint32_t d : dims)
    for (int shift = 24; shift >= 0; shift -= 8)
      s += static_cast<char>((d >> shift) & 0xff);
  return s + payload;
}

// ---- reference files (tests/reference/*.txt, written once by a PyTorch script) ----

/// `s` cut at each `sep`; a trailing separator gives a trailing empty part.
inline std::vector<std::string> splitOn(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(s);
  while (std::getline(in, part, sep))
    parts.push_back(part);
  if (!s.empty() && s.back() == sep) parts.emplace_back();
  return parts;
}

/// Comma-separated numbers, as Python's repr writes them (nan, inf and -inf included).
inline std::vector<double> parseValues(const std::string& s) {
  std::vector<double> v;
  for (const std::string& p : splitOn(s, ','))
    if (!p.empty()) v.push_back(std::strtod(p.c_str(), nullptr));
  return v;
}

/// The lines of a reference file, each cut at '|'.
inline std::vector<std::vector<std::string>> readReferenceLines(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::vector<std::vector<std::string>> lines;
  std::string line;
  while (std::getline(in, line))
    lines.push_back(splitOn(line, '|'));
  return lines;
}

/// A tensor as a reference file writes it: "dtype:shape:values" (shape and values comma-separated).
struct ReferenceTensor {
  std::string dtype;
  Shape shape;
  std::vector<double> values;
};

inline ReferenceTensor parseReferenceTensor(const std::string& text) {
  std::vector<std::string> parts = splitOn(text, ':');
  Shape shape;
  for (double d : parseValues(parts.at(1)))
    shape.push_back(static_cast<int64_t>(d));
  return {parts.at(0), shape, parseValues(parts.at(2))};
}

/// Values agree with a reference's: NaN with NaN, infinities exactly, the rest to 1e-12 relative
/// and 1e-14 absolute (float64 inputs of O(1); PyTorch's exp/log/erf and the C library's differ
/// by an ulp or two, and an exact 0 may come out as 1e-16 of rounding; the sign of zero is not
/// compared).
inline ::testing::AssertionResult sameReferenceValues(const std::vector<double>& got,
                                                      const std::vector<double>& want) {
  return allClose(got, want, 1e-12, 1e-14);
}

/// `t` has the reference's dtype and shape, and its values (sameReferenceValues).
inline ::testing::AssertionResult sameAsReference(const Tensor& t, const ReferenceTensor& r) {
  if (std::string(dtypeName(t.dtype())) != r.dtype)
    return ::testing::AssertionFailure()
           << "dtype " << dtypeName(t.dtype()) << ", PyTorch's " << r.dtype;
  if (t.sizes() != r.shape)
    return ::testing::AssertionFailure()
           << "shape " << shapeString(t.sizes()) << ", PyTorch's " << shapeString(r.shape);
  return sameReferenceValues(t.to_vector<double>(), r.values);
}

/// Each output as sameAsReference checks it.
inline ::testing::AssertionResult sameAsReference(const std::vector<Tensor>& got,
                                                  const std::vector<ReferenceTensor>& want) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << got.size() << " outputs, PyTorch gives " << want.size();
  for (size_t k = 0; k < got.size(); ++k) {
    auto r = sameAsReference(got[k], want[k]);
    if (!r) return ::testing::AssertionFailure() << "output " << k << ": " << r.message();
  }
  return ::testing::AssertionSuccess();
}

/// The weights w of a reference's gradient of sum(output * w): 1, 1.5, 2, 1, ... in row-major
/// order.
inline Tensor referenceWeights(const Tensor& t) {
  std::vector<double> w(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = 1.0 + 0.5 * static_cast<double>(i % 3);
  return from_vector(w, t.sizes()).to(t.dtype());
}

/// A differentiable function of several tensors.
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

/// Compares autograd's gradient of sum(f(inputs) * w) (w fixed random weights) with central
/// differences, for every floating input. Inputs must be contiguous float64 leaves.
/// Tolerance: float64 central differences with eps=1e-6 are accurate to ~1e-8 relative for smooth
/// functions, so atol=1e-5/rtol=1e-4 only fails on a wrong rule.
inline ::testing::AssertionResult gradcheck(const Fn& f, std::vector<Tensor> inputs,
                                            double eps = 1e-6, double atol = 1e-5,
                                            double rtol = 1e-4) {
  std::vector<Tensor> diff;
  for (Tensor& t : inputs)
    if (t.is_floating_point()) {
      t = t.detach().clone().requires_grad_();
      diff.push_back(t);
    }
  Tensor y = f(inputs);
  Tensor w = randn(y.sizes(), y.dtype(), Generator(1234));
  auto loss = [&](const std::vector<Tensor>& in) { return (f(in) * w).sum().item<double>(); };
  // An output that does not depend on the inputs differentiably has zero gradients.
  std::vector<Tensor> analytic(diff.size());
  if (y.requires_grad())
    analytic = autograd::grad({(y * w).sum()}, diff, {}, std::nullopt, false, true);
  for (size_t k = 0; k < diff.size(); ++k) {
    Tensor& t = diff[k];
    auto* p = t.data_ptr<double>();
    std::vector<double> numeric(static_cast<size_t>(t.numel()));
    // Grad mode stays on: for double backward, f itself differentiates.
    for (int64_t j = 0; j < t.numel(); ++j) {
      double orig = p[j];
      p[j] = orig + eps;
      double hi = loss(inputs);
      p[j] = orig - eps;
      double lo = loss(inputs);
      p[j] = orig;
      numeric[static_cast<size_t>(j)] = (hi - lo) / (2 * eps);
    }
    std::vector<double> got = analytic[k].defined() ? analytic[k].to_vector<double>()
                                                    : std::vector<double>(numeric.size(), 0.0);
    auto r = allClose(got, numeric, rtol, atol);
    if (!r)
      return ::testing::AssertionFailure()
             << "input " << k << " (shape " << shapeString(t.sizes()) << "): analytic vs "
             << "numeric gradient: " << r.message();
  }
  return ::testing::AssertionSuccess();
}

/// Double backward: gradcheck of the first-order gradient (built with create_graph=true).
inline ::testing::AssertionResult gradgradcheck(const Fn& f, const std::vector<Tensor>& inputs) {
  Fn firstOrder = [f](const std::vector<Tensor>& in) {
    std::vector<Tensor> diff;
    for (const Tensor& t : in)
      if (t.is_floating_point()) diff.push_back(t);
    Tensor y = f(in);
    Tensor w = randn(y.sizes(), y.dtype(), Generator(99));
    std::vector<Tensor> g = autograd::grad({(y * w).sum()}, diff, {}, true, true, true);
    Tensor total = zeros({}, kFloat64);
    for (size_t i = 0; i < g.size(); ++i) {
      if (!g[i].defined()) continue;
      total = total + (g[i] * randn(g[i].sizes(), g[i].dtype(), Generator(7 + i))).sum();
    }
    return total;
  };
  return gradcheck(firstOrder, inputs, 1e-5, 1e-4, 1e-3);
}

/// `fn` (a scalar of one float64 input) compiled gives eager's value exactly, and its gradient
/// within 1e-12 relative and absolute (the compiled step runs the same kernels; its backward may
/// add the terms of a gradient in another order).
template <typename F> inline void expectCompiledAsEager(F fn, const Tensor& input) {
  Tensor p = input.clone().requires_grad_(true), q = input.clone().requires_grad_(true);
  Tensor eager = fn(p);
  eager.backward();
  Tensor compiled = compile(fn)(q);
  compiled.backward();
  EXPECT_EQ(compiled.item<double>(), eager.item<double>());
  EXPECT_TRUE(allClose(q.grad().to_vector<double>(), p.grad().to_vector<double>(), 1e-12, 1e-12));
}

/// A fresh directory for one test's files, removed at the end.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "weft_test_XXXXXX").string();
    path = ::mkdtemp(pattern.data());
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  /// Writes `bytes` to the file `name` in the directory; returns its path.
  std::string write(const std::string& name, const std::string& bytes) const {
    std::string file = (path / name).string();
    std::ofstream(file, std::ios::binary) << bytes;
    return file;
  }
};

/// `fn` throws an `E` whose message holds every one of `parts`.
template <typename E, typename Fn>
::testing::AssertionResult throwsWith(Fn&& fn, const std::vector<std::string>& parts) {
  try {
    fn();
  } catch (const E& e) {
    for (const std::string& p : parts)
      if (std::string(e.what()).find(p) == std::string::npos)
        return ::testing::AssertionFailure() << "message lacks '" << p << "': " << e.what();
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw another type: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

/// The message of the `E` that `fn` throws; a test failure if it throws nothing or another type.
template <typename E = Error, typename Fn> std::string messageOf(Fn&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw " << typeid(e).name() << ", not the expected error: " << e.what();
    return "";
  }
  ADD_FAILURE() << "no error was thrown";
  return "";
}

/// Whether `text` contains `part`.
inline bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

/// Whether `a` and `b` have one shape, one dtype and the same bytes.
inline bool sameBytes(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype()) return false;
  Tensor x = a.contiguous(), y = b.contiguous();
  const size_t n = static_cast<size_t>(x.numel()) * elementSize(x.dtype());
  return n == 0 || std::memcmp(x.data_ptr(), y.data_ptr(), n) == 0;
}

} // namespace weft::test
