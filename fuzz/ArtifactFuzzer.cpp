// libFuzzer target for the artifact loader (weft/runtime/Artifact.h), which runs on untrusted
// files: any bytes open as an artifact or give a weft::Error, never a crash, undefined behaviour,
// a hang or an allocation in proportion to a count they declare. The bytes are an in-memory file
// (memfd), opened by path as a user's file would be.
#include "weft/runtime/Artifact.h"
#include "weft/runtime/Error.h"

#include <cstddef>
#include <cstdint>
#include <string>

#include <sys/mman.h>
#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const int fd = ::memfd_create("artifact", 0);
  if (fd < 0) __builtin_trap();
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size))
    __builtin_trap();
  try {
    std::shared_ptr<const weft::Artifact> a =
        weft::Artifact::open("/proc/self/fd/" + std::to_string(fd));
    for (const std::string& name : a->programNames()) // what weft-run --info reads
      (void)a->program(name).plan.steps.size();
    for (const weft::ArtifactTensor& t : a->state())
      (void)t.nbytes();
  } catch (const weft::Error&) {
  }
  return 0;
}
