// export_model() and load_state(): compile() for inference, the module's names for its state,
// and the runtime's artifact writer.
#include "weft/Export.h"

#include "weft/Autograd.h"
#include "weft/Functions.h"
#include "weft/runtime/Artifact.h"
#include "weft/runtime/InputFile.h"

#include <cstring>
#include <memory>

namespace weft {
namespace {

/// The name each of `state` has in `module` (its parameters', then its buffers' names), or
/// "constant.<i>" for tensors the function captured that the module does not hold.
std::vector<std::string> stateNames(const nn::Module& module, const std::vector<Tensor>& state) {
  nn::NamedTensors named = module.named_parameters();
  for (auto& b : module.named_buffers())
    named.push_back(std::move(b));
  std::vector<std::string> names;
  int constants = 0;
  for (const Tensor& t : state) {
    std::string name;
    for (const auto& [n, held] : named)
      if (held.is_same(t)) {
        name = n;
        break;
      }
    names.push_back(name.empty() ? "constant." + std::to_string(constants++) : name);
  }
  return names;
}

/// Restores a module's training mode when it goes out of scope.
class EvalMode {
public:
  explicit EvalMode(nn::Module& m) : module_(m), training_(m.is_training()) { m.eval(); }
  ~EvalMode() { module_.train(training_); }
  EvalMode(const EvalMode&) = delete;
  EvalMode& operator=(const EvalMode&) = delete;

private:
  nn::Module& module_;
  bool training_;
};

} // namespace

void export_model(nn::Module& module, const TensorFunction& forward,
                  const std::vector<Tensor>& example_inputs, const std::string& path,
                  const ExportOptions& options, std::source_location loc) {
  CallSite cs(loc);
  detail::convertStdExceptions("export_model", [&] {
    EvalMode eval(module);
    NoGradGuard noGrad;
    CompiledFunction compiled(CompileOptions().cpu_target(options.cpu_target_).fullgraph(), loc);
    compiled.call(example_inputs, forward, loc);
    std::shared_ptr<const Executable> exe = compiled.executable();
    WEFT_CHECK(exe != nullptr, Value, "export_model: the function was not compiled");
    Executable program = *exe;
    program.ir = compiled.graph_text();
    auto rename = [](std::vector<ExecutableValue>& values, const std::vector<std::string>& names,
                     const char* what) {
      if (names.empty()) return;
      WEFT_CHECK(names.size() == values.size(), Value, "export_model: ", names.size(), " ", what,
                 " names for ", values.size(), " ", what, "s");
      for (size_t i = 0; i < names.size(); ++i)
        values[i].name = names[i];
    };
    rename(program.arguments, options.input_names_, "input");
    rename(program.outputs, options.output_names_, "output");
    std::vector<Tensor> state = compiled.state_tensors();
    std::vector<Tensor> dense;
    std::vector<ArtifactTensor> tensors;
    ArtifactProgram p{options.program_, &program, stateNames(module, state)};
    for (size_t i = 0; i < state.size(); ++i) {
      dense.push_back(state[i].detach().cpu().contiguous());
      tensors.push_back({p.stateNames[i], dense.back().dtype(), dense.back().sizes(),
                         dense.back().data_ptr()});
    }
    writeArtifact(path, std::span(&p, 1), tensors, "weft " WEFT_VERSION_STRING);
  });
}

safetensors::TensorMap load_state(const std::string& path, std::source_location loc) {
  CallSite cs(loc);
  return detail::convertStdExceptions("load_state", [&] {
    std::shared_ptr<const Artifact> a = Artifact::open(path);
    safetensors::TensorMap out;
    for (const ArtifactTensor& t : a->state()) {
      Tensor copy = empty(t.shape, t.dtype);
      if (t.nbytes() > 0) std::memcpy(copy.data_ptr(), t.data, t.nbytes());
      out.emplace_back(t.name, std::move(copy));
    }
    return out;
  });
}

} // namespace weft
