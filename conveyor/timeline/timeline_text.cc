#include "conveyor/timeline/timeline_text.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <tuple>
#include <utility>

#include "conveyor/common/error.h"

namespace conveyor {
namespace {

void AssertOneLine(const std::string& name) {
  CONVEYOR_ASSERT(name.find('\n') == std::string::npos)
      << "timeline event name \"" << name << "\" holds a line break";
}

// Reads one line's fields; every read is checked.
class LineReader {
 public:
  LineReader(const std::string& line, int rank, int number)
      : fields_(line.substr(std::min<size_t>(2, line.size()))),
        line_(line),
        rank_(rank),
        number_(number) {}

  double Time(const char* what) {
    double value = 0;
    fields_ >> value;
    Check(static_cast<bool>(fields_) && std::isfinite(value), what);
    return value;
  }

  // START END: both finite, the end not before the start.
  std::pair<double, double> Interval() {
    const double start = Time("start");
    const double end = Time("end");
    Check(end >= start, "end (before the start)");
    return {start, end};
  }

  int Enum(const char* what, int count) {
    int value = -1;
    fields_ >> value;
    Check(static_cast<bool>(fields_) && value >= 0 && value < count, what);
    return value;
  }

  Action ReadAction() {
    std::string text;
    fields_ >> text;
    Check(static_cast<bool>(fields_), "action");
    try {
      return ParseAction(text);
    } catch (const UserError&) {
      Check(false, "action");
      throw;
    }
  }

  // The rest of the line, leading spaces dropped.
  std::string Name() {
    std::string name;
    fields_ >> std::ws;
    std::getline(fields_, name);
    Check(!name.empty(), "name");
    return name;
  }

  void Check(bool ok, const char* what) const {
    CONVEYOR_CHECK(ok) << "rank " << rank_ << "'s timeline, line " << number_ << ": bad " << what
                       << " in \"" << line_ << "\"";
  }

 private:
  std::istringstream fields_;
  const std::string& line_;
  int rank_;
  int number_;
};

}  // namespace

std::string EncodeTimelineText(const Timeline& t) {
  std::ostringstream out;
  out.precision(17);
  for (const Span& s : t.spans) {
    out << "S " << static_cast<int>(s.kind) << " " << s.start << " " << s.end << " "
        << s.action.ToString() << "\n";
  }
  for (const Phase& p : t.phases) {
    AssertOneLine(p.name);
    out << "P " << p.start << " " << p.end << " " << static_cast<int>(p.track) << " " << p.name
        << "\n";
  }
  for (const CounterSample& c : t.counters) {
    AssertOneLine(c.name);
    out << "C " << c.time << " " << c.value << " " << c.name << "\n";
  }
  return out.str();
}

void DecodeTimelineText(const std::string& text, int rank, Timeline& into) {
  Timeline read;
  std::istringstream in(text);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    LineReader fields(line, rank, number);
    const char type = line.size() >= 2 && line[1] == ' ' ? line[0] : '?';
    if (type == 'S') {
      Span s;
      s.rank = rank;
      s.kind = static_cast<SpanKind>(fields.Enum("span kind", 3));
      std::tie(s.start, s.end) = fields.Interval();
      s.action = fields.ReadAction();
      read.spans.push_back(s);
    } else if (type == 'P') {
      Phase p;
      p.rank = rank;
      std::tie(p.start, p.end) = fields.Interval();
      p.track = static_cast<PhaseTrack>(fields.Enum("track", kPhaseTracks));
      p.name = fields.Name();
      read.phases.push_back(p);
    } else if (type == 'C') {
      CounterSample c;
      c.rank = rank;
      c.time = fields.Time("time");
      c.value = fields.Time("value");
      c.name = fields.Name();
      read.counters.push_back(c);
    } else {
      fields.Check(false, "line type (S, P or C)");
    }
  }
  into.spans.insert(into.spans.end(), read.spans.begin(), read.spans.end());
  into.phases.insert(into.phases.end(), read.phases.begin(), read.phases.end());
  into.counters.insert(into.counters.end(), read.counters.begin(), read.counters.end());
}

}  // namespace conveyor
