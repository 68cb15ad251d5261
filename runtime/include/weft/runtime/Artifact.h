// An artifact (.weft): named programs (executables: inference, a whole train step, ...) over named
// state (parameters, buffers, optimizer state) in one file, which the runtime alone opens. The
// file: a 64-byte header ("WEFTART\0", the format version, the manifest's place, size and
// checksum, the state's place and size), the manifest (a Manifest message of
// runtime/proto/weft/artifact.proto: the producer, each program, its state's names), then the
// state as one safetensors section whose data starts 64-byte aligned. Opening maps the file
// read-only: the state is read in place, never copied, and every field is checked against the
// file (IOErrors naming what is wrong), so no file, however damaged or hostile, crashes the
// process or makes it allocate without bound.
#pragma once

#include "weft/runtime/Executable.h"

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace weft {

/// A program to write: its name, its executable, and the names its state tensors have in the
/// artifact (parallel to executable->state; programs may share state by name).
struct ArtifactProgram {
  std::string name;
  const Executable* executable = nullptr;
  std::vector<std::string> stateNames;
};

/// A state tensor to write or as an opened artifact holds it: dense row-major bytes.
struct ArtifactTensor {
  std::string name;
  DType dtype = DType::Float32;
  Shape shape;
  const void* data = nullptr;
  size_t nbytes() const;
};

/// Writes an artifact atomically (a temporary file renamed over `path`: a process killed while
/// writing leaves the previous file whole). Every program's state names must be among `state`,
/// of the executable's dtype and shape; names are unique (ValueErrors otherwise).
void writeArtifact(const std::string& path, std::span<const ArtifactProgram> programs,
                   std::span<const ArtifactTensor> state, const std::string& producer);

/// Writes `tensors` as a safetensors file at `path`, atomically (errors name `op`).
void writeSafetensors(const std::string& path, std::span<const ArtifactTensor> tensors,
                      const char* op);

class Artifact {
public:
  /// The format this runtime writes and reads.
  static constexpr uint32_t kFormatVersion = 1;

  /// Opens the artifact at `path`, its file mapped read-only for as long as the artifact (and
  /// anything holding it) lives.
  static std::shared_ptr<const Artifact> open(const std::string& path);
  /// The artifact in `bytes` (embedded in a binary, received over a network), read in place: they
  /// must start 64-byte aligned and outlive the artifact and everything holding it. `name` is
  /// what messages call it.
  static std::shared_ptr<const Artifact> fromMemory(std::span<const uint8_t> bytes,
                                                    const std::string& name = "<memory>");
  ~Artifact();
  Artifact(const Artifact&) = delete;
  Artifact& operator=(const Artifact&) = delete;

  const std::string& path() const { return path_; }
  const std::string& producer() const { return producer_; }
  uint64_t fileBytes() const { return size_; }
  /// The programs' names, in the file's order (a program of several buckets named once).
  std::vector<std::string> programNames() const;
  /// Program `name` (its code not loaded: copy it and loadCode() on a device), of bucket `bucket`
  /// (0: its largest where it has several); a ValueError listing the programs where there is none.
  const Executable& program(std::string_view name, int64_t bucket = 0) const;
  /// The buckets of program `name`'s dynamic dimension, ascending (empty: it has none).
  std::vector<int64_t> buckets(std::string_view name) const;
  /// The names program `name`'s state tensors have, in its order (of bucket `bucket`; 0: the
  /// largest).
  const std::vector<std::string>& stateNames(std::string_view name, int64_t bucket = 0) const;
  /// The state tensors, their bytes in the mapped file.
  const std::vector<ArtifactTensor>& state() const { return state_; }
  /// State tensor `name`, or null.
  const ArtifactTensor* findState(std::string_view name) const;
  /// Program `name` (of bucket `bucket`; 0: the largest) with its code loaded on `device`, loaded
  /// once per artifact and device and shared by every session there.
  std::shared_ptr<const Executable> loaded(std::string_view name, hal::Device& device,
                                           int64_t bucket = 0) const;
  /// Writes this artifact (every program, its producer) to `path` atomically, with the tensors in
  /// `replaced` in place of its state tensors of those names (each of the same dtype and shape;
  /// ValueErrors otherwise). `path` may be this artifact's own file: the mapping keeps the old one.
  void write(const std::string& path, std::span<const ArtifactTensor> replaced) const;

private:
  Artifact() = default;
  struct Program {
    std::string name;
    Executable executable;
    std::vector<std::string> stateNames;
  };
  /// Program `name` of bucket `bucket` (0: its only version, or its largest bucket).
  const Program& find(std::string_view name, int64_t bucket = 0) const;
  /// Reads the manifest and the state from the artifact's `size_` bytes at `bytes`, checking all.
  void parse(const uint8_t* bytes, const std::string& ctx);
  std::string path_, producer_;
  void* map_ = nullptr;
  uint64_t size_ = 0;
  std::vector<Program> programs_;
  std::vector<ArtifactTensor> state_;
  mutable std::mutex mutex_;
  mutable std::map<std::tuple<std::string, int64_t, const hal::Device*>,
                   std::shared_ptr<const Executable>>
      loaded_;
};

/// One caller's way to run a program of an artifact on a device. The program's code is the
/// artifact's, loaded once per device; its state is the artifact's too (on the CPU the mapped file
/// itself, never copied) until the program or writeState() changes it: a program that updates
/// its state (a train step) gets this session's own copy. Sessions of one artifact run at once
/// from many threads; one session serves one thread at a time.
class Session {
public:
  Session(std::shared_ptr<const Artifact> artifact, std::string_view program,
          hal::Device& device = hal::cpu());

  /// The arguments a call passes, and its outputs (a dynamic program's at its largest bucket).
  const std::vector<ExecutableValue>& arguments() const { return arguments_; }
  const std::vector<ExecutableValue>& outputs() const { return exe_->outputs; }
  const std::vector<std::string>& stateNames() const { return names_; }
  /// The buckets of the program's dynamic dimension, ascending (empty: it has none).
  std::vector<int64_t> buckets() const;
  /// The program's dynamic dimension (its largest bucket's), or none.
  const std::optional<DynamicBatch>& dynamic() const { return exe_->dynamic; }
  /// Runs the program on `args` (dense host bytes of the arguments' dtypes and shapes, in order)
  /// and writes its outputs to `outputs` (dense host buffers of the outputs' sizes).
  void run(std::span<const void* const> args, std::span<void* const> outputs);
  /// Runs a program with a dynamic dimension on `rows` rows (1 to its largest bucket): the
  /// arguments dynamic()->arguments lists hold `rows` rows along its dim, and each output with
  /// an axis rows * factor entries along it (the others as arguments() and outputs() give them).
  /// The smallest bucket that holds them runs; its padding never shows.
  void run(std::span<const void* const> args, std::span<void* const> outputs, int64_t rows);
  /// Copies state tensor `name` (as this session has it now) to `dst`, of exactly its size in
  /// bytes; replaces it from `src` likewise (a ValueError naming the tensor otherwise).
  void readState(std::string_view name, void* dst, size_t nbytes) const;
  void writeState(std::string_view name, const void* src, size_t nbytes);
  /// Saves this session's state (a train step's fine-tuned weights and optimizer state), written
  /// atomically: where `path` ends in ".safetensors", as a safetensors file of the program's state
  /// tensors by name; otherwise as the whole artifact with this session's state in place of its
  /// own (the artifact's own path included: later opens read the new state).
  void save(const std::string& path) const;

private:
  size_t stateIndex(std::string_view name, size_t nbytes) const;
  /// Gives state tensor `i` this session's own memory (a copy of what it holds).
  void own(size_t i);
  /// State tensor `i`'s bytes, copied to the host.
  std::vector<uint8_t> hostCopy(size_t i) const;
  std::shared_ptr<const Artifact> artifact_;
  /// A bucket's program (rows 0: a program without a dynamic dimension), and the index into
  /// the session's state of each state tensor it reads.
  struct Bucket {
    int64_t rows = 0;
    std::shared_ptr<const Executable> exe;
    std::vector<size_t> state;
  };
  std::shared_ptr<const Executable> exe_; ///< the largest bucket's
  hal::Device& device_;
  std::vector<Bucket> buckets_; ///< ascending
  std::vector<ExecutableValue> arguments_;
  std::vector<std::string> names_;
  std::vector<Buffer> state_;
  std::vector<bool> owned_;
};

} // namespace weft
