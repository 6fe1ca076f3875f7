// The table of every schedule conveyor can build, by name.
//
// Names: naive, gpipe, 1f1b, interleaved-1f1b, looped-bfs, zb-h1, zb-h2, interleaved-zb,
// zb-v, dualpipe, dualpipe-v. Each builder emits a compute-only Program and checks its own
// preconditions (UserError naming the bad value).
#ifndef CONVEYOR_SCHEDULE_REGISTRY_H_
#define CONVEYOR_SCHEDULE_REGISTRY_H_

#include <string>
#include <string_view>
#include <vector>

#include "conveyor/schedule/program.h"
#include "conveyor/schedule/schedule_options.h"

namespace conveyor {

using BuildFn = Program (*)(const ScheduleOptions&);

struct ScheduleInfo {
  std::string_view name;
  std::string_view summary;  // one line for `conveyor compare` and --help
  BuildFn build;
  int default_chunks;  // v used when ScheduleOptions::chunks == 0
  bool takes_chunks;   // whether the user may choose v
};

// Every schedule, in the order `conveyor compare` lists them.
const std::vector<ScheduleInfo>& AllSchedules();

// Throws UserError listing the known names when `name` is unknown.
const ScheduleInfo& FindSchedule(std::string_view name);

// FindSchedule(name).build(options), with chunks defaulted and checked against takes_chunks.
Program BuildSchedule(std::string_view name, const ScheduleOptions& options);

// "naive, gpipe, 1f1b, ..."
std::string ScheduleNames();

}  // namespace conveyor

#endif  // CONVEYOR_SCHEDULE_REGISTRY_H_
