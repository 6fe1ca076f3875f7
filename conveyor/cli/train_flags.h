// The settings of a training run as command-line flags over an optional TOML file: shared by
// `conveyor train` and `conveyor bench train`.
#ifndef CONVEYOR_CLI_TRAIN_FLAGS_H_
#define CONVEYOR_CLI_TRAIN_FLAGS_H_

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "conveyor/train/train_config.h"

namespace conveyor::cli {

struct TrainFlags {
  std::string config_file;
  TrainConfig given;  // values of the flags; only those on the command line are applied
  std::vector<std::pair<CLI::Option*, std::function<void(TrainConfig&)>>> options;
};

// Adds the positional TOML file and every TrainConfig setting as a flag of `cmd` ("--layers",
// "--pp", ...), bound to
// `flags`, which must outlive `cmd`.
void RegisterTrainFlags(CLI::App* cmd, TrainFlags& flags);

// The TOML file (if any) with the flags given on the command line over it; validated.
TrainConfig ResolveTrainConfig(const TrainFlags& flags);

}  // namespace conveyor::cli

#endif  // CONVEYOR_CLI_TRAIN_FLAGS_H_
