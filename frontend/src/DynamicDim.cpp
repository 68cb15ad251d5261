// compile()'s dynamic dimension: which rows a call has, its bucket, padding, and masking the
// padded rows out of the bucket's graph.
#include "CompiledSignature.h"
#include "weft/Autograd.h"
#include "weft/Functions.h"

#include <algorithm>

namespace weft {
namespace {

/// The real tensors two traces at different sizes captured must agree: parameters are the same
/// tensors, and a constant the function made (arange(x.size(0)), a literal) must hold the same
/// values, on the rows both have along a dimension of the dynamic size.
void checkConstantsAgree(const TraceContext& tc, const std::vector<Tensor>& b) {
  const std::vector<Tensor>& a = tc.state;
  WEFT_INTERNAL_ASSERT(a.size() == b.size(), "the two traces captured different state");
  std::vector<bool> key(a.size(), false); // random draws' keys: the two traces draw apart
  for (const GeneratorEvent& e : tc.generatorEvents)
    if (e.kind == GeneratorEvent::Kind::Draw) key[e.key] = true;
  for (size_t k = 0; k < a.size(); ++k) {
    if (key[k] || a[k].is_same(b[k])) continue;
    Tensor x = a[k], y = b[k];
    bool same = x.dim() == y.dim() && x.dtype() == y.dtype();
    for (int64_t d = 0; same && d < x.dim(); ++d)
      if (x.size(d) != y.size(d)) {
        int64_t n = std::min(x.size(d), y.size(d));
        x = x.narrow(d, 0, n);
        y = y.narrow(d, 0, n);
      }
    same = same && sameValues(x, y);
    WEFT_CHECK(same, Value, "compile: dynamic_dim: the function makes a tensor (state input s", k,
               ") whose values depend on the size of the dynamic dimension; inside the compiled "
               "function that size is the bucket's, not the batch's. Make it outside and pass it "
               "in, or compile without dynamic_dim");
  }
}

} // namespace

std::vector<ir::TensorType> DynamicCall::typesAt(const std::vector<Tensor>& real,
                                                 int64_t size) const {
  std::vector<ir::TensorType> types = typesOf(real);
  for (size_t i : args)
    types[i].shape[static_cast<size_t>(dim)] = size;
  return types;
}

std::vector<Tensor> DynamicCall::pad(const std::vector<Tensor>& real) const {
  NoGradGuard noGrad;
  std::vector<Tensor> out = real;
  for (size_t i : args)
    if (bucket > rows) {
      Tensor last = real[i].narrow(dim, rows - 1, 1);
      Shape s = last.sizes();
      s[static_cast<size_t>(dim)] = bucket - rows;
      out[i] = cat({real[i], last.expand(s)}, dim);
    }
  out.push_back(arange(bucket) < rows);
  return out;
}

std::optional<DynamicCall> dynamicCall(const CompileOptions& o, const std::vector<Tensor>& args) {
  if (!o.dynamic_dim_) return std::nullopt;
  DynamicCall c;
  c.dim = *o.dynamic_dim_;
  for (size_t i = 0; i < args.size(); ++i)
    if (o.dynamic_arguments_.empty()
            ? args[i].dim() > c.dim
            : std::find(o.dynamic_arguments_.begin(), o.dynamic_arguments_.end(), i) !=
                  o.dynamic_arguments_.end()) {
      WEFT_CHECK(args[i].dim() > c.dim, Shape, "compile: dynamic_dim(", c.dim, ") names argument ",
                 i, " of shape ", shapeString(args[i].sizes()), ", which has no dimension ", c.dim);
      c.args.push_back(i);
    }
  for (size_t i : o.dynamic_arguments_)
    WEFT_CHECK(i < args.size(), Index, "compile: dynamic_dim names argument ", i,
               " but the call has ", args.size(), " arguments");
  WEFT_CHECK(!c.args.empty(), Value, "compile: dynamic_dim(", c.dim,
             ") applies to no argument: none has more than ", c.dim, " dimensions");
  c.rows = args[c.args[0]].size(c.dim);
  for (size_t i : c.args)
    WEFT_CHECK(args[i].size(c.dim) == c.rows, Shape, "compile: dynamic_dim(", c.dim, "): argument ",
               i, " has ", args[i].size(c.dim), " rows where argument ", c.args[0], " has ", c.rows,
               "; name the arguments that share the dynamic dimension with "
               "dynamic_dim(dim, {indices})");
  WEFT_CHECK(c.rows > 0, Value, "compile: dynamic_dim(", c.dim,
             "): a call with 0 rows has no row to pad with; skip empty batches");
  if (o.buckets_.empty()) {
    c.bucket = 1;
    while (c.bucket < c.rows) {
      WEFT_CHECK(c.bucket <= (int64_t{1} << 61), Value, "compile: dynamic_dim(", c.dim,
                 "): ", c.rows, " rows have no power-of-two bucket that fits in memory");
      c.bucket *= 2;
    }
  } else {
    auto it = std::lower_bound(o.buckets_.begin(), o.buckets_.end(), c.rows);
    WEFT_CHECK(it != o.buckets_.end(), Value, "compile: ", c.rows,
               " rows exceed the largest bucket (", o.buckets_.back(),
               "); add a larger one to CompileOptions::buckets");
    c.bucket = *it;
  }
  return c;
}

std::unique_ptr<TraceContext> addProbe(passes::Program& program, const TensorFunction& fn,
                                       const std::vector<Tensor>& args, const DynamicCall& dyn,
                                       size_t numOutputs, std::source_location loc) {
  auto probe = std::make_unique<TraceContext>();
  probe->dynamicDim = true;
  std::vector<GradEffect> probeEffects;
  int64_t probeSize = 2 * dyn.bucket;
  try {
    traceInto(*probe, fn, dyn.typesAt(args, probeSize), args, probeEffects, loc);
  } catch (const Error& e) {
    throwError(e.kind(), std::string("compile: dynamic_dim: the function traces with ") +
                             std::to_string(dyn.bucket) + " rows but not with " +
                             std::to_string(probeSize) +
                             "; it must work for any number of rows: " + e.what());
  }
  program.probe = std::make_shared<passes::Program>();
  program.probe->graph = std::move(probe->graph);
  if (!program.wrt.empty()) askOutputGradients(*probe, *program.probe, args, numOutputs);
  program.rows = dyn.bucket;
  program.probeRows = probeSize;
  program.argumentAxes.assign(args.size(), std::nullopt);
  for (size_t i : dyn.args)
    program.argumentAxes[i] = passes::DynamicAxis{dyn.dim, 1};
  return probe;
}

void finishMasking(const TraceContext& tc, const TraceContext& probe,
                   const passes::Program& program, CompiledSignature& exe) {
  checkConstantsAgree(tc, probe.state); // the same state, as the pass checked
  exe.outputAxes = program.outputAxes;
  for (const GradEffect& e : exe.gradEffects)
    WEFT_INTERNAL_ASSERT(e.of == GradEffect::Of::Argument || e.output < 0 ||
                             !exe.outputAxes[static_cast<size_t>(e.output)],
                         "a gradient of state has the dynamic dimension");
}

} // namespace weft
