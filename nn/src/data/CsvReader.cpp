// read_csv: a CSV file read into memory, split at line boundaries and parsed one chunk per pool
// thread straight into the output tensors (a first pass counts each chunk's rows, so every chunk
// knows where its rows go).
#include "weft/data/Readers.h"

#include "weft/runtime/InputFile.h"

#include "weft/Functions.h"
#include "weft/runtime/ThreadPool.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string_view>

namespace weft::data {
namespace {

/// The whole file, read with pread into a byte tensor (weft's allocator refuses at once what
/// cannot fit) and checked to be unchanged at the end. No mapping: a file truncated by another
/// process while it is read is an IOError, not a SIGBUS.
class FileBytes {
public:
  FileBytes(const std::string& path, const std::string& ctx) {
    detail::InputFile file(path, ctx);
    WEFT_CHECK(file.size() <= static_cast<uint64_t>(INT64_MAX), IO, ctx, "its size ", file.size(),
               " is out of range");
    bytes_ = empty({static_cast<int64_t>(file.size())}, kUInt8);
    file.readAt(0, bytes_.data_ptr(), file.size());
    file.checkUnchanged();
  }
  const char* begin() const { return static_cast<const char*>(bytes_.data_ptr()); }
  const char* end() const { return begin() + bytes_.numel(); }

private:
  Tensor bytes_;
};

/// Where a column's values go: row r at base + r * stride, in `dtype`.
struct Sink {
  char* base;
  size_t stride;
  DType dtype;
};

/// A run of whole lines and what the passes learn about it.
struct Chunk {
  Chunk(const char* b, const char* e) : begin(b), end(e) {}
  const char* begin;
  const char* end;
  size_t rows = 0, lines = 0;         // pass 1: non-blank lines, all lines
  size_t firstRow = 0, firstLine = 0; // prefix sums: where the chunk's rows and lines start
  std::string error;                  // pass 2: the chunk's first bad row, if any
};

/// The end of the line starting at p (its '\n', or `end`).
const char* lineEnd(const char* p, const char* end) {
  const void* nl = std::memchr(p, '\n', static_cast<size_t>(end - p));
  return nl ? static_cast<const char*>(nl) : end;
}
/// The start of the line after the one ending at `nl` (`end` for the last line).
const char* afterLine(const char* nl, const char* end) {
  return nl < end ? nl + 1 : end;
}
/// The line's content end: before a '\r' of a CRLF ending.
const char* contentEnd(const char* b, const char* e) {
  return e > b && e[-1] == '\r' ? e - 1 : e;
}

const char* skipBlanks(const char* p, const char* e, char delim) {
  while (p < e && (*p == ' ' || *p == '\t') && *p != delim)
    ++p;
  return p;
}

/// Clinger's fast path for plain decimals ("-12.345"): when the digits form an integer m that T
/// holds exactly and the scale 10^k is exact in T too, m / 10^k is one correctly rounded division,
/// the same value from_chars gives. Returns nullptr for anything else (exponents, long mantissas,
/// inf, nan), which from_chars then parses.
template <typename T> const char* parseDecimal(const char* p, const char* e, T& out) {
  constexpr uint64_t kMaxExact = uint64_t{1} << std::numeric_limits<T>::digits;
  constexpr int kMaxScale = std::is_same_v<T, float> ? 10 : 22;
  static constexpr T kPow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                 1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
  const bool negative = p < e && *p == '-';
  p += negative;
  uint64_t m = 0;
  int digits = 0, scale = 0;
  for (; p < e && *p >= '0' && *p <= '9' && digits < 19; ++p, ++digits)
    m = m * 10 + static_cast<uint64_t>(*p - '0');
  if (p < e && *p == '.')
    for (++p; p < e && *p >= '0' && *p <= '9' && digits < 19; ++p, ++digits, ++scale)
      m = m * 10 + static_cast<uint64_t>(*p - '0');
  const bool plain = digits > 0 && (p == e || (*p != 'e' && *p != 'E' && (*p < '0' || *p > '9')));
  if (!plain || m > kMaxExact || scale > kMaxScale) return nullptr;
  const T v = static_cast<T>(m) / kPow10[scale];
  out = negative ? -v : v;
  return p;
}

/// Parses the number at [p, e) as T into dst; returns the end of the number or nullptr. Values
/// beyond a float type's range round to infinity or zero, as strtod does.
template <typename T> const char* parseNumber(const char* p, const char* e, char* dst) {
  T v{};
  if constexpr (std::is_floating_point_v<T>)
    if (const char* end = parseDecimal(p, e, v)) {
      std::memcpy(dst, &v, sizeof(T));
      return end;
    }
  std::from_chars_result r = std::from_chars(p, e, v);
  if constexpr (std::is_floating_point_v<T>)
    if (r.ec == std::errc::result_out_of_range) {
      v = static_cast<T>(std::strtod(std::string(p, r.ptr).c_str(), nullptr));
      r.ec = std::errc();
    }
  if (r.ec != std::errc()) return nullptr;
  std::memcpy(dst, &v, sizeof(T));
  return r.ptr;
}

/// Parses a number at p as `t` into dst; returns the position after it (and trailing blanks) or
/// nullptr if no number of that type is there. An empty float field reads as NaN.
const char* parseValue(const char* p, const char* e, DType t, char* dst, char delim) {
  p = skipBlanks(p, e, delim);
  if (p < e && *p == '"') { // a quoted number: parse inside the quotes
    const auto* close =
        static_cast<const char*>(std::memchr(p + 1, '"', static_cast<size_t>(e - p - 1)));
    if (!close || parseValue(p + 1, close, t, dst, delim) != close) return nullptr;
    return skipBlanks(close + 1, e, delim);
  }
  if (p < e && *p == '+' && p + 1 < e && p[1] != '-' && p[1] != '+') ++p; // from_chars has no '+'
  if (t != kInt64 && (p == e || *p == delim)) { // as pandas: an empty float field is NaN
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const float nanf = std::numeric_limits<float>::quiet_NaN();
    t == kFloat32 ? std::memcpy(dst, &nanf, sizeof nanf) : std::memcpy(dst, &nan, sizeof nan);
    return p;
  }
  const char* q = t == kFloat32   ? parseNumber<float>(p, e, dst)
                  : t == kFloat64 ? parseNumber<double>(p, e, dst)
                                  : parseNumber<int64_t>(p, e, dst);
  return q ? skipBlanks(q, e, delim) : nullptr;
}

/// The fields of one line, split at delimiters outside double quotes (quotes kept).
std::vector<std::string_view> splitFields(const char* b, const char* e, char delim) {
  std::vector<std::string_view> fields;
  const char* start = b;
  bool quoted = false;
  for (const char* p = b; p < e; ++p) {
    if (*p == '"') quoted = !quoted;
    if (*p == delim && !quoted) {
      fields.emplace_back(start, static_cast<size_t>(p - start));
      start = p + 1;
    }
  }
  fields.emplace_back(start, static_cast<size_t>(e - start));
  return fields;
}

/// A field's text: trimmed, outer quotes removed and "" unescaped.
std::string unquote(std::string_view f) {
  while (!f.empty() && (f.front() == ' ' || f.front() == '\t'))
    f.remove_prefix(1);
  while (!f.empty() && (f.back() == ' ' || f.back() == '\t'))
    f.remove_suffix(1);
  if (f.size() < 2 || f.front() != '"' || f.back() != '"') return std::string(f);
  std::string out;
  for (size_t i = 1; i + 1 < f.size(); ++i) {
    out += f[i];
    if (f[i] == '"' && f[i + 1] == '"') ++i;
  }
  return out;
}

/// Whether the whole field parses as `t`.
bool fieldIs(std::string_view f, DType t, char delim) {
  alignas(8) char scratch[8];
  const char* end = f.data() + f.size();
  return parseValue(f.data(), end, t, scratch, delim) == end;
}

/// What the parser knows about the file as a whole.
struct Layout {
  const std::string& path;
  char delim;
  std::vector<std::string> names;
  std::vector<bool> inferred; // per column: whether its dtype was guessed
};

/// The message for a line the fast path rejected: a wrong field count or the first bad value.
std::string describeBadRow(const Layout& L, const std::vector<Sink>& sinks, const char* b,
                           const char* e, size_t line) {
  const std::string where = detail::concat("read_csv: '", L.path, "' line ", line);
  std::vector<std::string_view> fields = splitFields(b, e, L.delim);
  if (fields.size() != sinks.size())
    return detail::concat(where, ": expected ", sinks.size(), " fields, found ", fields.size());
  for (size_t c = 0; c < fields.size(); ++c) {
    if (fieldIs(fields[c], sinks[c].dtype, L.delim)) continue;
    return detail::concat(where, ", column ", c + 1, " ('", detail::excerpt(L.names[c]),
                          "'): cannot parse \"", detail::excerpt(unquote(fields[c])), "\" as ",
                          dtypeName(sinks[c].dtype),
                          L.inferred[c] && sinks[c].dtype == kInt64
                              ? " (the column's dtype was inferred from its first 100 "
                                "values; pass CsvOptions().dtypes(...) to choose it)"
                              : "");
  }
  return detail::concat(where, ": malformed quoting");
}

/// Pass 1: counts a chunk's lines and non-blank lines.
void countRows(Chunk& chunk) {
  for (const char* p = chunk.begin; p < chunk.end;) {
    const char* e = lineEnd(p, chunk.end);
    ++chunk.lines;
    if (contentEnd(p, e) != p) ++chunk.rows;
    p = afterLine(e, chunk.end);
  }
}

/// Pass 2: parses a chunk's rows into the sinks; stops at the first bad row.
void parseRows(Chunk& chunk, const Layout& L, const std::vector<Sink>& sinks) {
  size_t row = chunk.firstRow, line = chunk.firstLine;
  const size_t cols = sinks.size();
  for (const char* p = chunk.begin; p < chunk.end; ++line) {
    const char* next = lineEnd(p, chunk.end);
    const char* e = contentEnd(p, next);
    const char* lineBegin = p;
    if (e != p) {
      const char* q = p;
      for (size_t c = 0; c < cols && q; ++c) {
        q = parseValue(q, e, sinks[c].dtype, sinks[c].base + row * sinks[c].stride, L.delim);
        if (q && c + 1 < cols) q = (q < e && *q == L.delim) ? q + 1 : nullptr;
      }
      if (q != e) {
        chunk.error = describeBadRow(L, sinks, lineBegin, e, line);
        return;
      }
      ++row;
    }
    p = afterLine(next, chunk.end);
  }
}

/// Runs fn(chunk) for every chunk on weft's thread pool (no thread to start, so none can fail to
/// start; an exception reaches the calling thread).
template <typename Fn> void forEachChunk(std::vector<Chunk>& chunks, Fn fn) {
  parallelFor(static_cast<int64_t>(chunks.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      fn(chunks[static_cast<size_t>(i)]);
  });
}

/// Splits [b, e) into about `n` chunks of whole lines.
std::vector<Chunk> splitChunks(const char* b, const char* e, size_t n) {
  const size_t size = static_cast<size_t>(e - b);
  n = std::clamp<size_t>(size / (1u << 16), 1, std::max<size_t>(n, 1)); // >= 64 KiB a chunk
  std::vector<Chunk> chunks;
  const char* start = b;
  for (size_t i = 1; i <= n && start < e; ++i) {
    const char* stop = i == n ? e : std::max(start, b + size / n * i);
    if (stop < e) stop = afterLine(lineEnd(stop, e), e);
    chunks.push_back({start, stop});
    start = stop;
  }
  if (chunks.empty()) chunks.push_back({b, e});
  return chunks;
}

/// The parsed file: header facts, the data lines and their chunks, counted (pass 1).
struct Scan {
  std::vector<std::string_view> firstFields;
  bool header = false;
  size_t rows = 0;
  const char* dataBegin = nullptr;
  const char* dataEnd = nullptr;
  std::vector<Chunk> chunks;
};

Scan scanFile(const FileBytes& file, const std::string& path, const CsvOptions& o) {
  const char* p = file.begin();
  const char* end = file.end();
  if (end - p >= 3 && std::memcmp(p, "\xEF\xBB\xBF", 3) == 0) p += 3; // a UTF-8 byte order mark
  size_t line = 1;
  while (p < end && contentEnd(p, lineEnd(p, end)) == p) { // blank lines before the first row
    p = afterLine(lineEnd(p, end), end);
    ++line;
  }
  WEFT_CHECK(p < end, IO, "read_csv: '", path, "' is empty: it has no header and no rows");
  Scan s;
  const char* firstEnd = lineEnd(p, end);
  s.firstFields = splitFields(p, contentEnd(p, firstEnd), o.delimiter_);
  s.header = o.header_.value_or(
      std::any_of(s.firstFields.begin(), s.firstFields.end(),
                  [&](std::string_view f) { return !fieldIs(f, kFloat64, o.delimiter_); }));
  s.dataBegin = s.header ? afterLine(firstEnd, end) : p;
  s.dataEnd = end;
  const size_t threads = static_cast<size_t>(o.threads_ > 0 ? o.threads_ : getNumThreads());
  s.chunks = splitChunks(s.dataBegin, end, threads);
  forEachChunk(s.chunks, countRows);
  size_t firstLine = s.header ? line + 1 : line;
  for (Chunk& c : s.chunks) {
    c.firstRow = s.rows;
    c.firstLine = firstLine;
    s.rows += c.rows;
    firstLine += c.lines;
  }
  return s;
}

/// The dtype of every column: given, or int64 when its first 100 values are integers, else
/// float32. The values are the file's first 100 rows, whatever the chunks: a result never depends
/// on the thread count.
std::vector<DType> columnTypes(const Scan& s, Layout& L, const CsvOptions& o) {
  const size_t cols = s.firstFields.size();
  L.inferred.assign(cols, false);
  if (!o.dtypes_.empty()) {
    WEFT_CHECK(o.dtypes_.size() == cols, Value, "read_csv: '", L.path, "' has ", cols,
               " columns but ", o.dtypes_.size(), " dtypes were given");
    return o.dtypes_;
  }
  if (o.dtype_) return std::vector<DType>(cols, *o.dtype_);
  std::vector<DType> types(cols, kInt64);
  L.inferred.assign(cols, true);
  size_t seen = 0;
  for (const char* p = s.dataBegin; p < s.dataEnd && seen < 100;) {
    const char* next = lineEnd(p, s.dataEnd);
    const char* e = contentEnd(p, next);
    if (e != p) {
      std::vector<std::string_view> fields = splitFields(p, e, L.delim);
      for (size_t i = 0; i < std::min(cols, fields.size()); ++i)
        if (types[i] == kInt64 && !fieldIs(fields[i], kInt64, L.delim)) types[i] = kFloat32;
      ++seen;
    }
    p = afterLine(next, s.dataEnd);
  }
  if (seen == 0) types.assign(cols, kFloat32); // no values to go by: the default float
  return types;
}

/// Checks the options before the file is opened.
void checkOptions(const CsvOptions& o) {
  for (DType t : o.dtypes_)
    WEFT_CHECK(t == kFloat32 || t == kFloat64 || t == kInt64, DType,
               "read_csv: columns can be float32, float64 or int64, not ", dtypeName(t));
  WEFT_CHECK(!o.dtype_ || *o.dtype_ == kFloat32 || *o.dtype_ == kFloat64 || *o.dtype_ == kInt64,
             DType, "read_csv: columns can be float32, float64 or int64, not ",
             dtypeName(*o.dtype_));
  WEFT_CHECK(o.threads_ >= 0, Value, "read_csv: CsvOptions::threads must be >= 0 (0: one per ",
             "pool thread), got ", o.threads_);
  const char d = o.delimiter_;
  WEFT_CHECK(d != '\n' && d != '\r' && d != '"' && d != '\0', Value,
             "read_csv: CsvOptions::delimiter cannot be '", detail::excerpt({&d, 1}),
             "' (line breaks, the quote and NUL have their own meaning); use ',', ';' or '\\t'");
}

/// Both readers: scans, lets `allocate` make the outputs and their sinks, parses in parallel.
template <typename Allocate>
void parseFile(const std::string& path, const CsvOptions& o, Layout& L, Allocate allocate) {
  checkOptions(o);
  const FileBytes file(path, detail::concat("read_csv: '", path, "': "));
  Scan s = scanFile(file, path, o);
  const size_t cols = s.firstFields.size();
  for (size_t c = 0; c < cols; ++c)
    L.names.push_back(s.header ? unquote(s.firstFields[c]) : std::to_string(c));
  std::vector<DType> types = columnTypes(s, L, o);
  std::vector<Sink> sinks = allocate(static_cast<int64_t>(s.rows), types);
  forEachChunk(s.chunks, [&](Chunk& c) { parseRows(c, L, sinks); });
  for (const Chunk& c : s.chunks) // the first bad row of the file is in the first failed chunk
    WEFT_CHECK(c.error.empty(), IO, c.error);
}

} // namespace

CsvTable read_csv(const std::string& path, CsvOptions options, std::source_location loc) {
  CallSite cs(loc);
  return detail::convertStdExceptions("read_csv", [&] {
    Layout layout{path, options.delimiter_, {}, {}};
    CsvTable table;
    parseFile(path, options, layout, [&](int64_t rows, const std::vector<DType>& types) {
      std::vector<Sink> sinks;
      for (DType t : types) {
        table.columns.push_back(empty({rows}, t));
        sinks.push_back({static_cast<char*>(table.columns.back().data_ptr()), elementSize(t), t});
      }
      return sinks;
    });
    table.names = std::move(layout.names);
    return table;
  });
}

Tensor read_csv_tensor(const std::string& path, CsvOptions options, std::source_location loc) {
  CallSite cs(loc);
  const DType dtype = options.dtype_.value_or(kFloat32);
  WEFT_CHECK(
      options.dtypes_.empty(), Value,
      "read_csv_tensor: reads one dtype for all columns; use read_csv for per-column dtypes");
  options.dtype(dtype);
  return detail::convertStdExceptions("read_csv_tensor", [&] {
    Layout layout{path, options.delimiter_, {}, {}};
    Tensor out;
    parseFile(path, options, layout, [&](int64_t rows, const std::vector<DType>& types) {
      const auto cols = static_cast<int64_t>(types.size());
      out = empty({rows, cols}, dtype);
      const size_t esize = elementSize(dtype);
      std::vector<Sink> sinks;
      for (size_t c = 0; c < types.size(); ++c)
        sinks.push_back({static_cast<char*>(out.data_ptr()) + c * esize,
                         esize * static_cast<size_t>(cols), dtype});
      return sinks;
    });
    return out;
  });
}

const Tensor& CsvTable::column(const std::string& name, std::source_location loc) const {
  CallSite cs(loc);
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return columns[i];
  WEFT_FAIL(Index, "CsvTable::column: no column named '", name, "'");
}

Tensor CsvTable::to_tensor(DType dtype, std::source_location loc) const {
  CallSite cs(loc);
  if (columns.empty()) return empty({0, 0}, dtype);
  std::vector<Tensor> converted;
  for (const Tensor& c : columns)
    converted.push_back(c.to(dtype));
  return stack(converted, 1);
}

} // namespace weft::data
