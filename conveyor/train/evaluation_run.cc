#include "conveyor/train/evaluation_run.h"

#include <ATen/ATen.h>

#include <chrono>
#include <memory>
#include <vector>

#include "conveyor/data/corpus.h"
#include "conveyor/data/open_token_source.h"
#include "conveyor/data/token_source.h"
#include "conveyor/data/token_windows.h"
#include "conveyor/train/builtin_tasks.h"
#include "conveyor/train/checkpoint.h"
#include "conveyor/train/forward_pipeline.h"
#include "conveyor/train/model_registry.h"
#include "conveyor/train/pipeline_model.h"

namespace conveyor {

EvaluationRun RunEvaluation(const TrainConfig& config, const std::string& checkpoint,
                            const RankContext& rank, const EvaluationProgress& progress) {
  EvaluationRun run;
  at::Tensor stream;
  if (IsTokenSource(config.data)) {
    const std::shared_ptr<const TokenSource> data = OpenTokenSource(config.data);
    stream = DataSetStream(*data, ModelSizes(config.model).vocab);
    run.source = data->Describe();
  } else {
    const Corpus corpus = LoadCorpus(config.data);
    stream = CorpusByteStream(corpus);
    run.source =
        "corpus " + corpus.source + ": " + std::to_string(corpus.documents.size()) + " documents";
  }
  const std::vector<Batch> windows =
      NextTokenWindows(stream, config.model.seq_len, config.batch_size);
  PipelineModel model(config, MakeModelTask(config), rank);
  if (!checkpoint.empty()) LoadWeights(checkpoint, model, config);
  ForwardPipeline forward(model);
  const auto start = std::chrono::steady_clock::now();
  std::function<void(int64_t, int64_t)> batch_done;
  if (progress) {
    batch_done = [&](int64_t done, int64_t total) {
      progress(done, total,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    };
  }
  run.metrics = EvaluateTokens(forward, windows, batch_done);
  return run;
}

}  // namespace conveyor
