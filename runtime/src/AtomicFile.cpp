// Atomic file writes: a temporary file beside the target, synced and renamed over it.
#include "weft/runtime/AtomicFile.h"

#include "weft/runtime/Error.h"
#include "weft/runtime/InputFile.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <utility>

#include <fcntl.h>
#include <unistd.h>

namespace weft::detail {

AtomicFile::AtomicFile(const std::string& target, std::string context)
    : target_(target), ctx_(std::move(context)) {
  static std::atomic<uint64_t> counter{0};
  for (int attempt = 0; fd_ < 0; ++attempt) {
    path_ = concat(target, ".tmp.", ::getpid(), ".", counter++);
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    // A crashed process's leftover may hold the name; any other failure is final.
    WEFT_CHECK(fd_ >= 0 || (errno == EEXIST && attempt < 100), IO, ctx_,
               "cannot create a temporary file next to it: ", errnoText());
  }
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(path_.c_str());
}

void AtomicFile::write(const void* data, size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t r = ::write(fd_, p, std::min<size_t>(n, 1U << 30));
    if (r < 0 && errno == EINTR) continue;
    WEFT_CHECK(r > 0, IO, ctx_, "cannot write ", path_, ": ", errnoText());
    p += r, n -= static_cast<size_t>(r);
  }
}

void AtomicFile::commit() {
  WEFT_CHECK(::fsync(fd_) == 0, IO, ctx_, "cannot sync ", path_, ": ", errnoText());
  int fd = std::exchange(fd_, -1);
  WEFT_CHECK(::close(fd) == 0, IO, ctx_, "cannot close ", path_, ": ", errnoText());
  WEFT_CHECK(::rename(path_.c_str(), target_.c_str()) == 0, IO, ctx_,
             "cannot replace it with the written file: ", errnoText());
  committed_ = true;
  // Syncing the directory makes the rename itself survive a power loss. A filesystem that cannot
  // sync directories still holds the complete new file, so a failure here is no error.
  size_t slash = target_.rfind('/');
  std::string dir = slash == std::string::npos ? "." : target_.substr(0, std::max<size_t>(slash, 1));
  int d = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d >= 0) {
    ::fsync(d);
    ::close(d);
  }
}

} // namespace weft::detail
