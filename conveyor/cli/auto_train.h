// `conveyor train --auto`: the auto-planner (sim/auto_planner.h) chooses the layout of a run
// on this machine's local ranks (dp x tp x pp, schedule, micro-batches, stage split,
// recomputation, ZeRO) from the model's layer costs measured here, before the ranks start.
//
// The launching process plans once and starts its ranks with the chosen flags in place of
// --auto (ArgsWithLayout), so every rank runs the same layout; under another launcher there
// is no such process and --auto is refused.
#ifndef CONVEYOR_CLI_AUTO_TRAIN_H_
#define CONVEYOR_CLI_AUTO_TRAIN_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "conveyor/train/train_config.h"

namespace conveyor {

struct AutoTrainFlags {
  bool on = false;  // --auto
  int64_t world = 4;
  std::string costs;  // a `conveyor profile` file; empty: the layers are timed now

  // --auto, --world and --costs; --auto excludes the flags of the layout it chooses.
  void Register(CLI::App* cmd);
};

// `config` with the planner's best layout for `flags.world` ranks on this machine that
// passes TrainConfig::Validate (ChooseLayout, train/layout_choice.h: from flags.costs when
// given); prints the choice, its prediction and the runners-up on stdout. The ranks share
// the CPU's cores, or (config.device a GPU) have a GPU each, or are `rank_threads` sharing
// the one GPU. UserError under another launcher, and as CheckLayoutDevices and ChooseLayout.
TrainConfig ChooseTrainLayout(const TrainConfig& config, const AutoTrainFlags& flags,
                              bool rank_threads);

// `args` with --auto, --world and --costs (and their values) taken out and the layout of
// `chosen` given as flags: the command line of the ranks.
std::vector<std::string> ArgsWithLayout(const std::vector<std::string>& args,
                                        const TrainConfig& chosen);

}  // namespace conveyor

#endif  // CONVEYOR_CLI_AUTO_TRAIN_H_
