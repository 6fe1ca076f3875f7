// Test support: one all-to-all pattern every Transport must carry (Transport::AllToAll), for
// the tests of each implementation (threads, processes over c10d, sub-groups).
#ifndef CONVEYOR_COMM_ALL_TO_ALL_TESTING_H_
#define CONVEYOR_COMM_ALL_TO_ALL_TESTING_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "conveyor/comm/transport.h"

namespace conveyor {

// Rows rank `from` sends rank `to` in the pattern: (from + 2 to) % 3, so that some parts are
// empty, the others of 1 or 2 rows, and no two directions of a pair need agree.
int64_t AllToAllRows(int from, int to);

// Rank `from`'s input in the pattern: its parts for ranks 0, 1, ... in order, row j of the
// part for rank `to` holding {1000 from + 100 to + j, -(1000 from + 100 to + j)}, as a
// transposed (non-contiguous) tensor's transpose.
at::Tensor AllToAllInput(int from, int ranks);

// Runs the pattern on `t` (every rank of it calls this) and checks with gtest's EXPECT_*
// that each rank receives exactly its parts, in rank order, contiguous, and that an exchange
// of nothing but empty parts gives an empty result of the right shape.
void ExpectAllToAllDelivers(Transport& t);

}  // namespace conveyor

#endif  // CONVEYOR_COMM_ALL_TO_ALL_TESTING_H_
