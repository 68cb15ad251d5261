// Printing tensors the way PyTorch does: "tensor([[1., 2.],\n        [3., 4.]], dtype=...)".
#include "TensorImpl.h"
#include "weft/Autograd.h"

#include <cmath>
#include <iomanip>
#include <ostream>
#include <sstream>

namespace weft {
namespace {

constexpr int64_t kSummarizeThreshold = 1000; // PyTorch's print threshold
constexpr int64_t kEdgeItems = 3;

/// How to format every element of one tensor, chosen once from all its values (PyTorch's
/// _Formatter).
struct Formatter {
  bool boolean = false, floating = false, intMode = false, sciMode = false;
  int width = 1;

  std::string format(double v) const {
    std::ostringstream os;
    if (boolean) {
      os << (v != 0 ? "True" : "False");
    } else if (!floating) {
      os << static_cast<int64_t>(v);
    } else if (std::isnan(v) || std::isinf(v)) {
      os << (std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
    } else if (sciMode) {
      os << std::scientific << std::setprecision(4) << v;
    } else if (intMode) {
      os << std::fixed << std::setprecision(0) << v << ".";
    } else {
      os << std::fixed << std::setprecision(4) << v;
    }
    return os.str();
  }
};

Formatter makeFormatter(const std::vector<double>& values, DType t) {
  Formatter f;
  f.boolean = t == DType::Bool;
  f.floating = isFloating(t);
  if (f.floating) {
    std::vector<double> finite;
    for (double v : values)
      if (std::isfinite(v)) finite.push_back(v);
    f.intMode = true;
    double maxAbs = 0, minAbs = std::numeric_limits<double>::infinity();
    for (double v : finite) {
      f.intMode = f.intMode && v == std::ceil(v);
      if (v != 0) {
        maxAbs = std::max(maxAbs, std::fabs(v));
        minAbs = std::min(minAbs, std::fabs(v));
      }
    }
    if (f.intMode)
      f.sciMode = maxAbs > 1e8;
    else if (maxAbs > 0)
      f.sciMode = maxAbs / minAbs > 1000 || maxAbs > 1e8 || minAbs < 1e-4;
  }
  for (double v : values)
    f.width = std::max(f.width, static_cast<int>(f.format(v).size()));
  return f;
}

struct Printer {
  const Tensor& t;
  const std::vector<double>& values; // row-major
  const Formatter& f;
  bool summarize;

  void print(std::ostream& os, int64_t dim, int64_t offset, int indent) const {
    const Shape& s = t.sizes();
    if (dim == static_cast<int64_t>(s.size())) {
      std::string v = f.format(values[static_cast<size_t>(offset)]);
      os << std::string(static_cast<size_t>(f.width) - v.size(), ' ') << v;
      return;
    }
    int64_t n = s[static_cast<size_t>(dim)];
    int64_t inner = numel(Shape(s.begin() + dim + 1, s.end()));
    os << "[";
    bool last = dim + 1 == static_cast<int64_t>(s.size());
    for (int64_t i = 0; i < n; ++i) {
      if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) {
        os << (last ? " ..." : "...");
        i = n - kEdgeItems - 1;
        if (last)
          os << ",";
        else
          os << ",\n" << std::string(static_cast<size_t>(indent + 1), ' ');
        continue;
      }
      if (i > 0) {
        os << ",";
        if (last)
          os << " ";
        else
          os << std::string(static_cast<size_t>(static_cast<int64_t>(s.size()) - dim - 1), '\n')
             << std::string(static_cast<size_t>(indent + 1), ' ');
      }
      print(os, dim + 1, offset + i * inner, indent + 1);
    }
    os << "]";
  }
};

} // namespace

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "[ Tensor (undefined) ]";
  if (t.impl()->trace != nullptr)
    return os << "tensor(<traced value %" << t.impl()->traceValue << ": " << dtypeName(t.dtype())
              << shapeString(t.sizes()) << ">)";
  std::vector<double> values = t.detach().to_vector<double>();
  bool summarize = t.numel() > kSummarizeThreshold;
  std::vector<double> shown;
  if (summarize) { // format only the printed elements, as PyTorch does
    for (size_t i = 0; i < values.size(); ++i)
      if (i < static_cast<size_t>(kEdgeItems) ||
          i + static_cast<size_t>(kEdgeItems) >= values.size())
        shown.push_back(values[i]);
  }
  Formatter f = makeFormatter(summarize ? shown : values, t.dtype());
  os << "tensor(";
  if (t.numel() == 0)
    os << "[]";
  else
    Printer{t, values, f, summarize}.print(os, 0, 0, 7);
  if (t.numel() == 0 && t.dim() != 1) {
    os << ", size=(";
    for (int64_t d = 0; d < t.dim(); ++d)
      os << (d ? ", " : "") << t.sizes()[static_cast<size_t>(d)];
    os << (t.dim() == 1 ? ",)" : ")");
  }
  if (!t.is_cpu()) os << ", device='" << t.device().str() << "'"; // before the dtype, as PyTorch
  bool defaultType =
      t.dtype() == DType::Float32 || t.dtype() == DType::Int64 || t.dtype() == DType::Bool;
  if (!defaultType) os << ", dtype=torch." << dtypeName(t.dtype());
  if (t.grad_fn())
    os << ", grad_fn=<" << t.grad_fn()->name() << ">";
  else if (t.requires_grad())
    os << ", requires_grad=True";
  return os << ")";
}

} // namespace weft
