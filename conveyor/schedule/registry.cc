#include "conveyor/schedule/registry.h"

#include "conveyor/common/error.h"
#include "conveyor/schedule/builders/dualpipe.h"
#include "conveyor/schedule/builders/dualpipe_v.h"
#include "conveyor/schedule/builders/gpipe.h"
#include "conveyor/schedule/builders/interleaved_1f1b.h"
#include "conveyor/schedule/builders/interleaved_zb.h"
#include "conveyor/schedule/builders/looped_bfs.h"
#include "conveyor/schedule/builders/naive.h"
#include "conveyor/schedule/builders/1f1b.h"
#include "conveyor/schedule/builders/zb_h1.h"
#include "conveyor/schedule/builders/zb_h2.h"
#include "conveyor/schedule/builders/zb_v.h"

namespace conveyor {

const std::vector<ScheduleInfo>& AllSchedules() {
  static const std::vector<ScheduleInfo> kSchedules = {
      {"naive", "one micro-batch at a time through all stages", BuildNaive, 1, false},
      {"gpipe", "all forwards, then all backwards", BuildGpipe, 1, false},
      {"1f1b", "one forward one backward after a warm-up (PipeDream-flush)", Build1F1B, 1,
       false},
      {"interleaved-1f1b", "1F1B over v chunks per rank, loop placement", BuildInterleaved1F1B, 2,
       true},
      {"looped-bfs", "breadth-first over v chunks per rank", BuildLoopedBfs, 2, true},
      {"zb-h1", "zero bubble, 1F1B memory: W deferred into the bubble", BuildZbH1, 1, false},
      {"zb-h2", "zero bubble, up to 2p-1 in flight", BuildZbH2, 1, false},
      {"interleaved-zb", "zero bubble (ZB1P) over v chunks per rank", BuildInterleavedZb, 2, true},
      {"zb-v", "zero bubble on a V placement, 1F1B memory", BuildZbV, 2, false},
      {"dualpipe", "two directions, overlapped F&B, 2x parameters", BuildDualPipe, 2, false},
      {"dualpipe-v", "DualPipe cut in half onto a V placement", BuildDualPipeV, 2, false},
  };
  return kSchedules;
}

std::string ScheduleNames() {
  std::string names;
  for (const ScheduleInfo& info : AllSchedules()) {
    if (!names.empty()) names += ", ";
    names += info.name;
  }
  return names;
}

const ScheduleInfo& FindSchedule(std::string_view name) {
  for (const ScheduleInfo& info : AllSchedules()) {
    if (info.name == name) return info;
  }
  CONVEYOR_CHECK(false) << "unknown schedule '" << name << "' (known: " << ScheduleNames() << ")";
  return AllSchedules().front();
}

Program BuildSchedule(std::string_view name, const ScheduleOptions& options) {
  const ScheduleInfo& info = FindSchedule(name);
  ScheduleOptions resolved = options;
  if (resolved.chunks == 0) resolved.chunks = info.default_chunks;
  CONVEYOR_CHECK(info.takes_chunks || resolved.chunks == info.default_chunks)
      << "schedule '" << name << "' uses " << info.default_chunks << " stage(s) per rank; --chunks "
      << options.chunks << " is not possible";
  return info.build(resolved);
}

}  // namespace conveyor
