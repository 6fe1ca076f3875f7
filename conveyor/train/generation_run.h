// One rank's `conveyor generate`: the model alone (no corpus, optimizer or measurement) on a
// forward-only pipeline, with a checkpoint's weights or a Hugging Face folder's, continuing
// a prompt of token ids (generate.h); and the continuation as text.
#ifndef CONVEYOR_TRAIN_GENERATION_RUN_H_
#define CONVEYOR_TRAIN_GENERATION_RUN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "conveyor/comm/rank_context.h"
#include "conveyor/data/tokenizer.h"
#include "conveyor/train/generate.h"
#include "conveyor/train/train_config.h"

namespace conveyor {

struct GenerationRequest {
  std::string checkpoint;  // the weights; empty: config.model.model_dir's
  std::vector<int64_t> prompt;
  int tokens = 0;  // to generate
  Sampling sampling;
  uint64_t seed = 1;
  int context = 0;  // most tokens the model sees, >= 1
  bool kv_cache = true;
};

struct GenerationRun {
  std::vector<int64_t> tokens;  // the continuation alone
  double seconds = 0;           // the generation's, the model built before
};

// Makes `config` (a checkpoint's or a model folder's) one of generation on one data-parallel
// replica of one rank unless `config` says more ranks (dp, tp, pp set before): the GPipe
// schedule of one micro-batch, one sample per replica, nothing of a training run written or
// resumed (ConfigureForwardOnly).
void ConfigureGeneration(TrainConfig& config);

// Builds the model of `config` as `rank`, loads request.checkpoint's weights (when given)
// and generates (GenerateTokens). Collective over the world; every rank returns the same
// tokens.
GenerationRun RunGeneration(const TrainConfig& config, const RankContext& rank,
                            const GenerationRequest& request);

// The text `continuation` adds to `prompt`: decoded after the prompt, not alone (a piece's
// leading space, "▁the", is dropped at the start of a decoded text); the whole text when it
// does not begin with the prompt's.
std::string DecodeContinuation(const Tokenizer& tokenizer, const std::vector<int64_t>& prompt,
                               const std::vector<int64_t>& continuation);

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_GENERATION_RUN_H_
