// Exporting for deployment: a module's forward compiled ahead of time and written, with its
// weights, as an artifact (.weft, weft/runtime/Artifact.h) that the runtime alone loads and runs.
#pragma once

#include "weft/Compile.h"
#include "weft/Safetensors.h"
#include "weft/nn/Module.h"
#include "weft/optim/Optimizer.h"

#include <optional>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

namespace weft {

/// Options for export_model(), spelled like LibTorch's builders.
struct ExportOptions {
  std::string cpu_target_ = "host";
  std::string program_ = "forward";

  /// The CPU the generated code is built for (CompileOptions::cpu_target): "host", or a feature
  /// level ("x86-64-v3") so that the artifact runs on every machine of that level.
  ExportOptions& cpu_target(std::string name) {
    cpu_target_ = std::move(name);
    return *this;
  }
  std::vector<std::string> targets_;
  /// Several CPUs at once: the generated code built for each target named (feature levels such
  /// as "x86-64-v4", "x86-64-v3", and "x86-64" as the portable fallback every x86-64 machine
  /// runs), in order of preference; the runtime loads the first the machine it runs on can run.
  /// Replaces cpu_target().
  ExportOptions& targets(std::vector<std::string> names) {
    targets_ = std::move(names);
    return *this;
  }
  bool append_ = false;
  /// Adds the program to the artifact already at the path (its other programs, and their state
  /// this export does not write, are kept; a program of the same name is replaced), so that one
  /// file holds, say, "forward" and "train_step" over the same named weights.
  ExportOptions& append(bool on = true) {
    append_ = on;
    return *this;
  }
  std::vector<std::string> input_names_, output_names_;
  /// The program's name in the artifact ("forward"; export_train_step's "train_step").
  ExportOptions& program(std::string name) {
    program_ = std::move(name);
    return *this;
  }
  /// The names the program's arguments and outputs have in the artifact (default a0, a1, ...
  /// and out0, out1, ...): what weft-run matches inputs by and writes outputs under.
  ExportOptions& input_names(std::vector<std::string> names) {
    input_names_ = std::move(names);
    return *this;
  }
  ExportOptions& output_names(std::vector<std::string> names) {
    output_names_ = std::move(names);
    return *this;
  }
  std::optional<int64_t> dynamic_dim_;
  std::vector<size_t> dynamic_arguments_;
  std::vector<int64_t> buckets_;
  /// Exports the program for a dynamic size along dimension `dim` of the arguments listed (every
  /// argument with more than `dim` dims when empty), as CompileOptions::dynamic_dim compiles it:
  /// a program per bucket (see buckets()), each with the memory plan of its own size; a runtime
  /// Session runs a call of n rows in the smallest bucket that holds them, its padding unseen.
  ExportOptions& dynamic_dim(int64_t dim, std::vector<size_t> arguments = {}) {
    dynamic_dim_ = dim;
    dynamic_arguments_ = std::move(arguments);
    return *this;
  }
  /// The buckets, ascending (default: powers of two up to the example inputs' size).
  ExportOptions& buckets(std::vector<int64_t> sizes) {
    buckets_ = std::move(sizes);
    return *this;
  }
};

/// Compiles `forward` (a function of tensors shaped like `example_inputs`, reading `module`'s
/// parameters and buffers) for inference, in eval mode and without autograd, and writes it to
/// `path` as an artifact: its state named as `module.named_parameters()` and `named_buffers()`
/// name it (other captured tensors "forward.constant.0", ...: the program's own), written
/// atomically. The module's training
/// mode is restored afterwards. A function compile() cannot capture whole (one that reads
/// tensor values) is a ValueError naming why.
void export_model(nn::Module& module, const TensorFunction& forward,
                  const std::vector<Tensor>& example_inputs, const std::string& path,
                  const ExportOptions& options = {}, WEFT_LOC);

namespace detail {

/// `module`'s parameters and buffers by name: what an exported program's state is named after.
nn::NamedTensors moduleStateNames(const nn::Module& module);

/// Puts a module in training mode `training` (false: eval) and restores its mode when it goes out
/// of scope.
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

/// Whether argument `i`, `t`, has dynamic dimension `dim`: it has that many dims and is among
/// `arguments` (or they are empty).
bool isDynamicArgument(int64_t dim, const std::vector<size_t>& arguments, size_t i,
                       const Tensor& t);
/// `inputs` with `rows` rows along dimension `dim` of the dynamic ones: their first rows, or all
/// of them and the last repeated.
std::vector<Tensor> withRows(const std::vector<Tensor>& inputs, int64_t dim,
                             const std::vector<size_t>& arguments, int64_t rows);

/// Appends the tensors of `r` (a tensor, a vector of them, or a tuple of those, nested) to `out`.
template <typename R> void flattenTensors(R&& r, std::vector<Tensor>& out) {
  using T = std::remove_cvref_t<R>;
  if constexpr (std::is_same_v<T, Tensor>) {
    out.push_back(r);
  } else if constexpr (std::is_convertible_v<T, std::vector<Tensor>>) {
    for (const Tensor& t : std::vector<Tensor>(r))
      out.push_back(t);
  } else {
    std::apply([&](auto&&... parts) { (flattenTensors(parts, out), ...); }, r);
  }
}

/// A module holder's forward as a TensorFunction: one tensor per input (one to three), its
/// result's tensors flattened in order. `what` names the caller in errors.
template <typename Impl>
TensorFunction holderForward(std::shared_ptr<Impl> impl, const char* what) {
  return [impl, what](const std::vector<Tensor>& in) -> std::vector<Tensor> {
    std::vector<Tensor> out;
    if constexpr (requires { impl->forward(in[0]); }) {
      if (in.size() == 1) {
        flattenTensors(impl->forward(in[0]), out);
        return out;
      }
    }
    if constexpr (requires { impl->forward(in[0], in[1]); }) {
      if (in.size() == 2) {
        flattenTensors(impl->forward(in[0], in[1]), out);
        return out;
      }
    }
    if constexpr (requires { impl->forward(in[0], in[1], in[2]); }) {
      if (in.size() == 3) {
        flattenTensors(impl->forward(in[0], in[1], in[2]), out);
        return out;
      }
    }
    WEFT_FAIL(Value, what, ": the module's forward takes no ", in.size(), " tensors (give ", what,
              " a function for other forwards)");
  };
}

} // namespace detail

/// export_model() of a module holder's forward (nn::Linear, a WEFT_MODULE holder) taking
/// one tensor per example input and returning a tensor, a vector of them or a tuple of those.
template <typename Holder>
requires requires(Holder& h) { h.ptr(); }
void export_model(Holder& module, const std::vector<Tensor>& example_inputs,
                  const std::string& path, const ExportOptions& options = {}, WEFT_LOC) {
  export_model(*module.ptr(), detail::holderForward(module.ptr(), "export_model"), example_inputs,
               path, options, loc);
}

/// Compiles a whole train step (`step`: forward, loss, backward and `optimizer`'s update, reading
/// `module`'s parameters and buffers, on tensors shaped like `example_inputs`) without running it,
/// and writes it to `path` as an artifact's program "train_step": each call of it updates the
/// parameters, buffers and optimizer state in place and returns what `step` returns (its loss).
/// The state is named as the module names it, the optimizer's as "optimizer." and its
/// state_dict() key ("optimizer.state.0.exp_avg", "optimizer.param_groups.0.lr"), and random
/// draws' keys "train_step.rng.<i>" (a runtime session moves them on every step, as eager draws
/// would). The
/// optimizer's state is made first (Optimizer::init_state()) where no step made it yet. The module
/// is traced in the mode it is in (train(): dropout, batch statistics), from no gradients (its
/// own are set aside meanwhile).
void export_train_step(nn::Module& module, optim::Optimizer& optimizer, const TensorFunction& step,
                       const std::vector<Tensor>& example_inputs, const std::string& path,
                       const ExportOptions& options = {}, WEFT_LOC);

/// The named state an artifact holds (parameters, buffers, optimizer state), as tensors.
safetensors::TensorMap load_state(const std::string& path, WEFT_LOC);

} // namespace weft
