// A training checkpoint: everything a run needs to continue exactly where it stopped (the model,
// the optimizer, the schedule, the data order and the random streams) in one safetensors file.
#pragma once

#include "weft/Safetensors.h"
#include "weft/data/DataLoader.h"
#include "weft/nn/Module.h"

#include <string>

namespace weft {

/// Named groups of tensors saved to one safetensors file as "group.key". A run that saves
///
///     Checkpoint ck;
///     ck.set("model", model->state_dict()).set("optimizer", opt.state_dict())
///       .set("scheduler", schedule.state_dict()).set(loader).set(default_generator());
///     ck.save("run.safetensors");
///
/// and later restores them in the same order (`ck.get("model")` into load_state_dict,
/// `ck.restore(loader)`, `ck.restore(default_generator())`) continues bit for bit as if it had
/// not stopped: the loader resumes mid-epoch with the same order and augmentations, and random
/// ops (dropout) draw the same numbers.
class Checkpoint {
public:
  /// Stores a copy of `dict` as group `group` (replacing a group of that name); an undefined
  /// tensor is an error naming its key.
  Checkpoint& set(const std::string& group, const nn::StateDict& dict, WEFT_LOC);
  /// Stores the loader's position (epoch, batches handed out, seed) as group "loader".
  Checkpoint& set(const data::DataLoader& loader, WEFT_LOC);
  /// Stores a random stream's seed and offset as group `group`.
  Checkpoint& set(const Generator& generator, const std::string& group = "generator", WEFT_LOC);
  /// Group `group`; an IOError naming the group if the checkpoint has none.
  nn::StateDict get(const std::string& group, WEFT_LOC) const;
  bool contains(const std::string& group) const;
  /// Moves `loader` to the stored position (its next begin() continues there); a stored state
  /// that is malformed or does not fit the loader is an error and changes nothing.
  void restore(data::DataLoader& loader, WEFT_LOC) const;
  /// Moves `generator` to the stored seed and offset (both checked first).
  void restore(Generator& generator, const std::string& group = "generator", WEFT_LOC) const;

  /// Writes all groups atomically (see safetensors::save_file), with `metadata`.
  void save(const std::string& path, const safetensors::Metadata& metadata = {}, WEFT_LOC) const;
  /// Reads a checkpoint written by save(); IOError for a damaged file.
  static Checkpoint load(const std::string& path, WEFT_LOC);

private:
  std::map<std::string, nn::StateDict> groups_;
};

} // namespace weft
