#include "conveyor/train/generation_run.h"

#include <algorithm>
#include <chrono>

#include "conveyor/train/builtin_tasks.h"
#include "conveyor/train/checkpoint.h"
#include "conveyor/train/forward_pipeline.h"
#include "conveyor/train/pipeline_model.h"

namespace conveyor {

void ConfigureGeneration(TrainConfig& config) {
  config.schedule = "gpipe";
  config.chunks = 0;
  config.microbatches = 1;
  config.batch_size = std::max(config.dp, 1);  // one sample per replica
  ConfigureForwardOnly(config);
  config.resume.clear();
}

GenerationRun RunGeneration(const TrainConfig& config, const RankContext& rank,
                            const GenerationRequest& request) {
  PipelineModel model(config, MakeModelTask(config), rank);
  if (!request.checkpoint.empty()) LoadWeights(request.checkpoint, model, config);
  ForwardPipeline forward(model);
  const auto start = std::chrono::steady_clock::now();
  GenerationRun run;
  run.tokens = GenerateTokens(forward, request.prompt, request.tokens, request.sampling,
                              request.seed, request.context, request.kv_cache);
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return run;
}

std::string DecodeContinuation(const Tokenizer& tokenizer, const std::vector<int64_t>& prompt,
                               const std::vector<int64_t>& continuation) {
  std::vector<int64_t> all = prompt;
  all.insert(all.end(), continuation.begin(), continuation.end());
  const std::string head = tokenizer.Decode(prompt), whole = tokenizer.Decode(all);
  return whole.compare(0, head.size(), head) == 0 ? whole.substr(head.size()) : whole;
}

}  // namespace conveyor
