// Hostile and unlucky inputs through the file readers, loads and options: files changed while
// read, gzip bombs, absurd headers, junk, loads that must change nothing when any part is bad,
// and options outside PyTorch's ranges. Each gives a weft::Error naming what is wrong and the
// caller's line, never a signal, a standard-library exception or a half-applied change.
#include "weft/runtime/InputFile.h"
#include "TestUtil.h"

#include <zlib.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace weft::test {
namespace {

namespace fs = std::filesystem;

/// Whether every byte of `message` is printable ASCII: nothing copied raw from a binary file.
bool printable(const std::string& message) {
  return std::all_of(message.begin(), message.end(), [](char c) { return c >= 0x20 && c < 0x7F; });
}

/// "IoHardeningTest.cpp:<line>", as a message names the caller's line.
std::string here(int line) {
  return "IoHardeningTest.cpp:" + std::to_string(line);
}

// ---- files that change while read ----

/// Whether this process has `path` open: a link in /proc/self/fd points at it.
bool isOpen(const fs::path& path) {
  std::error_code ec;
  for (fs::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code linkError;
    if (fs::read_symlink(it->path(), linkError) == path) return true;
  }
  return false;
}

/// A reader of one file kind: the file's bytes, how far a truncation cuts it, and the read.
struct RaceCase {
  std::string name;
  std::string bytes;
  size_t cut;
  std::function<Tensor(const std::string&)> read;
  /// Where a truncation may surface as the reader's own "truncated" error (a gzip stream cut
  /// while it is decompressed), not as "changed while being read".
  bool cutLooksTruncated = false;
};

/// What another process does to the file while it is read: the bytes it leaves and how.
struct Change {
  const char* what;
  std::string after;
  std::function<void(const std::string& path)> apply;
};

/// Reads the case's file while a second thread changes it as soon as it is open, until the reader
/// has reported the change (at most 10 tries). Every outcome must be an IOError naming the file or
/// a tensor equal to a read of the file before or after the change: never a signal (a reader that
/// mapped the file would die of SIGBUS here) nor a value read from a file half changed. Whether a
/// try catches the reader mid-read depends on the machine's load, so that the change is noticed
/// is checked deterministically apart (InputFileNoticesEveryChangeAfterOpen).
void changeWhileReading(const TempDir& dir, const RaceCase& c, const Change& change) {
  SCOPED_TRACE(c.name + std::string(", ") + change.what);
  const Tensor before = c.read(dir.write(c.name + ".before", c.bytes));
  std::optional<Tensor> after;
  try {
    after = c.read(dir.write(c.name + ".after", change.after));
  } catch (const IOError&) {
  }
  const std::string path = dir.write(c.name, c.bytes);
  int noticed = 0;
  for (int attempt = 0; attempt < 10 && noticed == 0; ++attempt) {
    dir.write(c.name, c.bytes);
    std::atomic<bool> done{false};
    std::thread other([&] {
      while (!done.load())
        if (isOpen(path)) return change.apply(path);
    });
    std::string error;
    std::optional<Tensor> result;
    try {
      result = c.read(path);
    } catch (const IOError& e) {
      error = e.what();
    } catch (const std::exception& e) {
      error = std::string("not an IOError: ") + e.what();
    }
    done = true;
    other.join();
    if (result) {
      EXPECT_TRUE(sameBytes(*result, before) || (after && sameBytes(*result, *after)))
          << "a read gave a value that the file held neither before nor after the change";
      continue;
    }
    EXPECT_TRUE(has(error, "'" + path + "'")) << error;
    noticed += has(error, "changed while being read") ||
               (c.cutLooksTruncated && (has(error, "truncated") || has(error, "corrupt")));
  }
  if (noticed == 0)
    std::printf("[ note ] %s, %s: no try caught the reader mid-read\n", c.name.c_str(),
                change.what);
}

/// The readers' file: every change after open (truncated, grown, rewritten in place) is an IOError
/// saying so when the reader reads past it or checks at the end, whatever the timing.
TEST(FileReaders, InputFileNoticesEveryChangeAfterOpen) {
  TempDir dir;
  const std::string bytes(4096, 'x');
  struct Case {
    const char* what;
    std::function<void(const std::string&)> change;
  };
  const std::vector<Case> cases = {
      {"truncated", [](const std::string& p) { ::truncate(p.c_str(), 100); }},
      {"grown", [&](const std::string& p) { dir.write(p.substr(p.rfind('/') + 1), bytes + "y"); }},
      {"rewritten", [&](const std::string& p) {
         ::usleep(20000); // a later modification time, on every file system's clock
         dir.write(p.substr(p.rfind('/') + 1), std::string(4096, 'z'));
       }}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string path = dir.write(std::string("f-") + c.what, bytes);
    detail::InputFile file(path, "test: '" + path + "': ");
    EXPECT_EQ(file.size(), bytes.size());
    c.change(path);
    std::string buffer(bytes.size(), '\0');
    std::string m = messageOf<IOError>([&] {
      file.readAt(0, buffer.data(), buffer.size());
      file.checkUnchanged();
    });
    EXPECT_TRUE(has(m, "changed while being read") && has(m, "'" + path + "'")) << m;
  }
}

/// `data` as one gzip member.
std::string gzipMember(const std::string& data) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY),
            Z_OK);
  std::string out(deflateBound(&zs, data.size()), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

/// 8 MB of a CSV table: rows "i,i/2,-i".
std::string bigCsv() {
  std::string text = "a,b,c\n";
  for (int i = 0; text.size() < (8u << 20); ++i)
    text += std::to_string(i) + "," + std::to_string(i / 2) + ".5," + std::to_string(-i) + "\n";
  return text;
}

std::string patternBytes(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i)
    s[i] = static_cast<char>(i * 7 % 251);
  return s;
}

TEST(FileReaders, SurviveTheFileTruncatedOrGrownWhileTheyReadIt) {
  TempDir dir;
  const std::string csv = bigCsv();
  const std::string payload = patternBytes(8u << 20);
  const std::string idx = idxBytes(0x08, {8, 1024, 1024}, payload);
  Tensor big = from_vector(std::vector<float>(2u << 20, 1.5f), {2 << 20});
  const std::vector<uint8_t> st = safetensors::save({{"w", big}});
  const std::string gz = gzipMember(idx);
  const std::vector<RaceCase> cases = {
      {"table.csv", csv, csv.rfind('\n', csv.size() / 2) + 1,
       [](const std::string& p) { return data::read_csv_tensor(p); }},
      {"images.idx", idx, idx.size() / 2, [](const std::string& p) { return data::read_idx(p); }},
      {"images.idx.gz", gz, gz.size() / 2, [](const std::string& p) { return data::read_idx(p); },
       true},
      {"corpus.txt", payload, payload.size() / 2,
       [](const std::string& p) { return data::read_bytes({p}); }},
      {"w.safetensors", std::string(st.begin(), st.end()), st.size() / 2,
       [](const std::string& p) { return safetensors::load_file(p).at(0).second; }},
  };
  const std::string tail = "1,2.5,3\n";
  for (const RaceCase& c : cases) {
    changeWhileReading(dir, c, {"truncated", c.bytes.substr(0, c.cut), [&](const std::string& p) {
                                  ASSERT_EQ(::truncate(p.c_str(), static_cast<off_t>(c.cut)), 0);
                                }});
    changeWhileReading(dir, c, {"grown", c.bytes + tail, [&](const std::string& p) {
                                  std::ofstream(p, std::ios::binary | std::ios::app) << tail;
                                }});
  }
}

TEST(FileReaders, NeverTrustASizeTheFileReported) {
  // Files in /proc report size 0 and hold bytes: a reader that trusted the size would read
  // nothing (or map nothing) and parse an empty file; each must see that the file holds more.
  for (auto read :
       std::vector<std::function<void()>>{[] { data::read_csv("/proc/self/status"); },
                                          [] { data::read_bytes({"/proc/self/status"}); },
                                          [] { safetensors::load_file("/proc/self/status"); }}) {
    std::string m = messageOf<IOError>(read);
    EXPECT_TRUE(has(m, "'/proc/self/status'")) << m;
    EXPECT_TRUE(has(m, "changed while being read") || has(m, "too short")) << m;
  }
  EXPECT_TRUE(has(messageOf<IOError>([] { data::read_csv("/proc/self/status"); }),
                  "holds more than the 0 bytes its size said"));
  // /proc/self/mem cannot be read at offset 0: an unreadable file, even for root.
  for (auto read : std::vector<std::function<void()>>{
           [] { data::read_csv("/proc/self/mem"); }, [] { data::read_idx("/proc/self/mem"); },
           [] { data::read_bytes({"/proc/self/mem"}); }}) {
    std::string m = messageOf<IOError>(read);
    EXPECT_TRUE(has(m, "'/proc/self/mem'") && has(m, "cannot read it")) << m;
  }
}

// ---- gzip bombs and absurd headers ----

TEST(FileReaders, GzipBombBehindASmallIdxHeaderFailsAfterTheDeclaredPayload) {
  TempDir dir;
  // The header declares 16 bytes; 6 GB of zeros follow in 6 MB of gzip, then a damaged member.
  // A reader that decompressed the stream before reading the header would spend seconds and
  // gigabytes and then report the damage; weft reads the header, the 16 bytes and one more.
  const std::string mib(1u << 20, '\0');
  std::string bomb = gzipMember(idxBytes(0x08, {16}, std::string(16, 'x')) + mib);
  const std::string zeros = gzipMember(mib);
  for (int i = 0; i < 6000; ++i)
    bomb += zeros;
  bomb += std::string("\x1f\x8b\x08\0\0\0\0\0\0\x03", 10) + std::string(64, '\xff');
  ASSERT_LT(bomb.size(), 8u << 20);
  const std::string path = dir.write("bomb.idx.gz", bomb);
  const int line = __LINE__ + 1;
  std::string m = messageOf<IOError>([&] { data::read_idx(path); });
  EXPECT_TRUE(has(m, "'" + path + "'")) << m;
  EXPECT_TRUE(has(m, "longer than its header says") && has(m, "needs 16 data bytes")) << m;
  EXPECT_FALSE(has(m, "corrupt")) << "the reader decompressed past the payload: " << m;
  EXPECT_TRUE(has(m, here(line))) << m;
}

TEST(FileReaders, HeadersDeclaringMoreThanTheFileHoldsAllocateNothing) {
  TempDir dir;
  // 2^32-1 x 2^16-1 x 15 bytes fit in int64 but in no file of 32 bytes, raw or compressed.
  const std::string header = idxBytes(0x08, {0xffffffff, 0xffff, 15}, "abcdefghijklmnop");
  const std::string raw = dir.write("huge.idx", header);
  std::string m = messageOf<IOError>([&] { data::read_idx(raw); });
  EXPECT_TRUE(has(m, raw) && has(m, "truncated") && has(m, "found 16")) << m;
  const std::string gz = dir.write("huge.idx.gz", gzipMember(header));
  m = messageOf<IOError>([&] { data::read_idx(gz); });
  EXPECT_TRUE(has(m, gz) && has(m, "compressed bytes can hold")) << m;
  // Trailing data, raw or compressed, a short payload and a header cut off.
  const std::string longer = dir.write("longer.idx", idxBytes(0x08, {2}, "abc"));
  m = messageOf<IOError>([&] { data::read_idx(longer); });
  EXPECT_TRUE(has(m, "longer than its header says") && has(m, "needs 2 data bytes, found 3")) << m;
  const std::string longerGz = dir.write("longer.gz", gzipMember(idxBytes(0x08, {2}, "abc")));
  m = messageOf<IOError>([&] { data::read_idx(longerGz); });
  EXPECT_TRUE(has(m, "longer than its header says") && has(m, "more follow")) << m;
  const std::string shortGz = dir.write("short.gz", gzipMember(idxBytes(0x0D, {4}, "abcdefg")));
  m = messageOf<IOError>([&] { data::read_idx(shortGz); });
  EXPECT_TRUE(has(m, "needs 16 data bytes, found 7")) << m;
  const std::string cutHeader = dir.write("cut.idx", idxBytes(0x08, {2, 3}, "").substr(0, 9));
  m = messageOf<IOError>([&] { data::read_idx(cutHeader); });
  EXPECT_TRUE(has(m, "truncated inside its header")) << m;
}

// ---- directories, junk and messages ----

TEST(FileReaders, DirectoriesAndJunkAreIOErrorsNamingThePathInPrintableText) {
  TempDir dir;
  const std::string d = dir.path.string();
  const std::vector<std::function<void(const std::string&)>> readers = {
      [](const std::string& p) { data::read_csv(p); },
      [](const std::string& p) { data::read_csv_tensor(p); },
      [](const std::string& p) { data::read_idx(p); },
      [](const std::string& p) { data::read_bytes({p}); },
      [](const std::string& p) { safetensors::load_file(p); },
      [](const std::string& p) { safetensors::metadata(p); },
      [](const std::string& p) { Checkpoint::load(p); },
      [](const std::string& p) { data::CsvDataset{p}; },
  };
  std::string junk = "a,b\n1,";
  for (int i = 0; i < 5000; ++i)
    junk += static_cast<char>((i * 131 + 7) % 256);
  const std::string junkPath = dir.write("junk.bin", junk);
  for (size_t i = 0; i < readers.size(); ++i) {
    SCOPED_TRACE("reader " + std::to_string(i));
    std::string m = messageOf<IOError>([&] { readers[i](d); });
    EXPECT_TRUE(has(m, "'" + d + "'") && has(m, "is a directory")) << m;
    EXPECT_TRUE(has(m, "(called from " + std::string(__FILE__))) << m; // the lambda's line
    if (i == 3) continue; // bytes are bytes: read_bytes reads junk
    m = messageOf<IOError>([&] { readers[i](junkPath); });
    EXPECT_TRUE(has(m, "'" + junkPath + "'")) << m;
    EXPECT_TRUE(printable(m) && m.size() < 600) << "raw bytes of the file in: " << m;
  }
  // A FIFO is refused at once, not waited on for a writer.
  const std::string fifo = (dir.path / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (size_t i = 0; i < readers.size(); ++i) {
    std::string m = messageOf<IOError>([&] { readers[i](fifo); });
    EXPECT_TRUE(has(m, "'" + fifo + "'") && has(m, "not a regular file")) << m;
  }
  // A bad value is quoted as a short escaped excerpt.
  const std::string longField =
      dir.write("long.csv", "a\n1\n" + std::string(100000, '\x9f') + "\n");
  std::string m = messageOf<IOError>([&] { data::read_csv(longField); });
  EXPECT_TRUE(has(m, "line 3, column 1") && has(m, "\\x9f\\x9f") && has(m, "...")) << m;
  EXPECT_TRUE(printable(m) && m.size() < 600) << m;
}

// ---- CSV: the same result for any thread count ----

TEST(Csv, ResultsDoNotDependOnTheThreadCount) {
  TempDir dir;
  // Each file is larger than 4 chunks of 64 KiB, so 2 and 4 threads really split it.
  auto rows = [](int n, const std::string& eol, int floatAt) {
    std::string s;
    for (int i = 0; i < n; ++i)
      s += std::to_string(i) + ",\"" + std::to_string(i * 3) + "\"," +
           (i == floatAt ? "2.5" : std::to_string(-i)) + eol;
    return s;
  };
  const std::string blanks(300000, '\n'); // a first chunk of blank lines only
  const std::string wide(2000, ' ');      // rows so long that one chunk holds fewer than 100
  std::vector<std::pair<std::string, std::string>> files = {
      {"blank_after_header.csv", "a,b,c\n" + blanks + rows(20000, "\n", -1)},
      {"float_after_blanks.csv", "a,b,c\n" + blanks + rows(20000, "\n", 50)},
      {"trailing_blank.csv", "a,b,c\n" + rows(30000, "\n", 70) + blanks},
      {"crlf.csv", "a,b,c\r\n" + rows(30000, "\r\n", -1) + "\r\n\r\n"},
      {"no_final_newline.csv",
       [&] {
         std::string s = "a,b,c\n" + rows(30000, "\n", 99);
         return s.substr(0, s.rfind('\n', 450000));
       }()},
      {"wide_rows.csv",
       [&] {
         std::string s = "a,b,c\n";
         for (int i = 0; i < 300; ++i)
           s += std::to_string(i) + "," + wide + std::to_string(i) + "," + (i == 80 ? "0.5" : "7") +
                "\n";
         return s;
       }()},
  };
  for (const auto& [name, text] : files) {
    SCOPED_TRACE(name);
    ASSERT_GT(text.size(), 4u << 16);
    const std::string path = dir.write(name, text);
    std::optional<data::CsvTable> first;
    std::string firstError;
    for (int threads : {1, 2, 3, 4}) {
      std::optional<data::CsvTable> t;
      std::string error;
      try {
        t = data::read_csv(path, data::CsvOptions().threads(threads));
      } catch (const IOError& e) {
        error = std::string(e.what()).substr(0, std::string(e.what()).find(" (called from"));
      }
      if (threads == 1) {
        first = t, firstError = error;
        continue;
      }
      EXPECT_EQ(error, firstError) << threads << " threads";
      ASSERT_EQ(t.has_value(), first.has_value());
      if (!t) continue;
      EXPECT_EQ(t->names, first->names);
      ASSERT_EQ(t->columns.size(), first->columns.size());
      for (size_t c = 0; c < t->columns.size(); ++c)
        EXPECT_TRUE(sameBytes(t->columns[c], first->columns[c]))
            << "column " << c << " with " << threads
            << " threads: " << dtypeName(t->columns[c].dtype()) << " vs "
            << dtypeName(first->columns[c].dtype());
    }
    ASSERT_TRUE(first.has_value()) << firstError;
  }
  // The floats in rows 51 and 81 are among the first 100 values, whatever the first chunk holds
  // (a quarter of the wide file is 75 rows); with no float among them a column is int64.
  auto dtypes = [&](const std::string& name) {
    std::vector<DType> out;
    for (const Tensor& c :
         data::read_csv((dir.path / name).string(), data::CsvOptions().threads(4)).columns)
      out.push_back(c.dtype());
    return out;
  };
  EXPECT_EQ(dtypes("float_after_blanks.csv"), (std::vector<DType>{kInt64, kInt64, kFloat32}));
  EXPECT_EQ(dtypes("wide_rows.csv"), (std::vector<DType>{kInt64, kInt64, kFloat32}));
  EXPECT_EQ(dtypes("blank_after_header.csv"), (std::vector<DType>{kInt64, kInt64, kInt64}));
}

TEST(Csv, OptionsAreCheckedBeforeTheFileIsRead) {
  TempDir dir;
  const std::string path = dir.write("a.csv", "a\n1\n");
  const data::CsvOptions negative = data::CsvOptions().threads(-2);
  const int line = __LINE__ + 1;
  std::string m = messageOf<ValueError>([&] { data::read_csv(path, negative); });
  EXPECT_TRUE(has(m, "threads must be >= 0") && has(m, "-2") && has(m, here(line))) << m;
  m = messageOf<ValueError>([&] { data::read_csv(path, data::CsvOptions().delimiter('\n')); });
  EXPECT_TRUE(has(m, "delimiter cannot be '\\x0a'")) << m;
  m = messageOf<ValueError>([&] { data::read_csv(path, data::CsvOptions().delimiter('"')); });
  EXPECT_TRUE(has(m, "delimiter")) << m;
}

} // namespace
} // namespace weft::test
