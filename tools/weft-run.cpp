// weft-run: runs a program of an artifact (.weft) with the runtime alone (no compiler), on inputs
// from a safetensors file or .npy files, and writes its outputs as safetensors.
//
//   weft-run model.weft --info
//   weft-run model.weft --inputs in.safetensors --out out.safetensors [--program forward]
//   weft-run model.weft --input image.npy [--input ...] --bench 100 [--device vulkan:0]
//   weft-run model.weft --train 1000 --data train.safetensors [--save tuned.safetensors]
#include "weft/runtime/Artifact.h"
#include "weft/runtime/AtomicFile.h"
#include "weft/runtime/Blas.h"
#include "weft/runtime/Error.h"
#include "weft/runtime/InputFile.h"
#include "weft/runtime/SafetensorsFormat.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {

using namespace weft;

const char* kUsage =
    "usage: weft-run MODEL.weft [--info] [--program NAME] [--device DEVICE]\n"
    "                [--inputs FILE.safetensors | --input FILE.npy ...] [--out FILE.safetensors]\n"
    "                [--bench N] [--train N --data FILE.safetensors [--save FILE]]\n"
    "  --info      the programs, their signatures, state, code targets and sizes, and the\n"
    "              BLAS kernels this CPU runs\n"
    "  --program   the program to run (default: the artifact's first)\n"
    "  --device    cpu (default), vulkan:0, ...\n"
    "  --inputs    a safetensors file holding each argument under its name\n"
    "  --input     a .npy file per argument, in order\n"
    "  --out       where the outputs go, under their names\n"
    "  --bench N   runs N more times and prints the latency\n"
    "  --train N   runs N steps of a train step (default program: train_step) on batches of\n"
    "              --data (a tensor per argument, its rows batched in order, cycling), prints\n"
    "              the first output, then writes the state back: into MODEL.weft, or --save\n"
    "              (an artifact, or a .safetensors file of the state)\n";

struct HostTensor {
  DType dtype = DType::Float32;
  Shape shape;
  std::vector<uint8_t> bytes;
};

/// A .npy file (format 1.0 to 3.0, little-endian, C order).
HostTensor readNpy(const std::string& path) {
  const std::string ctx = "weft-run: '" + path + "': ";
  detail::InputFile file(path, ctx);
  uint8_t head[12] = {};
  WEFT_CHECK(file.size() >= 10, IO, ctx, "too short for a .npy file");
  file.readAt(0, head, std::min<uint64_t>(12, file.size()));
  WEFT_CHECK(std::memcmp(head, "\x93NUMPY", 6) == 0, IO, ctx, "not a .npy file");
  const int major = head[6];
  WEFT_CHECK(major >= 1 && major <= 3, IO, ctx, ".npy format ", major, " is not read here");
  const uint64_t lenBytes = major == 1 ? 2 : 4, start = 8 + lenBytes;
  uint64_t n = head[8] | static_cast<uint64_t>(head[9]) << 8;
  if (major > 1) n |= static_cast<uint64_t>(head[10]) << 16 | static_cast<uint64_t>(head[11]) << 24;
  WEFT_CHECK(start + n <= file.size() && n <= (1u << 20), IO, ctx, "a damaged .npy header");
  std::string dict(n, '\0');
  file.readAt(start, dict.data(), n);
  auto field = [&](const std::string& key) {
    const size_t at = dict.find("'" + key + "'");
    WEFT_CHECK(at != std::string::npos, IO, ctx, "its header has no '", key, "'");
    size_t v = dict.find(':', at);
    WEFT_CHECK(v != std::string::npos, IO, ctx, "a damaged .npy header");
    v = dict.find_first_not_of(' ', v + 1);
    WEFT_CHECK(v != std::string::npos, IO, ctx, "a damaged .npy header");
    return v;
  };
  size_t d = field("descr");
  const size_t e = dict.find('\'', d + 1);
  WEFT_CHECK(dict[d] == '\'' && e != std::string::npos, IO, ctx, "a damaged .npy header");
  const std::string descr = dict.substr(d + 1, e - d - 1);
  const std::map<std::string, DType> codes = {
      {"|b1", DType::Bool},     {"|u1", DType::UInt8},    {"<i4", DType::Int32},
      {"<i8", DType::Int64},    {"<f2", DType::Float16},  {"<f4", DType::Float32},
      {"<f8", DType::Float64}};
  auto code = codes.find(descr);
  WEFT_CHECK(code != codes.end(), IO, ctx, "dtype '", descr,
             "' is not one weft reads (little-endian bool, uint8, int32, int64, float16/32/64)");
  WEFT_CHECK(dict.compare(field("fortran_order"), 5, "False") == 0, IO, ctx,
             "Fortran-ordered arrays are not read here (save a C-ordered copy)");
  size_t s = field("shape");
  WEFT_CHECK(dict[s] == '(', IO, ctx, "a damaged .npy shape");
  const size_t close = dict.find(')', s);
  WEFT_CHECK(close != std::string::npos, IO, ctx, "a damaged .npy shape");
  HostTensor t;
  t.dtype = code->second;
  for (size_t i = s + 1; i < close;) {
    i = dict.find_first_not_of(" ,", i);
    if (i >= close) break;
    size_t used = 0;
    long long dim = -1;
    try {
      dim = std::stoll(dict.substr(i, close - i), &used);
    } catch (const std::exception&) {
    }
    WEFT_CHECK(dim >= 0 && used > 0, IO, ctx, "a damaged .npy shape");
    t.shape.push_back(dim);
    i += used;
  }
  std::optional<int64_t> bytes = byteSize(t.shape, t.dtype);
  WEFT_CHECK(bytes && start + n + static_cast<uint64_t>(*bytes) == file.size(), IO, ctx,
             "its data is not the size its shape ", shapeString(t.shape), " takes");
  t.bytes.resize(static_cast<size_t>(*bytes));
  if (!t.bytes.empty()) file.readAt(start + n, t.bytes.data(), t.bytes.size());
  file.checkUnchanged();
  // C++ bools hold 0 or 1, as the kernels read them.
  WEFT_CHECK(t.dtype != DType::Bool ||
                 std::all_of(t.bytes.begin(), t.bytes.end(), [](uint8_t b) { return b <= 1; }),
             IO, ctx, "a bool array holds a byte other than 0 and 1");
  return t;
}

/// The tensors of a safetensors file, by name.
std::map<std::string, HostTensor> readSafetensors(const std::string& path) {
  const std::string ctx = "weft-run: '" + path + "': ";
  detail::InputFile file(path, ctx);
  uint8_t prefix[8] = {};
  if (file.size() >= 8) file.readAt(0, prefix, 8);
  const uint64_t n = safetensors::format::headerLength(prefix, file.size(), ctx);
  std::string text(n, '\0');
  file.readAt(8, text.data(), n);
  safetensors::format::Header h = safetensors::format::parseHeader(text, file.size() - 8 - n, ctx);
  std::map<std::string, HostTensor> out;
  for (const safetensors::format::Entry& e : h.entries) {
    HostTensor t{e.dtype, e.shape, std::vector<uint8_t>(e.end - e.begin)};
    if (!t.bytes.empty()) file.readAt(8 + n + e.begin, t.bytes.data(), t.bytes.size());
    safetensors::format::checkBools(e, t.bytes.data(), ctx);
    out.emplace(e.name, std::move(t));
  }
  file.checkUnchanged();
  return out;
}

std::string typeString(const ExecutableValue& v) {
  return std::string(dtypeName(v.dtype)) + " " + shapeString(v.shape);
}

void printInfo(const Artifact& a) {
  std::printf("%s: %llu bytes, written by %s\n", a.path().c_str(),
              static_cast<unsigned long long>(a.fileBytes()), a.producer().c_str());
  const BlasInfo& blas = blasInfo();
  std::printf("BLAS: %s, kernels %s (chosen by %s)\n", blas.library.c_str(), blas.core.c_str(),
              blas.chosen.c_str());
  size_t stateBytes = 0;
  for (const ArtifactTensor& t : a.state())
    stateBytes += t.nbytes();
  std::printf("state: %zu tensors, %zu bytes\n", a.state().size(), stateBytes);
  for (const std::string& name : a.programNames()) {
    const Executable& e = a.program(name);
    size_t kernelSteps = 0;
    for (const PlanStep& s : e.plan.steps)
      kernelSteps += s.kernel >= 0 ? 1 : 0;
    std::printf("program %s: %zu steps (%zu generated kernels), %zu state tensors%s, arena %lld "
                "bytes\n",
                name.c_str(), e.plan.steps.size(), kernelSteps, e.state.size(),
                e.plan.stateUpdates.empty() ? "" : " (updated)",
                static_cast<long long>(e.plan.arenaBytes));
    for (const ExecutableValue& v : e.arguments)
      std::printf("  argument %s: %s\n", v.name.c_str(), typeString(v).c_str());
    for (const ExecutableValue& v : e.outputs)
      std::printf("  output %s: %s\n", v.name.c_str(), typeString(v).c_str());
    std::vector<bool> updated(e.state.size(), false);
    for (const auto& [index, slot] : e.plan.stateUpdates)
      updated[static_cast<size_t>(index)] = true;
    const std::vector<std::string>& names = a.stateNames(name);
    for (size_t i = 0; i < e.state.size(); ++i)
      std::printf("  state %s: %s%s\n", names[i].c_str(), typeString(e.state[i]).c_str(),
                  updated[i] ? " (updated)" : "");
    if (e.dynamic) {
      std::string list;
      for (int64_t b : a.buckets(name))
        list += (list.empty() ? "" : ", ") + std::to_string(b);
      std::printf("  dynamic dimension %lld of the batched arguments: buckets %s (the signature "
                  "is the largest's)\n",
                  static_cast<long long>(e.dynamic->dim), list.c_str());
    }
    // The CPU loads the first code object it can run.
    bool chosen = false;
    for (const hal::CodeObject& c : e.plan.kernels.code) {
      const std::string why = hal::cpu().cannotRun(c);
      const char* mark = !why.empty() ? "" : chosen ? " (this CPU runs it too)" : " (this CPU runs it)";
      chosen = chosen || why.empty();
      std::printf("  code: %s, %zu bytes, for %s%s\n", c.format.c_str(), c.bytes.size(),
                  c.target.substr(0, c.target.find(' ', c.target.find(' ') + 1)).c_str(), mark);
    }
  }
}

/// A 0-d or one-element output as a number, for the training log ("" for others).
std::string scalarText(const ExecutableValue& v, const std::vector<uint8_t>& bytes) {
  if (numel(v.shape) != 1) return "";
  double x = 0;
  if (v.dtype == DType::Float32) {
    float f;
    std::memcpy(&f, bytes.data(), 4);
    x = f;
  } else if (v.dtype == DType::Float64) {
    std::memcpy(&x, bytes.data(), 8);
  } else {
    return "";
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", x);
  return text;
}

/// --train: `steps` calls of `program` on batches of `dataFile`, then the state saved to `saveTo`.
int runTraining(const std::shared_ptr<const Artifact>& a, std::string program,
                const std::string& device, long steps, const std::string& dataFile,
                const std::string& saveTo) {
  if (program.empty()) {
    std::vector<std::string> names = a->programNames();
    program = std::find(names.begin(), names.end(), "train_step") != names.end() ? "train_step"
                                                                                  : names.at(0);
  }
  Session session(a, program, hal::device(Device(device)));
  WEFT_CHECK(!a->program(program).plan.stateUpdates.empty(), Value, "weft-run: program '",
             program, "' updates no state: --train runs a train step (export_train_step)");
  std::map<std::string, HostTensor> data = readSafetensors(dataFile);
  // Each argument's rows come from the data tensor of its name: batch b is rows [b*B, (b+1)*B).
  int64_t batches = -1;
  std::vector<const HostTensor*> sources;
  for (const ExecutableValue& v : session.arguments()) {
    auto it = data.find(v.name);
    WEFT_CHECK(it != data.end(), Value, "weft-run: '", dataFile, "' holds no tensor '", v.name,
               "' (argument ", sources.size(), ", batches of ", typeString(v), ")");
    const HostTensor& t = it->second;
    const bool fits = !v.shape.empty() && v.shape[0] > 0 && t.dtype == v.dtype &&
                      t.shape.size() == v.shape.size() &&
                      std::equal(v.shape.begin() + 1, v.shape.end(), t.shape.begin() + 1) &&
                      t.shape[0] >= v.shape[0];
    WEFT_CHECK(fits, Value, "weft-run: '", v.name, "' in '", dataFile, "' is ",
               dtypeName(t.dtype), " ", shapeString(t.shape), ": batches of ", typeString(v),
               " need at least ", v.shape.empty() ? 0 : v.shape[0], " rows of the same type");
    const int64_t n = t.shape[0] / v.shape[0];
    WEFT_CHECK(batches < 0 || n == batches, Value, "weft-run: the data tensors hold different "
                                                   "numbers of batches (", batches, " and ", n, ")");
    batches = n;
    sources.push_back(&t);
  }
  WEFT_CHECK(batches > 0, Value, "weft-run: program '", program, "' takes no batched argument");
  std::vector<std::vector<uint8_t>> outputs;
  std::vector<void*> out;
  for (const ExecutableValue& v : session.outputs())
    outputs.emplace_back(*byteSize(v.shape, v.dtype));
  for (auto& o : outputs)
    out.push_back(o.data());
  const long every = std::max(1L, steps / 10);
  const auto t0 = std::chrono::steady_clock::now();
  for (long step = 0; step < steps; ++step) {
    std::vector<const void*> in;
    for (size_t i = 0; i < sources.size(); ++i) {
      const size_t batchBytes = static_cast<size_t>(*byteSize(session.arguments()[i].shape,
                                                              session.arguments()[i].dtype));
      in.push_back(sources[i]->bytes.data() + static_cast<size_t>(step % batches) * batchBytes);
    }
    session.run(in, out);
    if ((step + 1) % every == 0 || step + 1 == steps) {
      std::string text = outputs.empty() ? "" : scalarText(session.outputs()[0], outputs[0]);
      std::printf("step %ld/%ld%s%s\n", step + 1, steps,
                  text.empty() ? "" : (" " + session.outputs()[0].name + " ").c_str(),
                  text.c_str());
    }
  }
  const double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  session.save(saveTo);
  std::printf("%ld steps in %.3f s (%.3f ms a step); state written to %s\n", steps, s,
              1e3 * s / static_cast<double>(steps), saveTo.c_str());
  return 0;
}

int run(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::fputs(kUsage, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  std::string model = args[0], program, device = "cpu", inputsFile, outFile;
  std::vector<std::string> npys;
  bool info = false;
  long bench = 0, train = 0;
  std::string dataFile, saveFile;
  auto count = [](const std::string& option, const std::string& v) {
    char* end = nullptr;
    const long n = std::strtol(v.c_str(), &end, 10);
    WEFT_CHECK(*end == '\0' && n > 0 && n <= 100000000, Value, "weft-run: ", option,
               " takes a count from 1 to 100000000, not '", v, "'");
    return n;
  };
  for (size_t i = 1; i < args.size(); ++i) {
    auto value = [&]() -> const std::string& {
      WEFT_CHECK(i + 1 < args.size(), Value, "weft-run: ", args[i], " needs a value\n", kUsage);
      return args[++i];
    };
    if (args[i] == "--info") info = true;
    else if (args[i] == "--program") program = value();
    else if (args[i] == "--device") device = value();
    else if (args[i] == "--inputs") inputsFile = value();
    else if (args[i] == "--input") npys.push_back(value());
    else if (args[i] == "--out") outFile = value();
    else if (args[i] == "--bench") bench = count(args[i], value());
    else if (args[i] == "--train") train = count(args[i], value());
    else if (args[i] == "--data") dataFile = value();
    else if (args[i] == "--save") saveFile = value();
    else
      WEFT_FAIL(Value, "weft-run: unknown option '", args[i], "'\n", kUsage);
  }
  std::shared_ptr<const Artifact> a = Artifact::open(model);
  if (info) printInfo(*a);
  if (train > 0) {
    WEFT_CHECK(!dataFile.empty(), Value, "weft-run: --train needs --data\n", kUsage);
    return runTraining(a, program, device, train, dataFile, saveFile.empty() ? model : saveFile);
  }
  if (inputsFile.empty() && npys.empty()) {
    WEFT_CHECK(info, Value, "weft-run: no inputs (--inputs or --input); --info describes the "
                            "artifact\n", kUsage);
    return 0;
  }
  if (program.empty()) program = a->programNames().at(0);
  Session session(a, program, hal::device(Device(device)));
  const std::vector<ExecutableValue>& want = session.arguments();
  std::vector<HostTensor> inputs;
  if (!inputsFile.empty()) {
    std::map<std::string, HostTensor> byName = readSafetensors(inputsFile);
    for (const ExecutableValue& v : want) {
      auto it = byName.find(v.name);
      WEFT_CHECK(it != byName.end(), Value, "weft-run: '", inputsFile, "' holds no tensor '",
                 v.name, "' (argument ", inputs.size(), ", ", typeString(v), ")");
      inputs.push_back(std::move(it->second));
    }
  } else {
    WEFT_CHECK(npys.size() == want.size(), Value, "weft-run: program '", program, "' takes ",
               want.size(), " arguments, given ", npys.size(), " .npy files");
    for (const std::string& p : npys)
      inputs.push_back(readNpy(p));
  }
  // A dynamic program: the batched arguments' rows are the first one's, within the buckets.
  const std::optional<DynamicBatch>& dyn = session.dynamic();
  int64_t rows = 0;
  std::vector<ExecutableValue> expected = want, produced = session.outputs();
  if (dyn) {
    const auto first = static_cast<size_t>(dyn->arguments.at(0));
    const size_t dim = static_cast<size_t>(dyn->dim);
    WEFT_CHECK(inputs[first].shape.size() > dim, Value, "weft-run: argument ", first, " ('",
               want[first].name, "') has no dimension ", dim, " (the batch)");
    rows = inputs[first].shape[dim];
    for (int32_t i : dyn->arguments)
      expected[static_cast<size_t>(i)].shape[dim] = rows;
    for (size_t i = 0; i < produced.size(); ++i)
      if (const auto [axis, factor] = dyn->outputAxes[i]; axis >= 0)
        produced[i].shape[static_cast<size_t>(axis)] = rows * factor;
  }
  std::vector<const void*> in;
  for (size_t i = 0; i < want.size(); ++i) {
    WEFT_CHECK(inputs[i].dtype == expected[i].dtype && inputs[i].shape == expected[i].shape,
               Value, "weft-run: argument ", i, " ('", want[i].name, "') must be ",
               typeString(expected[i]), ", got ", dtypeName(inputs[i].dtype), " ",
               shapeString(inputs[i].shape));
    in.push_back(inputs[i].bytes.data());
  }
  std::vector<HostTensor> outputs;
  std::vector<void*> out;
  for (const ExecutableValue& v : produced) {
    outputs.push_back({v.dtype, v.shape, std::vector<uint8_t>(*byteSize(v.shape, v.dtype))});
  }
  for (HostTensor& t : outputs)
    out.push_back(t.bytes.data());
  auto call = [&] {
    if (dyn)
      session.run(in, out, rows);
    else
      session.run(in, out);
  };
  call();
  std::vector<std::string> names;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const ExecutableValue& v = produced[i];
    names.push_back(v.name);
    std::printf("%s: %s\n", v.name.c_str(), typeString(v).c_str());
  }
  if (!outFile.empty()) {
    std::vector<ArtifactTensor> written;
    for (size_t i = 0; i < outputs.size(); ++i)
      written.push_back({names[i], outputs[i].dtype, outputs[i].shape, outputs[i].bytes.data()});
    writeSafetensors(outFile, written, "weft-run");
  }
  if (bench > 0) {
    std::vector<double> ms;
    for (long i = 0; i < bench; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      call();
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                       .count());
    }
    std::sort(ms.begin(), ms.end());
    auto at = [&](double q) { return ms[static_cast<size_t>(q * static_cast<double>(ms.size() - 1))]; };
    std::printf("%ld runs on %s: median %.4f ms, p90 %.4f ms, min %.4f ms\n", bench, device.c_str(),
                at(0.5), at(0.9), ms.front());
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
