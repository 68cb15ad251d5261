// The timeline WEFT_PROFILE=trace.json writes: a Chrome trace (chrome://tracing, Perfetto) of what
// ran, as complete events on tracks: each host thread's eager ops (with the user's line) and plan
// steps, and each GPU queue's dispatches timed by the device's timestamp queries.
#pragma once

#include <string>

namespace weft::timeline {

/// Whether WEFT_PROFILE names a trace file (anything but "1", which asks for step tables).
bool enabled();
/// Microseconds on the timeline's clock (steady, from the process's first use).
double nowUs();
/// "file:line" of the current call site (Error.h's CallSite), or "".
std::string callSite();
/// Records an event [startUs, startUs + durUs) on the calling thread's track, or on the named
/// `track` ("vulkan:0 queue"); `category` is "op", "step" or "gpu"; `where` is shown as its
/// argument (the user's line). Past a million events the rest are dropped (the file says so).
void record(std::string name, const char* category, double startUs, double durUs,
            std::string where = {}, const std::string& track = {});

/// Times a scope as one event on the calling thread's track (nothing when the timeline is off).
class Scope {
public:
  Scope(const char* category, std::string name, std::string where = {});
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

private:
  const char* category_ = nullptr;
  std::string name_, where_;
  double start_ = -1;
};

/// Writes the file now (also done when the process exits).
void write();

} // namespace weft::timeline
