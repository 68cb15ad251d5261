// A compiled program in runtime terms, complete and saveable: its signature, its named state, and
// the plan (interpreter steps with op codes and attributes, kernel launches by index into a kernel
// table with the generated code, buffer lifetimes). Loading and running one needs only the runtime.
#pragma once

#include "weft/runtime/Interpreter.h"
#include "weft/runtime/Plan.h"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace weft {

/// A named, typed value of an executable's signature.
struct ExecutableValue {
  std::string name;
  DType dtype = DType::Float32;
  Shape shape;
  bool operator==(const ExecutableValue&) const = default;
};

/// A state input holding a random draw's key, int64 [2] = (seed, offset): a caller that wants
/// fresh numbers on every call, as eager code draws them, moves its offset by `stride` after each
/// call (the draws its generator makes per call; 0 where each call repeats the first's draws).
struct RandomKey {
  int32_t state = 0;
  int64_t stride = 0;
  bool operator==(const RandomKey&) const = default;
};

/// What makes a program one bucket of a dynamic dimension (compile()'s dynamic_dim): its last
/// argument is a bool [bucket] mask, true for the real rows; the `arguments` listed have `bucket`
/// rows along `dim`. A caller with fewer rows repeats its last row up to the bucket, and cuts each
/// output with an axis to rows * factor along that axis (the others are whole).
struct DynamicBatch {
  int64_t dim = 0;
  int64_t bucket = 0;
  std::vector<int32_t> arguments;
  /// Per output: the axis the rows lie along (-1: none) and how many entries a row has there.
  std::vector<std::pair<int32_t, int64_t>> outputAxes;
  bool operator==(const DynamicBatch&) const = default;
};

class Executable {
public:
  /// The arguments each call passes, in order.
  std::vector<ExecutableValue> arguments;
  /// The state each call passes after the arguments (parameters, buffers, optimizer state,
  /// constants): read, and for those the plan updates, written in place.
  std::vector<ExecutableValue> state;
  /// What it returns, in order.
  std::vector<ExecutableValue> outputs;
  Plan plan;
  /// The state inputs that hold random draws' keys (Session moves them on after every call).
  std::vector<RandomKey> randomKeys;
  /// Set where the program is one bucket of a dynamic dimension.
  std::optional<DynamicBatch> dynamic;
  /// The program's text IR, for inspection ("" where it was not kept).
  std::string ir;

  /// The executable as bytes (a Program of proto/weft/artifact.proto behind a header with a
  /// format version and a checksum): everything above except loaded code.
  std::vector<uint8_t> save() const;
  /// An executable from save()'s bytes, its code loaded on `device`. Damaged or truncated bytes,
  /// another format version, or code built for another target are a weft::Error.
  static Executable load(std::span<const uint8_t> bytes, hal::Device& device = hal::cpu());

  /// Adds the code of `other`, the same program built for other targets, to this kernel table
  /// (after this one's: a device loads the first it can run); a ValueError where the two differ
  /// beyond their code and their kernels' names.
  void addCodeFrom(const Executable& other);

  /// Loads the kernel table's code on `device` unless it is loaded there; a DeviceError when the
  /// device lacks the kernel of one of the plan's interpreter steps, or cannot load the code.
  void loadCode(hal::Device& device = hal::cpu());

  /// Runs it on `device` (where loadCode put its code and where `args` and `stateValues` are),
  /// on values of the signature's types (an error naming the first mismatch); returns the
  /// outputs, on `device`. A random op's key (seed, offset) is one of the state values: a caller
  /// that wants fresh numbers passes a new key per call.
  std::vector<Buffer> run(hal::Device& device, std::span<const Buffer> args,
                          std::span<const Buffer> stateValues) const;
};

} // namespace weft
