// A stage whose forward, backward-for-inputs and backward-for-weights each take a fixed
// time almost without using the CPU (they sleep, and yield for the last 0.3 ms so as not to
// overshoot), to check the executor against the simulator with many ranks on few cores, and
// to measure the executor's own overhead (zero times).
//
// Activations are (n, T, 1) floats: the first stage turns token ids into them. The last
// stage's loss is the sum of its output. A weight of one element gets a real gradient, so
// W has work to defer, as with Linear.
#ifndef CONVEYOR_RUNTIME_SYNTHETIC_STAGE_H_
#define CONVEYOR_RUNTIME_SYNTHETIC_STAGE_H_

#include <memory>
#include <vector>

#include "conveyor/runtime/stage.h"

namespace conveyor {

struct SyntheticCosts {
  double f = 0, i = 0, w = 0;  // seconds
};

std::unique_ptr<StageModule> MakeSyntheticStage(int stage, const SyntheticCosts& costs);

}  // namespace conveyor

#endif  // CONVEYOR_RUNTIME_SYNTHETIC_STAGE_H_
