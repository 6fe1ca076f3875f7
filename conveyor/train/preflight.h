// Checks made before any rank starts, in the launcher, so that a run that cannot start or
// cannot keep its results fails at once with a UserError naming the setting, instead of
// after its ranks spent their time. Both read only the configuration and the file system.
#ifndef CONVEYOR_TRAIN_PREFLIGHT_H_
#define CONVEYOR_TRAIN_PREFLIGHT_H_

#include "conveyor/train/train_config.h"

namespace conveyor {

// Checks, cheaply, what would stop a run: the configuration, the schedule's preconditions,
// enough layers for its stages. Reads no file (generation runs without the corpus). UserError.
void PreflightCheck(const TrainConfig& config);

// What a run does with its data: trains on it (its split, its task), or evaluates every token
// of it (`conveyor eval`: one stream, no split).
enum class DataUse { kTrain, kEvaluateAll };

// Checks the files a run reads and writes, so that no run fails after its work is done:
// the corpus exists; to train on it, builds the task (MakeTask: the corpus loads, is not empty,
// is longer than a sequence, its validation split long enough, has the classes asked for); to
// evaluate all of it, opens it (a data set's index checked, a text read); checks a model folder's
// weights against its config.json (HfCheckpoint, headers only), then checks that the metrics file
// can be written (its folder exists and takes new files; an existing folder is refused) and that
// the trace, TensorBoard and checkpoint folders take new files, or that their nearest existing
// parent does, and that a --resume names a folder (CheckInputPath) and continues its run
// (CheckResume). UserError naming the flag and the path. Creates no file that outlives the call.
void PreflightFiles(const TrainConfig& config, DataUse use = DataUse::kTrain);

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_PREFLIGHT_H_
