// The op-by-op translation of a traced graph into ONNX (OnnxTranslate.h).
#include "OnnxTranslate.h"

#include "weft/Functions.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <numeric>
#include <optional>
#include <span>
#include <unordered_set>
#include <variant>

namespace weft::onnx_export {
namespace {

using ir::ValueId;

/// ONNX's element type of `t`.
int32_t onnxType(DType t) {
  using P = onnx::TensorProto;
  switch (t) {
  case DType::Bool:
    return P::BOOL;
  case DType::UInt8:
    return P::UINT8;
  case DType::Int32:
    return P::INT32;
  case DType::Int64:
    return P::INT64;
  case DType::Float16:
    return P::FLOAT16;
  case DType::BFloat16:
    return P::BFLOAT16;
  case DType::Float32:
    return P::FLOAT;
  case DType::Float64:
    return P::DOUBLE;
  }
  return P::UNDEFINED;
}

/// An ONNX tensor of `t`'s dtype, shape and bytes (little-endian, as ONNX's raw_data is).
onnx::TensorProto tensorProto(const std::string& name, const Tensor& t) {
  onnx::TensorProto p;
  p.set_name(name);
  p.set_data_type(onnxType(t.dtype()));
  for (int64_t d : t.sizes())
    p.add_dims(d);
  Tensor dense = t.detach().cpu().contiguous();
  p.set_raw_data(static_cast<const char*>(dense.data_ptr()),
                 static_cast<size_t>(dense.numel()) * elementSize(dense.dtype()));
  return p;
}

void setType(onnx::ValueInfoProto& v, const std::string& name, const ir::TensorType& t) {
  v.set_name(name);
  onnx::TypeProto_Tensor* tt = v.mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnxType(t.dtype));
  onnx::TensorShapeProto* shape = tt->mutable_shape();
  for (int64_t d : t.shape)
    shape->add_dim()->set_dim_value(d);
}

/// An attribute of an emitted node.
struct Attr {
  std::string name;
  std::variant<int64_t, float, std::vector<int64_t>, std::string, onnx::TensorProto> value;
};

/// Translates one graph: its inputs become graph inputs (arguments) and initializers (state), its
/// nodes one or more ONNX nodes each.
class Translator {
public:
  Translator(const ir::Graph& g, onnx::GraphProto& out, const Probe* probe)
      : g_(g), out_(out), probe_(probe), names_(g.values().size()),
        outputNames_(g.values().size()), pooled_(g.values().size()) {
    if (probe_ == nullptr) return;
    const ir::Graph& p = *probe_->graph;
    bool same = p.values().size() == g.values().size() && p.nodes().size() == g.nodes().size() &&
                p.arguments() == g.arguments() && p.state() == g.state() &&
                p.outputs() == g.outputs();
    for (size_t i = 0; same && i < g.nodes().size(); ++i)
      same = g.nodes()[i].op == p.nodes()[i].op && g.nodes()[i].operands == p.nodes()[i].operands;
    for (size_t v = 0; same && v < g.values().size(); ++v)
      same = g.values()[v].type.shape.size() == p.values()[v].type.shape.size();
    WEFT_CHECK(same, Value, "export_onnx: the function computes something else at ",
               probe_->probeRows, " rows than at ", probe_->rows,
               " (its graph's structure depends on the dynamic dimension's size), so no one ONNX "
               "graph computes it for every size");
  }

  /// Names the graph's inputs and outputs, adds the state as initializers and translates every
  /// node.
  void run(const std::vector<Tensor>& state, const OnnxOptions& options) {
    const auto& args = g_.arguments();
    WEFT_CHECK(options.input_names_.empty() || options.input_names_.size() == args.size(), Value,
               "export_onnx: ", options.input_names_.size(), " input names for ", args.size(),
               " inputs");
    WEFT_CHECK(options.output_names_.empty() || options.output_names_.size() == g_.outputs().size(),
               Value, "export_onnx: ", options.output_names_.size(), " output names for ",
               g_.outputs().size(), " outputs");
    for (size_t i = 0; i < args.size(); ++i) {
      const ValueId v = args[i];
      names_[v] = options.input_names_.empty() ? "a" + std::to_string(i) : options.input_names_[i];
      claim(names_[v]);
      declare(*out_.add_input(), names_[v], v);
      if (probe_ && dynamicArgument_.empty() && g_.type(v) != probe_->graph->type(v))
        dynamicArgument_ = names_[v];
    }
    WEFT_CHECK(!probe_ || !dynamicArgument_.empty(), Value, "export_onnx: dynamic_dim(",
               probe_ ? probe_->dim : 0, "): no argument has that dimension");
    WEFT_CHECK(state.size() == g_.state().size(), Value, "onnx_model: ", state.size(),
               " state tensors for a graph of ", g_.state().size(), " state inputs");
    for (size_t k = 0; k < state.size(); ++k) {
      const ValueId v = g_.state()[k];
      const ir::TensorType& type = g_.type(v);
      WEFT_CHECK(state[k].dtype() == type.dtype && state[k].sizes() == type.shape, Value,
                 "onnx_model: state ", k, " (", g_.value(v).name, ") is ",
                 ir::typeString({state[k].dtype(), state[k].sizes()}), ", the graph reads ",
                 ir::typeString(type));
      WEFT_CHECK(!probe_ || type == probe_->graph->type(v), Value, "export_onnx: ",
                 g_.value(v).name, ", a tensor the function makes, is sized by the dynamic "
                 "dimension (", ir::typeString(type), " at ", probe_ ? probe_->rows : 0,
                 " rows): make it from the inputs instead, so that the model computes it");
      names_[v] = g_.value(v).name;
      claim(names_[v]);
      *out_.add_initializer() = tensorProto(names_[v], state[k]);
    }
    for (size_t i = 0; i < g_.outputs().size(); ++i) {
      const ValueId v = g_.outputs()[i];
      std::string name =
          options.output_names_.empty() ? "out" + std::to_string(i) : options.output_names_[i];
      claim(name);
      // The node computing the value writes the output under its name, where it is the value's
      // first output and no input (otherwise an Identity copies it there).
      const ValueId s = source(v);
      if (!g_.isInput(s) && outputNames_[s].empty()) outputNames_[s] = name;
      outputs_.push_back(std::move(name));
    }
    for (size_t i = 0; i < g_.nodes().size(); ++i)
      translate(static_cast<int32_t>(i));
    node_ = nullptr;
    for (size_t i = 0; i < g_.outputs().size(); ++i) // after the nodes, whose errors say more
      declare(*out_.add_output(), outputs_[i], g_.outputs()[i]);
    for (size_t i = 0; i < g_.outputs().size(); ++i)
      if (names_[g_.outputs()[i]] != outputs_[i]) emitTo("Identity", {names_[g_.outputs()[i]]}, outputs_[i]);
    removeDeadNodes();
  }

private:
  const ir::Graph& g_;
  onnx::GraphProto& out_;
  const Probe* probe_;
  std::vector<std::string> names_;       // per value: its ONNX name
  std::vector<std::string> outputNames_; // per value: the graph output its node writes, if any
  std::vector<std::string> pooled_;      // per max_pool_argmax value: the max pool's values
  std::vector<std::string> outputs_;
  std::vector<std::string> taken_;
  std::string dynamicArgument_;             // the first argument holding the dynamic dimension
  std::vector<std::pair<int64_t, std::string>> rowsTimes_; // (factor, its 1-D tensor)
  const ir::Node* node_ = nullptr; // the node being translated
  int firstNode_ = 0;              // the first ONNX node it emitted
  int constants_ = 0;

  void claim(const std::string& name) {
    WEFT_CHECK(!name.empty() && std::ranges::count(taken_, name) == 0, Value,
               "export_onnx: the name '", name, "' is given twice (inputs, state and outputs "
               "need distinct names)");
    taken_.push_back(name);
  }

  [[noreturn]] void unsupported(std::string_view what) const {
    std::string where = node_->loc.known() ? " (called at " + node_->loc.text() + ")" : "";
    WEFT_FAIL(Value, "export_onnx: ONNX (opset ", kOnnxOpset, ") has no operator for ", what,
              where, "; compute it another way, or run the model with weft's runtime (export_model)");
  }

  /// Declares graph input or output `name` of value `v`'s type; the dimensions that hold the
  /// dynamic one are named ("batch", "4*batch").
  void declare(onnx::ValueInfoProto& info, const std::string& name, ValueId v) {
    setType(info, name, g_.type(v));
    if (probe_ == nullptr) return;
    const Shape& a = g_.type(v).shape;
    const Shape& b = probe_->graph->type(v).shape;
    auto* dims = info.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim();
    for (size_t d = 0; d < a.size(); ++d) {
      if (a[d] == b[d]) continue;
      const int64_t f = factorOf(a[d], b[d], "the shape of " + name);
      (*dims)[static_cast<int>(d)].set_dim_param(
          f == 1 ? probe_->name : std::to_string(f) + "*" + probe_->name);
    }
  }

  /// `f` where a dimension is `a` long in the trace and `b` in the probe: f times the dynamic
  /// dimension. Any other relation is an error.
  int64_t factorOf(int64_t a, int64_t b, const std::string& what) const {
    const int64_t step = probe_->probeRows - probe_->rows;
    const int64_t f = (b - a) / step;
    WEFT_CHECK((b - a) % step == 0 && f > 0 && a == f * probe_->rows, Value, "export_onnx: ",
               what, " is ", a, " at ", probe_->rows, " rows and ", b, " at ", probe_->probeRows,
               ": not a multiple of the dynamic dimension, so no one ONNX graph computes it",
               node_ && node_->loc.known() ? " (called at " + node_->loc.text() + ")" : "");
    return f;
  }

  /// The dynamic dimension times `f`, as a 1-D int64 tensor computed from the input holding it.
  std::string rowsTimes(int64_t f) {
    for (const auto& [factor, name] : rowsTimes_)
      if (factor == f) return name;
    std::string name;
    if (f == 1) {
      name = emit("Shape", {dynamicArgument_},
                  {{"start", probe_->dim}, {"end", probe_->dim + 1}});
    } else {
      name = emit("Mul", {rowsTimes(1), ints({f})});
    }
    rowsTimes_.emplace_back(f, name);
    return name;
  }

  /// A 1-D int64 tensor of shape `a` (the trace's), computed where the probe's `b` differs.
  std::string shapeInput(const Shape& a, const Shape& b) {
    if (a == b) return ints(a);
    std::vector<std::string> pieces;
    std::vector<int64_t> run;
    for (size_t d = 0; d < a.size(); ++d) {
      if (a[d] == b[d]) {
        run.push_back(a[d]);
        continue;
      }
      if (!run.empty()) pieces.push_back(ints(run));
      run.clear();
      pieces.push_back(rowsTimes(factorOf(a[d], b[d], std::string(opName(node_->op)) + "'s shape")));
    }
    if (!run.empty()) pieces.push_back(ints(run));
    return pieces.size() == 1 ? pieces[0] : emit("Concat", pieces, {{"axis", int64_t{0}}});
  }

  /// The probe's shape of value `v` (the trace's without a probe).
  const Shape& probeShape(ValueId v) const {
    return probe_ ? probe_->graph->type(v).shape : g_.type(v).shape;
  }
  const Shape& probeResult() const { return probeShape(node_->result); }

  /// With a probe: that the node's attributes are the probe node's, but for those the
  /// translation computes from the dynamic dimension (`allowed`).
  void checkAttributes(int32_t index) const {
    if (probe_ == nullptr) return;
    const ir::Node& other = probe_->graph->nodes()[static_cast<size_t>(index)];
    for (const auto& [key, value] : node_->attrs.items()) {
      const AttrValue& theirs = other.attrs.raw(key);
      const double* x = std::get_if<double>(&value);
      const double* y = std::get_if<double>(&theirs);
      if (theirs == value || (x && y && std::memcmp(x, y, sizeof(double)) == 0)) continue; // NaN
      const OpKind kind = opInfo(node_->op).kind;
      const bool allowed =
          (key == "shape" && (kind == OpKind::Reshape || kind == OpKind::Expand ||
                              kind == OpKind::Full)) ||
          (key == "end" && kind == OpKind::Slice) ||
          (key == "input_shape" && kind == OpKind::ConvInputGrad) ||
          (key == "size" && kind == OpKind::CheckIndex);
      WEFT_CHECK(allowed, Value, "export_onnx: ", opName(node_->op),
                 node_->loc.known() ? " (called at " + node_->loc.text() + ")" : "",
                 " depends on the dynamic dimension's size: its '", key, "' is not the same at ",
                 probe_->rows, " and ", probe_->probeRows,
                 " rows, so no one ONNX graph computes it for every size");
    }
  }

  const ir::TensorType& type(ValueId v) const { return g_.type(v); }
  const std::string& in(size_t k) const { return names_[node_->operands[k]]; }
  const ir::TensorType& inType(size_t k) const { return type(node_->operands[k]); }
  const ir::TensorType& resultType() const { return type(node_->result); }

  std::string fresh(std::string_view hint) {
    return std::string(hint) + "_" + std::to_string(out_.node_size());
  }

  onnx::NodeProto& addNode(std::string_view op, const std::vector<std::string>& inputs,
                           const std::vector<std::string>& outputs, const std::vector<Attr>& attrs) {
    onnx::NodeProto& n = *out_.add_node();
    n.set_op_type(std::string(op));
    n.set_name(std::string(op) + "_" + std::to_string(out_.node_size() - 1));
    if (node_ != nullptr && node_->loc.known()) n.set_doc_string(node_->loc.text());
    for (const std::string& i : inputs)
      n.add_input(i);
    for (const std::string& o : outputs)
      n.add_output(o);
    for (const Attr& a : attrs) {
      onnx::AttributeProto& p = *n.add_attribute();
      p.set_name(a.name);
      std::visit(
          [&](const auto& v) {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, int64_t>) {
              p.set_type(onnx::AttributeProto::INT);
              p.set_i(v);
            } else if constexpr (std::is_same_v<T, float>) {
              p.set_type(onnx::AttributeProto::FLOAT);
              p.set_f(v);
            } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
              p.set_type(onnx::AttributeProto::INTS);
              for (int64_t x : v)
                p.add_ints(x);
            } else if constexpr (std::is_same_v<T, std::string>) {
              p.set_type(onnx::AttributeProto::STRING);
              p.set_s(v);
            } else {
              p.set_type(onnx::AttributeProto::TENSOR);
              *p.mutable_t() = v;
            }
          },
          a.value);
    }
    return n;
  }

  /// Emits `op` with a fresh result name; returns it.
  std::string emit(std::string_view op, const std::vector<std::string>& inputs,
                   const std::vector<Attr>& attrs = {}) {
    std::string name = fresh(op);
    addNode(op, inputs, {name}, attrs);
    return name;
  }
  void emitTo(std::string_view op, const std::vector<std::string>& inputs, const std::string& to,
              const std::vector<Attr>& attrs = {}) {
    addNode(op, inputs, {to}, attrs);
  }

  /// The node's result is `name` (computed by a node this one emitted, or an existing value).
  void bind(const std::string& name) {
    const ValueId r = node_->result;
    const std::string& wanted = outputNames_[r];
    if (wanted.empty() || name == wanted) {
      names_[r] = name;
      return;
    }
    // A graph output: the node that made `name` for this one writes it under the output's name.
    for (int i = out_.node_size() - 1; i >= firstNode_; --i) {
      onnx::NodeProto& made = *out_.mutable_node(i);
      for (int k = 0; k < made.output_size(); ++k) {
        if (made.output(k) != name) continue;
        const bool read = std::ranges::any_of(
            out_.node().begin() + i + 1, out_.node().end(),
            [&](const onnx::NodeProto& n) { return std::ranges::count(n.input(), name) > 0; });
        if (read) break;
        made.set_output(k, wanted);
        names_[r] = wanted;
        return;
      }
    }
    emitTo("Identity", {name}, wanted);
    names_[r] = wanted;
  }

  /// Emits `op` computing the node's result.
  void result(std::string_view op, const std::vector<std::string>& inputs,
              const std::vector<Attr>& attrs = {}) {
    bind(emit(op, inputs, attrs));
  }

  /// A constant of `t`'s values, as an initializer.
  std::string constant(const Tensor& t) {
    std::string name = "const_" + std::to_string(constants_++);
    *out_.add_initializer() = tensorProto(name, t);
    return name;
  }
  std::string ints(std::initializer_list<int64_t> v) {
    return ints(std::span<const int64_t>(v.begin(), v.size()));
  }
  std::string ints(std::span<const int64_t> v) {
    Tensor t = empty({static_cast<int64_t>(v.size())}, DType::Int64);
    if (!v.empty()) std::memcpy(t.data_ptr(), v.data(), v.size_bytes());
    return constant(t);
  }
  std::string scalar(double v, DType dtype) { return constant(full({}, v, dtype)); }
  static std::vector<int64_t> vec(const Shape& s) { return {s.begin(), s.end()}; }

  std::string cast(const std::string& v, DType from, DType to) {
    if (from == to) return v;
    return emit("Cast", {v}, {{"to", static_cast<int64_t>(onnxType(to))}});
  }

  void translate(int32_t index) {
    node_ = &g_.nodes()[static_cast<size_t>(index)];
    firstNode_ = out_.node_size();
    checkAttributes(index);
    const ir::Node& n = *node_;
    switch (opInfo(n.op).kind) {
    case OpKind::Unary:
      return unary(n.op);
    case OpKind::Binary:
      return binary(n.op);
    case OpKind::Cast:
      return result("Cast", {in(0)}, {{"to", static_cast<int64_t>(onnxType(resultType().dtype))}});
    case OpKind::Identity:
      return bind(in(0));
    case OpKind::Where:
      return result("Where", {cast(in(0), inType(0).dtype, DType::Bool), in(1), in(2)});
    case OpKind::Reduce:
      return reduce(n.op);
    case OpKind::ArgReduce:
      return result(n.op == OpCode::ArgMax ? "ArgMax" : "ArgMin", {in(0)},
                    {{"axis", n.attrs.i("dim")}, {"keepdims", int64_t{n.attrs.b("keepdim")}}});
    case OpKind::Scan:
      if (n.op != OpCode::CumSum) unsupported(opName(n.op));
      return result("CumSum", {in(0), ints({n.attrs.i("dim")})});
    case OpKind::Normalize:
      if (n.op == OpCode::LogCumSumExp) unsupported(opName(n.op));
      return result(n.op == OpCode::Softmax ? "Softmax" : "LogSoftmax", {in(0)},
                    {{"axis", n.attrs.i("dim")}});
    case OpKind::Sort: {
      const int64_t dim = n.attrs.i("dim");
      const int64_t rank = static_cast<int64_t>(inType(0).shape.size());
      const size_t d = static_cast<size_t>(dim < 0 ? dim + rank : dim);
      const int64_t size = rank == 0 ? 1 : inType(0).shape[d];
      const int64_t probeSize = rank == 0 ? 1 : probeShape(node_->operands[0])[d];
      std::string k = shapeInput(Shape{size}, Shape{probeSize});
      std::string values = fresh("TopK_values"), indices = fresh("TopK_indices");
      addNode("TopK", {in(0), k}, {values, indices},
              {{"axis", dim}, {"largest", int64_t{n.attrs.b("descending")}}, {"sorted", int64_t{1}}});
      return bind(indices);
    }
    case OpKind::Reshape:
      return reshape(in(0));
    case OpKind::Permute:
      return result("Transpose", {in(0)}, {{"perm", vec(n.attrs.ints("dims"))}});
    case OpKind::Expand:
      return result("Expand", {in(0), shapeInput(resultType().shape, probeResult())});
    case OpKind::Slice: {
      int64_t end = n.attrs.i("end");
      if (probe_ && probe_->graph->nodes()[static_cast<size_t>(index)].attrs.i("end") != end) {
        // Up to the end of a dimension that holds the dynamic one: to its end at every size.
        const size_t dim = static_cast<size_t>(n.attrs.i("dim"));
        WEFT_CHECK(end == inType(0).shape[dim] &&
                       probe_->graph->nodes()[static_cast<size_t>(index)].attrs.i("end") ==
                           probeShape(n.operands[0])[dim],
                   Value, "export_onnx: slice",
                   n.loc.known() ? " (called at " + n.loc.text() + ")" : "",
                   " takes some rows of the dynamic dimension, a number that depends on its size");
        end = INT64_MAX;
      }
      return result("Slice", {in(0), ints({n.attrs.i("start")}), ints({end}),
                              ints({n.attrs.i("dim")}), ints({n.attrs.i("step")})});
    }
    case OpKind::Flip: {
      const Shape& dims = n.attrs.ints("dims");
      return result("Slice", {in(0), ints(std::vector<int64_t>(dims.size(), -1)),
                              ints(std::vector<int64_t>(dims.size(), INT64_MIN)), ints(dims),
                              ints(std::vector<int64_t>(dims.size(), -1))});
    }
    case OpKind::Pad: {
      const Shape& pads = n.attrs.ints("pads");
      std::vector<int64_t> onnxPads(pads.size());
      const size_t rank = pads.size() / 2;
      for (size_t d = 0; d < rank; ++d) {
        onnxPads[d] = pads[2 * d];
        onnxPads[rank + d] = pads[2 * d + 1];
      }
      return result("Pad", {in(0), ints(onnxPads), scalar(n.attrs.f("value"), inType(0).dtype)},
                    {{"mode", std::string("constant")}});
    }
    case OpKind::Cat: {
      std::vector<std::string> inputs;
      for (size_t k = 0; k < n.operands.size(); ++k)
        inputs.push_back(in(k));
      return result("Concat", inputs, {{"axis", n.attrs.i("dim")}});
    }
    case OpKind::MatMul:
      return result("MatMul", {in(0), in(1)});
    case OpKind::Conv:
      return result("Conv", {in(0), in(1)}, convAttrs(inType(1).shape));
    case OpKind::ConvInputGrad:
      return convTranspose();
    case OpKind::ConvWeightGrad:
      unsupported("conv_weight_grad (a convolution's weight gradient: ONNX export is for inference)");
    case OpKind::Gather:
      return gather();
    case OpKind::Scatter:
      return scatter(n.op);
    case OpKind::IndexSelect: {
      // A 0-d index selects one entry and keeps the dimension (ONNX's Gather would drop it).
      std::string picked = inType(1).shape.empty() ? emit("Reshape", {in(1), ints({1})}) : in(1);
      return result("Gather", {in(0), picked}, {{"axis", n.attrs.i("dim")}});
    }
    case OpKind::IndexAdd:
      return indexAdd();
    case OpKind::CheckIndex: {
      if (!n.attrs.b("wrap")) return bind(in(0));
      const int64_t size = n.attrs.i("size");
      const int64_t probeSize =
          probe_ ? probe_->graph->nodes()[static_cast<size_t>(index)].attrs.i("size") : size;
      // A 0-d size: of the dynamic dimension, computed from it.
      std::string bound = size == probeSize
                              ? scalar(static_cast<double>(size), DType::Int64)
                              : emit("Reshape", {shapeInput(Shape{size}, Shape{probeSize}),
                                                 ints(std::span<const int64_t>())});
      std::string negative = emit("Less", {in(0), scalar(0, DType::Int64)});
      std::string wrapped = emit("Add", {in(0), bound});
      return result("Where", {negative, wrapped, in(0)});
    }
    case OpKind::Matrix:
      if (n.op != OpCode::Det) unsupported(opName(n.op));
      return result("Det", {in(0)});
    case OpKind::Pool:
      return maxPool();
    case OpKind::Full:
      return fullConstant();
    case OpKind::Random:
      return random(n.op);
    case OpKind::ArgScan:
      unsupported(opName(n.op));
    }
    unsupported(opName(n.op));
  }

  /// Reshapes `v` to the node's result shape: -1 where one dimension holds the dynamic one,
  /// computed where more do.
  void reshape(const std::string& v) {
    const Shape& shape = resultType().shape;
    const Shape& probe = probeResult();
    std::vector<Attr> attrs;
    if (std::ranges::count(shape, 0) > 0) attrs.push_back({"allowzero", int64_t{1}});
    size_t differ = 0, at = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      if (shape[d] != probe[d]) differ++, at = d;
    if (differ == 1 && attrs.empty()) {
      std::vector<int64_t> target = vec(shape);
      target[at] = -1;
      return result("Reshape", {v, ints(target)});
    }
    result("Reshape", {v, shapeInput(shape, probe)}, attrs);
  }

  void unary(OpCode op) {
    const DType rt = resultType().dtype;
    const UnaryDomain domain = opInfo(op).unaryDomain;
    std::string x = in(0);
    if (domain == UnaryDomain::Logical || (op == OpCode::BitwiseNot && rt == DType::Bool)) {
      return result("Not", {cast(x, inType(0).dtype, DType::Bool)});
    }
    x = cast(x, inType(0).dtype, rt);
    const bool integral = !isFloating(rt);
    switch (op) {
    case OpCode::Neg: return result("Neg", {x});
    case OpCode::Abs: return result("Abs", {x});
    case OpCode::Sign: return result("Sign", {x});
    case OpCode::Relu: return result("Relu", {x});
    case OpCode::Exp: return result("Exp", {x});
    case OpCode::Log: return result("Log", {x});
    case OpCode::Sqrt: return result("Sqrt", {x});
    case OpCode::Sin: return result("Sin", {x});
    case OpCode::Cos: return result("Cos", {x});
    case OpCode::Tan: return result("Tan", {x});
    case OpCode::Asin: return result("Asin", {x});
    case OpCode::Acos: return result("Acos", {x});
    case OpCode::Atan: return result("Atan", {x});
    case OpCode::Sinh: return result("Sinh", {x});
    case OpCode::Cosh: return result("Cosh", {x});
    case OpCode::Asinh: return result("Asinh", {x});
    case OpCode::Acosh: return result("Acosh", {x});
    case OpCode::Atanh: return result("Atanh", {x});
    case OpCode::Tanh: return result("Tanh", {x});
    case OpCode::Sigmoid: return result("Sigmoid", {x});
    case OpCode::Erf: return result("Erf", {x});
    case OpCode::Reciprocal: return result("Reciprocal", {x});
    case OpCode::Floor: return integral ? bind(x) : result("Floor", {x});
    case OpCode::Ceil: return integral ? bind(x) : result("Ceil", {x});
    case OpCode::Round: return integral ? bind(x) : result("Round", {x});
    case OpCode::Trunc:
      if (integral) return bind(x);
      return result("Where", {emit("Less", {x, scalar(0, rt)}), emit("Ceil", {x}), emit("Floor", {x})});
    case OpCode::Rsqrt: return result("Reciprocal", {emit("Sqrt", {x})});
    case OpCode::Log2: return result("Div", {emit("Log", {x}), scalar(std::log(2.0), rt)});
    case OpCode::Log10: return result("Div", {emit("Log", {x}), scalar(std::log(10.0), rt)});
    case OpCode::Exp2: return result("Pow", {scalar(2, rt), x});
    case OpCode::Log1p: return result("Log", {emit("Add", {x, scalar(1, rt)})});
    case OpCode::Expm1: return result("Sub", {emit("Exp", {x}), scalar(1, rt)});
    case OpCode::Erfc: return result("Sub", {scalar(1, rt), emit("Erf", {x})});
    default:
      unsupported(opName(op));
    }
  }

  void binary(OpCode op) {
    const BinaryResult kind = opInfo(op).binaryResult;
    const DType rt = resultType().dtype;
    const bool logical = op == OpCode::LogicalAnd || op == OpCode::LogicalOr ||
                         op == OpCode::LogicalXor ||
                         ((op == OpCode::BitwiseAnd || op == OpCode::BitwiseOr ||
                           op == OpCode::BitwiseXor) && rt == DType::Bool);
    DType operand = inType(0).dtype;
    if (logical) operand = DType::Bool;
    else if (kind != BinaryResult::Bool) operand = rt;
    const std::string a = cast(in(0), inType(0).dtype, operand);
    const std::string b = cast(in(1), inType(1).dtype, operand);
    switch (op) {
    case OpCode::Add: return result("Add", {a, b});
    case OpCode::Sub: return result("Sub", {a, b});
    case OpCode::Mul: return result("Mul", {a, b});
    case OpCode::Div: return result("Div", {a, b});
    case OpCode::Pow: return result("Pow", {a, b});
    case OpCode::Maximum: return result("Max", {a, b});
    case OpCode::Minimum: return result("Min", {a, b});
    case OpCode::Fmod: return result("Mod", {a, b}, {{"fmod", int64_t{1}}});
    case OpCode::Eq: return result("Equal", {a, b});
    case OpCode::Ne: return result("Not", {emit("Equal", {a, b})});
    case OpCode::Lt: return result("Less", {a, b});
    case OpCode::Le: return result("LessOrEqual", {a, b});
    case OpCode::Gt: return result("Greater", {a, b});
    case OpCode::Ge: return result("GreaterOrEqual", {a, b});
    case OpCode::LogicalAnd:
    case OpCode::BitwiseAnd:
      if (!logical) unsupported(opName(op));
      return result("And", {a, b});
    case OpCode::LogicalOr:
    case OpCode::BitwiseOr:
      if (!logical) unsupported(opName(op));
      return result("Or", {a, b});
    case OpCode::LogicalXor:
    case OpCode::BitwiseXor:
      if (!logical) unsupported(opName(op));
      return result("Xor", {a, b});
    case OpCode::FloorDivide: {
      if (isFloating(operand)) {
        // As weft's kernel (and PyTorch's): from fmod, so that 1.0 // 0.1 is 9, not 10.
        std::string zero = scalar(0, operand);
        std::string mod = emit("Mod", {a, b}, {{"fmod", int64_t{1}}});
        std::string div = emit("Div", {emit("Sub", {a, mod}), b});
        std::string opposite = emit("And", {emit("Not", {emit("Equal", {mod, zero})}),
                                            emit("Xor", {emit("Less", {b, zero}),
                                                         emit("Less", {mod, zero})})});
        div = emit("Sub", {div, cast(opposite, DType::Bool, operand)});
        std::string floor = emit("Floor", {div});
        std::string up = emit("Greater", {emit("Sub", {div, floor}), scalar(0.5, operand)});
        floor = emit("Add", {floor, cast(up, DType::Bool, operand)});
        std::string quotient = emit("Div", {a, b});
        std::string signedZero = emit("Mul", {zero, quotient}); // copysign(0, a / b)
        std::string byZero = emit("Equal", {b, zero});          // IEEE division's inf and NaN
        return result("Where", {byZero, quotient,
                                emit("Where", {emit("Equal", {div, zero}), signedZero, floor})});
      }
      // Integers: ONNX's Div truncates; floor division is one less where the remainder is
      // not zero and the signs differ.
      std::string q = emit("Div", {a, b});
      std::string r = emit("Mod", {a, b}, {{"fmod", int64_t{1}}});
      std::string zero = scalar(0, operand);
      std::string inexact = emit("Not", {emit("Equal", {r, zero})});
      std::string signs = emit("Xor", {emit("Less", {a, zero}), emit("Less", {b, zero})});
      std::string adjust = cast(emit("And", {inexact, signs}), DType::Bool, operand);
      return result("Sub", {q, adjust});
    }
    default:
      unsupported(opName(op));
    }
  }

  void reduce(OpCode op) {
    const ir::Node& n = *node_;
    const Shape& dims = n.attrs.ints("dims");
    const std::string x = cast(in(0), inType(0).dtype, resultType().dtype);
    const int64_t keep = n.attrs.b("keepdim") ? 1 : 0;
    if (op == OpCode::Sum) {
      std::vector<std::string> inputs{x};
      if (!dims.empty()) inputs.push_back(ints(dims));
      return result("ReduceSum", inputs, {{"keepdims", keep}});
    }
    const char* name = op == OpCode::Prod ? "ReduceProd" : op == OpCode::AMax ? "ReduceMax" : "ReduceMin";
    std::vector<Attr> attrs{{"keepdims", keep}};
    if (!dims.empty()) attrs.push_back({"axes", std::vector<int64_t>(dims.begin(), dims.end())});
    result(name, {x}, attrs);
  }

  std::vector<Attr> convAttrs(const Shape& weight) {
    const ir::Node& n = *node_;
    const Shape& padding = n.attrs.ints("padding");
    std::vector<int64_t> pads(padding.begin(), padding.end());
    pads.insert(pads.end(), padding.begin(), padding.end());
    return {{"kernel_shape", std::vector<int64_t>(weight.begin() + 2, weight.end())},
            {"strides", vec(n.attrs.ints("stride"))},
            {"pads", pads},
            {"dilations", vec(n.attrs.ints("dilation"))},
            {"group", n.attrs.i("groups")}};
  }

  /// conv_input_grad (conv_transpose's forward): ConvTranspose, its output padding what makes the
  /// input's shape.
  void convTranspose() {
    const ir::Node& n = *node_;
    const Shape& g = inType(0).shape;
    const Shape& w = inType(1).shape;
    const Shape& target = resultType().shape;
    const Shape& stride = n.attrs.ints("stride");
    const Shape& padding = n.attrs.ints("padding");
    const Shape& dilation = n.attrs.ints("dilation");
    std::vector<int64_t> outputPadding;
    for (size_t d = 0; d + 2 < g.size(); ++d) {
      const int64_t natural =
          (g[d + 2] - 1) * stride[d] - 2 * padding[d] + dilation[d] * (w[d + 2] - 1) + 1;
      outputPadding.push_back(target[d + 2] - natural);
    }
    std::vector<Attr> attrs = convAttrs(w);
    attrs.push_back({"output_padding", outputPadding});
    result("ConvTranspose", {in(0), in(1)}, attrs);
  }

  /// max_pool_argmax: MaxPool's indices (ONNX counts them over the whole tensor, weft per plane);
  /// its values are kept for the gather that reads the maxima through them.
  void maxPool() {
    const ir::Node& n = *node_;
    const Shape& x = inType(0).shape;
    const Shape& padding = n.attrs.ints("padding");
    // The windows weft's output has (ceil_mode's last window starts inside the input, as in
    // PyTorch, a rule ONNX's ceil_mode lacks): floor mode over enough padding at the end.
    const Shape& kernel = n.attrs.ints("kernel_size");
    const Shape& stride = n.attrs.ints("stride");
    const Shape& dilation = n.attrs.ints("dilation");
    const Shape& out = resultType().shape;
    const size_t lead = x.size() - padding.size();
    std::vector<int64_t> pads(padding.begin(), padding.end());
    for (size_t d = 0; d < padding.size(); ++d) {
      const int64_t reach = (out[lead + d] - 1) * stride[d] + dilation[d] * (kernel[d] - 1) + 1;
      pads.push_back(std::max(padding[d], reach - x[lead + d] - padding[d]));
    }
    std::string values = fresh("MaxPool_values"), indices = fresh("MaxPool_indices");
    addNode("MaxPool", {in(0)}, {values, indices},
            {{"kernel_shape", vec(kernel)},
             {"strides", vec(stride)},
             {"pads", pads},
             {"dilations", vec(dilation)}});
    pooled_[n.result] = values;
    const auto spatial = static_cast<std::ptrdiff_t>(padding.size());
    const int64_t plane = std::accumulate(x.end() - spatial, x.end(), int64_t{1}, std::multiplies<>());
    const Shape& probe = probeShape(n.operands[0]);
    WEFT_CHECK(std::equal(x.end() - spatial, x.end(), probe.end() - spatial), Value,
               "export_onnx: max pooling",
               n.loc.known() ? " (called at " + n.loc.text() + ")" : "",
               " over the dynamic dimension: its indices would depend on the size");
    result("Mod", {indices, scalar(static_cast<double>(plane), DType::Int64)});
  }

  /// The node that computes `v`, looking through stop_gradient.
  const ir::Node* producer(ValueId v) const {
    const int32_t p = g_.value(v).producer;
    if (p < 0) return nullptr;
    const ir::Node* n = &g_.nodes()[static_cast<size_t>(p)];
    return n->op == OpCode::StopGradient ? producer(n->operands[0]) : n;
  }

  /// Whether `shape` is `x`'s with its last `spatial` dims flattened into one.
  static bool flattensPlanes(const Shape& shape, const Shape& x, size_t spatial) {
    if (spatial == 0 || x.size() < spatial || shape.size() != x.size() - spatial + 1) return false;
    const size_t lead = x.size() - spatial;
    int64_t plane = 1;
    for (size_t d = lead; d < x.size(); ++d)
      plane *= x[d];
    return std::equal(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(lead), shape.begin()) &&
           shape.back() == plane;
  }

  /// `v`, or what it is a stop_gradient of.
  ValueId source(ValueId v) const {
    const int32_t p = g_.value(v).producer;
    if (p < 0 || g_.nodes()[static_cast<size_t>(p)].op != OpCode::StopGradient) return v;
    return source(g_.nodes()[static_cast<size_t>(p)].operands[0]);
  }

  /// gather: GatherElements, or, where it reads a max pool's input at its argmax (max_pool2d's
  /// values), the max pool's values reshaped.
  void gather() {
    const ir::Node& n = *node_;
    const ir::Node* data = producer(n.operands[0]);
    const ir::Node* index = producer(n.operands[1]);
    const ir::Node* argmax = index && index->op == OpCode::Reshape ? producer(index->operands[0]) : nullptr;
    if (data && data->op == OpCode::Reshape && argmax && argmax->op == OpCode::MaxPoolArgmax &&
        source(argmax->operands[0]) == source(data->operands[0]) && !pooled_[argmax->result].empty() &&
        flattensPlanes(data->attrs.ints("shape"), type(argmax->operands[0]).shape,
                       argmax->attrs.ints("kernel_size").size()) &&
        n.attrs.i("dim") == static_cast<int64_t>(resultType().shape.size()) - 1) {
      return reshape(pooled_[argmax->result]);
    }
    result("GatherElements", {in(0), in(1)}, {{"axis", n.attrs.i("dim")}});
  }

  void scatter(OpCode op) {
    const ir::Node& n = *node_;
    std::string reduction = op == OpCode::Scatter       ? "none"
                            : op == OpCode::ScatterAdd  ? "add"
                            : op == OpCode::ScatterProd ? "mul"
                                                        : "";
    if (reduction.empty()) unsupported(opName(op));
    // ONNX's updates have the index's shape; torch's source may be larger (its corner is read).
    std::string src = in(2);
    const Shape& index = inType(1).shape;
    if (inType(2).shape != index || probeShape(n.operands[2]) != probeShape(n.operands[1])) {
      src = emit("Slice", {src, ints(std::vector<int64_t>(index.size(), 0)),
                           shapeInput(index, probeShape(n.operands[1])), ints(iota(index.size()))});
    }
    result("ScatterElements", {in(0), in(1), src},
           {{"axis", n.attrs.i("dim")}, {"reduction", reduction}});
  }

  static std::vector<int64_t> iota(size_t n) {
    std::vector<int64_t> v(n);
    std::iota(v.begin(), v.end(), 0);
    return v;
  }

  /// index_add: ScatterElements adding the source at its index broadcast along the other dims.
  void indexAdd() {
    const ir::Node& n = *node_;
    const Shape& src = inType(2).shape;
    const Shape& probe = probeShape(n.operands[2]);
    const int64_t dim = n.attrs.i("dim");
    Shape along(std::vector<int64_t>(src.size(), 1)), probeAlong = along;
    if (!src.empty()) {
      along[static_cast<size_t>(dim)] = src[static_cast<size_t>(dim)];
      probeAlong[static_cast<size_t>(dim)] = probe[static_cast<size_t>(dim)];
    }
    std::string index = emit("Reshape", {in(1), shapeInput(along, probeAlong)});
    index = emit("Expand", {index, shapeInput(src, probe)});
    result("ScatterElements", {in(0), index, in(2)},
           {{"axis", dim}, {"reduction", std::string("add")}});
  }

  void fullConstant() {
    const ir::Node& n = *node_;
    const ir::TensorType& t = resultType();
    // An integer value exactly (int64 past 2^53, INT64_MAX as a sentinel), else the number.
    const int64_t* integer = n.attrs.tryGet<int64_t>("value");
    const Scalar value = integer ? Scalar(*integer) : Scalar(n.attrs.number("value"));
    int64_t numel = 1;
    for (int64_t d : t.shape)
      numel *= d;
    const bool dynamic = t.shape != probeResult();
    if ((numel <= 16 && !dynamic) || t.dtype == DType::BFloat16) {
      WEFT_CHECK(!dynamic, Value, "export_onnx: a bfloat16 constant sized by the dynamic dimension",
                 n.loc.known() ? " (called at " + n.loc.text() + ")" : "",
                 ": ONNX's ConstantOfShape makes no bfloat16");
      return bind(constant(full(t.shape, value, t.dtype)));
    }
    onnx::TensorProto one = tensorProto("", full({1}, value, t.dtype));
    result("ConstantOfShape", {shapeInput(t.shape, probeResult())}, {{"value", one}});
  }

  void random(OpCode op) {
    const ir::Node& n = *node_;
    const ir::TensorType& t = resultType();
    if (t.dtype != DType::Float32 && t.dtype != DType::Float64 && t.dtype != DType::Float16)
      unsupported(std::string(opName(op)) + " of " + std::string(dtypeName(t.dtype)));
    std::vector<Attr> attrs{{"shape", std::vector<int64_t>(t.shape.begin(), t.shape.end())},
                            {"dtype", static_cast<int64_t>(onnxType(t.dtype))}};
    if (op == OpCode::Uniform) {
      attrs.push_back({"low", static_cast<float>(n.attrs.f("low"))});
      attrs.push_back({"high", static_cast<float>(n.attrs.f("high"))});
      return result("RandomUniform", {}, attrs);
    }
    attrs.push_back({"mean", static_cast<float>(n.attrs.f("mean"))});
    attrs.push_back({"scale", static_cast<float>(n.attrs.f("std"))});
    result("RandomNormal", {}, attrs);
  }

  /// Drops nodes whose results nothing reads (a max pool's indices where its values serve), and
  /// initializers no node reads.
  void removeDeadNodes() {
    std::unordered_set<std::string> live(outputs_.begin(), outputs_.end());
    auto isLive = [&](const std::string& s) { return live.contains(s); };
    std::vector<bool> keep(static_cast<size_t>(out_.node_size()), false);
    for (int i = out_.node_size() - 1; i >= 0; --i) {
      const onnx::NodeProto& n = out_.node(i);
      if (!std::ranges::any_of(n.output(), isLive)) continue;
      keep[static_cast<size_t>(i)] = true;
      for (const std::string& s : n.input())
        live.insert(s);
    }
    google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
    for (int i = 0; i < out_.node_size(); ++i) {
      if (!keep[static_cast<size_t>(i)]) continue;
      onnx::NodeProto& n = *out_.mutable_node(i);
      // MaxPool computes its optional indices only where they are read.
      if (n.op_type() == "MaxPool" && n.output_size() == 2 && !isLive(n.output(1)))
        n.mutable_output()->RemoveLast();
      nodes.Add(std::move(n));
    }
    out_.mutable_node()->Swap(&nodes);
    google::protobuf::RepeatedPtrField<onnx::TensorProto> inits;
    for (onnx::TensorProto& t : *out_.mutable_initializer())
      if (isLive(t.name())) inits.Add(std::move(t));
    out_.mutable_initializer()->Swap(&inits);
  }
};

} // namespace

void translateGraph(const ir::Graph& g, const Probe* probe, const std::vector<Tensor>& state,
                    const OnnxOptions& options, onnx::GraphProto& out) {
  Translator(g, out, probe).run(state, options);
}

} // namespace weft::onnx_export
