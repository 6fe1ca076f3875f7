#include "conveyor/timeline/chrome_trace.h"

#include <cstdio>

#include "conveyor/common/error.h"
#include "conveyor/timeline/render_util.h"

namespace conveyor {
namespace {

double MicrosecondsPer(TimeUnit time_unit) {
  switch (time_unit) {
    case TimeUnit::kSeconds:
      return 1e6;
    case TimeUnit::kCostUnits:
      return 1e3;
  }
  CONVEYOR_ASSERT(false) << "unknown time unit " << static_cast<int>(time_unit);
}

// `text` as a JSON string literal, quotes included.
std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buffer[8];
          std::snprintf(buffer, sizeof(buffer), "\\u%04x", c);
          out += buffer;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

// A number with up to three decimals (nanoseconds for microsecond times), never in exponent
// form.
std::string Decimal(double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.3f", value);
  std::string text = buffer;
  text.erase(text.find_last_not_of('0') + 1);
  if (text.back() == '.') text.pop_back();
  return text == "-0" ? "0" : text;
}

std::string Metadata(const char* name, int pid, int tid, const std::string& args) {
  return "{\"name\":\"" + std::string(name) + "\",\"ph\":\"M\",\"pid\":" + std::to_string(pid) +
         ",\"tid\":" + std::to_string(tid) + ",\"args\":{" + args + "}}";
}

std::string Complete(const std::string& name, const std::string& category, int pid, int tid,
                     double start_us, double end_us, const std::string& args) {
  return "{\"name\":" + JsonString(name) + ",\"cat\":" + JsonString(category) +
         ",\"ph\":\"X\",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(tid) +
         ",\"ts\":" + Decimal(start_us) + ",\"dur\":" + Decimal(end_us - start_us) + ",\"args\":{" +
         args + "}}";
}

std::string Event(const Span& s, int pid, double us_per_unit) {
  const Action& a = s.action;
  std::string args = "\"stage\":" + std::to_string(a.stage);
  if (a.microbatch >= 0) args += ",\"microbatch\":" + std::to_string(a.microbatch);
  args += ",\"op\":" + JsonString(std::string(OpName(a.op)));
  if (a.op == Op::kOverlapFB) args += ",\"backward\":" + JsonString(a.BackwardHalf().ToString());
  const std::string category = s.kind == SpanKind::kPost   ? "post"
                               : s.kind == SpanKind::kWait ? "wait"
                                                           : std::string(OpName(a.op));
  const bool comm = IsComm(a.op) || s.kind != SpanKind::kRun;
  return Complete(SpanName(s), category, pid, comm ? 1 : 0, s.start * us_per_unit,
                  s.end * us_per_unit, args);
}

}  // namespace

std::string RenderChromeTrace(const std::vector<TraceGroup>& groups) {
  std::vector<std::string> events;
  int next_pid = 1;
  for (const TraceGroup& group : groups) {
    CONVEYOR_CHECK(group.timeline != nullptr)
        << "trace group '" << group.name << "' has no timeline";
    const Timeline& timeline = *group.timeline;
    CheckTimeline(timeline);
    const int first_pid = next_pid;
    next_pid += timeline.num_ranks;
    // A phase's thread: 2 + its track; the parallel axes' threads only where they are used.
    bool used[kPhaseTracks] = {true};
    for (const Phase& p : timeline.phases) used[static_cast<int>(p.track)] = true;
    for (int r = 0; r < timeline.num_ranks; ++r) {
      const int pid = first_pid + r;
      events.push_back(
          Metadata("process_name", pid, 0,
                   "\"name\":" + JsonString(group.name + ": rank " + std::to_string(r))));
      events.push_back(
          Metadata("process_sort_index", pid, 0, "\"sort_index\":" + std::to_string(pid)));
      events.push_back(Metadata("thread_name", pid, 0, "\"name\":\"compute\""));
      events.push_back(Metadata("thread_name", pid, 1, "\"name\":\"comm\""));
      for (int track = 0; track < kPhaseTracks; ++track) {
        if (!used[track]) continue;
        events.push_back(Metadata(
            "thread_name", pid, 2 + track,
            "\"name\":" + JsonString(std::string(PhaseTrackName(static_cast<PhaseTrack>(track))))));
      }
    }
    const double us_per_unit = MicrosecondsPer(timeline.time_unit);
    for (const Span& s : timeline.spans) {
      events.push_back(Event(s, first_pid + s.rank, us_per_unit));
    }
    for (const Phase& p : timeline.phases) {
      events.push_back(Complete(p.name, "phase", first_pid + p.rank, 2 + static_cast<int>(p.track),
                                p.start * us_per_unit, p.end * us_per_unit, ""));
    }
    for (const CounterSample& c : timeline.counters) {
      events.push_back("{\"name\":" + JsonString(c.name) +
                       ",\"ph\":\"C\",\"pid\":" + std::to_string(first_pid + c.rank) +
                       ",\"ts\":" + Decimal(c.time * us_per_unit) +
                       ",\"args\":{\"value\":" + Decimal(c.value) + "}}");
    }
  }
  std::string out = "{\"traceEvents\":[\n";
  for (size_t i = 0; i < events.size(); ++i) {
    out += events[i] + (i + 1 < events.size() ? ",\n" : "\n");
  }
  return out + "],\"displayTimeUnit\":\"ms\"}\n";
}

std::string RenderChromeTrace(const Timeline& timeline, const std::string& name) {
  return RenderChromeTrace(std::vector<TraceGroup>{{name, &timeline}});
}

}  // namespace conveyor
