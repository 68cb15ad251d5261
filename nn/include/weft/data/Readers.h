// Readers from files into tensors: IDX (MNIST's format), CSV (parsed in parallel) and raw bytes.
// Every reader takes untrusted files: a malformed file, a directory, a file changed while read or
// one declaring sizes it cannot hold is an IOError naming the path, never a crash.
#pragma once

#include "weft/Tensor.h"

#include <optional>
#include <string>
#include <vector>

namespace weft::data {

/// Reads an IDX file (raw or gzip, told apart by its magic bytes) into a tensor of the file's
/// shape. u8 -> uint8, i32 -> int32, f32 -> float32, f64 -> float64; i8 and i16, which weft has no
/// dtype for, widen losslessly to int32. The header is read first and then exactly the payload it
/// declares: a declared size the file cannot hold (even compressed), a short payload or trailing
/// data is an IOError naming the file, found without decompressing past the payload.
Tensor read_idx(const std::string& path, WEFT_LOC);

/// Options for read_csv, builder-style.
struct CsvOptions {
  std::optional<bool> header_; ///< whether row 1 holds names (unset: guessed from its fields)
  char delimiter_ = ',';       ///< the field separator
  int threads_ = 0;            ///< chunks parsed in parallel (0: weft::getNumThreads())
  std::optional<DType> dtype_; ///< one dtype for every column
  std::vector<DType> dtypes_;  ///< a dtype per column (overrides dtype)

  /// Whether the first row is a header (default: guessed, a header has a non-numeric field).
  CsvOptions& header(bool on = true) {
    header_ = on;
    return *this;
  }
  /// The field separator.
  CsvOptions& delimiter(char c) {
    delimiter_ = c;
    return *this;
  }
  /// How many chunks of whole lines the file is split into, parsed on weft's thread pool (>= 0;
  /// 0: one per pool thread). The result is the same for any count.
  CsvOptions& threads(int n) {
    threads_ = n;
    return *this;
  }
  /// Parses every column as `t` (float32, float64 or int64).
  CsvOptions& dtype(DType t) {
    dtype_ = t;
    return *this;
  }
  /// Parses column i as `types[i]` (float32, float64 or int64).
  CsvOptions& dtypes(std::vector<DType> types) {
    dtypes_ = std::move(types);
    return *this;
  }
};

/// A parsed CSV file: one 1-D tensor per column.
struct CsvTable {
  std::vector<std::string> names; ///< header names, or "0", "1", ... without a header
  std::vector<Tensor> columns;    ///< column i, [rows], in its dtype
  /// The number of data rows.
  int64_t rows() const { return columns.empty() ? 0 : columns.front().size(0); }
  /// The column called `name`; IndexError if there is none.
  const Tensor& column(const std::string& name, WEFT_LOC) const;
  /// All columns side by side as [rows, cols] of `dtype`.
  Tensor to_tensor(DType dtype = kFloat32, WEFT_LOC) const;
};

/// Reads a CSV file into typed columns. The file is read into memory and split at line boundaries
/// into one chunk per thread. Without a given dtype a column is int64 if its first 100 values are
/// integers, else float32. Empty float fields read as NaN; blank lines are skipped; CRLF line
/// endings and double-quoted fields (without line breaks inside) are accepted. A row with the
/// wrong number of fields, or a value that does not parse, throws IOError naming file, line and
/// column.
CsvTable read_csv(const std::string& path, CsvOptions options = {}, WEFT_LOC);

/// Reads a CSV file straight into one [rows, cols] tensor of options.dtype (float32 unless given),
/// with read_csv's parsing and errors; the fast path for numeric tables.
Tensor read_csv_tensor(const std::string& path, CsvOptions options = {}, WEFT_LOC);

/// The bytes of `paths`, concatenated, as a uint8 tensor [total bytes].
Tensor read_bytes(const std::vector<std::string>& paths, WEFT_LOC);

} // namespace weft::data
