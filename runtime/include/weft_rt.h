/* weft_rt: the C API of weft's runtime, for programs that run exported artifacts (.weft) with no
 * compiler, no Python and no C++ exceptions crossing the boundary. Link libweft_rt.so.
 *
 *   weft_artifact* a;
 *   if (weft_artifact_open("model.weft", &a) != WEFT_OK) puts(weft_last_error());
 *   weft_session* s;
 *   weft_session_create(a, "forward", "cpu", &s);
 *   const void* in[] = {images};  void* out[] = {logits};
 *   weft_session_run(s, in, out);
 *   weft_session_release(s);  weft_artifact_release(a);
 *
 * Every function returning weft_status sets the calling thread's last error message (read with
 * weft_last_error()), "" on success. An artifact is shared by any number of sessions and threads;
 * a session serves one thread at a time. */
#ifndef WEFT_RT_H
#define WEFT_RT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define WEFT_RT_API __attribute__((visibility("default")))
#else
#define WEFT_RT_API
#endif

typedef enum weft_status {
  WEFT_OK = 0,
  WEFT_VALUE_ERROR = 1,    /* an argument outside what the call accepts */
  WEFT_SHAPE_ERROR = 2,
  WEFT_DTYPE_ERROR = 3,
  WEFT_DEVICE_ERROR = 4,   /* no such device, device memory exhausted, code it cannot run */
  WEFT_INDEX_ERROR = 5,
  WEFT_IO_ERROR = 6,       /* a file that cannot be read, or is not a valid artifact */
  WEFT_INTERNAL_ERROR = 7  /* weft's bug: please report the message */
} weft_status;

/* The element types, as weft names them ("float32", ...). */
typedef enum weft_dtype {
  WEFT_BOOL = 0,
  WEFT_UINT8 = 1,
  WEFT_INT32 = 2,
  WEFT_INT64 = 3,
  WEFT_FLOAT16 = 4,
  WEFT_BFLOAT16 = 5,
  WEFT_FLOAT32 = 6,
  WEFT_FLOAT64 = 7
} weft_dtype;

/* A value of a program's signature. `name` and `shape` live as long as the session. */
typedef struct weft_value_info {
  const char* name;
  weft_dtype dtype;
  int32_t rank;
  const int64_t* shape;
  size_t nbytes; /* of its dense row-major data */
} weft_value_info;

typedef struct weft_artifact weft_artifact;
typedef struct weft_session weft_session;

/* The calling thread's message of the last failed call ("" after a successful one). */
WEFT_RT_API const char* weft_last_error(void);

/* Opens (maps) the artifact at `path`. Release it when done; sessions keep it alive. */
WEFT_RT_API weft_status weft_artifact_open(const char* path, weft_artifact** out);
/* Opens the artifact in `data` (embedded in the binary, received over a network), read in place:
 * `data` must be 64-byte aligned and outlive the artifact and every session of it. */
WEFT_RT_API weft_status weft_artifact_open_memory(const void* data, size_t size, weft_artifact** out);
WEFT_RT_API void weft_artifact_release(weft_artifact* artifact);
/* Its programs ("forward", "train_step", ...): their count, and name `i` (NULL out of range). */
WEFT_RT_API int32_t weft_artifact_program_count(const weft_artifact* artifact);
WEFT_RT_API const char* weft_artifact_program_name(const weft_artifact* artifact, int32_t i);
/* The producer that wrote it ("weft 0.1.0"). */
WEFT_RT_API const char* weft_artifact_producer(const weft_artifact* artifact);

/* A session running `program` on `device` ("cpu", "vulkan:0"). */
WEFT_RT_API weft_status weft_session_create(weft_artifact* artifact, const char* program, const char* device,
                                weft_session** out);
WEFT_RT_API void weft_session_release(weft_session* session);
WEFT_RT_API int32_t weft_session_argument_count(const weft_session* session);
WEFT_RT_API int32_t weft_session_output_count(const weft_session* session);
WEFT_RT_API int32_t weft_session_state_count(const weft_session* session);
WEFT_RT_API weft_status weft_session_argument(const weft_session* session, int32_t i, weft_value_info* out);
WEFT_RT_API weft_status weft_session_output(const weft_session* session, int32_t i, weft_value_info* out);
WEFT_RT_API weft_status weft_session_state(const weft_session* session, int32_t i, weft_value_info* out);
/* Runs the program: `arguments[i]` points to argument i's dense data, `outputs[i]` to room for
 * output i's (weft_session_output's nbytes). A train step (export_train_step's "train_step")
 * updates the session's state: its parameters, optimizer state and random keys. */
WEFT_RT_API weft_status weft_session_run(weft_session* session, const void* const* arguments,
                             void* const* outputs);
/* A program exported with a dynamic dimension (ExportOptions::dynamic_dim, a batch): its
 * buckets, ascending (count 0: it has none), and the dimension (-1: none). The signature above
 * is the largest bucket's. */
WEFT_RT_API int32_t weft_session_bucket_count(const weft_session* session);
WEFT_RT_API int64_t weft_session_bucket(const weft_session* session, int32_t i);
WEFT_RT_API int32_t weft_session_dynamic_dim(const weft_session* session);
/* Whether argument `i` is batched (1: it holds the rows along the dimension; 0: not). */
WEFT_RT_API int32_t weft_session_argument_batched(const weft_session* session, int32_t i);
/* Where output `i` holds the rows: along `*axis`, `*factor` entries per row (-1 and 1: it is not
 * batched, whole at every row count). */
WEFT_RT_API weft_status weft_session_output_batch(const weft_session* session, int32_t i,
                                                  int32_t* axis, int64_t* factor);
/* Runs such a program on `rows` rows (1 to the largest bucket): the batched arguments hold `rows`
 * rows along the dimension, each batched output rows * factor entries along its axis (the rest as
 * the signature gives them); the smallest bucket holding them runs. */
WEFT_RT_API weft_status weft_session_run_rows(weft_session* session, int64_t rows,
                                              const void* const* arguments, void* const* outputs);
/* Copies the session's state tensor `name` out, or replaces it; `nbytes` must be its size. */
WEFT_RT_API weft_status weft_session_read_state(const weft_session* session, const char* name, void* dst,
                                    size_t nbytes);
WEFT_RT_API weft_status weft_session_write_state(weft_session* session, const char* name, const void* src,
                                     size_t nbytes);

/* Saves the session's state (after train steps: the fine-tuned weights and optimizer state),
 * atomically: to a safetensors file where `path` ends in ".safetensors", else as the whole
 * artifact with this state (the artifact's own file included). */
WEFT_RT_API weft_status weft_session_save(const weft_session* session, const char* path);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_RT_H */
