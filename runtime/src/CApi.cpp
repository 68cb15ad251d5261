// weft_rt.h over the runtime's Artifact and Session: every weft error (and any other exception)
// becomes a status and the calling thread's message; nothing is thrown across the boundary.
#include "weft_rt.h"

#include "weft/runtime/Artifact.h"
#include "weft/runtime/Error.h"

#include <memory>
#include <new>
#include <string>
#include <vector>

struct weft_artifact {
  std::shared_ptr<const weft::Artifact> artifact;
  std::vector<std::string> programs;
};

struct weft_session {
  std::unique_ptr<weft::Session> session;
  std::vector<weft::ExecutableValue> state; // names, dtypes and shapes, for weft_session_state
};

namespace {

thread_local std::string lastError;

weft_status statusOf(weft::ErrorKind k) {
  switch (k) {
  case weft::ErrorKind::Value:
    return WEFT_VALUE_ERROR;
  case weft::ErrorKind::Shape:
    return WEFT_SHAPE_ERROR;
  case weft::ErrorKind::DType:
    return WEFT_DTYPE_ERROR;
  case weft::ErrorKind::Device:
    return WEFT_DEVICE_ERROR;
  case weft::ErrorKind::Index:
    return WEFT_INDEX_ERROR;
  case weft::ErrorKind::IO:
    return WEFT_IO_ERROR;
  case weft::ErrorKind::Internal:
    return WEFT_INTERNAL_ERROR;
  }
  return WEFT_INTERNAL_ERROR;
}

/// Runs `fn`, turning what it throws into a status and this thread's message.
template <typename Fn> weft_status guarded(Fn&& fn) {
  try {
    fn();
    lastError.clear();
    return WEFT_OK;
  } catch (const weft::Error& e) {
    lastError = e.what();
    return statusOf(e.kind());
  } catch (const std::bad_alloc&) {
    lastError = "out of memory";
    return WEFT_VALUE_ERROR;
  } catch (const std::exception& e) {
    lastError = std::string("internal error, please report: ") + e.what();
    return WEFT_INTERNAL_ERROR;
  } catch (...) {
    lastError = "internal error, please report: an unknown exception";
    return WEFT_INTERNAL_ERROR;
  }
}

void require(bool ok, const char* what) {
  WEFT_CHECK(ok, Value, what);
}

weft_status describe(const std::vector<weft::ExecutableValue>& values, int32_t i,
                     weft_value_info* out) {
  return guarded([&] {
    require(out != nullptr, "the weft_value_info pointer is null");
    WEFT_CHECK(i >= 0 && static_cast<size_t>(i) < values.size(), Index, "index ", i,
               " is out of range (there are ", values.size(), ")");
    const weft::ExecutableValue& v = values[static_cast<size_t>(i)];
    out->name = v.name.c_str();
    out->dtype = static_cast<weft_dtype>(v.dtype);
    out->rank = static_cast<int32_t>(v.shape.size());
    out->shape = v.shape.data();
    out->nbytes = static_cast<size_t>(weft::numel(v.shape)) * weft::elementSize(v.dtype);
  });
}

} // namespace

static_assert(static_cast<int>(weft::DType::Float32) == WEFT_FLOAT32 &&
                  static_cast<int>(weft::DType::Bool) == WEFT_BOOL &&
                  static_cast<int>(weft::DType::Float64) == WEFT_FLOAT64,
              "weft_dtype follows weft's DType");

extern "C" {

const char* weft_last_error(void) {
  return lastError.c_str();
}

weft_status weft_artifact_open(const char* path, weft_artifact** out) {
  return guarded([&] {
    require(path != nullptr && out != nullptr, "weft_artifact_open: a null argument");
    *out = nullptr;
    auto a = std::make_unique<weft_artifact>();
    a->artifact = weft::Artifact::open(path);
    a->programs = a->artifact->programNames();
    *out = a.release();
  });
}

weft_status weft_artifact_open_memory(const void* data, size_t size, weft_artifact** out) {
  return guarded([&] {
    require(data != nullptr && out != nullptr, "weft_artifact_open_memory: a null argument");
    *out = nullptr;
    auto a = std::make_unique<weft_artifact>();
    a->artifact = weft::Artifact::fromMemory({static_cast<const uint8_t*>(data), size});
    a->programs = a->artifact->programNames();
    *out = a.release();
  });
}

void weft_artifact_release(weft_artifact* artifact) {
  delete artifact;
}

int32_t weft_artifact_program_count(const weft_artifact* artifact) {
  return artifact == nullptr ? 0 : static_cast<int32_t>(artifact->programs.size());
}

const char* weft_artifact_program_name(const weft_artifact* artifact, int32_t i) {
  if (artifact == nullptr || i < 0 || static_cast<size_t>(i) >= artifact->programs.size())
    return nullptr;
  return artifact->programs[static_cast<size_t>(i)].c_str();
}

const char* weft_artifact_producer(const weft_artifact* artifact) {
  return artifact == nullptr ? "" : artifact->artifact->producer().c_str();
}

weft_status weft_session_create(weft_artifact* artifact, const char* program, const char* device,
                                weft_session** out) {
  return guarded([&] {
    require(artifact != nullptr && program != nullptr && out != nullptr,
            "weft_session_create: a null argument");
    *out = nullptr;
    weft::hal::Device& d = weft::hal::device(weft::Device(device == nullptr ? "cpu" : device));
    auto s = std::make_unique<weft_session>();
    s->session = std::make_unique<weft::Session>(artifact->artifact, program, d);
    for (const std::string& name : s->session->stateNames()) {
      const weft::ArtifactTensor* t = artifact->artifact->findState(name);
      s->state.push_back({name, t->dtype, t->shape});
    }
    *out = s.release();
  });
}

void weft_session_release(weft_session* session) {
  delete session;
}

int32_t weft_session_argument_count(const weft_session* session) {
  return session == nullptr ? 0 : static_cast<int32_t>(session->session->arguments().size());
}

int32_t weft_session_output_count(const weft_session* session) {
  return session == nullptr ? 0 : static_cast<int32_t>(session->session->outputs().size());
}

int32_t weft_session_state_count(const weft_session* session) {
  return session == nullptr ? 0 : static_cast<int32_t>(session->state.size());
}

weft_status weft_session_argument(const weft_session* session, int32_t i, weft_value_info* out) {
  if (session == nullptr) return guarded([] { require(false, "the session is null"); });
  return describe(session->session->arguments(), i, out);
}

weft_status weft_session_output(const weft_session* session, int32_t i, weft_value_info* out) {
  if (session == nullptr) return guarded([] { require(false, "the session is null"); });
  return describe(session->session->outputs(), i, out);
}

weft_status weft_session_state(const weft_session* session, int32_t i, weft_value_info* out) {
  if (session == nullptr) return guarded([] { require(false, "the session is null"); });
  return describe(session->state, i, out);
}

namespace {
weft_status runSession(weft_session* session, const void* const* arguments, void* const* outputs,
                       int64_t rows, const char* fn) {
  return guarded([&] {
    WEFT_CHECK(session != nullptr, Value, fn, ": the session is null");
    const size_t na = session->session->arguments().size(), no = session->session->outputs().size();
    WEFT_CHECK(na == 0 || arguments != nullptr, Value, fn, ": the arguments array is null");
    WEFT_CHECK(no == 0 || outputs != nullptr, Value, fn, ": the outputs array is null");
    std::span<const void* const> in(arguments, na);
    std::span<void* const> out(outputs, no);
    if (rows < 0)
      session->session->run(in, out);
    else
      session->session->run(in, out, rows);
  });
}
} // namespace

weft_status weft_session_run(weft_session* session, const void* const* arguments,
                             void* const* outputs) {
  return runSession(session, arguments, outputs, -1, "weft_session_run");
}

weft_status weft_session_run_rows(weft_session* session, int64_t rows,
                                  const void* const* arguments, void* const* outputs) {
  if (rows < 0)
    return guarded([&] {
      WEFT_FAIL(Value, "weft_session_run_rows: ", rows, " rows (a count from 1 to the largest "
                "bucket)");
    });
  return runSession(session, arguments, outputs, rows, "weft_session_run_rows");
}

int32_t weft_session_argument_batched(const weft_session* session, int32_t i) {
  if (session == nullptr || !session->session->dynamic()) return 0;
  for (int32_t a : session->session->dynamic()->arguments)
    if (a == i) return 1;
  return 0;
}

weft_status weft_session_output_batch(const weft_session* session, int32_t i, int32_t* axis,
                                      int64_t* factor) {
  return guarded([&] {
    require(session != nullptr && axis != nullptr && factor != nullptr,
            "weft_session_output_batch: a null argument");
    const auto& outputs = session->session->outputs();
    WEFT_CHECK(i >= 0 && static_cast<size_t>(i) < outputs.size(), Index, "output ", i,
               " is out of range (there are ", outputs.size(), ")");
    *axis = -1;
    *factor = 1;
    if (const auto& d = session->session->dynamic()) {
      *axis = d->outputAxes[static_cast<size_t>(i)].first;
      *factor = d->outputAxes[static_cast<size_t>(i)].second;
    }
  });
}

int32_t weft_session_bucket_count(const weft_session* session) {
  if (session == nullptr) return 0;
  try {
    return static_cast<int32_t>(session->session->buckets().size());
  } catch (...) { // out of memory: nothing crosses the boundary
    return 0;
  }
}

int64_t weft_session_bucket(const weft_session* session, int32_t i) {
  if (session == nullptr || i < 0) return 0;
  try {
    std::vector<int64_t> b = session->session->buckets();
    return static_cast<size_t>(i) < b.size() ? b[static_cast<size_t>(i)] : 0;
  } catch (...) { // out of memory: nothing crosses the boundary
    return 0;
  }
}

int32_t weft_session_dynamic_dim(const weft_session* session) {
  if (session == nullptr || !session->session->dynamic()) return -1;
  return static_cast<int32_t>(session->session->dynamic()->dim);
}

weft_status weft_session_read_state(const weft_session* session, const char* name, void* dst,
                                    size_t nbytes) {
  return guarded([&] {
    require(session != nullptr && name != nullptr && (dst != nullptr || nbytes == 0),
            "weft_session_read_state: a null argument");
    session->session->readState(name, dst, nbytes);
  });
}

weft_status weft_session_write_state(weft_session* session, const char* name, const void* src,
                                     size_t nbytes) {
  return guarded([&] {
    require(session != nullptr && name != nullptr && (src != nullptr || nbytes == 0),
            "weft_session_write_state: a null argument");
    session->session->writeState(name, src, nbytes);
  });
}

weft_status weft_session_save(const weft_session* session, const char* path) {
  return guarded([&] {
    require(session != nullptr && path != nullptr, "weft_session_save: a null argument");
    session->session->save(path);
  });
}

} // extern "C"
