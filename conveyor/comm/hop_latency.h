// The time one pipeline hop takes: a message of a given size from one rank to its neighbour.
//
// The simulator charges every message that crosses ranks a latency (CostModel::comm_latency);
// on CPU ranks over Gloo that cost is 100-300 µs here, far from negligible next to actions of a
// few milliseconds. MeasureHopLatency measures it on the transport the run uses, so the
// prediction includes it.
#ifndef CONVEYOR_COMM_HOP_LATENCY_H_
#define CONVEYOR_COMM_HOP_LATENCY_H_

#include <cstdint>

#include "conveyor/comm/transport.h"

namespace conveyor {

// One-way seconds of a `bytes`-byte float message between ranks r and r + 1: the median over
// `round_trips` ping-pongs (after one warm-up) of half the round-trip time, measured for every
// pair of neighbours in turn while the others idle, averaged over the pairs. 0 on one rank.
// Collective: every rank calls it with the same arguments. Preconditions: bytes >= 4,
// round_trips >= 1. Uses tags near Transport::kMaxTag; no other traffic may be in flight.
double MeasureHopLatency(Transport& transport, int64_t bytes, int round_trips);

}  // namespace conveyor

#endif  // CONVEYOR_COMM_HOP_LATENCY_H_
