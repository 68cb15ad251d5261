/* The C API (weft_rt.h) from C, linking libweft_rt alone: the exported CNN (cnn.weft, as
 * weft_aot_writer left it) gives the JIT's outputs bit for bit, from 8 threads at once (1000
 * requests each, one session per thread, one artifact), and bad calls are statuses with messages.
 * Usage: weft_rt_test DIR */
#include "weft_rt.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kThreads = 8, kRequests = 1000 };

static void* readFile(const char* dir, const char* name, size_t* size) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE* f = fopen(path, "rb");
  if (f == NULL) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  void* data = malloc((size_t)n);
  if (data != NULL && fread(data, 1, (size_t)n, f) != (size_t)n) {
    free(data);
    data = NULL;
  }
  fclose(f);
  *size = (size_t)n;
  return data;
}

static int failures = 0;
#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "weft_rt_test:%d: ", __LINE__);                                              \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fprintf(stderr, "\n");                                                                       \
      ++failures;                                                                                  \
    }                                                                                              \
  } while (0)

struct Job {
  weft_artifact* artifact;
  const void* image;
  const void* expected;
  size_t outBytes;
  int mismatches;
  int errors;
};

static void* serve(void* arg) {
  struct Job* job = (struct Job*)arg;
  weft_session* s = NULL;
  if (weft_session_create(job->artifact, "forward", "cpu", &s) != WEFT_OK) {
    job->errors++;
    return NULL;
  }
  void* out = malloc(job->outBytes);
  for (int i = 0; i < kRequests; ++i) {
    const void* in[1] = {job->image};
    void* outs[1] = {out};
    if (weft_session_run(s, in, outs) != WEFT_OK) job->errors++;
    else if (memcmp(out, job->expected, job->outBytes) != 0) job->mismatches++;
  }
  free(out);
  weft_session_release(s);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: weft_rt_test DIR\n");
    return 2;
  }
  const char* dir = argv[1];
  char path[4096];
  snprintf(path, sizeof path, "%s/cnn.weft", dir);

  weft_artifact* a = NULL;
  CHECK(weft_artifact_open(path, &a) == WEFT_OK, "open: %s", weft_last_error());
  if (a == NULL) return 1;
  CHECK(strcmp(weft_last_error(), "") == 0, "a success leaves no message");
  CHECK(weft_artifact_program_count(a) == 1 && strcmp(weft_artifact_program_name(a, 0), "forward") == 0,
        "programs");
  CHECK(weft_artifact_program_name(a, 1) == NULL, "a name past the end");
  CHECK(strncmp(weft_artifact_producer(a), "weft ", 5) == 0, "producer %s", weft_artifact_producer(a));

  weft_session* s = NULL;
  CHECK(weft_session_create(a, "forward", "cpu", &s) == WEFT_OK, "session: %s", weft_last_error());
  CHECK(weft_session_argument_count(s) == 1 && weft_session_output_count(s) == 1, "signature");
  weft_value_info in, out;
  CHECK(weft_session_argument(s, 0, &in) == WEFT_OK && in.dtype == WEFT_FLOAT32 && in.rank == 4,
        "argument 0");
  CHECK(weft_session_output(s, 0, &out) == WEFT_OK && out.dtype == WEFT_FLOAT32, "output 0");
  CHECK(weft_session_argument(s, 1, &in) == WEFT_INDEX_ERROR, "argument 1 is out of range");

  size_t imageBytes = 0, expectedBytes = 0;
  void* image = readFile(dir, "cnn_inputs.bin", &imageBytes);
  void* expected = readFile(dir, "cnn_expected.bin", &expectedBytes);
  CHECK(image != NULL && expected != NULL && imageBytes == in.nbytes && expectedBytes == out.nbytes,
        "the inputs and expected outputs weft_aot_writer wrote");
  if (failures) return 1;

  /* One call: the JIT's bits. */
  void* logits = malloc(out.nbytes);
  const void* args[1] = {image};
  void* outs[1] = {logits};
  CHECK(weft_session_run(s, args, outs) == WEFT_OK, "run: %s", weft_last_error());
  CHECK(memcmp(logits, expected, out.nbytes) == 0, "the outputs differ from the JIT's");

  /* State: read, replaced (the session's own copy), read back; the artifact's is untouched. */
  weft_value_info st;
  CHECK(weft_session_state_count(s) == 4 && weft_session_state(s, 0, &st) == WEFT_OK, "state");
  float* w = malloc(st.nbytes);
  CHECK(weft_session_read_state(s, st.name, w, st.nbytes) == WEFT_OK, "read: %s", weft_last_error());
  float* zeros = calloc(1, st.nbytes);
  CHECK(weft_session_write_state(s, st.name, zeros, st.nbytes) == WEFT_OK, "write: %s", weft_last_error());
  CHECK(weft_session_read_state(s, st.name, w, st.nbytes) == WEFT_OK && memcmp(w, zeros, st.nbytes) == 0,
        "the written state reads back");
  CHECK(weft_session_read_state(s, st.name, w, st.nbytes + 4) == WEFT_VALUE_ERROR, "a wrong size");
  CHECK(weft_session_read_state(s, "no.such.tensor", w, 4) == WEFT_VALUE_ERROR, "an unknown name");

  /* Errors: statuses and messages, never a crash. */
  weft_artifact* missing = NULL;
  CHECK(weft_artifact_open("/nonexistent/model.weft", &missing) == WEFT_IO_ERROR && missing == NULL,
        "a missing file");
  CHECK(strstr(weft_last_error(), "model.weft") != NULL, "the message names the file: %s",
        weft_last_error());
  weft_session* none = NULL;
  CHECK(weft_session_create(a, "train_step", "cpu", &none) == WEFT_VALUE_ERROR && none == NULL,
        "an unknown program");
  CHECK(weft_session_create(a, "forward", "tpu:3", &none) == WEFT_VALUE_ERROR, "an unknown device");
  CHECK(weft_session_run(NULL, args, outs) == WEFT_VALUE_ERROR, "a null session");
  CHECK(weft_session_run(s, NULL, outs) == WEFT_VALUE_ERROR, "null arguments");

  /* 8 threads x 1000 requests, a session each, one artifact: every result the JIT's. */
  pthread_t threads[kThreads];
  struct Job jobs[kThreads];
  for (int t = 0; t < kThreads; ++t) {
    jobs[t] = (struct Job){a, image, expected, out.nbytes, 0, 0};
    pthread_create(&threads[t], NULL, serve, &jobs[t]);
  }
  int mismatches = 0, errors = 0;
  for (int t = 0; t < kThreads; ++t) {
    pthread_join(threads[t], NULL);
    mismatches += jobs[t].mismatches;
    errors += jobs[t].errors;
  }
  CHECK(mismatches == 0 && errors == 0, "%d mismatches and %d errors in %d requests", mismatches,
        errors, kThreads * kRequests);
  printf("weft_rt: %d requests from %d threads, %d mismatches\n", kThreads * kRequests, kThreads,
         mismatches);

  weft_session_release(s);
  weft_artifact_release(a);
  free(logits), free(w), free(zeros), free(image), free(expected);
  return failures == 0 ? 0 : 1;
}
