// nn::Module: registration, traversal, modes, conversion, state dicts, hooks and printing.
#include "weft/nn/Module.h"

#include <cxxabi.h>
#include <ostream>
#include <set>
#include <sstream>
#include <typeinfo>

namespace weft::nn {

namespace {
/// "weft::nn::LinearImpl" -> "Linear": the name PyTorch prints for a module class.
std::string className(const std::type_info& type) {
  int status = 0;
  char* demangled = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status);
  std::string name = status == 0 && demangled ? demangled : type.name();
  std::free(demangled);
  if (auto pos = name.rfind("::"); pos != std::string::npos) name = name.substr(pos + 2);
  if (name.size() > 4 && name.ends_with("Impl")) name.resize(name.size() - 4);
  return name;
}

void checkName(const std::string& name, const char* what) {
  WEFT_CHECK(!name.empty() && name.find('.') == std::string::npos, Value, "nn: ", what, " name '",
             name, "' must be non-empty and contain no '.'");
}

/// The handle stored under `name`, or null.
Tensor* find(NamedTensors& list, const std::string& name) {
  for (auto& [n, t] : list)
    if (n == name) return &t;
  return nullptr;
}
} // namespace

Module::Module(std::string name) : name_(std::move(name)) {}

std::string Module::name() const {
  return name_.empty() ? className(typeid(*this)) : name_;
}

Tensor& Module::register_parameter(std::string name, Tensor tensor, bool requires_grad,
                                   std::source_location loc) {
  CallSite cs(loc);
  checkName(name, "parameter");
  WEFT_CHECK(!find(parameters_, name) && !find(buffers_, name), Value, "nn: '", name,
             "' is already registered in ", this->name());
  if (tensor.defined()) {
    if (!tensor.is_leaf()) tensor = tensor.detach();
    if (tensor.is_floating_point()) tensor.requires_grad_(requires_grad);
  }
  parameters_.emplace_back(std::move(name), std::move(tensor));
  return parameters_.back().second;
}

Tensor& Module::register_buffer(std::string name, Tensor tensor, std::source_location loc) {
  CallSite cs(loc);
  checkName(name, "buffer");
  WEFT_CHECK(!find(parameters_, name) && !find(buffers_, name), Value, "nn: '", name,
             "' is already registered in ", this->name());
  buffers_.emplace_back(std::move(name), std::move(tensor));
  return buffers_.back().second;
}

void Module::addChild(std::string name, std::shared_ptr<Module> module, std::source_location loc) {
  CallSite cs(loc);
  checkName(name, "submodule");
  WEFT_CHECK(module != nullptr, Value, "nn: register_module('", name, "'): the module is empty");
  for (const auto& [n, m] : children_)
    WEFT_CHECK(n != name, Value, "nn: submodule '", name, "' is already registered");
  children_.emplace_back(std::move(name), std::move(module));
}

void Module::collect(const std::string& prefix, bool recurse, bool buffers,
                     NamedTensors& out) const {
  for (const auto& [n, t] : buffers ? buffers_ : parameters_)
    if (t.defined()) out.emplace_back(prefix + n, t);
  if (!recurse) return;
  for (const auto& [n, m] : children_)
    m->collect(prefix + n + ".", true, buffers, out);
}

NamedTensors Module::named_parameters(bool recurse) const {
  NamedTensors all, unique;
  collect("", recurse, false, all);
  std::set<const void*> seen; // a shared module or tied weight is listed once
  for (auto& [n, t] : all)
    if (seen.insert(t.impl().get()).second) unique.emplace_back(n, t);
  return unique;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters(recurse))
    out.push_back(t);
  return out;
}

NamedTensors Module::named_buffers(bool recurse) const {
  NamedTensors out;
  collect("", recurse, true, out);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_buffers(recurse))
    out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>>
Module::named_modules(const std::string& prefix, bool include_self) {
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> out;
  if (include_self) out.emplace_back(prefix, shared_from_this());
  for (const auto& [n, m] : children_)
    for (auto& entry : m->named_modules(prefix.empty() ? n : prefix + "." + n, true))
      out.push_back(std::move(entry));
  return out;
}

std::vector<std::shared_ptr<Module>> Module::modules(bool include_self) {
  std::vector<std::shared_ptr<Module>> out;
  for (auto& [n, m] : named_modules("", include_self))
    out.push_back(m);
  return out;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& [n, m] : children_)
    out.push_back(m);
  return out;
}

void Module::train(bool on) {
  training_.set(on);
  for (const auto& [n, m] : children_)
    m->train(on);
}

bool Module::is_training() const {
  return training_.read();
}

void Module::to(DType dtype, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(isFloating(dtype), DType, "nn: Module::to(", dtypeName(dtype),
             "): modules convert to floating dtypes only");
  NoGradGuard guard;
  auto convert = [&](NamedTensors& list) {
    for (auto& [n, t] : list)
      if (t.defined() && t.is_floating_point() && t.dtype() != dtype) t.set_data(t.to(dtype));
  };
  convert(parameters_);
  convert(buffers_);
  for (const auto& [n, m] : children_)
    m->to(dtype, loc);
}

void Module::to(Device device, std::source_location loc) {
  CallSite cs(loc);
  (void)hal::device(device); // a DeviceError for a device this process lacks, before any move
  NoGradGuard guard;
  // Each tensor keeps its handle (an optimizer made before the move still holds the parameters),
  // its memory moves; so do gradients.
  auto move = [&](NamedTensors& list) {
    for (auto& [n, t] : list) {
      if (!t.defined() || t.device() == device) continue;
      t.set_data(t.to(device));
      if (Tensor g = t.grad(); g.defined()) t.set_grad(g.to(device));
    }
  };
  move(parameters_);
  move(buffers_);
  for (const auto& [n, m] : children_)
    m->to(device, loc);
}

void Module::zero_grad(bool set_to_none) {
  NoGradGuard guard;
  for (Tensor& p : parameters()) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (set_to_none)
      p.set_grad({});
    else
      g.zero_();
  }
}

StateDict Module::state_dict() const {
  StateDict dict;
  NamedTensors all;
  collect("", true, false, all);
  collect("", true, true, all);
  for (auto& [n, t] : all)
    dict.emplace(n, t);
  return dict;
}

void Module::load_state_dict(const StateDict& dict, bool strict, std::source_location loc) {
  CallSite cs(loc);
  StateDict mine = state_dict();
  if (strict) {
    for (const auto& [name, t] : mine)
      WEFT_CHECK(dict.count(name), Value, "load_state_dict: missing key '", name, "' in ",
                 this->name());
    for (const auto& [name, t] : dict)
      WEFT_CHECK(mine.count(name), Value, "load_state_dict: unexpected key '", name, "' for ",
                 this->name());
  }
  // Every entry is checked before any is written. As PyTorch, a size mismatch is an error even
  // when not strict (strict only concerns missing and unexpected keys).
  for (const auto& [name, t] : mine) {
    auto it = dict.find(name);
    if (it == dict.end()) continue;
    WEFT_CHECK(it->second.defined(), Value, "load_state_dict: '", name,
               "' is an undefined tensor in the state dict");
    WEFT_CHECK(it->second.sizes() == t.sizes(), Shape, "load_state_dict: '", name, "' has shape ",
               shapeString(it->second.sizes()), " in the state dict but ", shapeString(t.sizes()),
               " in the module");
  }
  NoGradGuard guard;
  for (auto& [name, t] : mine)
    if (auto it = dict.find(name); it != dict.end()) t.copy_(it->second);
}

void Module::register_forward_pre_hook(ForwardPreHook hook) {
  preHooks_.push_back(std::move(hook));
}
void Module::register_forward_hook(ForwardHook hook) {
  hooks_.push_back(std::move(hook));
}
void Module::register_full_backward_hook(BackwardHook hook) {
  backwardHooks_.push_back(std::move(hook));
}

Tensor Module::runHooks(std::vector<Tensor> inputs,
                        const std::function<Tensor(const std::vector<Tensor>&)>& forward) {
  for (const ForwardPreHook& h : preHooks_)
    if (std::vector<Tensor> replaced = h(*this, inputs); !replaced.empty())
      inputs = std::move(replaced);
  Tensor out = forward(inputs);
  for (const ForwardHook& h : hooks_)
    if (Tensor replaced = h(*this, inputs, out); replaced.defined()) out = replaced;
  if (!backwardHooks_.empty() && out.requires_grad()) {
    std::weak_ptr<Module> self = weak_from_this();
    out.register_hook([self, hooks = backwardHooks_](const Tensor& g) {
      if (auto m = self.lock())
        for (const BackwardHook& h : hooks)
          h(*m, g);
      return Tensor();
    });
  }
  return out;
}

void Module::pretty_print(std::ostream& os) const {
  os << name() << "()";
}

namespace {
void printTree(std::ostream& os, const Module& m, const std::string& indent) {
  std::ostringstream line;
  m.pretty_print(line);
  std::string text = line.str();
  if (m.named_children().empty()) {
    os << text;
    return;
  }
  if (text.size() >= 2 && text.ends_with("()"))
    text.resize(text.size() - 2);
  else if (text.ends_with(")"))
    text.back() = ',';
  os << text << "(\n";
  for (const auto& [n, c] : m.named_children()) {
    os << indent << "  (" << n << "): ";
    printTree(os, *c, indent + "  ");
    os << "\n";
  }
  os << indent << ")";
}
} // namespace

std::ostream& operator<<(std::ostream& os, const Module& module) {
  printTree(os, module, "");
  return os;
}

} // namespace weft::nn
