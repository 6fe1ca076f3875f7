#include "conveyor/comm/overlap_lane.h"

#include "conveyor/common/error.h"

namespace conveyor {
namespace {
thread_local int current_lane = 0;
}  // namespace

int OverlapLane() { return current_lane; }

OverlapLaneScope::OverlapLaneScope(int lane) : previous_(current_lane) {
  CONVEYOR_ASSERT(lane == 0 || lane == 1) << "lane " << lane;
  current_lane = lane;
}

OverlapLaneScope::~OverlapLaneScope() { current_lane = previous_; }

Transport* LaneGroups::Current() const {
  return current_lane == 1 && lane1 != nullptr ? lane1 : lane0;
}

}  // namespace conveyor
