// How many lone ranks' worth of work several ranks sharing one device do at once, measured
// (`conveyor profile`, layer_profile.h): forked processes on the CPU, each computing a
// block's forwards as a rank does (taking turns in a ring where they outnumber the cores),
// or threads on streams of their own sharing one GPU.
#ifndef CONVEYOR_TRAIN_DEVICE_CAPACITY_H_
#define CONVEYOR_TRAIN_DEVICE_CAPACITY_H_

#include <ATen/core/Tensor.h>

#include <vector>

#include "conveyor/train/model_task.h"
#include "conveyor/train/profile_device.h"

namespace conveyor {

// How many lone ranks' worth of work 1, 2, ... `ranks` of `ranks` ranks computing blocks at
// once do (entry k - 1 for k busy; MeasuredBusyCounts' counts measured, the others
// interpolated): about 0.5 s of lone work in all each time, the forwards computed times one's
// time alone over the time from the start until the last finished (the sum of each one's own
// ratio would count the last ones' lone tails as shared speed). Processes on the CPU, threads
// on a GPU; empty when they could not run. `forward_s`: a forward's time alone, which sizes
// the work. On the CPU it forks: call it before the process starts threads of its own that
// hold locks.
std::vector<double> Capacities(const ModelTask& model, int index, const at::Tensor& x,
                               const MicroBatch& mb, int ranks, double forward_s,
                               const ProfileDevice& on);

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_DEVICE_CAPACITY_H_
