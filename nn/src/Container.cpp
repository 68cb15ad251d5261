// Containers: running a Sequential and looking modules up.
#include "weft/nn/Container.h"

namespace weft::nn {

Tensor SequentialImpl::forward(const Tensor& x) {
  Tensor y = x;
  for (const auto& step : steps_)
    y = step(y);
  return y;
}

std::shared_ptr<Module> SequentialImpl::operator[](size_t i) const {
  WEFT_CHECK(i < steps_.size(), Index, "Sequential: index ", i, " is out of range for ",
             steps_.size(), " modules");
  return named_children()[i].second;
}

std::shared_ptr<Module> ModuleListImpl::operator[](size_t i) const {
  WEFT_CHECK(i < items_.size(), Index, "ModuleList: index ", i, " is out of range for ",
             items_.size(), " modules");
  return items_[i];
}

bool ModuleDictImpl::contains(const std::string& key) const {
  for (const auto& [name, m] : named_children())
    if (name == key) return true;
  return false;
}

std::shared_ptr<Module> ModuleDictImpl::operator[](const std::string& key) const {
  for (const auto& [name, m] : named_children())
    if (name == key) return m;
  WEFT_FAIL(Index, "ModuleDict: no module named '", key, "'");
}

std::vector<std::string> ModuleDictImpl::keys() const {
  std::vector<std::string> out;
  for (const auto& [name, m] : named_children())
    out.push_back(name);
  return out;
}

} // namespace weft::nn
