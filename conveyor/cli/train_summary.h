// The end of a `conveyor train` run as rank 0 reports it on stdout: the final numbers, the
// per-rank table of where the pipeline time went, the measured and predicted bubble, where
// the traces went and the sample text.
#ifndef CONVEYOR_CLI_TRAIN_SUMMARY_H_
#define CONVEYOR_CLI_TRAIN_SUMMARY_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "conveyor/train/data_parallel_reducer.h"
#include "conveyor/train/evaluate.h"
#include "conveyor/train/rank_report.h"

namespace conveyor {

struct TrainSummary {
  int64_t steps = 0;      // the trainer's step at the end
  double final_loss = 0;  // the last step that was not skipped (0 without one)
  std::map<std::string, double> auxiliary_losses;  // that step's (StepMetrics'); empty: none
  double tokens_per_s = 0;                         // the last step's
  int64_t skipped_steps = 0;                       // non-finite steps skipped, overflows included
  int64_t overflow_steps = 0;     // steps skipped because gradients overflowed the loss scale
  double loss_scale = 0;          // the loss scale at the end; 0: loss scaling off
  EvalMetrics final_eval;         // accuracy < 0 when the task has none
  double baseline_accuracy = -1;  // the majority class's, with an accuracy
  std::vector<RankReport> ranks;
  double measured_bubble = 0;       // MeasuredBubble
  double predicted_bubble = 0;      // the simulator's, from measured costs
  double measured_pipeline_s = 0;   // the pipeline's makespan, a step on average
  double predicted_pipeline_s = 0;  // the simulator's, from measured costs
  std::string sharing;              // "4 ranks on 2 cores"; empty: no rank shares its cores
  double hop_s = 0;
  double exposed_comm = 0;            // ExposedCommFraction
  std::string mesh;                   // Mesh::Describe when dp or tp > 1; empty otherwise
  DataParallelStats dp;               // rank 0's gradient reduction, summed over the steps
  int64_t optimizer_state_bytes = 0;  // rank 0's AdamW state (1/dp of it with --zero 1)
  std::string trace_dir;              // empty: no traces written
  std::string sample;                 // printable sample text; empty: none
  double data_s = 0;                  // rank 0's wait for its batch, a step on average
  double first_data_s = 0;            // of them, the first step's (never read ahead)
};

// "12.3%" for 0.123.
std::string Percent(double x);

// Prints the summary to stdout and flushes it.
void PrintTrainSummary(const TrainSummary& s);

}  // namespace conveyor

#endif  // CONVEYOR_CLI_TRAIN_SUMMARY_H_
