// The simulator's prediction of a run from what the run measured: the cost model of the
// per-stage F, B, I, W seconds its ranks timed so far and the hop time measured when the
// trainer was built, and the simulation of the trainer's program under it.
#ifndef CONVEYOR_TRAIN_MEASURED_COSTS_H_
#define CONVEYOR_TRAIN_MEASURED_COSTS_H_

#include "conveyor/sim/cost_model.h"
#include "conveyor/sim/simulator.h"
#include "conveyor/train/trainer.h"

namespace conveyor {

// One StageCost per stage of the trainer's program: the mean measured seconds of its F, B, I
// and W over every rank's measured steps (RankMeasurements), 0 for an op never run (B: -1, which
// the simulator reads as I + W); comm_latency = trainer.hop_s(); post = the mean seconds a
// rank spent handing one message to the transport. Where ranks share cores
// (Trainer::sharing), the means are of the work the computes held, and the cost model's
// sharing is the trainer's. Collective over the trainer's world (the stages live on
// different ranks).
CostModel MeasuredCosts(const Trainer& trainer);

// The simulator's run of one step of the trainer's program under MeasuredCosts: its makespan
// (the pipeline's limit on this machine), bubble fraction and timeline (time unit "s").
// Collective.
SimResult PredictFromMeasuredCosts(const Trainer& trainer);

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_MEASURED_COSTS_H_
