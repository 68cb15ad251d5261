// The Chrome trace of WEFT_PROFILE=trace.json (see Timeline.h): events kept in memory under one
// lock and written as JSON when the process exits.
#include "weft/runtime/Timeline.h"

#include "weft/runtime/DebugFlags.h"
#include "weft/runtime/Error.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace weft::timeline {
namespace {

constexpr size_t kMaxEvents = 1'000'000;

struct Event {
  std::string name, where;
  const char* category;
  double start, duration;
  int track;
};

struct State {
  std::string path;
  std::mutex mutex;
  std::vector<Event> events;
  std::map<std::string, int> tracks; // named tracks, after the threads'
  std::map<std::thread::id, int> threads;
  bool dropped = false;
  std::chrono::steady_clock::time_point origin = std::chrono::steady_clock::now();
};

State* state() {
  static State* s = [] {
    std::string v = debugFlag("WEFT_PROFILE").value_or("");
    if (v.empty() || v == "0" || v == "1") return static_cast<State*>(nullptr);
    auto* st = new State; // never destroyed: written at exit, and threads may record until then
    st->path = v;
    std::atexit([] { write(); });
    return st;
  }();
  return s;
}

void appendJson(std::string& out, const std::string& text) {
  out += '"';
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  out += '"';
}

} // namespace

bool enabled() {
  return state() != nullptr;
}

double nowUs() {
  State* s = state();
  auto origin = s != nullptr ? s->origin : std::chrono::steady_clock::time_point{};
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - origin)
      .count();
}

std::string callSite() {
  const std::source_location* at = CallSite::current();
  if (at == nullptr) return {};
  return std::string(at->file_name()) + ":" + std::to_string(at->line());
}

void record(std::string name, const char* category, double startUs, double durUs,
            std::string where, const std::string& track) {
  State* s = state();
  if (s == nullptr) return;
  std::lock_guard<std::mutex> lock(s->mutex);
  if (s->events.size() >= kMaxEvents) {
    s->dropped = true;
    return;
  }
  int id = 0;
  if (track.empty()) {
    auto [it, fresh] = s->threads.emplace(std::this_thread::get_id(), 0);
    if (fresh) it->second = static_cast<int>(s->threads.size());
    id = it->second;
  } else {
    auto [it, fresh] = s->tracks.emplace(track, 0);
    if (fresh) it->second = 1000 + static_cast<int>(s->tracks.size());
    id = it->second;
  }
  s->events.push_back({std::move(name), std::move(where), category, startUs, durUs, id});
}

Scope::Scope(const char* category, std::string name, std::string where) {
  if (!enabled()) return;
  category_ = category;
  name_ = std::move(name);
  where_ = std::move(where);
  start_ = nowUs();
}

Scope::~Scope() {
  if (start_ < 0) return;
  record(std::move(name_), category_, start_, nowUs() - start_, std::move(where_));
}

void write() {
  State* s = state();
  if (s == nullptr) return;
  std::lock_guard<std::mutex> lock(s->mutex);
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  auto meta = [&](int tid, const std::string& name) {
    if (!first) out += ",\n";
    first = false;
    out += "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":" + std::to_string(tid) +
           ",\"args\":{\"name\":";
    appendJson(out, name);
    out += "}}";
  };
  for (const auto& [thread, id] : s->threads)
    meta(id, id == 1 ? "host thread 1 (first to record)" : "host thread " + std::to_string(id));
  for (const auto& [name, id] : s->tracks)
    meta(id, name);
  char num[64];
  for (const Event& e : s->events) {
    out += ",\n{\"ph\":\"X\",\"pid\":1,\"tid\":" + std::to_string(e.track) + ",\"cat\":\"" +
           e.category + "\",\"name\":";
    appendJson(out, e.name);
    std::snprintf(num, sizeof num, ",\"ts\":%.3f,\"dur\":%.3f", e.start, e.duration);
    out += num;
    if (!e.where.empty()) {
      out += ",\"args\":{\"at\":";
      appendJson(out, e.where);
      out += "}";
    }
    out += "}";
  }
  out += "\n]";
  if (s->dropped)
    out += ",\"otherData\":{\"note\":\"past 1000000 events, the rest were not recorded\"}";
  out += "}\n";
  if (FILE* f = std::fopen(s->path.c_str(), "w")) {
    std::fwrite(out.data(), 1, out.size(), f);
    std::fclose(f);
  } else {
    std::fprintf(stderr, "[weft] WEFT_PROFILE: cannot write %s\n", s->path.c_str());
  }
}

} // namespace weft::timeline
