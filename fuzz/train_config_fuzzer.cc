// Fuzz target: a TOML training config as `conveyor train --config` reads it: ApplyTomlFile
// over the defaults, then TrainConfig::Validate (conveyor/train/train_config.h). Every input
// is either refused with a UserError or gives a valid config. Anything else (a crash,
// another exception, a sanitizer report) is a finding.
#include <cstddef>
#include <cstdint>

#include "conveyor/common/error.h"
#include "conveyor/train/train_config.h"
#include "fuzz/scratch_dir.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const conveyor::fuzz::ScratchDir scratch;
  const std::string path = scratch.Write("config.toml", data, size);
  try {
    conveyor::TrainConfig config;
    conveyor::ApplyTomlFile(path, config);
    config.Validate();
  } catch (const conveyor::UserError&) {
  }
  return 0;
}
