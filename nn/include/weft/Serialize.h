// weft::save / weft::load, as LibTorch's torch::save / torch::load: a tensor, a list of tensors, a
// module's state_dict or an optimizer's, stored as a safetensors file that says which it holds.
#pragma once

#include "weft/Safetensors.h"
#include "weft/nn/Module.h"
#include "weft/optim/Optimizer.h"

#include <concepts>
#include <memory>
#include <string>
#include <vector>

namespace weft {

/// The metadata key naming what a file written by weft::save holds: "tensor", "tensors",
/// "module" or "optimizer" (with the optimizer's name under "weft.optimizer").
inline constexpr const char* kSavedObjectKey = "weft.object";

/// Writes `tensor` (a copy of its values, as tensor "0") to `path` atomically.
void save(const Tensor& tensor, const std::string& path, WEFT_LOC);
/// Writes the tensors as "0", "1", ... in order.
void save(const std::vector<Tensor>& tensors, const std::string& path, WEFT_LOC);
/// Writes the module's state_dict (every parameter and buffer by dotted name).
void save(const nn::Module& module, const std::string& path, WEFT_LOC);
/// Writes the optimizer's state_dict, with its name ("Adam") in the metadata.
void save(const optim::Optimizer& optimizer, const std::string& path, WEFT_LOC);
/// Writes the state_dict of the module a holder holds (weft::save(model, "m.safetensors")).
template <typename Impl>
void save(const nn::ModuleHolder<Impl>& module, const std::string& path, WEFT_LOC) {
  CallSite cs(loc);
  save(static_cast<const nn::Module&>(*module), path, loc);
}
/// Writes the state_dict of the module `module` points to.
template <std::derived_from<nn::Module> M>
void save(const std::shared_ptr<M>& module, const std::string& path, WEFT_LOC) {
  CallSite cs(loc);
  WEFT_CHECK(module != nullptr, Value, "weft::save: the module pointer is null");
  save(static_cast<const nn::Module&>(*module), path, loc);
}

// Each load reads and checks the whole file before changing anything: a file that is damaged,
// holds another kind of object, or does not fit the target is an error and the target stays as
// it was.
/// Reads a tensor saved by save(const Tensor&): an undefined `tensor` becomes it; a defined one
/// takes its values, shape and dtype and keeps its identity (LibTorch's set_), so that other
/// handles to it see them.
void load(Tensor& tensor, const std::string& path, WEFT_LOC);
/// Replaces the contents of `tensors` with the list saved by save(const std::vector<Tensor>&).
void load(std::vector<Tensor>& tensors, const std::string& path, WEFT_LOC);
/// Copies a saved state_dict into the module's parameters and buffers (strict load_state_dict).
void load(nn::Module& module, const std::string& path, WEFT_LOC);
/// Loads a saved optimizer state_dict; the optimizer must be of the kind that saved it.
void load(optim::Optimizer& optimizer, const std::string& path, WEFT_LOC);
/// Loads into the module a holder holds.
template <typename Impl>
void load(const nn::ModuleHolder<Impl>& module, const std::string& path, WEFT_LOC) {
  CallSite cs(loc);
  load(static_cast<nn::Module&>(*module), path, loc);
}
/// Loads into the module `module` points to.
template <std::derived_from<nn::Module> M>
void load(const std::shared_ptr<M>& module, const std::string& path, WEFT_LOC) {
  CallSite cs(loc);
  WEFT_CHECK(module != nullptr, Value, "weft::load: the module pointer is null");
  load(static_cast<nn::Module&>(*module), path, loc);
}

} // namespace weft
