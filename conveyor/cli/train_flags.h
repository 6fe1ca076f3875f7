// The settings of a training run as command-line flags over an optional TOML file: shared by
// `conveyor train` and `conveyor bench train`; `conveyor generate` takes the mesh flags alone.
#ifndef CONVEYOR_CLI_TRAIN_FLAGS_H_
#define CONVEYOR_CLI_TRAIN_FLAGS_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "conveyor/cli/launch_flags.h"
#include "conveyor/cli/run_as_ranks.h"
#include "conveyor/train/train_config.h"

namespace conveyor {

struct TrainFlags {
  std::string config_file;
  TrainConfig given;  // text and boolean flags; only those on the command line are applied
  // Flags that name an enum's value (--model, --partition), by flag, parsed when applied.
  std::map<std::string, std::string> choices;
  // Numeric flags by TOML key, read as int64 / double and range-checked when applied (an
  // int flag would make CLI11 refuse 4294967298 with a confusing message, or wrap).
  std::map<std::string, int64_t> integers;
  std::map<std::string, double> reals;
  std::vector<std::string> data;  // --data's words: a path, or weights and paths of a blend
  std::vector<std::pair<CLI::Option*, std::function<void(TrainConfig&)>>> options;
  LaunchFlags launch;
  // train --auto: the layout is chosen after resolving, which then checks the config at one
  // rank and one micro-batch instead of the file's or the defaults' layout.
  bool auto_layout = false;
};

// Adds the positional TOML file, every TrainConfig setting as a flag of `cmd` ("--layers",
// "--pp", ...) and --oversubscribe, bound to `flags`, which must outlive `cmd`.
void RegisterTrainFlags(CLI::App* cmd, TrainFlags& flags);

// Adds --pp, --dp, --tp, --mesh-order and --device (the mesh of the run's ranks) bound to `flags`,
// which must outlive `cmd`. RegisterTrainFlags adds them among the others.
void RegisterMeshFlags(CLI::App* cmd, TrainFlags& flags);

// The TOML file (if any) with the flags given on the command line over it; validated. A
// value out of range names its flag ("--layers must be within [1, 4096], got 0") or its
// file and key.
TrainConfig ResolveTrainConfig(const TrainFlags& flags);

// Sets the settings whose flags were given on the command line in `config` (range-checked
// by name as ResolveTrainConfig does; the combination is not validated).
void ApplyGivenFlags(const TrainFlags& flags, TrainConfig& config);

// How to run `config`'s mesh: max(dp, 1) x tp x pp ranks (dp 0: under another launcher the
// world decides it), its timeout and threads, rank 0's output direct. UserError when that
// many local ranks are more than `launch` allows (named "--dp x --tp x --pp").
RanksOptions MeshRanksOptions(const TrainConfig& config, const LaunchFlags& launch);

}  // namespace conveyor

#endif  // CONVEYOR_CLI_TRAIN_FLAGS_H_
