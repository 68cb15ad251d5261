// export_model() and load_state(): compile() for inference, the module's names for its state,
// and the runtime's artifact writer.
#include "weft/Export.h"

#include "weft/Autograd.h"
#include "weft/Functions.h"
#include "weft/runtime/Artifact.h"
#include "weft/runtime/InputFile.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>

namespace weft {
namespace {

/// Whether input `i`, `t`, has the dynamic dimension `o` names.
bool isDynamic(const ExportOptions& o, size_t i, const Tensor& t) {
  return detail::isDynamicArgument(*o.dynamic_dim_, o.dynamic_arguments_, i, t);
}

/// `inputs` with `rows` rows along the dynamic dimension `o` names.
std::vector<Tensor> withRows(const std::vector<Tensor>& inputs, const ExportOptions& o,
                             int64_t rows) {
  return detail::withRows(inputs, *o.dynamic_dim_, o.dynamic_arguments_, rows);
}

/// Compiles `fn` on `example_inputs` without running it (once per bucket of a dynamic
/// dimension) and writes the program, named as `options` names it, with its state named from
/// `known`, to `path`.
void exportProgram(const TensorFunction& fn, const std::vector<Tensor>& example_inputs,
                   const nn::NamedTensors& known, const std::string& path,
                   const ExportOptions& options, std::source_location loc) {
  std::vector<std::string> targets = options.targets_;
  if (targets.empty()) targets.push_back(options.cpu_target_);
  CompileOptions co = CompileOptions().fullgraph();
  std::vector<int64_t> buckets = {0};
  if (options.dynamic_dim_) {
    co.dynamic_dim(*options.dynamic_dim_, options.dynamic_arguments_).buckets(options.buckets_);
    buckets = options.buckets_;
    if (buckets.empty()) { // powers of two up to the examples' rows
      int64_t rows = 1;
      for (size_t i = 0; i < example_inputs.size(); ++i)
        if (isDynamic(options, i, example_inputs[i]))
          rows = std::max(rows, example_inputs[i].size(*options.dynamic_dim_));
      for (int64_t b = 1; b < rows * 2; b *= 2)
        buckets.push_back(b);
    }
    co.recompile_limit(static_cast<int>(buckets.size()));
  }
  // A program per bucket; per target, its code: the plans must agree but for the code (every
  // target but the host's fixes the same choices), which joins the first target's table.
  std::vector<CompiledFunction::Exported> exported;
  for (size_t t = 0; t < targets.size(); ++t) {
    CompiledFunction compiled(co.cpu_target(targets[t]), loc);
    for (size_t i = 0; i < buckets.size(); ++i) {
      const int64_t b = buckets[i];
      CompiledFunction::Exported e = compiled.export_program(
          b > 0 ? withRows(example_inputs, options, b) : example_inputs, fn, known, loc);
      if (t == 0) {
        exported.push_back(std::move(e));
        continue;
      }
      exported[i].executable.addCodeFrom(e.executable);
    }
  }
  auto rename = [](auto begin, auto end, const std::vector<std::string>& names, const char* what) {
    if (names.empty()) return;
    WEFT_CHECK(names.size() == static_cast<size_t>(end - begin), Value, "export: ", names.size(),
               " ", what, " names for ", end - begin, " ", what, "s");
    for (size_t i = 0; i < names.size(); ++i)
      begin[static_cast<std::ptrdiff_t>(i)].name = names[i];
  };
  std::vector<ArtifactProgram> programs;
  std::vector<Tensor> dense;
  std::vector<ArtifactTensor> tensors;
  for (CompiledFunction::Exported& out : exported) {
    Executable& program = out.executable;
    auto& args = program.arguments;
    rename(args.begin(), args.end() - (program.dynamic ? 1 : 0), options.input_names_, "input");
    rename(program.outputs.begin(), program.outputs.end(), options.output_names_, "output");
    ArtifactProgram p{options.program_, &program, {}};
    for (size_t k = 0; k < out.state.size(); ++k) {
      std::string name = out.state[k].first;
      // What the function made or drew is the program's own ("forward.constant.0"), apart
      // from another program's; a bucket's that differs from another bucket's (a constant
      // sized by the batch) is the bucket's own.
      if (name.starts_with("constant.") || name.starts_with("rng."))
        name = options.program_ + "." + name;
      Tensor t = out.state[k].second.detach().cpu().contiguous();
      auto same = std::ranges::find_if(tensors, [&](const ArtifactTensor& a) { return a.name == name; });
      if (same != tensors.end() &&
          !(same->dtype == t.dtype() && same->shape == t.sizes() &&
            std::memcmp(same->data, t.data_ptr(), same->nbytes()) == 0)) {
        name += "@" + std::to_string(program.dynamic ? program.dynamic->bucket : 0);
        same = tensors.end();
      }
      p.stateNames.push_back(name);
      program.state[k].name = name;
      if (same != tensors.end()) continue; // another bucket's, the same
      dense.push_back(t);
      tensors.push_back({name, t.dtype(), t.sizes(), t.data_ptr()});
    }
    programs.push_back(std::move(p));
  }
  // Appending: the artifact's other programs stay, with the state they read that this export
  // does not write.
  std::shared_ptr<const Artifact> existing;
  if (options.append_ && std::filesystem::exists(path)) existing = Artifact::open(path);
  if (existing) {
    for (const std::string& name : existing->programNames()) {
      if (name == options.program_) continue; // replaced
      std::vector<int64_t> buckets = existing->buckets(name);
      if (buckets.empty()) buckets.push_back(0);
      for (int64_t b : buckets)
        programs.push_back({name, &existing->program(name, b), existing->stateNames(name, b)});
    }
    for (const ArtifactTensor& t : existing->state()) {
      const bool written =
          std::ranges::any_of(tensors, [&](const ArtifactTensor& a) { return a.name == t.name; });
      const bool read = std::ranges::any_of(programs, [&](const ArtifactProgram& p) {
        return std::ranges::count(p.stateNames, t.name) > 0;
      });
      if (!written && read) tensors.push_back(t);
    }
  }
  writeArtifact(path, programs, tensors, "weft " WEFT_VERSION_STRING);
}

} // namespace

namespace detail {

nn::NamedTensors moduleStateNames(const nn::Module& module) {
  nn::NamedTensors named = module.named_parameters();
  for (auto& b : module.named_buffers())
    named.push_back(std::move(b));
  return named;
}

bool isDynamicArgument(int64_t dim, const std::vector<size_t>& arguments, size_t i,
                       const Tensor& t) {
  return t.dim() > dim && (arguments.empty() || std::ranges::count(arguments, i) > 0);
}

std::vector<Tensor> withRows(const std::vector<Tensor>& inputs, int64_t dim,
                             const std::vector<size_t>& arguments, int64_t rows) {
  std::vector<Tensor> out = inputs;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!isDynamicArgument(dim, arguments, i, out[i]) || out[i].size(dim) == rows) continue;
    const int64_t have = out[i].size(dim);
    if (rows < have) {
      out[i] = out[i].narrow(dim, 0, rows);
    } else {
      Shape s = out[i].sizes();
      s[static_cast<size_t>(dim)] = rows - have;
      out[i] = cat({out[i], out[i].narrow(dim, have - 1, 1).expand(s)}, dim);
    }
  }
  return out;
}

} // namespace detail

void export_model(nn::Module& module, const TensorFunction& forward,
                  const std::vector<Tensor>& example_inputs, const std::string& path,
                  const ExportOptions& options, std::source_location loc) {
  CallSite cs(loc);
  detail::convertStdExceptions("export_model", [&] {
    detail::TrainingMode eval(module, false);
    NoGradGuard noGrad;
    exportProgram(forward, example_inputs, detail::moduleStateNames(module), path, options, loc);
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
    nn::NamedTensors known = detail::moduleStateNames(module);
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
