#include "conveyor/train/train_testing.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "conveyor/comm/local_transport.h"
#include "conveyor/comm/rank_threads.h"
#include "conveyor/sim/model_spec.h"
#include "conveyor/sim/recompute.h"
#include "conveyor/train/builtin_tasks.h"
#include "conveyor/train/checkpoint.h"
#include "conveyor/train/forward_pipeline.h"

namespace conveyor {

std::string TinyCorpus() {
  // Written once per test process, removed when it exits.
  static const struct File {
    File()
        : path(::testing::TempDir() + "conveyor_tiny_corpus." + std::to_string(::getpid()) +
               ".txt") {
      std::ofstream out(path);
      for (int i = 0; i < 200; ++i) {
        out << "the quick brown fox " << i % 7 << " jumps over the lazy dog.\n"
            << "pipelines stream micro-batches through stages, number " << i << ".\n";
      }
    }
    ~File() { ::unlink(path.c_str()); }  // not std::filesystem at exit: see cli_testing.cc
    std::string path;
  } file;
  return file.path;
}

LayerList BuildAllLayers(const ModelTask& model) {
  return model.BuildLayers({}, {0, model.num_layers()});
}

TrainConfig TinyGpt() {
  TrainConfig c;
  c.data = TinyCorpus();
  c.model.layers = 4;
  c.model.hidden = 16;
  c.model.heads = 2;
  c.model.seq_len = 16;
  c.batch_size = 6;
  c.microbatches = 4;
  c.steps = 3;
  c.warmup_steps = 1;
  c.pp = 1;
  c.schedule = "gpipe";
  c.eval_batches = 1;
  c.sample_tokens = 0;
  c.timeout_s = 60;
  c.device = DeviceKind::kCpu;  // GPU tests ask for CUDA themselves
  return c;
}

void ExpectSameLosses(const std::vector<double>& want, const std::vector<double>& got,
                      const std::string& what, double relative) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t k = 0; k < want.size(); ++k) {
    EXPECT_NEAR(got[k], want[k], relative * std::abs(want[k])) << what << " step " << k + 1;
  }
}

TrainConfig TinyLlama() {
  TrainConfig c = TinyGpt();
  c.model.kind = ModelKind::kLlama;
  c.model.hidden = 32;
  c.model.heads = 4;
  c.model.kv_heads = 2;
  c.batch_size = 8;
  return c;
}

std::vector<double> TrainOnThreads(const TrainConfig& config,
                                   const std::function<void(Trainer&, Transport&)>& after,
                                   int64_t stop_at, std::shared_ptr<const TrainTask> task) {
  const int64_t last = stop_at == 0 ? config.steps : std::max<int64_t>(stop_at, 0);
  TransportOptions options;
  options.timeout = std::chrono::seconds(config.timeout_s);
  // On CUDA the messages match by order alone, as NCCL matches them between processes.
  options.match_by_order = config.device == DeviceKind::kCuda;
  auto world = LocalWorld(std::max(config.dp, 1) * config.cp * config.tp * config.pp, options);
  if (task == nullptr) task = MakeTask(config);
  std::vector<double> losses;
  RunRankThreads(world, [&](int r) {
    Trainer trainer(config, task, InProcessRank(world[r].get(), config.device));
    if (!config.resume.empty()) LoadCheckpoint(config.resume, trainer, config);
    while (trainer.step() < last) {
      const double loss = trainer.Step().loss;
      if (r == 0) losses.push_back(loss);
    }
    if (after) after(trainer, *world[r]);
  });
  return losses;
}

std::vector<EvalMetrics> EvaluateOnThreads(const TrainConfig& config) {
  std::mutex mu;
  std::vector<EvalMetrics> metrics;
  TrainOnThreads(config, [&](Trainer& t, Transport&) {
    ForwardPipeline forward(t.model());
    const EvalMetrics m = Evaluate(forward, t.task(), t.step());
    std::lock_guard<std::mutex> lock(mu);
    metrics.push_back(m);
  });
  return metrics;
}

std::vector<double> TrainCollecting(const TrainConfig& c, Weights& weights,
                                    std::vector<DataParallelStats>* dp) {
  std::mutex mu;
  return TrainOnThreads(c, [&](Trainer& t, Transport&) {
    Weights mine;
    for (const auto& [name, p] : t.model().Parameters()) {
      mine[name] = t.model()
                       .GatherWhole(name, p.detach())
                       .to(at::kCPU, /*non_blocking=*/false,
                           /*copy=*/true);
    }
    {
      // Replica 0 holds every weight but the experts divided over its expert-parallel
      // group's other ranks (data- or tensor-parallel ones): those from whichever rank holds
      // them.
      std::lock_guard<std::mutex> lock(mu);
      for (const auto& [name, w] : mine) {
        if (t.model().leads_replicas() || t.model().parameter_specs().Of(name).grad_sum.experts) {
          weights.insert({name, w});
        }
      }
    }
    if (dp == nullptr) return;
    const DataParallelStats stats = t.Step().dp;  // one more step, to see its reduction
    std::lock_guard<std::mutex> lock(mu);
    dp->push_back(stats);
  });
}

TrainConfig WithMesh(TrainConfig base, const MeshRun& run) {
  base.dp = run.dp;
  base.tp = run.tp;
  base.pp = run.pp;
  base.cp = run.cp;
  base.ep = run.ep;
  base.schedule = run.schedule;
  base.zero = run.zero;
  base.recompute = run.recompute;
  base.sequence_parallel = run.sequence_parallel.value_or(false);
  return base;
}

std::string DescribeRun(const TrainConfig& c) {
  return std::string(ModelKindName(c.model.kind)) + " dp " + std::to_string(c.dp) + " x cp " +
         std::to_string(c.cp) + " x tp " + std::to_string(c.tp) + " x ep " + std::to_string(c.ep) +
         " x pp " + std::to_string(c.pp) + " " + c.schedule + " zero " + std::to_string(c.zero) +
         " recompute " + std::string(RecomputeName(c.recompute)) +
         (c.sequence_parallel ? ", sequence parallel" : "");
}

void ExpectSameWeights(const Weights& want, const Weights& got, double lr, const std::string& what,
                       double relative) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (const auto& [name, w] : want) {
    ASSERT_TRUE(got.count(name)) << what << ": " << name;
    ASSERT_EQ(got.at(name).sizes(), w.sizes()) << what << ": " << name;
    // AdamW moves an element by about lr per step whatever its gradient's size, so sums in
    // another order (1e-7 relative) may move a near-zero-gradient element differently:
    // allow 1% of one step.
    EXPECT_TRUE(at::allclose(got.at(name), w, relative, 0.01 * lr))
        << what << ": " << name << " differs by " << (got.at(name) - w).abs().max().item<double>();
  }
}

}  // namespace conveyor
