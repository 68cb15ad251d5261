// weft::save / weft::load: tensors, lists, modules and optimizers as safetensors files whose
// metadata says which of them a file holds.
#include "weft/Serialize.h"

#include "weft/runtime/InputFile.h"

#include <charconv>
#include <map>
#include <system_error>
#include <utility>

namespace weft {
namespace {

/// The metadata key of the optimizer's name ("Adam") in a saved optimizer.
constexpr const char* kOptimizerKey = "weft.optimizer";

/// What a file of kind `kind` holds, for messages.
std::string describe(const std::string& kind) {
  static const std::map<std::string, std::string> kinds{{"tensor", "a tensor"},
                                                        {"tensors", "a list of tensors"},
                                                        {"module", "a module's state_dict"},
                                                        {"optimizer", "an optimizer's state_dict"}};
  auto it = kinds.find(kind);
  return it != kinds.end() ? it->second : "an object of kind '" + kind + "'";
}

/// Writes `tensors` to `path` with metadata naming them a `kind` (plus `extra` entries).
void write(const safetensors::TensorMap& tensors, const std::string& path, const char* kind,
           safetensors::Metadata extra = {}) {
  extra[kSavedObjectKey] = kind;
  safetensors::save_file(tensors, path, extra);
}

/// The tensors as "0", "1", ...; an undefined one is an error naming its place.
safetensors::TensorMap numbered(const std::vector<Tensor>& tensors) {
  safetensors::TensorMap out;
  for (size_t i = 0; i < tensors.size(); ++i) {
    WEFT_CHECK(tensors[i].defined(), Value, "weft::save: tensor ", i,
               " of the list is undefined; only defined tensors can be saved");
    out.emplace_back(std::to_string(i), tensors[i].detach());
  }
  return out;
}

/// A state dict's tensors, detached, for the file.
safetensors::TensorMap entries(const nn::StateDict& dict) {
  safetensors::TensorMap out;
  for (const auto& [name, t] : dict)
    out.emplace_back(name, t.defined() ? t.detach() : t);
  return out;
}

/// The tensors of the file weft::save wrote as a `kind`, and its metadata, from one read (a file
/// replaced meanwhile cannot lend one its kind and the other its tensors).
safetensors::TensorMap readSaved(const std::string& path, const std::string& kind,
                                 safetensors::Metadata& meta) {
  safetensors::TensorMap map = safetensors::load_file(path, &meta);
  auto it = meta.find(kSavedObjectKey);
  WEFT_CHECK(it != meta.end(), IO, "weft::load: '", path,
             "' was not written by weft::save (its metadata has no '", kSavedObjectKey,
             "'); read a plain safetensors file with safetensors::load_file");
  WEFT_CHECK(it->second == kind, IO, "weft::load: '", path, "' holds ", describe(it->second),
             ", not ", describe(kind), "; load it into what saved it");
  return map;
}

/// The tensors "0" to "n-1" of a saved list, in order; any other name is an IOError.
std::vector<Tensor> readList(const std::string& path, const std::string& kind) {
  safetensors::Metadata meta;
  safetensors::TensorMap map = readSaved(path, kind, meta);
  std::vector<Tensor> list(map.size());
  for (auto& [name, t] : map) {
    size_t index = list.size();
    auto [end, error] = std::from_chars(name.data(), name.data() + name.size(), index);
    WEFT_CHECK(error == std::errc() && end == name.data() + name.size() && index < list.size() &&
                   name == std::to_string(index),
               IO, "weft::load: '", path, "' holds a tensor named '", detail::excerpt(name, 60),
               "', not one of 0 to ", list.size() - 1, " as weft::save names them");
    list[index] = std::move(t);
  }
  return list;
}

/// The state dict in a file saved as a `kind`, and the file's metadata.
nn::StateDict readDict(const std::string& path, const std::string& kind,
                       safetensors::Metadata& meta) {
  nn::StateDict dict;
  for (auto& [name, t] : readSaved(path, kind, meta))
    dict.emplace(name, std::move(t));
  return dict;
}

/// Runs `load` (a state_dict load); its error is rethrown with the file named in front.
template <typename Fn> void namingFile(const std::string& path, Fn&& load) {
  try {
    load();
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::Internal) throw;
    std::string message = e.what(), site = CallSite::describe();
    if (!site.empty() && message.ends_with(site)) message.resize(message.size() - site.size());
    throwError(e.kind(), detail::concat("weft::load: '", path, "' does not fit: ", message));
  }
}

} // namespace

void save(const Tensor& tensor, const std::string& path, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(tensor.defined(), Value, "weft::save: the tensor is undefined");
  write(numbered({tensor}), path, "tensor");
}

void save(const std::vector<Tensor>& tensors, const std::string& path, std::source_location loc) {
  CallSite cs(loc);
  write(numbered(tensors), path, "tensors");
}

void save(const nn::Module& module, const std::string& path, std::source_location loc) {
  CallSite cs(loc);
  write(entries(module.state_dict()), path, "module");
}

void save(const optim::Optimizer& optimizer, const std::string& path, std::source_location loc) {
  CallSite cs(loc);
  write(entries(optimizer.state_dict()), path, "optimizer",
        {{kOptimizerKey, optimizer.defaults().optimizer()}});
}

void load(Tensor& tensor, const std::string& path, std::source_location loc) {
  CallSite cs(loc);
  std::vector<Tensor> list = readList(path, "tensor");
  WEFT_CHECK(list.size() == 1, IO, "weft::load: '", path, "' holds ", list.size(),
             " tensors where a saved tensor has one");
  if (!tensor.defined()) {
    tensor = std::move(list[0]);
    return;
  }
  WEFT_CHECK(tensor.grad_fn() == nullptr, Value,
             "weft::load: the tensor to load into was computed by autograd (it has a grad_fn); "
             "load into a leaf or an undefined tensor");
  tensor.set_data(list[0]);
}

void load(std::vector<Tensor>& tensors, const std::string& path, std::source_location loc) {
  CallSite cs(loc);
  tensors = readList(path, "tensors");
}

void load(nn::Module& module, const std::string& path, std::source_location loc) {
  CallSite cs(loc);
  safetensors::Metadata meta;
  nn::StateDict dict = readDict(path, "module", meta);
  namingFile(path, [&] { module.load_state_dict(dict); });
}

void load(optim::Optimizer& optimizer, const std::string& path, std::source_location loc) {
  CallSite cs(loc);
  const std::string mine = optimizer.defaults().optimizer();
  safetensors::Metadata meta;
  nn::StateDict dict = readDict(path, "optimizer", meta);
  auto it = meta.find(kOptimizerKey);
  const std::string saved = it != meta.end() ? it->second : "an unnamed optimizer";
  WEFT_CHECK(saved == mine, IO, "weft::load: '", path, "' holds the state of ", saved, ", not of ",
             mine, "; load it into the kind of optimizer that saved it");
  namingFile(path, [&] { optimizer.load_state_dict(dict); });
}

} // namespace weft
