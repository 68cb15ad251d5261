// Bucketing a dynamic dimension: follow it through every op, mask every reduction over it.
#include "weft/passes/PaddedRows.h"

#include "weft/passes/GraphBuilder.h"
#include "weft/passes/Pass.h"
#include "weft/passes/Program.h"

#include <algorithm>
#include <limits>
#include <map>
#include <tuple>

namespace weft::passes {
namespace {

using ir::ValueId;

/// What a masked-out row must hold so that a reduction ignores it.
enum class Fill { Zero, One, Lowest, Highest };

AttrValue fillValue(Fill f, DType t) {
  if (f == Fill::Zero || f == Fill::One) return f == Fill::One ? 1.0 : 0.0;
  const bool low = f == Fill::Lowest;
  if (isFloating(t))
    return low ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  return low ? lowestInteger(t) : highestInteger(t);
}

std::string at(const ir::Location& loc) {
  return loc.known() ? " at " + loc.text() : std::string();
}

template <typename... Args> ir::Diagnostic fail(const ir::Node& n, const Args&... args) {
  return ir::diag(ErrorKind::Value, "dynamic_dim: ", opName(n.op), at(n.loc), " ", args...);
}

ir::Diagnostic structureDiffers(const std::string& what) {
  return ir::diag(ErrorKind::Value,
                  "dynamic_dim: the function records a different graph when the "
                  "dynamic dimension has another size (",
                  what,
                  "); its ops must not depend on that size. Decide such branches outside the "
                  "compiled function, or compile without dynamic_dim");
}

/// Attributes that may differ between the two traces: they spell shapes (checked through the
/// result types).
bool mayDiffer(OpKind kind, const std::string& name) {
  if (name == "shape")
    return kind == OpKind::Reshape || kind == OpKind::Expand || kind == OpKind::Full ||
           kind == OpKind::Random;
  return name == "input_shape" && kind == OpKind::ConvInputGrad;
}

/// For a constant (a number the user wrote, as in `x / n`): the first op that reads it, which is
/// what the user sees in the source.
std::string usedBy(const ir::Graph& g, size_t node) {
  const ir::Node& n = g.nodes()[node];
  if (n.op != OpCode::Full) return "";
  for (size_t k = node + 1; k < g.nodes().size(); ++k) {
    const ir::Node& user = g.nodes()[k];
    if (std::find(user.operands.begin(), user.operands.end(), n.result) != user.operands.end())
      return std::string("(an operand of ") + std::string(opName(user.op)) + at(user.loc) + ") ";
  }
  return "";
}

std::optional<ir::Diagnostic> compareStructure(const ir::Graph& a, const ir::Graph& b) {
  if (a.values().size() != b.values().size() || a.nodes().size() != b.nodes().size())
    return structureDiffers("a different number of ops");
  if (a.arguments() != b.arguments() || a.state() != b.state())
    return structureDiffers("different inputs");
  if (a.outputs() != b.outputs() || a.stateUpdates().size() != b.stateUpdates().size())
    return structureDiffers("different outputs");
  for (size_t i = 0; i < a.stateUpdates().size(); ++i)
    if (a.stateUpdates()[i].state != b.stateUpdates()[i].state ||
        a.stateUpdates()[i].newValue != b.stateUpdates()[i].newValue)
      return structureDiffers("different state updates");
  for (size_t i = 0; i < a.nodes().size(); ++i) {
    const ir::Node &x = a.nodes()[i], &y = b.nodes()[i];
    if (x.op != y.op || x.operands != y.operands)
      return structureDiffers(std::string(opName(x.op)) + at(x.loc) + " becomes " +
                              std::string(opName(y.op)) + at(y.loc));
    if (x.attrs.items().size() != y.attrs.items().size())
      return structureDiffers(std::string("the attributes of ") + std::string(opName(x.op)) +
                              at(x.loc));
    OpKind kind = opInfo(x.op).kind;
    for (const auto& [name, value] : x.attrs.items()) {
      if (!y.attrs.has(name))
        return structureDiffers("the attributes of " + std::string(opName(x.op)) + at(x.loc));
      if (y.attrs.raw(name) == value || mayDiffer(kind, name)) continue;
      return fail(x, usedBy(a, i),
                  "reads a number computed from the size of the dynamic dimension (its ", name,
                  " changes with the size): inside the compiled function that size is the "
                  "bucket's, not the batch's. Average with mean() instead of dividing by "
                  "x.size(0), or compile without dynamic_dim");
    }
  }
  return std::nullopt;
}

int64_t product(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i)
    p *= s[i];
  return p;
}

bool contains(const Shape& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

/// What one op does with the dynamic dimension.
struct Rule {
  MaybeAxis result;
  /// Operands read through a mask, and what masked rows become.
  std::vector<std::pair<size_t, Fill>> masks;
  /// The op creates values of the dynamic size from nothing that has it (full, random, expand):
  /// where is read off the two traces.
  bool source = false;
};

class Masker {
public:
  explicit Masker(const PaddedTrace& t)
      : t_(t), g_(*t.graph), p_(*t.probe), b_(out_.graph), size_(t.size) {
    out_.graph = ir::Graph(g_.name());
  }

  ir::Result<MaskedGraph> run() {
    if (auto d = compareStructure(g_, p_)) return *d;
    out_.valueMap.assign(g_.values().size(), ir::kNoValue);
    axes_.assign(g_.values().size(), std::nullopt);
    for (size_t i = 0; i < g_.arguments().size(); ++i) {
      ValueId v = g_.arguments()[i];
      out_.valueMap[static_cast<size_t>(v)] = out_.graph.addArgument(g_.type(v), g_.value(v).name);
      axes_[static_cast<size_t>(v)] = i < t_.arguments.size() ? t_.arguments[i] : std::nullopt;
      if (auto d = settle(v, nullptr, true)) return *d; // unlisted ones (seeds): found by the probe
    }
    valid_ = out_.graph.addArgument({DType::Bool, {size_}}, "valid");
    for (ValueId v : g_.state()) {
      out_.valueMap[static_cast<size_t>(v)] = out_.graph.addState(g_.type(v), g_.value(v).name);
      if (auto d = settle(v, nullptr, true)) return *d; // constants made from the size
    }
    for (const ir::Node& n : g_.nodes()) {
      std::vector<MaybeAxis> ax;
      std::vector<ValueId> operands;
      for (ValueId o : n.operands) {
        ax.push_back(axes_[static_cast<size_t>(o)]);
        operands.push_back(out_.valueMap[static_cast<size_t>(o)]);
      }
      auto r = rule(n, ax);
      if (!r) return r.diagnostic();
      b_.setLocation(n.loc);
      for (const auto& [i, fill] : r.value().masks)
        operands[i] = masked(operands[i], *ax[i], fill);
      if (b_.error()) return *b_.error();
      out_.valueMap[static_cast<size_t>(n.result)] =
          out_.graph.addNode(n.op, std::move(operands), n.attrs, g_.type(n.result), n.loc);
      axes_[static_cast<size_t>(n.result)] = r.value().result;
      if (auto d = settle(n.result, &n, r.value().source)) return *d;
    }
    for (const ir::StateUpdate& u : g_.stateUpdates()) {
      if (axes_[static_cast<size_t>(u.newValue)]) {
        const ir::Value& v = g_.value(u.newValue);
        return ir::diag(ErrorKind::Value, "dynamic_dim: state ", g_.value(u.state).name,
                        " is written with a value that has the dynamic dimension",
                        v.producer >= 0 ? at(g_.nodes()[static_cast<size_t>(v.producer)].loc) : "",
                        "; state keeps one shape across calls");
      }
      out_.graph.addStateUpdate(out_.valueMap[static_cast<size_t>(u.state)],
                                out_.valueMap[static_cast<size_t>(u.newValue)]);
    }
    for (ValueId o : g_.outputs()) {
      out_.graph.addOutput(out_.valueMap[static_cast<size_t>(o)]);
      out_.outputs.push_back(axes_[static_cast<size_t>(o)]);
    }
    return std::move(out_);
  }

private:
  /// Checks the axis found for `v` against the probe trace; for a source, finds it there.
  std::optional<ir::Diagnostic> settle(ValueId v, const ir::Node* n, bool source) {
    const Shape &s = g_.type(v).shape, &p = p_.type(v).shape;
    MaybeAxis& ax = axes_[static_cast<size_t>(v)];
    auto bad = [&](const char* what) {
      if (n != nullptr) return fail(*n, what);
      return ir::diag(ErrorKind::Value, "dynamic_dim: input ", g_.value(v).name, " ", what);
    };
    if (s.size() != p.size()) return structureDiffers("a value's rank changes");
    if (!ax && s != p) {
      if (!source)
        return bad("makes a value whose size follows the dynamic dimension in a way weft cannot "
                   "track (it must stay the outermost factor of one axis)");
      for (size_t d = 0; d < s.size(); ++d)
        if (s[d] != p[d]) {
          if (ax) return bad("makes a value with two axes of the dynamic size");
          ax = DynamicAxis{static_cast<int64_t>(d), s[d] / size_};
        }
    }
    if (!ax) return std::nullopt;
    auto a = static_cast<size_t>(ax->axis);
    bool ok = a < s.size() && ax->factor > 0 && s[a] == size_ * ax->factor &&
              p[a] == t_.probeSize * ax->factor;
    for (size_t d = 0; ok && d < s.size(); ++d)
      ok = d == a || s[d] == p[d];
    if (!ok)
      return bad("makes a value whose size follows the dynamic dimension in a way weft cannot "
                 "track (it must stay the outermost factor of one axis)");
    return std::nullopt;
  }

  /// `x` with the rows past the valid ones replaced by `fill`.
  ValueId masked(ValueId x, DynamicAxis ax, Fill fill) {
    const ir::TensorType t = out_.graph.type(x); // a copy: emitting nodes grows the value list
    auto key = std::make_tuple(ax.axis, ax.factor, t.shape.size());
    auto it = masks_.find(key);
    if (it == masks_.end()) {
      GValue m = b_.value(valid_);
      if (ax.factor > 1)
        m = reshape(expand(reshape(m, {size_, 1}), {size_, ax.factor}), {size_ * ax.factor});
      Shape s(t.shape.size(), 1);
      s[static_cast<size_t>(ax.axis)] = size_ * ax.factor;
      it = masks_.emplace(key, reshape(m, s)).first;
    }
    GValue f =
        b_.emit(OpCode::Full, {},
                Attrs{{"shape", Shape{}}, {"dtype", t.dtype}, {"value", fillValue(fill, t.dtype)}});
    return where(it->second, b_.value(x), f).id;
  }

  const Shape& shapeOf(ValueId v) const { return g_.type(v).shape; }

  ir::Result<Rule> rule(const ir::Node& n, const std::vector<MaybeAxis>& ax) const {
    const OpInfo& info = opInfo(n.op);
    auto rank = [&](size_t i) { return static_cast<int64_t>(shapeOf(n.operands[i]).size()); };
    auto r = static_cast<int64_t>(shapeOf(n.result).size());
    const Attrs& at = n.attrs;
    Rule rule;
    switch (info.kind) {
    case OpKind::Normalize:
      if (ax[0] && at.i("dim") == ax[0]->axis) {
        // normalizes over the rows: padded ones must add nothing (exp(lowest - max) is 0)
        rule.masks.emplace_back(0, Fill::Lowest);
        rule.result = ax[0];
        return rule;
      }
      [[fallthrough]]; // along another axis, rows stay rows
    case OpKind::Unary:
    case OpKind::Binary:
    case OpKind::Cast:
    case OpKind::Identity:
    case OpKind::CheckIndex: // padded rows copy valid ones: their indices are checked alike
    case OpKind::Where:
    case OpKind::Scan: // a prefix sum along the rows: valid rows never read later ones
    case OpKind::ArgScan:
      for (size_t i = 0; i < ax.size(); ++i) {
        if (!ax[i]) continue;
        DynamicAxis aligned{ax[i]->axis + r - rank(i), ax[i]->factor};
        if (rule.result && *rule.result != aligned)
          return fail(n, "combines values whose dynamic dimension is on different axes");
        rule.result = aligned;
      }
      return rule;
    case OpKind::Reduce:
    case OpKind::ArgReduce: {
      if (!ax[0]) return rule;
      int64_t a = ax[0]->axis;
      bool reduce = info.kind == OpKind::Reduce;
      Shape dims = reduce ? at.ints("dims") : Shape{at.i("dim")};
      if ((reduce && dims.empty()) || contains(dims, a)) {
        Fill f = n.op == OpCode::Sum                                ? Fill::Zero
                 : n.op == OpCode::Prod                             ? Fill::One
                 : (n.op == OpCode::AMax || n.op == OpCode::ArgMax) ? Fill::Lowest
                                                                    : Fill::Highest;
        rule.masks.emplace_back(0, f);
        return rule;
      }
      int64_t before = at.b("keepdim") ? 0
                                       : std::count_if(dims.begin(), dims.end(),
                                                       [&](int64_t d) { return d < a; });
      rule.result = DynamicAxis{a - before, ax[0]->factor};
      return rule;
    }
    case OpKind::Sort:
      if (ax[0] && at.i("dim") == ax[0]->axis) return fail(n, "sorts along the dynamic dimension");
      rule.result = ax[0];
      return rule;
    case OpKind::Flip:
      if (ax[0] && contains(at.ints("dims"), ax[0]->axis))
        return fail(n, "reverses the dynamic dimension");
      rule.result = ax[0];
      return rule;
    case OpKind::Slice:
      if (ax[0] && at.i("dim") == ax[0]->axis &&
          !(at.i("start") == 0 && at.i("step") == 1 &&
            at.i("end") >= shapeOf(n.operands[0])[static_cast<size_t>(ax[0]->axis)]))
        return fail(n, "picks rows of the dynamic dimension (x[i] or x.slice along it); only "
                       "whole rows may be taken inside a function compiled with dynamic_dim");
      rule.result = ax[0];
      return rule;
    case OpKind::Pad:
      if (ax[0]) {
        auto a = static_cast<size_t>(ax[0]->axis);
        if (at.ints("pads")[2 * a] != 0 || at.ints("pads")[2 * a + 1] != 0)
          return fail(n, "pads the dynamic dimension");
      }
      rule.result = ax[0];
      return rule;
    case OpKind::Permute:
      if (ax[0]) {
        const auto& dims = at.ints("dims");
        auto p = std::find(dims.begin(), dims.end(), ax[0]->axis) - dims.begin();
        rule.result = DynamicAxis{p, ax[0]->factor};
      }
      return rule;
    case OpKind::Expand:
      if (ax[0])
        rule.result = DynamicAxis{ax[0]->axis + r - rank(0), ax[0]->factor};
      else
        rule.source = true;
      return rule;
    case OpKind::Reshape:
      if (ax[0]) return reshapeRule(n, *ax[0]);
      return rule;
    case OpKind::Cat:
      for (size_t i = 0; i < ax.size(); ++i) {
        const Shape& s = shapeOf(n.operands[i]);
        if (s.size() == 1 && s[0] == 0) continue; // ignored by cat
        if (i > 0 && ax[i] != rule.result)
          return fail(n, "joins values with and without the dynamic dimension");
        rule.result = ax[i];
      }
      if (rule.result && at.i("dim") == rule.result->axis)
        return fail(n, "concatenates along the dynamic dimension");
      return rule;
    case OpKind::MatMul:
      return matmulRule(n, ax, r);
    case OpKind::Matrix: // each matrix on its own: rows may be a batch axis only
      if (ax[0] && ax[0]->axis >= rank(0) - 2)
        return fail(n, "has the dynamic dimension inside its matrices");
      rule.result = ax[0];
      return rule;
    case OpKind::Conv:
    case OpKind::ConvInputGrad:
    case OpKind::Pool:
      if (ax.size() > 1 && ax[1]) return fail(n, "has the dynamic dimension in its weight");
      if (ax[0] && ax[0]->axis != 0)
        return fail(n, "has the dynamic dimension on a channel or spatial axis");
      rule.result = ax[0];
      return rule;
    case OpKind::ConvWeightGrad: // sums over the batch axis of both operands
      for (size_t i = 0; i < 2; ++i)
        if (ax[i] && ax[i]->axis != 0)
          return fail(n, "has the dynamic dimension on a channel or spatial axis");
      if (ax[1])
        rule.masks.emplace_back(1, Fill::Zero);
      else if (ax[0])
        rule.masks.emplace_back(0, Fill::Zero);
      return rule;
    case OpKind::Gather: // out[..i..] = x[..index[..i..]..]: rows follow the index's rows
      if (ax[0] && ax[0] != ax[1])
        return fail(n, "reads rows of the dynamic dimension at positions that do not follow it");
      rule.result = ax[1];
      return rule;
    case OpKind::Scatter: { // self, index, src
      int64_t dim = at.i("dim");
      if (ax[1] != ax[2])
        return fail(n, "has an index and a source that disagree on the dynamic dimension");
      if (ax[0] && ax[0] != ax[1]) return fail(n, "writes across the dynamic dimension");
      if (!ax[1]) return rule;
      if (!ax[0] && dim != ax[1]->axis)
        return fail(n, "writes rows of the dynamic dimension into a tensor without it");
      // Scattering along the rows: scatter writes the same as the last valid row (the padded rows
      // are its copies).
      // The reductions see no padded rows: each is masked with its identity.
      if (dim == ax[1]->axis && n.op != OpCode::Scatter)
        rule.masks.emplace_back(2, n.op == OpCode::ScatterAdd    ? Fill::Zero
                                   : n.op == OpCode::ScatterProd ? Fill::One
                                   : n.op == OpCode::ScatterAmax ? Fill::Lowest
                                                                 : Fill::Highest);
      rule.result = ax[0];
      return rule;
    }
    case OpKind::IndexSelect: { // x, index (1-D)
      int64_t dim = at.i("dim");
      if (ax[1]) {
        if (ax[0] && ax[0]->axis != dim)
          return fail(n, "gives its result two axes of the dynamic dimension");
        rule.result = DynamicAxis{dim, ax[1]->factor};
      } else if (ax[0]) {
        if (ax[0]->axis == dim) return fail(n, "selects fixed rows of the dynamic dimension");
        rule.result = ax[0];
      }
      return rule;
    }
    case OpKind::IndexAdd: { // self, index (1-D), src
      int64_t dim = at.i("dim");
      if (ax[1]) { // adds the rows of src into self: a sum over the rows
        if (!ax[2] || ax[2]->axis != dim || (ax[0] && ax[0]->axis != dim))
          return fail(n, "adds along the dynamic dimension in a way weft cannot mask");
        rule.masks.emplace_back(2, Fill::Zero);
        rule.result = ax[0];
        return rule;
      }
      if (ax[0] != ax[2] || (ax[0] && ax[0]->axis == dim))
        return fail(n, "adds across the dynamic dimension");
      rule.result = ax[0];
      return rule;
    }
    case OpKind::Full:
    case OpKind::Random:
      rule.source = true;
      return rule;
    }
    return fail(n, "is not known to the dynamic_dim analysis");
  }

  /// Where the dynamic dimension lands after a reshape: the output axis whose outer part it
  /// becomes (the elements before it and from it on must match).
  ir::Result<Rule> reshapeRule(const ir::Node& n, DynamicAxis in) const {
    const Shape& s = shapeOf(n.operands[0]);
    const Shape &o = shapeOf(n.result), &po = p_.type(n.result).shape;
    auto a = static_cast<size_t>(in.axis);
    int64_t before = product(s, 0, a), from = product(s, a, s.size());
    for (size_t c = 0; c < o.size(); ++c) {
      if (product(o, 0, c) != before || product(o, c, o.size()) != from) continue;
      if (o[c] % size_ != 0) continue;
      int64_t m = o[c] / size_;
      if (c < po.size() && po[c] == t_.probeSize * m) {
        Rule rule;
        rule.result = DynamicAxis{static_cast<int64_t>(c), m};
        return rule;
      }
    }
    return fail(n, "splits the dynamic dimension or merges it with an axis before it (it must "
                   "stay the outermost factor of one axis)");
  }

  ir::Result<Rule> matmulRule(const ir::Node& n, const std::vector<MaybeAxis>& ax,
                              int64_t r) const {
    auto ra = static_cast<int64_t>(shapeOf(n.operands[0]).size());
    auto rb = static_cast<int64_t>(shapeOf(n.operands[1]).size());
    int64_t batchDims = r - (ra >= 2 ? 1 : 0) - (rb >= 2 ? 1 : 0);
    Rule rule;
    bool contracted = false;
    for (size_t k = 0; k < 2; ++k) {
      if (!ax[k]) continue;
      int64_t a = ax[k]->axis, rk = k == 0 ? ra : rb;
      bool inner = k == 0 ? (rk == 1 || a == rk - 1) : (rk == 1 || a == rk - 2);
      if (inner) { // the contraction sums over the rows: mask one operand
        if (!contracted) rule.masks.emplace_back(k, Fill::Zero);
        contracted = true;
        continue;
      }
      int64_t pos = k == 0 && a == rk - 2   ? r - 1 - (rb >= 2 ? 1 : 0)
                    : k == 1 && a == rk - 1 ? r - 1
                                            : a + batchDims - (rk - 2);
      DynamicAxis d{pos, ax[k]->factor};
      if (rule.result && *rule.result != d)
        return fail(n, "gives its result two axes of the dynamic dimension");
      rule.result = d;
    }
    if (contracted && rule.result)
      return fail(n, "sums over the dynamic dimension of one operand and keeps it from another");
    return rule;
  }

  const PaddedTrace& t_;
  const ir::Graph &g_, &p_;
  MaskedGraph out_;
  GraphBuilder b_;
  int64_t size_;
  ValueId valid_ = ir::kNoValue;
  std::vector<MaybeAxis> axes_;
  std::map<std::tuple<int64_t, int64_t, size_t>, GValue> masks_;
};

} // namespace

ir::Result<MaskedGraph> maskPaddedRows(const PaddedTrace& trace) {
  return Masker(trace).run();
}

namespace {

class MaskRows : public ProgramPass {
public:
  std::string_view name() const override { return "mask-rows"; }
  ir::Result<bool> run(Program& p) override {
    if (!p.probe) return false; // no dynamic dimension, or masked already
    if (p.backward || !p.executables.empty())
      return ir::diag(ErrorKind::Value, "mask-rows runs before split and lower");
    PaddedTrace trace;
    trace.graph = &p.graph;
    trace.probe = &p.probe->graph;
    trace.size = p.rows;
    trace.probeSize = p.probeRows;
    trace.arguments = p.argumentAxes;
    auto masked = maskPaddedRows(trace);
    if (!masked) return masked.diagnostic();
    const std::vector<ValueId>& map = masked.value().valueMap;
    for (ValueId& v : p.seeds)
      v = map[static_cast<size_t>(v)];
    for (ValueId& v : p.grads)
      v = v == ir::kNoValue ? v : map[static_cast<size_t>(v)];
    for (ValueId& v : p.wrt)
      v = map[static_cast<size_t>(v)];
    p.graph = std::move(masked.value().graph);
    p.outputAxes = std::move(masked.value().outputs);
    p.probe.reset();
    return true;
  }
};

} // namespace

std::unique_ptr<Pass> createMaskRows() {
  return std::make_unique<MaskRows>();
}

} // namespace weft::passes
