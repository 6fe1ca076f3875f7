#include "conveyor/cli/train_summary.h"

#include <gtest/gtest.h>

#include <string>

namespace conveyor {
namespace {

TEST(TrainSummaryTest, PercentHasOneDecimal) {
  EXPECT_EQ(Percent(0.1234), "12.3%");
  EXPECT_EQ(Percent(1), "100.0%");
}

TEST(TrainSummaryTest, PrintsTheRunsNumbersAndOneRowPerRank) {
  TrainingRun s;
  s.steps = 7;
  s.final_loss = 1.5;
  s.tokens_per_s = 1000;
  s.final_eval.loss = 1.75;
  s.final_eval.batches = 2;
  s.ranks.resize(2);
  s.ranks[1].rank = 1;
  s.ranks[1].step_s = 0.002;
  s.ranks[1].predicted_peak_microbatches = 3;
  s.measured_bubble = 0.5;
  s.predicted_bubble = 0.25;
  s.measured_pipeline_s = 0.04;
  s.predicted_pipeline_s = 0.0375;
  s.hop_s = 2e-5;
  s.exposed_comm = 0.125;
  ::testing::internal::CaptureStdout();
  PrintTrainSummary(s);
  std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("done: 7 steps, final loss 1.5000, held-out loss 1.7500, 1000 tokens/s\n"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("skipped"), std::string::npos) << out;
  EXPECT_EQ(out.find("accuracy"), std::string::npos) << out;
  EXPECT_EQ(out.find("auxiliary"), std::string::npos) << out;  // a model without any
  EXPECT_NE(out.find("   1     2.00     0.00        0.00      0.00    0.0%   100.0%      0.00   "
                     "0.00 (3.0 mb)\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("bubble: measured 50.0%, predicted by the simulator from measured costs 25.0% "
                     "(one hop 20 us); exposed communication 12.5% of the step\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("pipeline: measured 40.00 ms a step, predicted 37.50 ms\n"), std::string::npos)
      << out;
  EXPECT_EQ(out.find("compute: the ranks share"), std::string::npos) << out;
  EXPECT_EQ(out.find("traces:"), std::string::npos) << out;
  EXPECT_EQ(out.find("sample:"), std::string::npos) << out;
  EXPECT_EQ(out.find("mesh"), std::string::npos) << out;  // a pipeline only

  s.sharing = "4 ranks, room for 2 at full speed";
  ::testing::internal::CaptureStdout();
  PrintTrainSummary(s);
  out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("compute: the ranks share their machine's cores (4 ranks, room for 2 at full "
                     "speed)"),
            std::string::npos)
      << out;
  s.sharing.clear();

  s.mesh = "dp 1 x tp 2 x pp 1";
  s.ranks[1].coords = MeshCoords{.dp = 0, .tp = 1, .pp = 0};
  s.ranks[1].dp_comm_s = 0.004;
  s.ranks[1].dp_exposed_s = 0.001;
  s.ranks[1].tp_comm_s = 0.0025;
  s.ranks[1].ep_comm_s = 0.0015;
  ::testing::internal::CaptureStdout();
  PrintTrainSummary(s);
  out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("expert-parallel\nall-to-alls; mesh dp 1 x tp 2 x pp 1:\n"), std::string::npos)
      << out;
  EXPECT_NE(out.find("\n   0   0   0   0      0.00  100.0%      0.00      0.00\n"
                     "   1   0   1   0      4.00   75.0%      2.50      1.50\n"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("ZeRO-1"), std::string::npos) << out;
  s.dp.buckets = 7;
  s.dp.bytes = 7 << 20;
  s.dp.scattered_bytes = 7 << 19;
  s.dp.scattered_kept_bytes = 7 << 18;
  ::testing::internal::CaptureStdout();
  PrintTrainSummary(s);
  out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("data parallel: per step 1.00 MiB of gradients in 1.0 buckets"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("ZeRO-1: 0.50 MiB of them reduce-scattered, of which rank 0 received its "
                     "range of 0.25 MiB"),
            std::string::npos)
      << out;
  s.mesh.clear();
  s.dp = DataParallelStats{};

  s.skipped_steps = 2;
  s.final_eval.accuracy = 0.5;
  s.baseline_accuracy = 0.25;
  s.trace_dir = "t";
  s.sample = "hello";
  s.auxiliary_losses = {{"load_balance", 1.0625}, {"z_loss", 0.003}};
  ::testing::internal::CaptureStdout();
  PrintTrainSummary(s);
  out = ::testing::internal::GetCapturedStdout();
  s.final_eval.batches = 0;
  ::testing::internal::CaptureStdout();
  PrintTrainSummary(s);
  EXPECT_NE(::testing::internal::GetCapturedStdout().find(
                "final loss 1.5000, no held-out data, 1000 tokens/s\n"),
            std::string::npos);
  EXPECT_NE(out.find("2 step(s) skipped: non-finite loss or gradient norm\n"), std::string::npos)
      << out;
  EXPECT_NE(out.find("held-out accuracy 50.0% (majority class 25.0%)\n"), std::string::npos) << out;
  EXPECT_NE(out.find("traces: t/trace.json, measured.svg\n"), std::string::npos) << out;
  EXPECT_NE(out.find("\nsample:\nhello\n"), std::string::npos) << out;
  EXPECT_NE(out.find("1000 tokens/s\nauxiliary losses of that step (besides the loss): "
                     "load_balance 1.062, z_loss 0.003\n"),
            std::string::npos)
      << out;
}

// A LoRA run's line: trained and frozen parameters, and the gradient and AdamW bytes the
// frozen ones do not take; absent when nothing is frozen.
TEST(TrainSummaryTest, ALoraRunSaysWhatItTrainsAndWhatItSaves) {
  TrainingRun s;
  s.trained_parameters = 623104;
  ::testing::internal::CaptureStdout();
  PrintTrainSummary(s);
  EXPECT_EQ(::testing::internal::GetCapturedStdout().find("frozen"), std::string::npos);
  s.frozen_parameters = 25469440;
  s.frozen_state_bytes = 12 * s.frozen_parameters;
  ::testing::internal::CaptureStdout();
  PrintTrainSummary(s);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("parameters: 0.6231M trained (LoRA adapters), 25.47M frozen: 291.47 MiB of "
                     "gradients and AdamW state not held (over the mesh)\n"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace conveyor
