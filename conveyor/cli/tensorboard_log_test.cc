#include "conveyor/cli/tensorboard_log.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace conveyor {
namespace {

std::map<std::string, double> AsMap(const std::vector<TaggedScalar>& scalars) {
  std::map<std::string, double> map;
  for (const auto& [tag, value] : scalars) EXPECT_TRUE(map.emplace(tag, value).second) << tag;
  return map;
}

TEST(TensorBoardLogTest, AStepHasItsMetricsAndEachBlocksExpertLoad) {
  StepMetrics m;
  m.step = 7;
  m.loss = 2.5;
  m.lr = 1e-3;
  m.grad_norm = 0.75;
  m.tokens_per_s = 1000;
  m.seconds = 0.5;
  m.loss_scale = 1024;
  m.auxiliary_losses = {{"load_balance", 0.125}};
  m.expert_load = {{"model.layers.0.mlp", {6, 2, 0, 0}}, {"model.layers.1.mlp", {2, 2, 2, 2}}};
  m.tokens_dropped = {{"model.layers.0.mlp", 3}};
  const auto scalars = AsMap(StepScalars(m, /*loss_scaling=*/true));
  EXPECT_EQ(scalars.at("train/loss"), 2.5);
  EXPECT_EQ(scalars.at("train/lr"), 1e-3);
  EXPECT_EQ(scalars.at("train/grad_norm"), 0.75);
  EXPECT_EQ(scalars.at("train/tokens_per_s"), 1000);
  EXPECT_EQ(scalars.at("train/step_s"), 0.5);
  EXPECT_EQ(scalars.at("train/loss_scale"), 1024);
  EXPECT_EQ(scalars.at("train/aux/load_balance"), 0.125);
  EXPECT_EQ(scalars.at("moe/model.layers.0.mlp/load_max"), 6);
  EXPECT_EQ(scalars.at("moe/model.layers.0.mlp/load_mean"), 2);
  EXPECT_EQ(scalars.at("moe/model.layers.0.mlp/imbalance"), 3);
  EXPECT_EQ(scalars.at("moe/model.layers.0.mlp/tokens_dropped"), 3);
  EXPECT_EQ(scalars.at("moe/model.layers.1.mlp/imbalance"), 1);
  EXPECT_EQ(scalars.count("moe/model.layers.1.mlp/tokens_dropped"), 0u);
  EXPECT_EQ(scalars.at("moe/imbalance_max"), 3);
  EXPECT_EQ(scalars.count("dp/comm_s"), 0u);  // no data parallelism
  EXPECT_EQ(scalars.count("train/skipped"), 0u);
}

TEST(TensorBoardLogTest, ASkippedStepSaysSoAndHasNoLoss) {
  StepMetrics m;
  m.skipped = true;
  m.loss_scale = 512;
  const auto scaled = AsMap(StepScalars(m, /*loss_scaling=*/true));
  EXPECT_EQ(scaled.at("train/skipped"), 1);
  EXPECT_EQ(scaled.at("train/loss_scale"), 512);
  EXPECT_EQ(scaled.count("train/loss"), 0u);
  EXPECT_EQ(AsMap(StepScalars(m, /*loss_scaling=*/false)).count("train/loss_scale"), 0u);
}

TEST(TensorBoardLogTest, AnEvaluationWithoutHeldOutDataHasNoLoss) {
  EXPECT_TRUE(EvalScalars(EvalMetrics{3, 0, -1, 0}).empty());
  const auto scalars = AsMap(EvalScalars(EvalMetrics{3, 1.5, 0.25, 4}));
  EXPECT_EQ(scalars.at("eval/loss"), 1.5);
  EXPECT_EQ(scalars.at("eval/accuracy"), 0.25);
}

TEST(TensorBoardLogTest, TheRunHasItsBubblesAndEachRanksPeakMemory) {
  TrainingRun run;
  run.measured_bubble = 0.25;
  run.predicted_bubble = 0.125;
  run.ranks.resize(2);
  run.ranks[0].rank = 0;
  run.ranks[0].peak_tensor_bytes = 1 << 20;
  run.ranks[1].rank = 1;
  run.ranks[1].peak_tensor_bytes = 3 << 20;
  run.ranks[1].peak_resident_bytes = 5 << 20;
  const auto scalars = AsMap(RunScalars(run));
  EXPECT_EQ(scalars.at("pipeline/bubble_measured"), 0.25);
  EXPECT_EQ(scalars.at("pipeline/bubble_predicted"), 0.125);
  EXPECT_EQ(scalars.at("memory/rank_0/peak_tensor_mib"), 1);
  EXPECT_EQ(scalars.at("memory/rank_1/peak_tensor_mib"), 3);
  EXPECT_EQ(scalars.at("memory/peak_tensor_mib_max"), 3);
  EXPECT_EQ(scalars.at("memory/peak_resident_mib_max"), 5);
}

}  // namespace
}  // namespace conveyor
