// ONNX export: a module's forward (or a traced graph) as an ONNX model (opset 17) that other
// runtimes (onnxruntime, TensorRT, OpenVINO, ...) load. Inference only; library weft::onnx, the
// one room that links the ONNX schema library and protobuf's full runtime.
#pragma once

#include "weft/Export.h"

#include <optional>
#include <string>
#include <vector>

namespace weft {

namespace ir {
class Graph;
}

/// Options for export_onnx(), spelled like torch.onnx.export's arguments.
struct OnnxOptions {
  std::vector<std::string> input_names_, output_names_;
  /// The names the model's inputs and outputs have (default a0, a1, ... and out0, out1, ...).
  OnnxOptions& input_names(std::vector<std::string> names) {
    input_names_ = std::move(names);
    return *this;
  }
  OnnxOptions& output_names(std::vector<std::string> names) {
    output_names_ = std::move(names);
    return *this;
  }
  std::optional<int64_t> dynamic_dim_;
  std::vector<size_t> dynamic_arguments_;
  std::string dynamic_name_ = "batch";
  /// Exports the model for any size along dimension `dim` of the arguments listed (every argument
  /// with more than `dim` dims when empty), as torch.onnx.export's dynamic_axes: that dimension of
  /// the inputs and of the outputs that follow it is named `name` in the model, and the shapes the
  /// model computes with are computed from it. The function is traced at the example inputs' size
  /// and at one row more; an op whose attributes change otherwise (a constant of the batch's size,
  /// a slice of some rows) is a ValueError naming it and its line.
  OnnxOptions& dynamic_dim(int64_t dim, std::vector<size_t> arguments = {},
                           std::string name = "batch") {
    dynamic_dim_ = dim;
    dynamic_arguments_ = std::move(arguments);
    dynamic_name_ = std::move(name);
    return *this;
  }
  std::string graph_name_ = "main";
  /// The ONNX graph's name.
  OnnxOptions& graph_name(std::string name) {
    graph_name_ = std::move(name);
    return *this;
  }
};

/// The ONNX opset export_onnx() writes.
inline constexpr int64_t kOnnxOpset = 17;

/// Traces `forward` (a function of tensors shaped like `example_inputs`, reading `module`'s
/// parameters and buffers) in eval mode without autograd, as export_model() does, and writes it to
/// `path` as an ONNX model (opset 17), atomically: the weights as initializers named as
/// `module.named_parameters()` and `named_buffers()` name them (other captured tensors
/// "constant.N"), each node's source line in its doc_string. The shapes are the example inputs',
/// but for a dynamic dimension (OnnxOptions::dynamic_dim).
/// An op ONNX cannot express is a ValueError naming it and the line that called it; so is a
/// function that reads tensor values or updates state. The model is checked with ONNX's checker
/// and strict shape inference before it is written.
void export_onnx(nn::Module& module, const TensorFunction& forward,
                 const std::vector<Tensor>& example_inputs, const std::string& path,
                 const OnnxOptions& options = {}, WEFT_LOC);

/// export_onnx() of a module holder's forward (nn::Sequential, nn::LSTM, a WEFT_MODULE
/// holder) taking one tensor per example input; a forward returning a tuple exports its tensors.
template <typename Holder>
requires requires(Holder& h) { h.ptr(); }
void export_onnx(Holder& module, const std::vector<Tensor>& example_inputs,
                 const std::string& path, const OnnxOptions& options = {}, WEFT_LOC) {
  export_onnx(*module.ptr(), detail::holderForward(module.ptr(), "export_onnx"), example_inputs,
              path, options, loc);
}

/// The ONNX model (serialized ModelProto) of a graph (trace()'s, or text IR read with
/// ir::parseGraph) whose state inputs read `state` (in order; each input named as the graph
/// names it), its shapes static. Errors as export_onnx()'s.
std::string onnx_model(const ir::Graph& graph, const std::vector<Tensor>& state,
                       const OnnxOptions& options = {}, WEFT_LOC);

} // namespace weft
