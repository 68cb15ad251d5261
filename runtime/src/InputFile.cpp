// InputFile: pread-based reads of a regular file that check every byte count, and printable
// excerpts of what a file holds.
#include "weft/runtime/InputFile.h"

#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

namespace weft::detail {

std::string excerpt(std::string_view bytes, size_t max) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < std::min(bytes.size(), max); ++i) {
    auto c = static_cast<unsigned char>(bytes[i]);
    if (c == '"' || c == '\'' || c == '\\')
      out += '\\', out += static_cast<char>(c);
    else if (c >= 0x20 && c < 0x7F)
      out += static_cast<char>(c);
    else
      out += "\\x", out += kHex[c >> 4], out += kHex[c & 15];
  }
  if (bytes.size() > max) out += "...";
  return out;
}

std::string errnoText() {
  return std::error_code(errno, std::generic_category()).message();
}

InputFile::InputFile(const std::string& path, std::string context) : context_(std::move(context)) {
  do // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below)
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  while (fd_ < 0 && errno == EINTR);
  WEFT_CHECK(fd_ >= 0, IO, context_, "cannot open it: ", errnoText());
  struct stat st {};
  const bool statted = ::fstat(fd_, &st) == 0;
  if (!statted || !S_ISREG(st.st_mode)) {
    const std::string why = !statted              ? "cannot stat it: " + errnoText()
                            : S_ISDIR(st.st_mode) ? "it is a directory, not a regular file"
                                                  : "it is not a regular file";
    ::close(fd_);
    WEFT_FAIL(IO, context_, why);
  }
  size_ = static_cast<uint64_t>(st.st_size);
  mtimeSec_ = st.st_mtim.tv_sec;
  mtimeNsec_ = st.st_mtim.tv_nsec;
}

InputFile::~InputFile() {
  ::close(fd_);
}

uint64_t InputFile::readSome(uint64_t offset, void* dst, uint64_t n) const {
  auto* p = static_cast<char*>(dst);
  uint64_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(fd_, p + done, std::min<uint64_t>(n - done, 1U << 30),
                              static_cast<off_t>(offset + done));
    if (r < 0 && errno == EINTR) continue;
    WEFT_CHECK(r >= 0, IO, context_, "cannot read it: ", errnoText());
    if (r == 0) break;
    done += static_cast<uint64_t>(r);
  }
  return done;
}

void InputFile::readAt(uint64_t offset, void* dst, uint64_t n) const {
  const uint64_t got = readSome(offset, dst, n);
  if (got < n)
    changed(concat("it ended at byte ", offset + got, " while ", offset + n, " were expected (",
                   size_, " at open)"));
}

void InputFile::expectSize(uint64_t size) const {
  if (size != size_) changed(concat("its size went from ", size, " to ", size_, " bytes"));
}

void InputFile::checkUnchanged() const {
  struct stat st {};
  WEFT_CHECK(::fstat(fd_, &st) == 0, IO, context_, "cannot stat it: ", errnoText());
  if (static_cast<uint64_t>(st.st_size) != size_)
    changed(concat("its size went from ", size_, " to ", st.st_size, " bytes"));
  if (st.st_mtim.tv_sec != mtimeSec_ || st.st_mtim.tv_nsec != mtimeNsec_)
    changed("it was written to");
  char probe = 0; // files whose size says nothing, as in /proc, hold bytes past it
  if (readSome(size_, &probe, 1) != 0)
    changed(concat("it holds more than the ", size_, " bytes its size said"));
}

void InputFile::changed(const std::string& how) const {
  WEFT_FAIL(IO, context_, "the file changed while being read (", how,
            "); read it again once nothing writes to it");
}

} // namespace weft::detail
