// weft_rt.hpp: a thin C++ wrapper over the runtime's C API (weft_rt.h), header only, for C++
// programs that link libweft_rt.so alone: handles that release themselves, std::string and
// std::vector in place of pointers and counts, and a weft_rt::Error (with the status) where a call
// fails.
//
//   weft_rt::Artifact model = weft_rt::Artifact::open("model.weft");
//   weft_rt::Session session(model, "forward");
//   std::vector<float> logits(session.outputs()[0].nbytes / sizeof(float));
//   session.run({image.data()}, {logits.data()});
#ifndef WEFT_RT_HPP
#define WEFT_RT_HPP

#include "weft_rt.h"

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace weft_rt {

/// A failed call: the C API's status and the thread's message.
class Error : public std::runtime_error {
public:
  Error(weft_status status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  weft_status status() const { return status_; }

private:
  weft_status status_;
};

namespace detail {
inline void check(weft_status s) {
  if (s != WEFT_OK) throw Error(s, weft_last_error());
}
} // namespace detail

/// A value of a program's signature, or a state tensor.
struct ValueInfo {
  std::string name;
  weft_dtype dtype = WEFT_FLOAT32;
  std::vector<int64_t> shape;
  size_t nbytes = 0; ///< of its dense row-major data
};

/// An opened artifact; copies share it. Sessions keep it alive.
class Artifact {
public:
  static Artifact open(const std::string& path) {
    weft_artifact* a = nullptr;
    detail::check(weft_artifact_open(path.c_str(), &a));
    return Artifact(a);
  }
  /// Read in place: `data` must be 64-byte aligned and outlive the artifact and its sessions.
  static Artifact open_memory(const void* data, size_t size) {
    weft_artifact* a = nullptr;
    detail::check(weft_artifact_open_memory(data, size, &a));
    return Artifact(a);
  }
  std::vector<std::string> programs() const {
    std::vector<std::string> names;
    for (int32_t i = 0; i < weft_artifact_program_count(get()); ++i)
      names.emplace_back(weft_artifact_program_name(get(), i));
    return names;
  }
  std::string producer() const { return weft_artifact_producer(get()); }
  weft_artifact* get() const { return handle_.get(); }

private:
  explicit Artifact(weft_artifact* a) : handle_(a, weft_artifact_release) {}
  std::shared_ptr<weft_artifact> handle_;
};

/// A program of an artifact on a device; one thread at a time (one session per thread).
class Session {
public:
  Session(const Artifact& artifact, const std::string& program, const std::string& device = "cpu")
      : artifact_(artifact), handle_(nullptr, weft_session_release) {
    weft_session* s = nullptr;
    detail::check(weft_session_create(artifact.get(), program.c_str(), device.c_str(), &s));
    handle_.reset(s);
  }
  std::vector<ValueInfo> arguments() const {
    return values(weft_session_argument_count(get()), weft_session_argument);
  }
  std::vector<ValueInfo> outputs() const {
    return values(weft_session_output_count(get()), weft_session_output);
  }
  std::vector<ValueInfo> state() const {
    return values(weft_session_state_count(get()), weft_session_state);
  }
  /// Runs the program: each argument's dense data, and room for each output's.
  void run(const std::vector<const void*>& arguments, const std::vector<void*>& outputs) {
    checkCounts(arguments.size(), outputs.size());
    detail::check(weft_session_run(get(), arguments.data(), outputs.data()));
  }
  /// A dynamic program's buckets, ascending (empty: none), and its dimension (-1: none).
  std::vector<int64_t> buckets() const {
    std::vector<int64_t> out;
    for (int32_t i = 0; i < weft_session_bucket_count(get()); ++i)
      out.push_back(weft_session_bucket(get(), i));
    return out;
  }
  int32_t dynamic_dim() const { return weft_session_dynamic_dim(get()); }
  /// Whether argument `i` holds the rows; where output `i` holds them ({axis, factor}; axis -1:
  /// it is not batched).
  bool argument_batched(int32_t i) const { return weft_session_argument_batched(get(), i) != 0; }
  std::pair<int32_t, int64_t> output_batch(int32_t i) const {
    int32_t axis = -1;
    int64_t factor = 1;
    detail::check(weft_session_output_batch(get(), i, &axis, &factor));
    return {axis, factor};
  }
  /// Runs a dynamic program on `rows` rows (weft_session_run_rows).
  void run(const std::vector<const void*>& arguments, const std::vector<void*>& outputs,
           int64_t rows) {
    checkCounts(arguments.size(), outputs.size());
    detail::check(weft_session_run_rows(get(), rows, arguments.data(), outputs.data()));
  }
  /// State tensor `name`'s bytes.
  std::vector<uint8_t> read_state(const std::string& name) const {
    for (const ValueInfo& v : state())
      if (v.name == name) {
        std::vector<uint8_t> bytes(v.nbytes);
        detail::check(weft_session_read_state(get(), name.c_str(), bytes.data(), bytes.size()));
        return bytes;
      }
    throw Error(WEFT_VALUE_ERROR, "weft_rt::Session::read_state: no state '" + name + "'");
  }
  void write_state(const std::string& name, const void* data, size_t nbytes) {
    detail::check(weft_session_write_state(get(), name.c_str(), data, nbytes));
  }
  /// To a .safetensors file, or as the whole artifact (see weft_session_save).
  void save(const std::string& path) const { detail::check(weft_session_save(get(), path.c_str())); }
  weft_session* get() const { return handle_.get(); }

private:
  void checkCounts(size_t arguments, size_t outputs) const {
    const auto na = static_cast<size_t>(weft_session_argument_count(get()));
    const auto no = static_cast<size_t>(weft_session_output_count(get()));
    if (arguments != na || outputs != no)
      throw Error(WEFT_VALUE_ERROR, "weft_rt::Session::run: the program takes " +
                                        std::to_string(na) + " arguments and gives " +
                                        std::to_string(no) + " outputs; given " +
                                        std::to_string(arguments) + " and " +
                                        std::to_string(outputs));
  }
  using Describe = weft_status (*)(const weft_session*, int32_t, weft_value_info*);
  std::vector<ValueInfo> values(int32_t n, Describe describe) const {
    std::vector<ValueInfo> out;
    for (int32_t i = 0; i < n; ++i) {
      weft_value_info info{};
      detail::check(describe(get(), i, &info));
      out.push_back({info.name, info.dtype, std::vector<int64_t>(info.shape, info.shape + info.rank),
                     info.nbytes});
    }
    return out;
  }
  Artifact artifact_;
  std::unique_ptr<weft_session, void (*)(weft_session*)> handle_;
};

} // namespace weft_rt

#endif // WEFT_RT_HPP
