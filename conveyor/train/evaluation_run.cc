#include "conveyor/train/evaluation_run.h"

#include <ATen/ATen.h>

#include <chrono>
#include <memory>
#include <vector>

#include "conveyor/common/error.h"
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
  StreamMasks masks;
  std::shared_ptr<const TokenSource> data;
  if (IsTokenSource(config.data)) {
    data = OpenTokenSource(config.data);
    stream = DataSetStream(*data, ModelSizes(config.model).vocab);
    run.source = data->Describe();
    if (const std::shared_ptr<const TokenSource> mask = OpenLossMask(config.data, *data)) {
      masks.targets = LossMaskStream(*mask);
      run.source += "; loss mask " + mask->name();
      run.loss_mask = true;
    }
    if (config.document_mask) {
      CheckDocumentsToMask(*data);
      masks.documents = data.get();
    }
  } else {
    CONVEYOR_CHECK(!config.document_mask)
        << "--document-mask needs a tokenized data set (--data PREFIX); --data " << config.data
        << " is text";
    const Corpus corpus = LoadCorpus(config.data);
    stream = CorpusByteStream(corpus);
    run.source =
        "corpus " + corpus.source + ": " + std::to_string(corpus.documents.size()) + " documents";
  }
  const std::vector<Batch> windows =
      NextTokenWindows(stream, config.model.seq_len, config.batch_size, masks);
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
