// Safetensors checkpoints: files made by hand from the spec load, round trips are bit-exact, the
// bytes written are the reference library's, saves are atomic, and every corruption is an IOError.
#include "TestUtil.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <unistd.h>

namespace weft::test {
namespace {

namespace st = weft::safetensors;
namespace fs = std::filesystem;

/// `v` as `n` little-endian bytes.
std::string le(uint64_t v, int n) {
  std::string s;
  for (int i = 0; i < n; ++i)
    s += static_cast<char>(v >> (8 * i) & 0xFF);
  return s;
}

/// A safetensors file as the spec lays it out: the header length, `header` padded with spaces so
/// that the data starts 8-byte aligned, then `data`.
std::string file(std::string header, const std::string& data = "") {
  header.append((8 - header.size() % 8) % 8, ' ');
  return le(header.size(), 8) + header + data;
}

st::TensorMap loadBytes(const std::string& bytes) {
  return st::load(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

std::string toString(const std::vector<uint8_t>& bytes) {
  return {bytes.begin(), bytes.end()};
}

/// The bytes of `t` in row-major order.
std::string bytesOf(const Tensor& t) {
  Tensor c = t.contiguous();
  size_t n = static_cast<size_t>(c.numel()) * elementSize(c.dtype());
  return n == 0 ? "" : std::string(static_cast<const char*>(c.data_ptr()), n);
}

std::vector<std::string> namesOf(const st::TensorMap& m) {
  std::vector<std::string> names;
  for (const auto& [name, t] : m)
    names.push_back(name);
  return names;
}

const Tensor& find(const st::TensorMap& m, const std::string& name) {
  for (const auto& [n, t] : m)
    if (n == name) return t;
  throw std::runtime_error("no tensor " + name);
}

/// Runs `call`, expecting an IOError whose message holds every fragment.
template <typename F>
::testing::AssertionResult throwsIO(F&& call, const std::vector<std::string>& fragments) {
  try {
    call();
  } catch (const IOError& e) {
    std::string what = e.what();
    for (const std::string& f : fragments)
      if (what.find(f) == std::string::npos)
        return ::testing::AssertionFailure() << "message lacks \"" << f << "\": " << what;
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw something else than IOError: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

// ---- 1. files made by hand from the spec ----

TEST(Safetensors, HandMadeFileOfEveryDTypeLoads) {
  std::string header = R"({"step":{"dtype":"I64","shape":[],"data_offsets":[0,8]},)"
                       R"("f64":{"dtype":"F64","shape":[2],"data_offsets":[8,24]},)"
                       R"("weight":{"dtype":"F32","shape":[2,2],"data_offsets":[24,40]},)"
                       R"("i32":{"dtype":"I32","shape":[2],"data_offsets":[40,48]},)"
                       R"("bf16":{"dtype":"BF16","shape":[2],"data_offsets":[48,52]},)"
                       R"("f16":{"dtype":"F16","shape":[3],"data_offsets":[52,58]},)"
                       R"("u8":{"dtype":"U8","shape":[3],"data_offsets":[58,61]},)"
                       R"("mask":{"dtype":"BOOL","shape":[3],"data_offsets":[61,64]}})";
  std::string data = le(123456789012, 8) +                                       // step
                     le(0x3FE0000000000000, 8) + le(0xC008000000000000, 8) +     // 0.5, -3
                     le(0x3FC00000, 4) + le(0xC0000000, 4) + le(0x3E800000, 4) + // 1.5, -2, 0.25
                     le(0x42C80000, 4) +                                         // 100
                     le(0xFFFFFFF9, 4) + le(0x7FFFFFFF, 4) +                     // -7, 2^31-1
                     le(0x3F80, 2) + le(0x4049, 2) +                             // 1, 3.140625
                     le(0x3C00, 2) + le(0xC000, 2) + le(0x7BFF, 2) +             // 1, -2, 65504
                     le(0, 1) + le(255, 1) + le(7, 1) + le(1, 1) + le(0, 1) + le(1, 1);
  std::string bytes = file(header, data);
  st::TensorMap m = loadBytes(bytes);

  EXPECT_EQ(namesOf(m), (std::vector<std::string>{"step", "f64", "weight", "i32", "bf16", "f16",
                                                  "u8", "mask"}));
  EXPECT_EQ(find(m, "step").dtype(), kInt64);
  EXPECT_EQ(find(m, "step").dim(), 0);
  EXPECT_EQ(find(m, "step").item<int64_t>(), 123456789012);
  EXPECT_EQ(find(m, "f64").to_vector<double>(), (std::vector<double>{0.5, -3}));
  EXPECT_EQ(find(m, "weight").dtype(), kFloat32);
  EXPECT_EQ(find(m, "weight").sizes(), (Shape{2, 2}));
  EXPECT_EQ(find(m, "weight").to_vector<float>(), (std::vector<float>{1.5f, -2, 0.25f, 100}));
  EXPECT_EQ(find(m, "i32").to_vector<int32_t>(), (std::vector<int32_t>{-7, 2147483647}));
  EXPECT_EQ(find(m, "bf16").dtype(), kBFloat16);
  EXPECT_EQ(find(m, "bf16").to_vector<float>(), (std::vector<float>{1, 3.140625f}));
  EXPECT_EQ(find(m, "f16").dtype(), kFloat16);
  EXPECT_EQ(find(m, "f16").to_vector<float>(), (std::vector<float>{1, -2, 65504}));
  EXPECT_EQ(find(m, "u8").to_vector<uint8_t>(), (std::vector<uint8_t>{0, 255, 7}));
  EXPECT_EQ(find(m, "mask").dtype(), kBool);
  EXPECT_EQ(find(m, "mask").to_vector<bool>(), (std::vector<bool>{true, false, true}));
  for (const auto& [name, t] : m)
    EXPECT_FALSE(t.requires_grad()) << name;
  // The header is written in the reference's order and spelling, so saving reproduces the file.
  EXPECT_EQ(toString(st::save(m)), bytes);
}

class SafetensorsFiles : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("weft_safetensors_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void write(const std::string& name, const std::string& bytes) const {
    std::ofstream(path(name), std::ios::binary) << bytes;
  }
  /// The names in the test's directory, sorted.
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_))
      names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  fs::path dir_;
};

TEST_F(SafetensorsFiles, HandMadeFileInAnyOrderWithMetadataLoads) {
  std::string header = R"({
    "z": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]},
    "__metadata__": {"format": "pt", "note": "caf\u00e9 \"q\" \ud83d\ude00 \\ \/"},
    "a": {"shape": [1], "data_offsets": [0, 4], "dtype": "I32", "extra": [null, true, -1.5e3]},
    "empty": {"dtype": "F16", "shape": [0, 3], "data_offsets": [8, 8]}
  })";
  write("hand.safetensors", file(header, le(42, 4) + le(0x40490FDB, 4)));
  st::TensorMap m = st::load_file(path("hand.safetensors"));
  EXPECT_EQ(namesOf(m), (std::vector<std::string>{"z", "a", "empty"}));
  EXPECT_EQ(find(m, "z").to_vector<float>(), (std::vector<float>{3.14159274f}));
  EXPECT_EQ(find(m, "a").dtype(), kInt32);
  EXPECT_EQ(find(m, "a").to_vector<int32_t>(), (std::vector<int32_t>{42}));
  EXPECT_EQ(find(m, "empty").dtype(), kFloat16);
  EXPECT_EQ(find(m, "empty").sizes(), (Shape{0, 3}));
  EXPECT_EQ(st::metadata(path("hand.safetensors")),
            (st::Metadata{{"format", "pt"}, {"note", "caf\xC3\xA9 \"q\" \xF0\x9F\x98\x80 \\ /"}}));
}

// ---- 2. round trips ----

const std::vector<DType> kAllDTypes = {kFloat32, kFloat64, kFloat16, kBFloat16,
                                       kInt32,   kInt64,   kUInt8,   kBool};

/// Tensors of every dtype: contiguous, transposed, broadcast, 0-d and empty, plus special floats.
st::TensorMap everyKindOfTensor() {
  st::TensorMap in;
  for (DType t : kAllDTypes) {
    std::string n(dtypeName(t));
    Tensor base = arange(6).to(t).reshape({2, 3});
    in.emplace_back(n + ".matrix", base);
    in.emplace_back(n + ".transposed", base.t());
    in.emplace_back(n + ".expanded", base.select(0, 1).expand({2, 3}));
    in.emplace_back(n + ".scalar", scalar_tensor(3, t));
    in.emplace_back(n + ".empty", empty({0}, t));
    in.emplace_back(n + ".empty2d", empty({2, 0}, t));
  }
  in.emplace_back("float32.special", tensor({-0.0, NAN, INFINITY, 1e-40, -3.5}));
  in.emplace_back("float64.special",
                  from_vector<double>({-0.0, NAN, -INFINITY, 4.9e-324, 1.0 / 3}, {5}));
  in.emplace_back("float32.grad", ones({2}).requires_grad_());
  return in;
}

/// Checks that `out` holds the tensors of `in` with the same dtypes, shapes and bytes.
void expectSameTensors(const st::TensorMap& in, const st::TensorMap& out) {
  ASSERT_EQ(in.size(), out.size());
  for (const auto& [name, t] : in) {
    const Tensor& u = find(out, name);
    EXPECT_EQ(u.dtype(), t.dtype()) << name;
    EXPECT_EQ(u.sizes(), t.sizes()) << name;
    EXPECT_TRUE(u.numel() == 0 || u.is_contiguous()) << name; // an empty one has no layout
    EXPECT_EQ(bytesOf(u), bytesOf(t)) << name;
  }
}

TEST_F(SafetensorsFiles, RoundTripIsBitExactForEveryDType) {
  st::TensorMap in = everyKindOfTensor();
  st::Metadata md = {{"format", "pt"}, {"note", "line\nbreak \"q\" \x01 caf\xC3\xA9"}};
  st::TensorMap fromBytes = loadBytes(toString(st::save(in, md)));
  expectSameTensors(in, fromBytes);

  st::save_file(in, path("all.safetensors"), md);
  expectSameTensors(in, st::load_file(path("all.safetensors")));
  EXPECT_EQ(st::metadata(path("all.safetensors")), md);

  // Files list tensors with larger elements first (int64 and float64 rank as the reference ranks
  // them), then by name.
  std::vector<std::string> order = {"int64",    "float64", "float32", "int32",
                                    "bfloat16", "float16", "uint8",   "bool"};
  std::vector<std::string> expected = namesOf(in);
  auto rank = [&](const std::string& name) {
    return std::find(order.begin(), order.end(), name.substr(0, name.find('.'))) - order.begin();
  };
  std::sort(expected.begin(), expected.end(), [&](const std::string& a, const std::string& b) {
    return std::pair(rank(a), a) < std::pair(rank(b), b);
  });
  EXPECT_EQ(namesOf(fromBytes), expected);
}

// ---- 3. the bytes written ----

std::string f32Bytes(std::initializer_list<uint32_t> bits) {
  std::string s;
  for (uint32_t b : bits)
    s += le(b, 4);
  return s;
}

TEST(Safetensors, SaveWritesTheReferenceLibrarysBytes) {
  // The reference's own serialization tests: a 64-byte header needs no padding...
  std::string zeroToFive =
      f32Bytes({0, 0x3F800000, 0x40000000, 0x40400000, 0x40800000, 0x40A00000});
  std::string header = R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})";
  ASSERT_EQ(header.size(), 64u);
  Tensor x = arange(6).to(kFloat32);
  EXPECT_EQ(toString(st::save({{"attn.0", x.reshape({1, 2, 3})}})),
            le(64, 8) + header + zeroToFive);
  // ...a 65-byte one gets 7 spaces, so the data starts at byte 80.
  header = R"({"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}})";
  EXPECT_EQ(toString(st::save({{"attn0", x.reshape({1, 1, 2, 3})}})),
            le(72, 8) + header + std::string(7, ' ') + zeroToFive);
  EXPECT_EQ(toString(st::save({})), le(8, 8) + "{}" + std::string(6, ' '));
  EXPECT_EQ(toString(st::save({}, {{"framework", "pt"}})),
            le(40, 8) + R"({"__metadata__":{"framework":"pt"}})" + std::string(5, ' '));

  // Larger elements first, names next, metadata first and escaped as serde_json escapes.
  st::TensorMap mixed = {{"a", full({1}, 7, kUInt8)},
                         {"b", full({1}, 1.0, kFloat64)},
                         {"c", full({1}, 2.0, kFloat32)},
                         {"d", scalar_tensor(true)},
                         {"e", tensor({-1, 2})}};
  header = R"({"__metadata__":{"k\"ey":"v\\al\n\u0001"},)"
           R"("e":{"dtype":"I64","shape":[2],"data_offsets":[0,16]},)"
           R"("b":{"dtype":"F64","shape":[1],"data_offsets":[16,24]},)"
           R"("c":{"dtype":"F32","shape":[1],"data_offsets":[24,28]},)"
           R"("a":{"dtype":"U8","shape":[1],"data_offsets":[28,29]},)"
           R"("d":{"dtype":"BOOL","shape":[],"data_offsets":[29,30]}})";
  std::string data = le(~uint64_t{0}, 8) + le(2, 8) + le(0x3FF0000000000000, 8) +
                     le(0x40000000, 4) + le(7, 1) + le(1, 1);
  std::vector<uint8_t> bytes = st::save(mixed, {{"k\"ey", "v\\al\n\x01"}});
  EXPECT_EQ(toString(bytes), file(header, data));
  EXPECT_EQ((bytes.size() - data.size()) % 8, 0u); // the data starts 8-byte aligned
}

// ---- 4. atomic saves ----

TEST_F(SafetensorsFiles, SaveReplacesAtomicallyAndCleansUpOnFailure) {
  std::string target = path("model.safetensors");
  st::save_file({{"w", ones({2})}}, target);
  st::save_file({{"v", zeros({3}, kInt32)}}, target, {{"step", "2"}});
  st::TensorMap m = st::load_file(target);
  EXPECT_EQ(namesOf(m), (std::vector<std::string>{"v"}));
  EXPECT_EQ(st::metadata(target), (st::Metadata{{"step", "2"}}));
  EXPECT_EQ(listing(), (std::vector<std::string>{"model.safetensors"}));

  // No directory to create the temporary file in.
  std::string missing = path("missing/model.safetensors");
  EXPECT_TRUE(throwsIO(
      [&] {
        st::save_file({{"w", ones({2})}}, missing);
      },
      {"safetensors::save_file", missing, "cannot create a temporary file",
       "No such file or directory"}));
  // The temporary file is written, but cannot replace a directory: it must not stay behind.
  fs::create_directory(path("taken"));
  EXPECT_TRUE(throwsIO(
      [&] {
        st::save_file({{"w", ones({2})}}, path("taken"));
      },
      {path("taken"), "cannot replace it"}));
  EXPECT_EQ(listing(), (std::vector<std::string>{"model.safetensors", "taken"}));
  EXPECT_TRUE(fs::is_empty(path("taken")));
  // A save rejected before writing leaves the old file as it was.
  EXPECT_THROW(st::save_file({{"w", Tensor()}}, target), ValueError);
  EXPECT_EQ(namesOf(st::load_file(target)), (std::vector<std::string>{"v"}));
}

TEST(Safetensors, SaveRejectsWhatAFileCannotHold) {
  auto throwsValue = [](const st::TensorMap& m, const std::string& fragment) {
    try {
      st::save(m);
    } catch (const ValueError& e) {
      return std::string(e.what()).find(fragment) != std::string::npos;
    }
    return false;
  };
  EXPECT_TRUE(throwsValue({{"w", ones({1})}, {"w", ones({2}, kInt64)}}, "'w' appears twice"));
  EXPECT_TRUE(throwsValue({{"w", Tensor()}}, "'w' is undefined"));
  EXPECT_TRUE(throwsValue({{"__metadata__", ones({1})}}, "\"__metadata__\" holds the metadata"));
  EXPECT_TRUE(throwsValue({{"bad\xFF", ones({1})}}, "not valid UTF-8"));
}

// ---- 5. corrupt files ----

struct Corruption {
  const char* name;
  std::string bytes;
  std::vector<std::string> mentions;
};

std::vector<Corruption> corruptions() {
  std::string f32x1 = R"("dtype":"F32","shape":[1])";
  return {
      {"empty buffer", "", {"0 bytes long", "8-byte header length"}},
      {"shorter than the length prefix", "abc", {"3 bytes long"}},
      {"header length past the end", le(1000, 8) + "{}", {"header length is 1000", "2 bytes"}},
      {"header length near 2^64", le(~uint64_t{0}, 8) + "{}", {"18446744073709551615"}},
      {"cut-off JSON", file(R"({"a":)"), {"not valid JSON", "unexpected end"}},
      {"bytes after the object", file("{} x"), {"not valid JSON", "after the JSON object"}},
      {"header is a list", file("[]"), {"the header is a list, not a JSON object"}},
      {"invalid UTF-8", file("{\"\xFF\":1}"), {"invalid UTF-8"}},
      {"control character", file("{\"a\x01\":1}"), {"control character"}},
      {"unterminated string", file(R"({"abc)"), {"unterminated string"}},
      {"bad escape", file(R"({"\q":1})"), {"invalid escape"}},
      {"lone surrogate", file(R"({"\ud800x":1})"), {"high surrogate without its low half"}},
      {"deep nesting", file(R"({"w":{"extra":)" + std::string(10000, '[')), {"nested too deeply"}},
      {"duplicate name",
       file(R"({"w":{)" + f32x1 + R"(,"data_offsets":[0,4]},"w":{)" + f32x1 +
                R"(,"data_offsets":[4,8]}})",
            le(0, 8)),
       {"key 'w' appears twice"}},
      {"entry not an object", file(R"({"w":3})"), {"tensor 'w' is a number, not an object"}},
      {"missing dtype",
       file(R"({"w":{"shape":[1],"data_offsets":[0,4]}})", le(0, 4)),
       {"tensor 'w' has no \"dtype\" field"}},
      {"missing shape",
       file(R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", le(0, 4)),
       {"tensor 'w' has no \"shape\" field"}},
      {"missing data_offsets",
       file(R"({"w":{)" + f32x1 + "}}", le(0, 4)),
       {"tensor 'w' has no \"data_offsets\" field"}},
      {"unknown dtype",
       file(R"({"w":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}})", le(0, 1)),
       {"dtype 'F8_E4M3'", "does not read"}},
      {"dtype not a string",
       file(R"({"w":{"dtype":4,"shape":[1],"data_offsets":[0,1]}})", le(0, 1)),
       {"has dtype a number"}},
      {"negative size",
       file(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})"),
       {"shape of tensor 'w' holds '-1'"}},
      {"fractional size",
       file(R"({"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,0]}})"),
       {"holds '1.5'"}},
      {"size past int64",
       file(R"({"w":{"dtype":"F32","shape":[9223372036854775808],"data_offsets":[0,0]}})"),
       {"holds '9223372036854775808'", "from 0 to 9223372036854775807"}},
      {"shape product overflows",
       file(R"({"w":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,0]}})"),
       {"shape [4294967296, 4294967296], whose size overflows"}},
      {"offsets do not match the shape",
       file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", le(0, 4)),
       {"data_offsets [0, 4] (4 bytes)", "[2] of F32 takes 8 bytes"}},
      {"three offsets",
       file(R"({"w":{)" + f32x1 + R"(,"data_offsets":[0,4,8]}})", le(0, 8)),
       {"more than two entries"}},
      {"one offset", file(R"({"w":{)" + f32x1 + R"(,"data_offsets":[0]}})"), {"fewer than two"}},
      {"offset past uint64",
       file(R"({"w":{)" + f32x1 + R"(,"data_offsets":[0,18446744073709551616]}})"),
       {"holds '18446744073709551616'"}},
      {"offsets backwards",
       file(R"({"w":{)" + f32x1 + R"(,"data_offsets":[4,0]}})", le(0, 4)),
       {"end before they begin"}},
      {"offsets past the data",
       file(R"({"w":{)" + f32x1 + R"(,"data_offsets":[4,8]}})", le(0, 4)),
       {"past the end of the 4-byte data section"}},
      {"overlapping tensors",
       file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
            R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
            std::string(12, '\0')),
       {"tensor 'b' (data_offsets [4, 12]) overlaps tensor 'a'"}},
      {"hole between tensors",
       file(R"({"a":{)" + f32x1 + R"(,"data_offsets":[0,4]},"b":{)" + f32x1 +
                R"(,"data_offsets":[8,12]}})",
            std::string(12, '\0')),
       {"bytes [4, 8) of the data section belong to no tensor"}},
      {"trailing data",
       file(R"({"a":{)" + f32x1 + R"(,"data_offsets":[0,4]}})", le(0, 8)),
       {"cover 4 bytes but the data section has 8"}},
      {"metadata not an object", file(R"({"__metadata__":"x"})"), {"must be an object"}},
      {"metadata value not a string",
       file(R"({"__metadata__":{"k":1}})"),
       {"metadata value of 'k' is a number, not a string"}},
      {"bool byte not 0 or 1",
       file(R"({"m":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", le(0x0201, 2)),
       {"bool tensor 'm' holds the byte 2 at element 1"}},
  };
}

TEST(Safetensors, EveryCorruptionIsAnIOErrorSayingWhatIsWrong) {
  for (const Corruption& c : corruptions()) {
    std::vector<std::string> mentions = c.mentions;
    mentions.push_back("safetensors::load: safetensors buffer: ");
    mentions.push_back("SafetensorsTest.cpp:"); // the caller's line
    EXPECT_TRUE(throwsIO([&] { loadBytes(c.bytes); }, mentions)) << c.name;
  }
}

TEST_F(SafetensorsFiles, FileErrorsNameTheFile) {
  std::string p = path("bad.safetensors");
  write("bad.safetensors", le(1000, 8) + "{}");
  EXPECT_TRUE(throwsIO([&] { st::load_file(p); },
                       {"safetensors::load_file: '" + p + "'", "header length is 1000"}));
  EXPECT_TRUE(throwsIO([&] { st::metadata(p); }, {"safetensors::metadata: '" + p + "'"}));
  EXPECT_TRUE(throwsIO([&] { st::load_file(path("none")); }, {"none", "cannot open it"}));
  EXPECT_TRUE(throwsIO([&] { st::load_file(dir_.string()); }, {"not a regular file"}));
}

TEST(Safetensors, DamagedFilesNeverCrash) {
  st::TensorMap m = {{"w", arange(6).to(kFloat32).reshape({2, 3})},
                     {"i", tensor({1, 2})},
                     {"m", tensor({true, false, true})},
                     {"h", ones({2}, kFloat16)}};
  std::string valid = toString(st::save(m, {{"k", "v"}}));
  for (size_t n = 0; n < valid.size(); ++n)
    EXPECT_THROW(loadBytes(valid.substr(0, n)), IOError) << "cut to " << n << " bytes";
  int loaded = 0, rejected = 0;
  for (size_t i = 0; i < valid.size(); ++i)
    for (int v : std::initializer_list<int>{valid[i] ^ 0x01, valid[i] ^ 0x80, 0x00, 0xFF, '"', '{',
                                            '[', '9', ',', '-'}) {
      std::string bytes = valid;
      bytes[i] = static_cast<char>(v);
      try {
        loadBytes(bytes);
        ++loaded;
      } catch (const Error&) {
        ++rejected;
      } catch (const std::exception& e) {
        ADD_FAILURE() << "byte " << i << " set to " << v << ": not a weft::Error: " << e.what();
      }
    }
  EXPECT_GT(loaded, 0);   // changed tensor data still loads
  EXPECT_GT(rejected, 0); // a changed header rarely does
}

} // namespace
} // namespace weft::test
