#include "conveyor/comm/rank_context.h"

namespace conveyor {

RankContext InProcessRank(Transport* world, DeviceKind kind) {
  const int rank = world != nullptr ? world->rank() : 0;
  return RankContext{world, rank, rank, ComputeDevice(kind, rank, rank), ""};
}

}  // namespace conveyor
