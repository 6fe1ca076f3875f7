// What ran where and when: the common currency of the simulator, the renderers and measured
// runs, so predicted and measured timelines are drawn and compared alike.
//
// A simulation fills only `spans` (kind kRun). A measured step (conveyor/profile) adds the
// posting of and the waits for messages, named phases outside the program (the optimizer,
// all-reduces) and counters sampled over time (activation bytes held, bytes sent).
#ifndef CONVEYOR_TIMELINE_TIMELINE_H_
#define CONVEYOR_TIMELINE_TIMELINE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "conveyor/schedule/action.h"

namespace conveyor {

enum class SpanKind : uint8_t {
  kRun,   // the action ran: a compute, or (simulated) a SEND/RECV
  kPost,  // a SEND/RECV was handed to the transport
  kWait,  // blocked until a SEND/RECV completed
};

struct Span {
  int rank = 0;
  Action action;
  double start = 0;  // seconds, or cost units in a simulation
  double end = 0;
  SpanKind kind = SpanKind::kRun;
};

// Where a phase is drawn: the rank's own step (the trainer's phases around the pipeline), or
// the collectives of one parallel axis, which may run beside the pipeline (a data-parallel
// all-reduce on the reducer's thread) or inside its computes (tensor-parallel all-reduces).
enum class PhaseTrack : uint8_t {
  kStep,
  kDataParallel,
  kTensorParallel,
  kExpertParallel,  // the all-to-alls carrying tokens to their experts and back
};
inline constexpr int kPhaseTracks = 4;

// "step" / "data parallel" / "tensor parallel" / "expert parallel".
std::string_view PhaseTrackName(PhaseTrack track);

// A stretch of a rank's time that is not an action of the program: "optimizer", a
// data-parallel all-reduce, ...
struct Phase {
  int rank = 0;
  std::string name;
  double start = 0;
  double end = 0;
  PhaseTrack track = PhaseTrack::kStep;
};

// The value of a rank's counter `name` from `time` on.
struct CounterSample {
  int rank = 0;
  std::string name;
  double time = 0;
  double value = 0;
};

// What a timeline's times count.
enum class TimeUnit : uint8_t {
  kCostUnits,  // the cost model's units (a simulation)
  kSeconds,    // measured
};

// "units" / "s": how renderers name the unit.
std::string_view TimeUnitName(TimeUnit unit);

struct Timeline {
  int num_ranks = 0;
  std::vector<Span> spans;  // any order; renderers sort as they need
  TimeUnit time_unit = TimeUnit::kCostUnits;
  std::vector<Phase> phases;
  std::vector<CounterSample> counters;

  // Latest end over all spans and phases (0 when empty).
  double makespan() const;
};

// "wait 1RECV_F3" / "post 1SEND_F3" / "1F3": how a span is named in traces and tips.
std::string SpanName(const Span& span);

}  // namespace conveyor

#endif  // CONVEYOR_TIMELINE_TIMELINE_H_
