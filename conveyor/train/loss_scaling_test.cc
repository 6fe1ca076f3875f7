// Dynamic loss scaling inside the trainer: scaled steps update exactly as unscaled ones,
// overflow skips the update, fp16 trains near fp32, checkpoints keep the scale.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "conveyor/common/error.h"
#include "conveyor/common/remove_tree.h"
#include "conveyor/device/compute_precision.h"
#include "conveyor/optim/loss_scaler.h"
#include "conveyor/train/builtin_tasks.h"
#include "conveyor/train/checkpoint.h"
#include "conveyor/train/train_testing.h"
#include "conveyor/train/trainer.h"

namespace conveyor {
namespace {

// The scaler as the trainer uses it, on fp32 (this CPU's libtorch may lack fp16 products):
// a power-of-two scale unscales exactly, and a large enough one overflows fp32 as a small one
// overflows fp16.
class LossScalingTest : public ::testing::Test {
 protected:
  void SetUp() override { at::set_num_threads(1); }
};

// Pipelines with a split backward (deferred W) and data-parallel replicas, the scale growing
// every second step: the losses, and so every update, are those of a run without scaling.
TEST_F(LossScalingTest, ScaledPipelinesTrainExactlyAsUnscaledOnes) {
  for (const char* schedule : {"1f1b", "zb-h1"}) {
    TrainConfig c = TinyGpt();
    c.steps = 5;
    c.pp = 2;
    c.dp = 2;
    c.batch_size = 8;
    c.schedule = schedule;
    const std::vector<double> want = TrainOnThreads(c);
    c.loss_scale = 1024;
    c.loss_scale_window = 2;
    std::vector<double> scales;
    const std::vector<double> got = TrainOnThreads(c, [&](Trainer& t, Transport&) {
      if (t.model().pipeline_rank() == 0 && t.model().coords().dp == 0)
        scales.push_back(t.loss_scaler().scale());
    });
    EXPECT_EQ(got, want) << schedule;
    EXPECT_EQ(scales, std::vector<double>({4096})) << schedule << ": 1024, doubled twice";
  }
}

// At the largest scale fp32 holds (2^127) this model's scaled gradients overflow (here at
// 2^126 as well, and fit from 2^125 on): each such step is skipped without an update and the
// scale halves, until a step fits and is taken.
TEST_F(LossScalingTest, OverflowSkipsTheUpdateAndHalvesTheScaleUntilStepsFit) {
  TrainConfig c = TinyGpt();
  c.steps = 10;
  c.loss_scale = 0x1p127;
  c.loss_scale_window = 1000;
  Trainer trainer(c, MakeTask(c), InProcessRank(nullptr, c.device));
  const auto params = trainer.model().Parameters();
  const at::Tensor before = params.back().second.detach().clone();
  StepMetrics m = trainer.Step();
  EXPECT_TRUE(m.skipped && m.overflow);
  EXPECT_TRUE(std::isfinite(m.loss)) << "only the gradients overflow";
  EXPECT_EQ(m.loss_scale, 0x1p127);
  EXPECT_EQ(trainer.loss_scaler().scale(), 0x1p126);
  EXPECT_TRUE(at::equal(params.back().second.detach(), before)) << "an overflow was applied";
  while (m.skipped && trainer.step() < c.steps) {
    const double scale = trainer.loss_scaler().scale();
    m = trainer.Step();
    EXPECT_EQ(m.skipped, m.overflow) << "step " << m.step << ": an overflow is the only skip";
    EXPECT_EQ(m.loss_scale, scale);
    EXPECT_EQ(trainer.loss_scaler().scale(), m.skipped ? scale / 2 : scale);
  }
  ASSERT_FALSE(m.skipped) << "no step fit within " << c.steps;
  EXPECT_TRUE(std::isfinite(m.grad_norm));
  EXPECT_LT(m.grad_norm, 100) << "the norm of the unscaled gradients";
  EXPECT_FALSE(at::equal(params.back().second.detach(), before)) << "the step was not applied";
}

// fp16 matrix products with the default dynamic scale (65536) where this libtorch has them
// on the CPU (torch 2.x: scripts/check-debian13 runs it): near fp32's losses, fp32 weights
// and gradients, and a pipeline with a split backward like one process.
TEST_F(LossScalingTest, Fp16PipelinesTrainNearFp32) {
  if (!AutocastComputesIn(at::kCPU, at::kHalf)) {
    GTEST_SKIP() << "this libtorch has no fp16 matrix product on the CPU";
  }
  TrainConfig c = TinyGpt();
  c.steps = 4;
  const std::vector<double> fp32 = TrainOnThreads(c);
  c.dtype = ComputeDtype::kFp16;
  std::vector<std::string> not_fp32;
  double scale = 0;
  const std::vector<double> fp16 = TrainOnThreads(c, [&](Trainer& t, Transport&) {
    scale = t.loss_scaler().scale();
    for (const auto& [name, p] : t.model().Parameters()) {
      if (p.scalar_type() != at::kFloat || p.grad().scalar_type() != at::kFloat) {
        not_fp32.push_back(name);
      }
    }
  });
  EXPECT_TRUE(not_fp32.empty()) << not_fp32.front();
  EXPECT_EQ(scale, 65536.0) << "no overflow, no growth within 2000 steps";
  ASSERT_EQ(fp16.size(), fp32.size());
  for (size_t k = 0; k < fp32.size(); ++k) {
    EXPECT_NEAR(fp16[k], fp32[k], 1e-2 * fp32[k]) << "step " << k + 1;
  }
  c.pp = 2;
  c.schedule = "zb-h1";
  const std::vector<double> pipelined = TrainOnThreads(c);
  ASSERT_EQ(pipelined.size(), fp16.size());
  for (size_t k = 0; k < fp16.size(); ++k) {
    EXPECT_NEAR(pipelined[k], fp16[k], 2e-3 * fp16[k]) << "zb-h1 step " << k + 1;
  }
}

TEST_F(LossScalingTest, CheckpointsKeepTheScaleAndItsCount) {
  TrainConfig c = TinyGpt();
  c.steps = 5;
  c.loss_scale = 256;
  c.loss_scale_window = 2;
  const std::string dir =
      ::testing::TempDir() + "conveyor_loss_scale_ckpt_" + std::to_string(::getpid());
  RemoveTree(dir);
  TrainOnThreads(
      c, [&](Trainer& t, Transport& w) { SaveCheckpoint(dir, t, c, &w); }, 3);
  TrainConfig resumed = c;
  resumed.resume = dir;
  resumed.steps = 3;  // nothing left to run: the state as loaded
  double scale = 0;
  int64_t good = -1;
  TrainOnThreads(resumed, [&](Trainer& t, Transport&) {
    scale = t.loss_scaler().scale();
    good = t.loss_scaler().good_steps();
  });
  EXPECT_EQ(scale, 512.0) << "256 doubled after steps 1-2";
  EXPECT_EQ(good, 1) << "step 3";
  RemoveTree(dir);
}

}  // namespace
}  // namespace conveyor
