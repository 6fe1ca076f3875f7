// ComputeSharing: which ranks share a compute device, and how fast a shared device runs
// each of them. Four rank processes on a 2-core host, or rank threads on one GPU, do not
// each compute at the speed of a device of their own.
//
// The model is processor sharing: rank r runs on device device[r]; device d runs up to
// capacity[d] busy ranks at full speed, and k > capacity[d] busy ranks each at
// capacity[d] / k of it (a CPU host: capacity = cores / intra-op threads per rank). A rank
// waiting for a message uses none of it. Where the device's work rate was measured for each
// count of busy ranks (busy_capacity), k busy ranks each run at that rate / k instead: more
// ranks than cores that take turns run slower than the rule says, even one alone. Used two ways:
// the simulator charges an action's cost as work done at that rate (sim/simulator.h), and measured
// spans, timed while sharing, are turned back into the work they held (IntrinsicSeconds) before
// they become costs.
//
// A GPU is not modelled by this: kernels of different streams overlap (measured: four rank
// threads on one H200 ran a step in 0.86x of one rank's time), which processor sharing
// cannot express.
#ifndef CONVEYOR_SIM_COMPUTE_SHARING_H_
#define CONVEYOR_SIM_COMPUTE_SHARING_H_

#include <string>
#include <vector>

#include "conveyor/timeline/timeline.h"

namespace conveyor {

struct ComputeSharing {
  std::vector<int> device;       // per rank; empty: every rank has a device of its own
  std::vector<double> capacity;  // per device, > 0
  // Optional, per device (empty: none for it): the lone ranks' worth of work it does with
  // 1, 2, ... of its ranks busy, entry k - 1 for k; its last entry for more.
  std::vector<std::vector<double>> busy_capacity;

  // Every rank on device 0 of `capacity`.
  static ComputeSharing OneDevice(int ranks, double capacity);

  // Whether some device holds more ranks than it runs at full speed, or has a busy count
  // that runs below it (else sharing changes no time).
  bool Shares() const;
  // The speed, 0 < rate <= 1, of each of `busy` ranks computing at once on `device_index`.
  double Rate(int device_index, int busy) const;
  // How many of `ranks` ranks can compute at full speed at once: the sum over devices of
  // min(its ranks, its capacity); `ranks` without sharing.
  double Room(int ranks) const;
  // "4 ranks, room for 2 at full speed": one clause per shared device; empty when none is.
  std::string Describe() const;
};

// CONVEYOR_CHECKs that `sharing` names a device for each of `ranks` ranks (or none) and that
// every capacity is positive.
void CheckSharing(const ComputeSharing& sharing, int ranks);

// The work each kRun span of `timeline` held: its duration at the rate its device ran it,
// integrated over the span (the busy ranks of a device being those with a kRun span open at
// that time). Index i is for timeline.spans[i] (0 for spans of another kind). Without
// sharing, every span's own duration.
std::vector<double> IntrinsicSeconds(const Timeline& timeline, const ComputeSharing& sharing);

}  // namespace conveyor

#endif  // CONVEYOR_SIM_COMPUTE_SHARING_H_
