// The safetensors format's header: a strict JSON reader for untrusted bytes, the header's
// validation, and its writer.
#include "weft/runtime/SafetensorsFormat.h"

#include "weft/runtime/Error.h"
#include "weft/runtime/InputFile.h"
#include "weft/runtime/TensorRef.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <set>

namespace weft::safetensors::format {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian and weft copies tensor bytes unchanged");

/// The header nests three levels; the limit keeps hostile nesting from exhausting the stack.
constexpr int kMaxJsonDepth = 16;

/// The length of the well-formed UTF-8 sequence at s[i], or 0: overlong forms, surrogates, code
/// points past U+10FFFF and cut-off sequences are ill-formed, and the reference rejects them.
size_t utf8Length(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  uint8_t c = byte(i);
  if (c < 0x80) return 1;
  size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
  if (n == 0 || c > 0xF4 || s.size() - i < n) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
  uint8_t c1 = byte(i + 1);
  bool bad = (c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 >= 0xA0) || (c == 0xF0 && c1 < 0x90) ||
             (c == 0xF4 && c1 >= 0x90);
  return bad ? 0 : n;
}

void appendUtf8(std::string& out, uint32_t cp) {
  auto add = [&](uint32_t b) { out += static_cast<char>(b); };
  if (cp < 0x80) {
    add(cp);
  } else if (cp < 0x800) {
    add(0xC0 | cp >> 6), add(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    add(0xE0 | cp >> 12), add(0x80 | (cp >> 6 & 0x3F)), add(0x80 | (cp & 0x3F));
  } else {
    add(0xF0 | cp >> 18), add(0x80 | (cp >> 12 & 0x3F)), add(0x80 | (cp >> 6 & 0x3F));
    add(0x80 | (cp & 0x3F));
  }
}

/// Appends `s` as a JSON string, escaped as serde_json (the reference's writer) escapes it.
void appendJsonString(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (char c : s) {
    auto u = static_cast<uint8_t>(c);
    if (c == '"' || c == '\\') {
      out += '\\', out += c;
    } else if (u >= 0x20) {
      out += c;
    } else if (c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t') {
      out += '\\', out += "bfnrt"[std::string_view("\b\f\n\r\t").find(c)];
    } else {
      out += "\\u00", out += kHex[u >> 4], out += kHex[u & 15];
    }
  }
  out += '"';
}

// ---- JSON ----

/// A strict JSON (RFC 8259) reader for untrusted bytes. It builds nothing it is not asked for:
/// callers walk objects and arrays, read the values they expect and skip the rest, so a hostile
/// header costs memory in proportion to the tensors it declares, not to its JSON structure. Every
/// flaw is an IOError naming its byte; nesting is bounded; strings must be UTF-8; an object may
/// not repeat a key.
class JsonReader {
public:
  enum class Kind : uint8_t { Object, Array, String, Number, Literal };

  JsonReader(std::string_view text, const std::string& ctx) : s_(text), ctx_(ctx) {}

  [[noreturn]] void fail(std::string_view what) const {
    WEFT_FAIL(IO, ctx_, "the header is not valid JSON (", what, " at header byte ", pos_, ")");
  }

  /// The kind of the next value; fails where no value starts.
  Kind next() {
    skipSpace();
    char c = peek();
    if (c == '{') return Kind::Object;
    if (c == '[') return Kind::Array;
    if (c == '"') return Kind::String;
    if (c == '-' || isDigit(c)) return Kind::Number;
    if (c == 't' || c == 'f' || c == 'n') return Kind::Literal;
    fail(pos_ < s_.size() ? "unexpected character" : "unexpected end");
  }

  /// Reads an object, calling `member(key)` for each member; `member` reads or skips the value.
  template <typename F> void object(F&& member) {
    std::set<std::string> seen; // a set, so many keys cost O(n log n), not O(n^2)
    list('{', '}', [&] {
      size_t keyPos = pos_;
      if (next() != Kind::String) fail("expected a string key");
      std::string key = string();
      if (!seen.insert(key).second) {
        pos_ = keyPos;
        fail("key " + quoted(key) + " appears twice in one object");
      }
      skipSpace();
      expect(':');
      member(std::move(key));
    });
  }

  /// Reads an array, calling `element()` for each element; `element` reads or skips it.
  template <typename F> void array(F&& element) { list('[', ']', element); }

  std::string string() {
    skipSpace();
    expect('"');
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) fail("unterminated string");
      auto c = static_cast<uint8_t>(s_[pos_]);
      if (c == '"') break;
      if (c < 0x20) fail("control character in a string");
      if (c == '\\') {
        escape(out);
        continue;
      }
      size_t n = utf8Length(s_, pos_);
      if (n == 0) fail("invalid UTF-8 in a string");
      out.append(s_.substr(pos_, n));
      pos_ += n;
    }
    ++pos_;
    return out;
  }

  /// A number's text, checked against JSON's grammar.
  std::string_view number() {
    skipSpace();
    size_t start = pos_;
    auto digits = [&] {
      if (!isDigit(peek())) fail("malformed number");
      while (isDigit(peek()))
        ++pos_;
    };
    if (peek() == '-') ++pos_;
    if (peek() == '0')
      ++pos_;
    else
      digits();
    if (peek() == '.') ++pos_, digits();
    if (peek() == 'e' || peek() == 'E') {
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      digits();
    }
    return s_.substr(start, pos_ - start);
  }

  /// Reads and discards the next value, checking it all the same.
  void skip() {
    switch (next()) {
    case Kind::Object:
      return object([&](const std::string&) { skip(); });
    case Kind::Array:
      return array([&] { skip(); });
    case Kind::String:
      return void(string());
    case Kind::Number:
      return void(number());
    case Kind::Literal:
      for (std::string_view word : {"true", "false", "null"})
        if (s_.substr(pos_, word.size()) == word) return void(pos_ += word.size());
      fail("unexpected character");
    }
  }

  /// Checks that only whitespace is left.
  void finish() {
    skipSpace();
    if (pos_ != s_.size()) fail("unexpected bytes after the JSON object");
  }

private:
  static bool isDigit(char c) { return c >= '0' && c <= '9'; }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void skipSpace() {
    while (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')
      ++pos_;
  }
  void expect(char c) {
    if (peek() != c || pos_ >= s_.size()) fail(std::string("expected '") + c + "'");
    ++pos_;
  }

  /// A comma-separated list between `open` and `close`, each item read by `item()`.
  template <typename F> void list(char open, char close, F&& item) {
    if (++depth_ > kMaxJsonDepth) fail("values nested too deeply");
    skipSpace();
    expect(open);
    skipSpace();
    if (peek() == close) {
      ++pos_;
    } else {
      do {
        item();
        skipSpace();
      } while (peek() == ',' && ++pos_);
      expect(close);
    }
    --depth_;
  }

  void escape(std::string& out) {
    ++pos_; // the backslash
    size_t simple = std::string_view("\"\\/bfnrt").find(peek());
    if (pos_ < s_.size() && simple != std::string_view::npos) {
      out += "\"\\/\b\f\n\r\t"[simple];
      ++pos_;
      return;
    }
    if (peek() != 'u') fail("invalid escape");
    ++pos_;
    uint32_t cp = hex4();
    if (cp >= 0xDC00 && cp <= 0xDFFF) fail("\\u escape of a lone low surrogate");
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      uint32_t low = s_.substr(pos_, 2) == "\\u" ? (pos_ += 2, hex4()) : 0;
      if (low < 0xDC00 || low > 0xDFFF) fail("\\u escape of a high surrogate without its low half");
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    }
    appendUtf8(out, cp);
  }

  uint32_t hex4() {
    if (s_.size() - pos_ < 4) fail("cut-off \\u escape");
    uint32_t v = 0;
    for (char c : s_.substr(pos_, 4)) {
      char lower = c >= 'A' && c <= 'F' ? static_cast<char>(c - 'A' + 'a') : c;
      size_t d = std::string_view("0123456789abcdef").find(lower);
      if (d == std::string_view::npos) fail("bad hex digit in a \\u escape");
      v = v * 16 + static_cast<uint32_t>(d);
    }
    pos_ += 4;
    return v;
  }

  std::string_view s_;
  const std::string& ctx_;
  size_t pos_ = 0;
  int depth_ = 0;
};

std::string_view kindName(JsonReader::Kind k) {
  switch (k) {
  case JsonReader::Kind::Object:
    return "an object";
  case JsonReader::Kind::Array:
    return "a list";
  case JsonReader::Kind::String:
    return "a string";
  case JsonReader::Kind::Number:
    return "a number";
  case JsonReader::Kind::Literal:
    return "true, false or null";
  }
  return "a value";
}

Metadata readMetadata(JsonReader& r, const std::string& ctx) {
  JsonReader::Kind k = r.next();
  WEFT_CHECK(k == JsonReader::Kind::Object, IO, ctx,
             "\"__metadata__\" must be an object mapping strings to strings, not ", kindName(k));
  Metadata m;
  r.object([&](std::string key) {
    JsonReader::Kind v = r.next();
    WEFT_CHECK(v == JsonReader::Kind::String, IO, ctx, "the metadata value of ", quoted(key),
               " is ", kindName(v),
               ", not a string (safetensors metadata maps strings to strings)");
    m.emplace(std::move(key), r.string());
  });
  return m;
}

/// Reads an integer in [0, max]: a sign, fraction or exponent disqualifies it, as it does for the
/// reference's reader. `field` and `name` say where it stands, for the message.
uint64_t readUnsigned(JsonReader& r, uint64_t max, std::string_view field, const std::string& name,
                      const std::string& ctx) {
  JsonReader::Kind k = r.next();
  WEFT_CHECK(k == JsonReader::Kind::Number, IO, ctx, "the ", field, " of tensor ", quoted(name),
             " holds ", kindName(k), ", not a non-negative integer");
  std::string_view text = r.number();
  uint64_t x = 0;
  bool ok = true;
  for (char c : text) {
    auto d = static_cast<uint64_t>(c - '0');
    ok = ok && c >= '0' && c <= '9' && x <= (max - d) / 10;
    x = ok ? x * 10 + d : 0;
  }
  WEFT_CHECK(ok, IO, ctx, "the ", field, " of tensor ", quoted(name), " holds ", quoted(text),
             ", not an integer from 0 to ", max);
  return x;
}

Entry readEntry(JsonReader& r, std::string name, const std::string& ctx) {
  JsonReader::Kind k = r.next();
  WEFT_CHECK(k == JsonReader::Kind::Object, IO, ctx, "the entry of tensor ", quoted(name), " is ",
             kindName(k), ", not an object with dtype, shape and data_offsets");
  Entry e;
  bool hasDType = false, hasShape = false;
  size_t offsets = 0;
  r.object([&](std::string key) {
    if (key == "dtype") {
      JsonReader::Kind v = r.next();
      std::string code = v == JsonReader::Kind::String ? r.string() : std::string(kindName(v));
      std::optional<DType> d = v == JsonReader::Kind::String ? dtypeOfCode(code) : std::nullopt;
      WEFT_CHECK(d, IO, ctx, "tensor ", quoted(name), " has dtype ",
                 v == JsonReader::Kind::String ? quoted(code) : code,
                 ", which weft does not read (it reads BOOL, U8, I32, I64, F16, BF16, F32, F64)");
      e.dtype = *d, hasDType = true;
    } else if (key == "shape") {
      JsonReader::Kind v = r.next();
      WEFT_CHECK(v == JsonReader::Kind::Array, IO, ctx, "the shape of tensor ", quoted(name),
                 " is ", kindName(v), ", not a list");
      r.array([&] {
        e.shape.push_back(static_cast<int64_t>(readUnsigned(r, INT64_MAX, "shape", name, ctx)));
      });
      hasShape = true;
    } else if (key == "data_offsets") {
      JsonReader::Kind v = r.next();
      WEFT_CHECK(v == JsonReader::Kind::Array, IO, ctx, "the data_offsets of tensor ", quoted(name),
                 " is ", kindName(v), ", not a list [begin, end]");
      r.array([&] {
        WEFT_CHECK(offsets < 2, IO, ctx, "the data_offsets of tensor ", quoted(name),
                   " has more than two entries; it is [begin, end]");
        (offsets++ == 0 ? e.begin : e.end) = readUnsigned(r, UINT64_MAX, "data_offsets", name, ctx);
      });
      WEFT_CHECK(offsets == 2, IO, ctx, "the data_offsets of tensor ", quoted(name),
                 " has fewer than two entries; it is [begin, end]");
    } else {
      r.skip(); // the reference ignores fields it does not know, and so does weft
    }
  });
  std::string_view missing = !hasDType      ? "dtype"
                             : !hasShape    ? "shape"
                             : offsets == 0 ? "data_offsets"
                                            : "";
  WEFT_CHECK(missing.empty(), IO, ctx, "tensor ", quoted(name), " has no \"", missing, "\" field");
  e.name = std::move(name);
  return e;
}

/// Checks that an entry's bytes lie inside the data section and match its shape and dtype.
void checkExtent(const Entry& e, uint64_t dataSize, const std::string& ctx) {
  std::string offsets = detail::concat("data_offsets [", e.begin, ", ", e.end, "]");
  WEFT_CHECK(e.begin <= e.end, IO, ctx, "tensor ", quoted(e.name), " has ", offsets,
             ", which end before they begin");
  WEFT_CHECK(e.end <= dataSize, IO, ctx, "tensor ", quoted(e.name), " has ", offsets,
             ", past the end of the ", dataSize, "-byte data section (is the file truncated?)");
  std::optional<int64_t> bytes = byteSize(e.shape, e.dtype);
  WEFT_CHECK(bytes, IO, ctx, "tensor ", quoted(e.name), " has shape ", shapeString(e.shape),
             ", whose size overflows");
  WEFT_CHECK(static_cast<uint64_t>(*bytes) == e.end - e.begin, IO, ctx, "tensor ", quoted(e.name),
             " has ", offsets, " (", e.end - e.begin, " bytes), but shape ", shapeString(e.shape),
             " of ", codeOf(e.dtype).name, " takes ", *bytes, " bytes");
}

/// Checks that the tensors, taken by offset, tile the data section exactly, as the reference
/// requires: no overlaps, no holes, no trailing bytes.
void checkTiling(const std::vector<Entry>& entries, uint64_t dataSize, const std::string& ctx) {
  std::vector<const Entry*> byOffset;
  for (const Entry& e : entries)
    byOffset.push_back(&e);
  std::sort(byOffset.begin(), byOffset.end(), [](const Entry* a, const Entry* b) {
    return std::pair(a->begin, a->end) < std::pair(b->begin, b->end);
  });
  const Entry* previous = nullptr;
  uint64_t cursor = 0;
  for (const Entry* e : byOffset) {
    WEFT_CHECK(e->begin >= cursor, IO, ctx, "tensor ", quoted(e->name), " (data_offsets [",
               e->begin, ", ", e->end, "]) overlaps tensor ", quoted(previous->name),
               " (data_offsets [", previous->begin, ", ", previous->end, "])");
    WEFT_CHECK(e->begin == cursor, IO, ctx, "bytes [", cursor, ", ", e->begin,
               ") of the data section belong to no tensor (safetensors files have no holes)");
    cursor = e->end;
    previous = e;
  }
  WEFT_CHECK(cursor == dataSize, IO, ctx, "the tensors cover ", cursor,
             " bytes but the data section has ", dataSize,
             " (the trailing bytes belong to no tensor)");
}

} // namespace

Code codeOf(DType t) {
  switch (t) {
  case DType::Bool:
    return {"BOOL", 0};
  case DType::UInt8:
    return {"U8", 1};
  case DType::Float16:
    return {"F16", 7};
  case DType::BFloat16:
    return {"BF16", 8};
  case DType::Int32:
    return {"I32", 9};
  case DType::Float32:
    return {"F32", 11};
  case DType::Float64:
    return {"F64", 12};
  case DType::Int64:
    return {"I64", 13};
  }
  WEFT_FAIL(Internal, "internal error, please report: a dtype without a safetensors code");
}

std::optional<DType> dtypeOfCode(std::string_view name) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (codeOf(static_cast<DType>(i)).name == name) return static_cast<DType>(i);
  return std::nullopt;
}

bool isUtf8(std::string_view s) {
  for (size_t i = 0, n = 0; i < s.size(); i += n)
    if ((n = utf8Length(s, i)) == 0) return false;
  return true;
}

/// A name or value from a file, shortened and escaped for an error message.
std::string quoted(std::string_view s) {
  return "'" + detail::excerpt(s, 60) + "'";
}

Header parseHeader(std::string_view text, uint64_t dataSize, const std::string& ctx) {
  JsonReader r(text, ctx);
  JsonReader::Kind k = r.next();
  WEFT_CHECK(k == JsonReader::Kind::Object, IO, ctx, "the header is ", kindName(k),
             ", not a JSON object");
  Header h;
  r.object([&](std::string key) {
    if (key == "__metadata__") return void(h.metadata = readMetadata(r, ctx));
    h.entries.push_back(readEntry(r, std::move(key), ctx));
    checkExtent(h.entries.back(), dataSize, ctx);
  });
  r.finish();
  checkTiling(h.entries, dataSize, ctx);
  return h;
}

/// Reads the 8-byte header length at the start of a `total`-byte file and checks it.
uint64_t headerLength(const uint8_t* prefix, uint64_t total, const std::string& ctx) {
  WEFT_CHECK(total >= 8, IO, ctx, "it is ", total,
             " bytes long, too short for the 8-byte header length a safetensors file starts with");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = n << 8 | prefix[i];
  WEFT_CHECK(n <= total - 8, IO, ctx, "its header length is ", n, " bytes, more than the ",
             total - 8, " bytes that follow it (truncated, or not a safetensors file)");
  WEFT_CHECK(n <= kMaxHeaderSize, IO, ctx, "its header length is ", n,
             " bytes, more than the limit of ", kMaxHeaderSize, " safetensors readers accept");
  return n;
}

/// C++ bools must hold 0 or 1: any other byte would make later kernels' behavior undefined.
void checkBools(const Entry& e, const uint8_t* bytes, const std::string& ctx) {
  if (e.dtype != DType::Bool) return;
  const uint8_t* last = bytes + (e.end - e.begin);
  const uint8_t* bad = std::find_if(bytes, last, [](uint8_t b) { return b > 1; });
  WEFT_CHECK(bad == last, IO, ctx, "bool tensor ", quoted(e.name), " holds the byte ",
             static_cast<int>(*bad), " at element ", bad - bytes, "; bools are stored as 0 or 1");
}


void checkWritable(const std::vector<std::string>& names, const Metadata& metadata, const char* op) {
  std::vector<std::string_view> sorted;
  for (const std::string& name : names) {
    WEFT_CHECK(name != "__metadata__", Value, op,
               ": \"__metadata__\" holds the metadata and cannot name a tensor");
    WEFT_CHECK(isUtf8(name), Value, op, ": tensor name ", quoted(name),
               " is not valid UTF-8, which the JSON header requires");
    sorted.push_back(name);
  }
  std::sort(sorted.begin(), sorted.end());
  auto twice = std::adjacent_find(sorted.begin(), sorted.end());
  WEFT_CHECK(twice == sorted.end(), Value, op, ": tensor name ", quoted(*twice),
             " appears twice; names in a file are unique");
  for (const auto& [key, value] : metadata)
    WEFT_CHECK(isUtf8(key) && isUtf8(value), Value, op, ": metadata ", quoted(key),
               " is not valid UTF-8, which the JSON header requires");
}

std::string writeHeader(std::vector<Entry>& entries, const Metadata& metadata, const char* op,
                        size_t align) {
  WEFT_INTERNAL_ASSERT(align >= 8 && (align & (align - 1)) == 0, "alignment ", align);
  std::vector<std::string> names;
  for (const Entry& e : entries)
    names.push_back(e.name);
  checkWritable(names, metadata, op);
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    int ra = codeOf(a.dtype).rank, rb = codeOf(b.dtype).rank;
    return ra != rb ? ra > rb : a.name < b.name;
  });
  std::string json = "{";
  if (!metadata.empty()) {
    json += "\"__metadata__\":{";
    for (const auto& [key, value] : metadata) {
      if (json.back() != '{') json += ',';
      appendJsonString(json, key);
      json += ':';
      appendJsonString(json, value);
    }
    json += '}';
  }
  uint64_t offset = 0;
  for (Entry& e : entries) {
    std::optional<int64_t> bytes = byteSize(e.shape, e.dtype);
    WEFT_CHECK(bytes, Value, op, ": tensor ", quoted(e.name), " of shape ", shapeString(e.shape),
               " is too large to describe");
    if (json.size() > 1) json += ',';
    appendJsonString(json, e.name);
    json += detail::concat(":{\"dtype\":\"", codeOf(e.dtype).name, "\",\"shape\":[");
    for (size_t d = 0; d < e.shape.size(); ++d)
      json += detail::concat(d == 0 ? "" : ",", e.shape[d]);
    e.begin = offset, e.end = offset + static_cast<uint64_t>(*bytes);
    json += detail::concat("],\"data_offsets\":[", e.begin, ",", e.end, "]}");
    offset = e.end;
  }
  json += '}';
  json.append((align - (8 + json.size()) % align) % align, ' ');
  WEFT_CHECK(json.size() <= kMaxHeaderSize, Value, op, ": the header would be ", json.size(),
             " bytes, more than the ", kMaxHeaderSize,
             " safetensors readers accept; save fewer tensors per file");
  std::string head;
  for (int i = 0; i < 8; ++i)
    head += static_cast<char>(static_cast<uint64_t>(json.size()) >> (8 * i) & 0xFF);
  return head + json;
}

} // namespace weft::safetensors::format
