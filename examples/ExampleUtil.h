// What the example programs share: command-line options, a progress line and a stopwatch.
#pragma once

#include <weft/weft.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace examples {

/// Parses `--name value` options and `--flag` switches into variables; `--help` prints the usage
/// and exits; anything unknown or malformed is a weft::ValueError that quotes the usage.
class Options {
public:
  Options(std::string program, std::string usage)
      : program_(std::move(program)), usage_(std::move(usage)) {}
  Options& flag(const std::string& name, bool& target) {
    handlers_[name] = [&target](const std::string*) { target = true; };
    switches_[name] = true;
    return *this;
  }
  template <typename T> Options& value(const std::string& name, T& target) {
    handlers_[name] = [this, name, &target](const std::string* v) {
      try {
        size_t used = 0;
        if constexpr (std::is_same_v<T, std::string>) {
          target = *v;
          used = v->size();
        } else if constexpr (std::is_floating_point_v<T>) {
          target = static_cast<T>(std::stod(*v, &used));
        } else {
          target = static_cast<T>(std::stoll(*v, &used));
        }
        if (used != v->size()) throw std::invalid_argument("trailing characters");
      } catch (const std::logic_error&) {
        fail(name + " expects a " + (std::is_floating_point_v<T> ? "number" : "whole number") +
             ", got '" + *v + "'");
      }
    };
    switches_[name] = false;
    return *this;
  }
  /// A `--name value` option that may repeat: each value is appended to `target`.
  Options& values(const std::string& name, std::vector<std::string>& target) {
    handlers_[name] = [&target](const std::string* v) { target.push_back(*v); };
    switches_[name] = false;
    return *this;
  }
  void parse(int argc, char** argv) const {
    for (int i = 1; i < argc; ++i) {
      std::string k = argv[i];
      if (k == "--help" || k == "-h") {
        std::fputs(usage_.c_str(), stdout);
        std::exit(0);
      }
      auto it = handlers_.find(k);
      if (it == handlers_.end()) fail("unknown option " + k);
      if (switches_.at(k)) {
        it->second(nullptr);
        continue;
      }
      if (i + 1 >= argc) fail(k + " needs a value");
      std::string v = argv[++i];
      it->second(&v);
    }
  }
  [[noreturn]] void fail(const std::string& why) const {
    throw weft::ValueError(program_ + ": " + why + "\n" + usage_);
  }
  /// The device `--device` named ("cpu", "vulkan", "vulkan:1"), opened now: one this machine
  /// lacks fails here, not at the first step.
  weft::Device device(const std::string& spec) const {
    try {
      weft::Device on(spec);
      (void)weft::hal::device(on);
      return on;
    } catch (const weft::Error& e) {
      fail("--device " + spec + ": " + e.what());
    }
  }

private:
  std::string program_, usage_;
  std::map<std::string, std::function<void(const std::string*)>> handlers_;
  std::map<std::string, bool> switches_;
};

/// Seconds since construction.
class Stopwatch {
public:
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

/// Rewrites one terminal line: "<label> [=====     ] done/total  loss L  R <unit>/s".
inline void progress(const std::string& label, size_t done, size_t total, double loss, double rate,
                     const char* unit) {
  int width = 30, filled = static_cast<int>(width * done / std::max<size_t>(total, 1));
  std::printf("\r%s [%s%s] %zu/%zu  loss %.4f  %.0f %s/s", label.c_str(),
              std::string(static_cast<size_t>(filled), '=').c_str(),
              std::string(static_cast<size_t>(width - filled), ' ').c_str(), done, total, loss,
              rate, unit);
  std::fflush(stdout);
}

/// Runs `body`, printing a weft error (or any other) instead of crashing: the exit code is 1.
inline int guardedMain(const std::function<int()>& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}

} // namespace examples
