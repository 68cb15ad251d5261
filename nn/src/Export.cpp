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

/// The names of `module`'s parameters and buffers, for the state of its programs.
nn::NamedTensors moduleNames(const nn::Module& module) {
  nn::NamedTensors named = module.named_parameters();
  for (auto& b : module.named_buffers())
    named.push_back(std::move(b));
  return named;
}

/// Restores a module's training mode when it goes out of scope.
class TrainingMode {
public:
  TrainingMode(nn::Module& m, bool training) : module_(m), before_(m.is_training()) {
    m.train(training);
  }
  ~TrainingMode() { module_.train(before_); }
  TrainingMode(const TrainingMode&) = delete;
  TrainingMode& operator=(const TrainingMode&) = delete;

private:
  nn::Module& module_;
  bool before_;
};

/// Compiles `fn` on `example_inputs` without running it and writes the program, named as
/// `options` names it, with its state named from `known`, to `path`.
void exportProgram(const TensorFunction& fn, const std::vector<Tensor>& example_inputs,
                   const nn::NamedTensors& known, const std::string& path,
                   const ExportOptions& options, std::source_location loc) {
  CompiledFunction compiled(CompileOptions().cpu_target(options.cpu_target_).fullgraph(), loc);
  CompiledFunction::Exported out = compiled.export_program(example_inputs, fn, known, loc);
  Executable& program = out.executable;
  auto rename = [](std::vector<ExecutableValue>& values, const std::vector<std::string>& names,
                   const char* what) {
    if (names.empty()) return;
    WEFT_CHECK(names.size() == values.size(), Value, "export: ", names.size(), " ", what,
               " names for ", values.size(), " ", what, "s");
    for (size_t i = 0; i < names.size(); ++i)
      values[i].name = names[i];
  };
  rename(program.arguments, options.input_names_, "input");
  rename(program.outputs, options.output_names_, "output");
  std::vector<Tensor> dense;
  std::vector<ArtifactTensor> tensors;
  ArtifactProgram p{options.program_, &program, {}};
  for (const auto& [name, t] : out.state) {
    p.stateNames.push_back(name);
    dense.push_back(t.detach().cpu().contiguous());
    tensors.push_back({name, dense.back().dtype(), dense.back().sizes(), dense.back().data_ptr()});
  }
  writeArtifact(path, std::span(&p, 1), tensors, "weft " WEFT_VERSION_STRING);
}

} // namespace

void export_model(nn::Module& module, const TensorFunction& forward,
                  const std::vector<Tensor>& example_inputs, const std::string& path,
                  const ExportOptions& options, std::source_location loc) {
  CallSite cs(loc);
  detail::convertStdExceptions("export_model", [&] {
    TrainingMode eval(module, false);
    NoGradGuard noGrad;
    exportProgram(forward, example_inputs, moduleNames(module), path, options, loc);
  });
}

void export_train_step(nn::Module& module, optim::Optimizer& optimizer, const TensorFunction& step,
                       const std::vector<Tensor>& example_inputs, const std::string& path,
                       const ExportOptions& options, std::source_location loc) {
  CallSite cs(loc);
  detail::convertStdExceptions("export_train_step", [&] {
    optimizer.init_state(loc);
    // The program starts from no gradients (a step that zero_grad()s first reads none): the
    // module's are set aside while it is traced, and given back.
    std::vector<std::pair<Tensor, Tensor>> grads;
    for (Tensor& p : module.parameters())
      if (p.grad().defined()) {
        grads.emplace_back(p, p.grad());
        p.set_grad({});
      }
    struct Restore {
      std::vector<std::pair<Tensor, Tensor>>& grads;
      ~Restore() {
        for (auto& [p, g] : grads)
          p.set_grad(g);
      }
    } restore{grads};
    nn::NamedTensors known = moduleNames(module);
    for (auto& [key, t] : optimizer.state_dict())
      known.emplace_back("optimizer." + key, t);
    ExportOptions o = options;
    if (o.program_ == ExportOptions().program_) o.program_ = "train_step";
    exportProgram(step, example_inputs, known, path, o, loc);
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
