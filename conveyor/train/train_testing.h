// Test support: a tiny corpus on disk, small configs, and training runs whose ranks are
// threads over the in-process transport.
#ifndef CONVEYOR_TRAIN_TRAIN_TESTING_H_
#define CONVEYOR_TRAIN_TRAIN_TESTING_H_

#include <ATen/core/Tensor.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "conveyor/sim/recompute.h"
#include "conveyor/train/evaluate.h"
#include "conveyor/train/trainer.h"

namespace conveyor {

// A task training `model` on `task`'s data (a test's variant of a built-in model).
class ModelSwapTask : public TrainTask {
 public:
  ModelSwapTask(std::shared_ptr<const TrainTask> task, std::shared_ptr<const ModelTask> model)
      : task_(std::move(task)), model_(std::move(model)) {}
  std::shared_ptr<const ModelTask> model() const override { return model_; }
  Batch TrainBatch(int64_t step) const override { return task_->TrainBatch(step); }
  std::vector<Batch> EvalBatches() const override { return task_->EvalBatches(); }
  double TokensPerBatch() const override { return task_->TokensPerBatch(); }
  std::string Describe() const override { return task_->Describe(); }

 private:
  std::shared_ptr<const TrainTask> task_;
  std::shared_ptr<const ModelTask> model_;
};

// A small text corpus written once into the test's temp folder; returns its path.
std::string TinyCorpus();

// The model's layers, all of them, unsharded: the whole model on one rank, as references.
LayerList BuildAllLayers(const ModelTask& model);

// A GPT small enough for tests, on TinyCorpus().
TrainConfig TinyGpt();
// TinyGpt's run with a Llama: hidden 32, 4 heads sharing 2 key-value heads, batch 8.
TrainConfig TinyLlama();

// A layout and run settings that tests vary over one model's training: positional in this
// order ({dp, tp, pp, schedule}, ...), or designated.
struct MeshRun {
  int dp = 1, tp = 1, pp = 1;
  std::string schedule = "1f1b";
  int zero = 0;
  Recompute recompute = Recompute::kNone;
  int cp = 1;
  // Unset: off in WithMesh; a test may take it otherwise (on where tp > 1).
  std::optional<bool> sequence_parallel;
  int ep = 1;
};

// `base` laid out as `run` says: its dp, tp, pp, cp, ep, schedule, ZeRO stage, recomputation
// and sequence parallelism; the rest of `base` as it is.
TrainConfig WithMesh(TrainConfig base, const MeshRun& run);

// The model and the layout of `c`, to name a run in failures: "gpt dp 2 x cp 1 x tp 2 x ep 1
// x pp 2 1f1b zero 0 recompute none, sequence parallel".
std::string DescribeRun(const TrainConfig& c);

// Expects `got` to hold as many losses as `want`, each within `relative` of its own; `what`
// names the run in failures.
void ExpectSameLosses(const std::vector<double>& want, const std::vector<double>& got,
                      const std::string& what, double relative = 2e-5);

// Trains until step `stop_at` (0: config.steps; negative: no step at all), from a checkpoint when
// config.resume is set, on dp x cp x tp x pp threads (dp 0 counts as 1); then calls `after` on
// every rank's trainer (on its thread). Returns the loss of every step run (rank 0's). With
// config.device kCuda the messages between ranks match by order only
// (TransportOptions::match_by_order), as over NCCL. `task`: what to train on (null:
// MakeTask(config)).
std::vector<double> TrainOnThreads(const TrainConfig& config,
                                   const std::function<void(Trainer&, Transport&)>& after = {},
                                   int64_t stop_at = 0,
                                   std::shared_ptr<const TrainTask> task = nullptr);

// Trains `config` (TrainOnThreads), then evaluates on the held-out batches on every rank:
// each rank's metrics, in the order the ranks finished.
std::vector<EvalMetrics> EvaluateOnThreads(const TrainConfig& config);

// Every parameter after training, by name, whole (tensor-parallel shards gathered), from the
// ranks of data-parallel replica 0 (an expert from the rank holding it under expert
// parallelism); with `dp`, one more step's data-parallel statistics.
using Weights = std::map<std::string, at::Tensor>;
std::vector<double> TrainCollecting(const TrainConfig& c, Weights& weights,
                                    std::vector<DataParallelStats>* dp = nullptr);

// Expects the same parameters of the same shapes, each within `relative` and 1% of one AdamW
// step (lr) of `want`'s; `what` names the run in failures.
void ExpectSameWeights(const Weights& want, const Weights& got, double lr, const std::string& what,
                       double relative = 1e-4);

}  // namespace conveyor

#endif  // CONVEYOR_TRAIN_TRAIN_TESTING_H_
