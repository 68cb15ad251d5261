// The per-op shaders' names and the hook through which codegen provides them.
#include "weft/runtime/Shaders.h"

#include "weft/runtime/Error.h"

#include <cstring>
#include <fstream>
#include <map>
#include <algorithm>
#include <mutex>
#include <set>
#include <sstream>

namespace weft::hal {
namespace {

std::mutex& sourceMutex() {
  static std::mutex m;
  return m;
}
ShaderSource& source() {
  static ShaderSource s;
  return s;
}

const char* familyName(ShaderFamily f) {
  switch (f) {
  case ShaderFamily::Map:
    return "map";
  case ShaderFamily::Reduce:
    return "reduce";
  case ShaderFamily::ArgReduce:
    return "argreduce";
  case ShaderFamily::Normalize:
    return "normalize";
  case ShaderFamily::Scan:
    return "scan";
  case ShaderFamily::Gather:
    return "gather";
  case ShaderFamily::Scatter:
    return "scatter";
  case ShaderFamily::CheckIndex:
    return "check_index";
  case ShaderFamily::MatMul:
    return "matmul";
  case ShaderFamily::Pool:
    return "pool";
  case ShaderFamily::Random:
    return "random";
  case ShaderFamily::Sort:
    return "sort";
  case ShaderFamily::Factor:
    return "factor";
  }
  return "?";
}

constexpr char kPackMagic[8] = {'W', 'E', 'F', 'T', 'S', 'P', 'V', '1'};

/// The capabilities a target string names ("caps=A,B,...").
std::set<std::string> capabilities(const std::string& target) {
  std::set<std::string> caps;
  std::istringstream in(target);
  for (std::string word; in >> word;)
    if (word.rfind("caps=", 0) == 0) {
      std::stringstream list(word.substr(5));
      for (std::string c; std::getline(list, c, ',');)
        caps.insert(c);
    }
  return caps;
}

std::map<std::string, std::vector<PackedShader>>& pack() {
  static std::map<std::string, std::vector<PackedShader>> shaders;
  return shaders;
}

ShaderCode fromPack(const ShaderKey& key, const std::string& target) {
  ShaderCode code;
  const std::set<std::string> have = capabilities(target);
  std::lock_guard<std::mutex> lock(sourceMutex()); // useShaderPack may replace the pack
  auto it = pack().find(key.str());
  if (it != pack().end())
    for (const PackedShader& s : it->second) {
      std::set<std::string> need = capabilities(s.target);
      if (std::includes(have.begin(), have.end(), need.begin(), need.end())) {
        code.words = s.words;
        return code;
      }
    }
  code.error = it == pack().end() ? "the shader pack in use has no such shader"
                                  : "the shader pack has it only for targets with capabilities "
                                    "this device lacks";
  return code;
}

} // namespace

void writeShaderPack(const std::string& path, const std::vector<PackedShader>& shaders) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  auto u32 = [&](uint32_t v) { out.write(reinterpret_cast<const char*>(&v), 4); };
  auto text = [&](const std::string& t) {
    u32(static_cast<uint32_t>(t.size()));
    out.write(t.data(), static_cast<std::streamsize>(t.size()));
  };
  out.write(kPackMagic, sizeof kPackMagic);
  u32(static_cast<uint32_t>(shaders.size()));
  for (const PackedShader& s : shaders) {
    text(s.key);
    text(s.target);
    u32(static_cast<uint32_t>(s.words.size()));
    out.write(reinterpret_cast<const char*>(s.words.data()),
              static_cast<std::streamsize>(s.words.size() * 4));
  }
  WEFT_CHECK(out.good(), IO, "writeShaderPack: cannot write ", path);
}

void useShaderPack(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  WEFT_CHECK(in.good(), IO, "useShaderPack: cannot read ", path);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t at = 0;
  auto need = [&](size_t n) {
    WEFT_CHECK(n <= bytes.size() - at, IO, "useShaderPack: ", path, " is cut short at byte ", at);
  };
  auto u32 = [&] {
    need(4);
    uint32_t v = 0;
    std::memcpy(&v, bytes.data() + at, 4);
    at += 4;
    return v;
  };
  auto text = [&] {
    const uint32_t n = u32();
    need(n);
    std::string t = bytes.substr(at, n);
    at += n;
    return t;
  };
  need(sizeof kPackMagic);
  WEFT_CHECK(std::memcmp(bytes.data(), kPackMagic, sizeof kPackMagic) == 0, IO, "useShaderPack: ",
             path, " is not a weft shader pack");
  at = sizeof kPackMagic;
  std::map<std::string, std::vector<PackedShader>> read;
  for (uint32_t i = 0, n = u32(); i < n; ++i) {
    PackedShader s;
    s.key = text();
    s.target = text();
    const uint32_t words = u32();
    need(size_t{words} * 4);
    s.words.resize(words);
    std::memcpy(s.words.data(), bytes.data() + at, size_t{words} * 4);
    at += size_t{words} * 4;
    WEFT_CHECK(isSpirv(s.words), IO, "useShaderPack: ", path, " holds a shader for ", s.key,
               " that is not SPIR-V");
    read[s.key].push_back(std::move(s));
  }
  std::lock_guard<std::mutex> lock(sourceMutex());
  pack() = std::move(read);
  source() = ShaderSource{&fromPack, nullptr};
}

std::string ShaderKey::str() const {
  std::string s = std::string(familyName(family)) + " " + std::string(opName(op)) + " ";
  for (size_t i = 0; i < dtypes.size(); ++i) {
    if (i > 0) s += i + 1 == dtypes.size() ? "->" : ",";
    s += dtypeName(dtypes[i]);
  }
  return s + " wg" + std::to_string(workgroupSize);
}

void setShaderSource(const ShaderSource& s) {
  std::lock_guard<std::mutex> lock(sourceMutex());
  source() = s;
}

ShaderSource shaderSource() {
  std::lock_guard<std::mutex> lock(sourceMutex());
  return source();
}

} // namespace weft::hal
