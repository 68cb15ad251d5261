// Checkpoints: groups of state dicts flattened to "group.key" names in a safetensors file.
#include "weft/Checkpoint.h"

#include "weft/runtime/InputFile.h"

namespace weft {
namespace {

/// A 1-D int64 tensor holding `values` (unsigned counters stored bit for bit).
Tensor counters(std::initializer_list<uint64_t> values) {
  std::vector<int64_t> v;
  for (uint64_t x : values)
    v.push_back(static_cast<int64_t>(x));
  return from_vector(v, {static_cast<int64_t>(v.size())});
}

/// The `n` counters of `dict`'s entry `key`, checked.
std::vector<uint64_t> readCounters(const nn::StateDict& dict, const std::string& group,
                                   const std::string& key, size_t n) {
  auto it = dict.find(key);
  WEFT_CHECK(it != dict.end() && it->second.defined() && it->second.dtype() == DType::Int64 &&
                 it->second.sizes() == Shape{static_cast<int64_t>(n)},
             IO, "checkpoint: group '", group, "' has no ", n, " int64 values named '", key, "'");
  std::vector<uint64_t> out;
  for (int64_t x : it->second.to_vector<int64_t>())
    out.push_back(static_cast<uint64_t>(x));
  return out;
}

} // namespace

Checkpoint& Checkpoint::set(const std::string& group, const nn::StateDict& dict,
                            std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(!group.empty() && group.find('.') == std::string::npos, Value,
             "checkpoint: a group name must be non-empty and without '.', got '", group, "'");
  nn::StateDict copy;
  for (const auto& [key, t] : dict) {
    WEFT_CHECK(t.defined(), Value, "checkpoint: '", group, ".", key, "' is an undefined tensor");
    copy[key] = t.detach().clone(); // a snapshot, not a view
  }
  groups_[group] = std::move(copy);
  return *this;
}

Checkpoint& Checkpoint::set(const data::DataLoader& loader, std::source_location loc) {
  data::LoaderState s = loader.state();
  return set("loader", {{"state", counters({s.epoch, s.batches, s.seed})}}, loc);
}

Checkpoint& Checkpoint::set(const Generator& generator, const std::string& group,
                            std::source_location loc) {
  return set(group, {{"state", counters({generator.seed(), generator.offset()})}}, loc);
}

bool Checkpoint::contains(const std::string& group) const {
  return groups_.count(group) != 0;
}

nn::StateDict Checkpoint::get(const std::string& group, std::source_location loc) const {
  CallSite cs(loc);
  auto it = groups_.find(group);
  WEFT_CHECK(it != groups_.end(), IO, "checkpoint: no group '", group, "'");
  return it->second;
}

void Checkpoint::restore(data::DataLoader& loader, std::source_location loc) const {
  CallSite cs(loc);
  std::vector<uint64_t> v = readCounters(get("loader"), "loader", "state", 3);
  loader.restore(data::LoaderState{v[0], v[1], v[2]});
}

void Checkpoint::restore(Generator& generator, const std::string& group,
                         std::source_location loc) const {
  CallSite cs(loc);
  std::vector<uint64_t> v = readCounters(get(group), group, "state", 2);
  generator.manual_seed(v[0]);
  generator.set_offset(v[1]);
}

void Checkpoint::save(const std::string& path, const safetensors::Metadata& metadata,
                      std::source_location loc) const {
  CallSite cs(loc);
  safetensors::TensorMap flat;
  for (const auto& [group, dict] : groups_)
    for (const auto& [key, t] : dict)
      flat.emplace_back(group + "." + key, t);
  safetensors::save_file(flat, path, metadata);
}

Checkpoint Checkpoint::load(const std::string& path, std::source_location loc) {
  CallSite cs(loc);
  Checkpoint ck;
  for (auto& [name, t] : safetensors::load_file(path)) {
    size_t dot = name.find('.');
    WEFT_CHECK(dot != std::string::npos && dot > 0, IO, "Checkpoint::load: '", path, "': tensor '",
               detail::excerpt(name, 60), "' is not named group.key");
    ck.groups_[name.substr(0, dot)][name.substr(dot + 1)] = t;
  }
  return ck;
}

} // namespace weft
