// The per-op shaders' names and the hook through which codegen provides them.
#include "weft/runtime/Shaders.h"

#include "weft/runtime/ByteWriter.h"
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


std::map<std::string, std::vector<PackedShader>>& pack() {
  static std::map<std::string, std::vector<PackedShader>> shaders;
  return shaders;
}

ShaderCode fromPack(const ShaderKey& key, const std::string& target) {
  ShaderCode code;
  const std::set<std::string> have = targetList(target, "caps=");
  std::lock_guard<std::mutex> lock(sourceMutex()); // useShaderPack may replace the pack
  auto it = pack().find(key.str());
  if (it != pack().end())
    for (const PackedShader& s : it->second) {
      std::set<std::string> need = targetList(s.target, "caps=");
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
  s += " wg" + std::to_string(workgroupSize);
  return block == 0 || block == kMatMulBlock ? s : s + " b" + std::to_string(block);
}

std::vector<uint8_t> packSpirvKernels(std::span<const SpirvKernel> kernels) {
  ByteWriter w;
  w.u64(kernels.size());
  for (const SpirvKernel& k : kernels) {
    w.str(k.symbol);
    w.pod(k.bindings);
    w.pod(k.workgroupSize);
    w.u64(k.words.size());
    for (uint32_t word : k.words)
      w.pod(word);
  }
  return std::move(w.bytes);
}

std::vector<SpirvKernel> unpackSpirvKernels(std::span<const uint8_t> bytes) {
  size_t at = 0;
  auto need = [&](uint64_t n) {
    WEFT_CHECK(n <= bytes.size() - at, Device, "a ", kSpirvKernelsFormat,
               " code object is cut short at byte ", at, " of ", bytes.size());
  };
  auto pod = [&]<typename T>(T) {
    need(sizeof(T));
    T v;
    std::memcpy(&v, bytes.data() + at, sizeof(T));
    at += sizeof(T);
    return v;
  };
  std::vector<SpirvKernel> kernels;
  const auto count = pod(uint64_t{});
  need(count); // each kernel takes more than a byte: no count past the bytes is believed
  for (uint64_t i = 0; i < count; ++i) {
    SpirvKernel k;
    const auto name = pod(uint64_t{});
    need(name);
    k.symbol.assign(reinterpret_cast<const char*>(bytes.data() + at), name);
    at += name;
    k.bindings = pod(uint32_t{});
    k.workgroupSize = pod(uint32_t{});
    const auto words = pod(uint64_t{});
    WEFT_CHECK(words <= (bytes.size() - at) / 4, Device, "a ", kSpirvKernelsFormat,
               " code object is cut short in kernel ", k.symbol);
    k.words.resize(words);
    std::memcpy(k.words.data(), bytes.data() + at, words * 4);
    at += words * 4;
    WEFT_CHECK(isSpirv(k.words) && k.bindings >= 1 && k.workgroupSize >= 1, Device,
               "kernel ", k.symbol, " of a ", kSpirvKernelsFormat,
               " code object is not SPIR-V binding its parameters and operands");
    kernels.push_back(std::move(k));
  }
  return kernels;
}

std::set<std::string> targetList(const std::string& target, std::string_view prefix) {
  std::set<std::string> all;
  std::istringstream in(target);
  for (std::string word; in >> word;)
    if (word.rfind(prefix, 0) == 0) {
      std::stringstream list(word.substr(prefix.size()));
      for (std::string c; std::getline(list, c, ',');)
        all.insert(c);
    }
  return all;
}

std::string spirvTargetMismatch(const std::string& code, const std::string& device) {
  for (const char* prefix : {"caps=", "exts="}) {
    const std::set<std::string> have = targetList(device, prefix), need = targetList(code, prefix);
    for (const std::string& n : need)
      if (have.count(n) == 0)
        return "it needs " + std::string(prefix[0] == 'c' ? "the SPIR-V capability " : "the extension ") +
               n + ", which the device lacks";
  }
  return "";
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
