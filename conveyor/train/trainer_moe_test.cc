// A Mixture-of-Experts Llama (nn/moe_mlp.h) trains like one process on every mesh: experts
// divided over expert-parallel ranks (--ep), pipelines of every schedule family, data
// parallelism; its auxiliary losses and expert load reported the same.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "conveyor/common/error.h"
#include "conveyor/common/remove_tree.h"
#include "conveyor/nn/moe_mlp.h"
#include "conveyor/train/checkpoint.h"
#include "conveyor/train/evaluate.h"
#include "conveyor/train/train_testing.h"
#include "conveyor/train/trainer.h"

namespace conveyor {
namespace {

// 4 decoder layers, the second and fourth sparse: 4 experts, top-2, a shared expert, the
// Switch loss.
TrainConfig TinyMoe() {
  TrainConfig c = TinyLlama();
  c.model.layers = 4;
  c.model.experts = 4;
  c.model.top_k = 2;
  c.model.expert_units = 24;
  c.model.shared_expert_units = 16;
  c.model.moe_sparse_step = 2;
  c.model.router_aux_loss_coef = 0.01;
  c.steps = 3;
  c.batch_size = 16;
  c.microbatches = 8;  // of 2 samples: the auxiliary loss is a micro-batch's
  c.dp = 1;
  c.pp = 1;
  return c;
}

TEST(TrainerMoeTest, EveryMeshAndScheduleTrainsAsOneProcess) {
  at::set_num_threads(1);
  const TrainConfig base = TinyMoe();
  Weights want;
  const std::vector<double> reference = TrainCollecting(base, want);
  ASSERT_EQ(reference.size(), 3u);
  EXPECT_TRUE(want.count("model.layers.1.mlp.experts.3.down_proj.weight"));
  EXPECT_FALSE(want.count("model.layers.0.mlp.experts.0.down_proj.weight"));  // dense layer 0
  for (const MeshRun& layout : std::vector<MeshRun>{
           {.dp = 1, .pp = 2, .schedule = "1f1b", .ep = 1},
           {.dp = 1, .pp = 4, .schedule = "1f1b", .ep = 1},
           {.dp = 1, .pp = 2, .schedule = "gpipe", .ep = 1},
           {.dp = 2, .pp = 2, .schedule = "zb-v", .ep = 2},
           {.dp = 2, .pp = 1, .schedule = "1f1b", .ep = 1},
           {.dp = 2, .pp = 1, .schedule = "1f1b", .ep = 2},
           {.dp = 2, .pp = 2, .schedule = "1f1b", .ep = 2},
           {.dp = 2, .pp = 2, .schedule = "zb-h1", .ep = 2},
           {.dp = 1, .pp = 2, .schedule = "interleaved-1f1b", .ep = 1},
           {.dp = 2, .pp = 2, .schedule = "dualpipe-v", .ep = 2},
           // ZeRO-1: the dense state over 2 replicas, the experts' kept whole (1 replica each)
           {.dp = 2, .pp = 1, .schedule = "1f1b", .zero = 1, .ep = 2},
           // over 4 and 2 (experts' replicas of 2)
           {.dp = 4, .pp = 1, .schedule = "1f1b", .zero = 1, .ep = 2},
           {.dp = 4, .pp = 2, .schedule = "1f1b", .zero = 1, .ep = 2},
           // tp 2: each TP rank routes half of the tokens, the experts whole on each or
           // spread over them (ep folds over tp first)
           {.dp = 1, .tp = 2, .pp = 1, .schedule = "1f1b", .ep = 1},
           {.dp = 1, .tp = 2, .pp = 1, .schedule = "1f1b", .ep = 2},
           {.dp = 2, .tp = 2, .pp = 1, .schedule = "1f1b", .ep = 2},
           {.dp = 2, .tp = 2, .pp = 1, .schedule = "1f1b", .ep = 4},
           {.dp = 1, .tp = 2, .pp = 2, .schedule = "1f1b", .ep = 2},
           {.dp = 1, .tp = 2, .pp = 2, .schedule = "zb-h1", .ep = 2},
           // sequence parallel: the blocks' input and output are the rank's positions
           {.dp = 1, .tp = 2, .pp = 1, .schedule = "1f1b", .sequence_parallel = true, .ep = 1},
           {.dp = 2, .tp = 2, .pp = 1, .schedule = "1f1b", .sequence_parallel = true, .ep = 4},
           {.dp = 1, .tp = 2, .pp = 2, .schedule = "zb-h1", .sequence_parallel = true, .ep = 2}}) {
    TrainConfig c = WithMesh(base, layout);
    c.microbatches = base.microbatches / c.dp;  // each micro-batch the same 2 samples
    const std::string what = DescribeRun(c);
    Weights got;
    const std::vector<double> losses = TrainCollecting(c, got);
    ExpectSameLosses(reference, losses, what);
    ExpectSameWeights(want, got, c.lr, what);
  }
}

// DualPipe's overlapped pairs run their halves at once (the backward half on the rank's
// thread, the forward half beside it, its all-to-alls on groups of their own) and compute
// exactly what the halves compute one after the other: the same losses and weights, bit for
// bit.
TEST(TrainerMoeTest, OverlappedPairsComputeExactlyAsSequentialOnes) {
  at::set_num_threads(1);
  for (const char* schedule : {"dualpipe-v", "dualpipe"}) {
    TrainConfig c = TinyMoe();
    c.dp = 2;
    c.ep = 2;
    c.pp = 2;
    c.schedule = schedule;
    c.microbatches = 4;
    Weights sequential, overlapped;
    c.sequential_pairs = true;
    const std::vector<double> one_by_one = TrainCollecting(c, sequential);
    c.sequential_pairs = false;
    const std::vector<double> at_once = TrainCollecting(c, overlapped);
    TrainOnThreads(
        c, [](Trainer& t, Transport&) { EXPECT_TRUE(t.model().overlaps_pairs()); }, -1);
    EXPECT_EQ(one_by_one, at_once) << schedule;
    ASSERT_EQ(sequential.size(), overlapped.size());
    for (const auto& [name, w] : sequential) {
      EXPECT_TRUE(at::equal(overlapped.at(name), w)) << schedule << ": " << name;
    }
  }
}

// The step's auxiliary loss and expert load are those of one process, on every rank.
TEST(TrainerMoeTest, AuxiliaryLossAndExpertLoadAreReportedAsOneProcessCountsThem) {
  at::set_num_threads(1);
  TrainConfig c = TinyMoe();
  c.steps = 1;
  std::vector<StepMetrics> one, four;
  const auto run = [](const TrainConfig& config, std::vector<StepMetrics>& out) {
    std::mutex mu;
    TrainOnThreads(
        config,
        [&](Trainer& t, Transport&) {
          const StepMetrics m = t.Step();
          std::lock_guard<std::mutex> lock(mu);
          out.push_back(m);
        },
        -1);
  };
  run(c, one);
  c.dp = 2;
  c.ep = 2;
  c.pp = 2;
  c.microbatches /= 2;  // each micro-batch the same 2 samples
  run(c, four);
  c.dp = 1;  // and with the tokens split over 2 TP ranks, the experts over them too
  c.tp = 2;
  c.microbatches *= 2;
  run(c, four);
  ASSERT_EQ(one.size(), 1u);
  ASSERT_EQ(four.size(), 8u);
  const StepMetrics& want = one[0];
  ASSERT_EQ(want.expert_load.size(), 2u);  // layers 1 and 3
  const std::vector<double>& load = want.expert_load.at("model.layers.1.mlp");
  double total = 0;
  for (double l : load) total += l;
  EXPECT_EQ(total, 16.0 * c.model.seq_len * 2);  // every token of the batch, k = 2 copies
  for (const StepMetrics& m : four) {
    EXPECT_EQ(m.expert_load, want.expert_load);
    EXPECT_NEAR(m.auxiliary_losses.at("load_balance"), want.auxiliary_losses.at("load_balance"),
                1e-9);
  }
}

// Checkpoints stay global under expert parallelism: saved at dp 2 x ep 2 x pp 2 (ZeRO-1)
// they hold every expert by name and the selection biases, and resume at another ep (1, 2,
// 4; with ZeRO-1 over the experts' replicas too) as the run that never stopped.
TEST(TrainerMoeTest, ACheckpointOfSpreadExpertsResumesAtAnyExpertParallelism) {
  at::set_num_threads(1);
  const std::string dir = ::testing::TempDir() + "conveyor_moe_ckpt_" + std::to_string(::getpid());
  RemoveTree(dir);
  TrainConfig base = TinyMoe();
  base.steps = 4;
  // A selection bias, which the checkpoint must keep (small: its steps must not bring the
  // router's choices to near-ties, which the meshes' rounding would break apart).
  base.model.router_bias_rate = 0.01;
  Weights want;
  const std::vector<double> full = TrainCollecting(base, want);
  TrainConfig saved = base;
  saved.dp = 2;
  saved.ep = 2;
  saved.pp = 2;
  saved.zero = 1;  // the dense parameters' AdamW state sharded over the 2 replicas
  saved.microbatches = base.microbatches / 2;  // each micro-batch the same 2 samples
  std::mutex mu;
  std::map<std::string, at::Tensor> biases;  // by MoE block, as saved
  const auto biases_of = [&](Trainer& t, std::map<std::string, at::Tensor>& out) {
    std::lock_guard<std::mutex> lock(mu);
    for (const MoeMlp* block : t.model().ExpertBlocks()) {
      out[block->prefix()] = block->selection_bias().clone();
    }
  };
  TrainOnThreads(
      saved,
      [&](Trainer& t, Transport& w) {
        SaveCheckpoint(dir, t, saved, &w);
        biases_of(t, biases);
      },
      3);
  ASSERT_EQ(biases.size(), 2u);
  // 3 steps of +-rate each: never back at 0.
  EXPECT_TRUE(biases.at("model.layers.1.mlp").abs().min().item<double>() > 0);
  std::map<std::string, at::Tensor> restored;
  TrainConfig load = base;
  load.resume = dir;
  TrainOnThreads(
      load, [&](Trainer& t, Transport&) { biases_of(t, restored); }, -1);
  ASSERT_EQ(restored.size(), biases.size());
  for (const auto& [block, bias] : biases) {
    EXPECT_TRUE(at::equal(restored.at(block), bias)) << block;
  }
  CheckpointWeights stored(dir);
  for (int e = 0; e < 4; ++e) {
    const std::string name = "model.layers.3.mlp.experts." + std::to_string(e) + ".up_proj.weight";
    EXPECT_EQ(stored.Read(name).sizes(), want.at(name).sizes()) << name;
  }
  for (MeshRun at : std::vector<MeshRun>{{.dp = 1, .ep = 1},
                                         {.dp = 2, .ep = 2},
                                         {.dp = 4, .ep = 4},
                                         {.dp = 4, .zero = 1, .ep = 2},
                                         {.dp = 1, .tp = 2, .ep = 2},
                                         {.dp = 2, .tp = 2, .ep = 1}}) {
    at.schedule = base.schedule;  // one stage, as `base` runs it
    TrainConfig resumed = WithMesh(base, at);
    resumed.microbatches = base.microbatches / at.dp;
    resumed.resume = dir;
    const std::string what = "resumed at " + DescribeRun(resumed);
    Weights got;
    const std::vector<double> rest = TrainCollecting(resumed, got);
    ExpectSameLosses({full.begin() + 3, full.end()}, rest, what);
    ExpectSameWeights(want, got, base.lr, what);
  }
  RemoveTree(dir);
}

// Held-out evaluation of an MoE model under expert parallelism: the replicas exchange tokens
// inside every forward, so with 3 batches over 2 replicas the one short of a batch repeats
// one uncounted; the loss is one process's, on every rank (it hung before: one replica's
// all-to-all waited for the other's).
TEST(TrainerMoeTest, EvaluationUnderExpertParallelismIsOneProcesssOnEveryRank) {
  at::set_num_threads(1);
  TrainConfig c = TinyMoe();
  c.steps = 1;
  c.eval_batches = 3;
  c.timeout_s = 60;
  const std::vector<EvalMetrics> one = EvaluateOnThreads(c);
  ASSERT_EQ(one.size(), 1u);
  const auto expect_one_process = [&](const TrainConfig& config) {
    for (const EvalMetrics& m : EvaluateOnThreads(config)) {
      EXPECT_EQ(m.batches, 3);
      EXPECT_NEAR(m.loss, one[0].loss, 2e-5 * one[0].loss);
    }
  };
  c.dp = 2;
  c.ep = 2;
  c.pp = 2;
  c.microbatches /= 2;
  expect_one_process(c);
  c.dp = 1;  // the tokens split over the TP ranks, the experts over them
  c.tp = 2;
  expect_one_process(c);
}

TEST(TrainerMoeTest, BadExpertSettingsAreRefusedInOneLine) {
  TrainConfig c = TinyMoe();
  c.ep = 3;
  c.dp = 3;
  EXPECT_THROW(c.Validate(), UserError);  // 4 experts over 3 ranks: refused when built
  c = TinyMoe();
  c.model.top_k = 5;
  EXPECT_THROW(c.Validate(), UserError);
  c = TinyMoe();
  c.model.experts = 0;
  c.ep = 2;
  c.dp = 2;
  try {
    c.Validate();
    FAIL() << "--ep without experts";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("has none"), std::string::npos) << e.what();
  }
  c = TinyMoe();
  c.ep = 4;
  c.dp = 1;
  c.tp = 2;  // 4 does not divide dp x tp
  EXPECT_THROW(c.Validate(), UserError);
  c.dp = 2;
  EXPECT_NO_THROW(c.Validate());
  c.model.seq_len = 15;  // each TP rank routes half of a sequence's tokens
  EXPECT_THROW(c.Validate(), UserError);
  c = TinyMoe();
  c.dp = 2;
  c.tp = 2;
  c.zero = 1;  // the router's state over tp x dp: not sharded yet
  EXPECT_THROW(c.Validate(), UserError);
}

}  // namespace
}  // namespace conveyor
