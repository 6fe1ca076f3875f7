// The end of a `conveyor train` run (train/training_run.h) as rank 0 reports it on stdout: the
// final numbers, the per-rank table of where the pipeline time went, the measured and
// predicted bubble, where the traces went and the sample text.
#ifndef CONVEYOR_CLI_TRAIN_SUMMARY_H_
#define CONVEYOR_CLI_TRAIN_SUMMARY_H_

#include <string>

#include "conveyor/train/training_run.h"

namespace conveyor {

// "12.3%" for 0.123.
std::string Percent(double x);

// Prints the summary to stdout and flushes it.
void PrintTrainSummary(const TrainingRun& s);

}  // namespace conveyor

#endif  // CONVEYOR_CLI_TRAIN_SUMMARY_H_
