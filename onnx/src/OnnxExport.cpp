// ONNX export: a traced graph, cleaned by compile()'s first graph passes, translated op by op
// (OnnxTranslate.cpp), checked with ONNX's checker and strict shape inference, written atomically.
#include "weft/Onnx.h"

#include "OnnxTranslate.h"

#include "weft/Autograd.h"
#include "weft/passes/Pass.h"
#include "weft/runtime/AtomicFile.h"
#include "weft/runtime/InputFile.h"

#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <optional>

namespace weft {
namespace {

using onnx_export::Probe;

/// Runs ONNX's checker and strict shape inference on `model`; a problem is weft's (an internal
/// error naming it).
void checkModel(const onnx::ModelProto& model) {
  try {
    onnx::checker::check_model(model);
    // Shape inference on a copy of the graph without the weights' bytes (never copied): the
    // weights become typed inputs, small constants stay (shapes and axes read their values).
    onnx::ModelProto copy;
    *copy.mutable_opset_import() = model.opset_import();
    copy.set_ir_version(model.ir_version());
    onnx::GraphProto& g = *copy.mutable_graph();
    const onnx::GraphProto& whole = model.graph();
    *g.mutable_node() = whole.node();
    *g.mutable_input() = whole.input();
    *g.mutable_output() = whole.output();
    for (const onnx::TensorProto& t : whole.initializer()) {
      if (t.raw_data().size() <= 64) {
        *g.add_initializer() = t;
        continue;
      }
      onnx::ValueInfoProto& v = *g.add_input();
      v.set_name(t.name());
      auto* tt = v.mutable_type()->mutable_tensor_type();
      tt->set_elem_type(t.data_type());
      for (int64_t d : t.dims())
        tt->mutable_shape()->add_dim()->set_dim_value(d);
    }
    onnx::ShapeInferenceOptions options(/*check_type=*/true, /*strict_mode=*/1);
    onnx::shape_inference::InferShapes(copy, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception& e) {
    WEFT_FAIL(Internal, "export_onnx: the ONNX model weft made does not check: ", e.what());
  }
}

/// compile()'s first graph passes: identities gone, constants folded, one node per distinct
/// computation.
ir::Graph cleaned(const ir::Graph& graph) {
  ir::Graph g = graph;
  passes::PassManager pm;
  for (const char* name : {"simplify", "fold", "simplify", "cse", "dce"})
    pm.add(passes::createPass(name));
  if (auto r = pm.run(g); !r) throwError(r.diagnostic().kind, r.diagnostic().message);
  return g;
}

/// The serialized, checked model of `graph` (and, for a dynamic dimension, of its probe).
std::string buildModel(const ir::Graph& graph, const std::vector<Tensor>& state,
                       const OnnxOptions& options, std::optional<Probe> probe) {
  WEFT_CHECK(graph.stateUpdates().empty(), Value, "export_onnx: the function updates state (",
             graph.stateUpdates().empty() ? "" : graph.value(graph.stateUpdates()[0].state).name,
             "); an ONNX model is a pure function: export the model in eval mode");
  ir::Graph g = cleaned(graph);
  std::optional<ir::Graph> probeGraph;
  if (probe) {
    probeGraph = cleaned(*probe->graph);
    probe->graph = &*probeGraph;
  }
  onnx::ModelProto model;
  model.set_ir_version(8); // the IR version of opset 17
  model.set_producer_name("weft");
  model.set_producer_version(WEFT_VERSION_STRING);
  onnx::OperatorSetIdProto& opset = *model.add_opset_import();
  opset.set_domain("");
  opset.set_version(kOnnxOpset);
  onnx::GraphProto& out = *model.mutable_graph();
  out.set_name(options.graph_name_);
  onnx_export::translateGraph(g, probe ? &*probe : nullptr, state, options, out);
  checkModel(model);
  WEFT_CHECK(model.ByteSizeLong() < (size_t{2} << 30), Value,
             "export_onnx: the model is over 2 GB, past what one protobuf message holds");
  std::string bytes;
  model.SerializeToString(&bytes);
  return bytes;
}

/// Names a trace's state inputs by `module`'s names; tensors the function made are its constants.
void nameState(TraceResult& traced, const nn::Module& module) {
  const nn::NamedTensors named = detail::moduleStateNames(module);
  ir::Graph& g = *traced.graph;
  int constants = 0;
  for (size_t k = 0; k < traced.state.size(); ++k) {
    std::string name;
    for (const auto& [n, t] : named)
      if (t.defined() && t.is_same(traced.state[k])) name = n;
    if (name.empty()) name = "constant." + std::to_string(constants++);
    g.renameInput(g.state()[k], name);
  }
}

/// The rows of the example inputs' dynamic dimension, which must agree, to trace at: two at least
/// (at one, the simplifier drops the broadcasts a size of 1 makes no-ops).
int64_t tracedRows(const OnnxOptions& options, const std::vector<Tensor>& example_inputs,
                   std::source_location loc) {
  CallSite cs(loc);
  const int64_t dim = *options.dynamic_dim_;
  WEFT_CHECK(dim >= 0, Value, "export_onnx: dynamic_dim must be >= 0, got ", dim);
  int64_t rows = -1;
  for (size_t i = 0; i < example_inputs.size(); ++i) {
    if (!detail::isDynamicArgument(dim, options.dynamic_arguments_, i, example_inputs[i]))
      continue;
    const int64_t n = example_inputs[i].size(dim);
    WEFT_CHECK(rows < 0 || n == rows, Value, "export_onnx: dynamic_dim(", dim, "): input ", i,
               " has ", n, " rows there, another input ", rows);
    rows = n;
  }
  WEFT_CHECK(rows >= 1, Value, "export_onnx: dynamic_dim(", dim,
             "): no example input has that dimension, or it is empty");
  return std::max<int64_t>(rows, 2);
}

/// That the tensors the function makes are the same at `rows` and one row more, but for those
/// sized by the dimension (the translation names those): a constant computed from the size
/// would be baked into the model.
void checkConstantsAgree(const TraceResult& traced, const TraceResult& probed, int64_t rows) {
  WEFT_CHECK(probed.state.size() == traced.state.size(), Value,
             "export_onnx: the function reads other tensors at ", rows + 1, " rows than at ", rows,
             ", so no one ONNX graph computes it for every size");
  for (size_t k = 0; k < traced.state.size(); ++k) {
    const Tensor& a = traced.state[k];
    const Tensor& b = probed.state[k];
    if (a.is_same(b) || a.sizes() != b.sizes() || a.dtype() != b.dtype()) continue;
    WEFT_CHECK(a.cpu().equal(b.cpu()), Value, "export_onnx: ",
               traced.graph->value(traced.graph->state()[k]).name,
               ", a tensor the function makes, holds other values at ", rows + 1, " rows than at ",
               rows, " (it is computed from the size): make it from the inputs instead, so that "
               "the model computes it");
  }
}

} // namespace

std::string onnx_model(const ir::Graph& graph, const std::vector<Tensor>& state,
                       const OnnxOptions& options, std::source_location loc) {
  CallSite cs(loc);
  return detail::convertStdExceptions("onnx_model", [&] {
    WEFT_CHECK(!options.dynamic_dim_, Value,
               "onnx_model: a graph has static shapes; export_onnx() exports a dynamic dimension");
    return buildModel(graph, state, options, std::nullopt);
  });
}

void export_onnx(nn::Module& module, const TensorFunction& forward,
                 const std::vector<Tensor>& example_inputs, const std::string& path,
                 const OnnxOptions& options, std::source_location loc) {
  // No CallSite around the traces: each node keeps the line that called its op (an unsupported
  // op's error names it); trace() and the checks below name `loc` in their own errors.
  detail::convertStdExceptions("export_onnx", [&] {
    detail::TrainingMode eval(module, false);
    NoGradGuard noGrad;
    const std::vector<size_t>& which = options.dynamic_arguments_;
    const int64_t rows = options.dynamic_dim_ ? tracedRows(options, example_inputs, loc) : 0;
    auto withRows = [&](int64_t n) {
      return detail::withRows(example_inputs, *options.dynamic_dim_, which, n);
    };
    TraceResult traced = trace(forward, rows > 0 ? withRows(rows) : example_inputs, loc);
    nameState(traced, module);
    std::optional<Probe> probe;
    TraceResult probed;
    if (rows > 0) { // the same function at one row more: what changes is the dynamic dimension
      probed = trace(forward, withRows(rows + 1), loc);
      CallSite cs(loc);
      checkConstantsAgree(traced, probed, rows);
      probe = Probe{probed.graph.get(), rows, rows + 1, *options.dynamic_dim_,
                    options.dynamic_name_};
    }
    CallSite cs(loc);
    std::string bytes = buildModel(*traced.graph, traced.state, options, probe);
    detail::AtomicFile file(path, "export_onnx: '" + path + "': ");
    file.write(bytes.data(), bytes.size());
    file.commit();
  });
}

} // namespace weft
