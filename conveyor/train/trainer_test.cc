#include "conveyor/train/trainer.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <set>
#include <string>

#include "conveyor/train/tasks.h"
#include "conveyor/train/train_testing.h"

namespace conveyor {
namespace {

using testing::TinyGpt;
using testing::TrainOnThreads;

class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override { at::set_num_threads(1); }
};

void ExpectSameLosses(const std::vector<double>& want, const std::vector<double>& got,
                      const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t k = 0; k < want.size(); ++k) {
    EXPECT_NEAR(got[k], want[k], 2e-5 * std::abs(want[k])) << what << " step " << k + 1;
  }
}

TEST_F(TrainerTest, LossesDoNotDependOnScheduleOrPp) {
  const std::vector<double> reference = TrainOnThreads(TinyGpt());
  ASSERT_EQ(reference.size(), 3u);
  EXPECT_LT(reference.back(), reference.front());
  const std::pair<int, const char*> runs[] = {
      {2, "1f1b"},  {2, "zb-v"},     {2, "dualpipe-v"}, {2, "interleaved-1f1b"},
      {3, "zb-h2"}, {2, "dualpipe"}, {3, "zb-h1"}};
  for (const auto& [pp, schedule] : runs) {
    TrainConfig c = TinyGpt();
    c.pp = pp;
    c.schedule = schedule;
    ExpectSameLosses(reference, TrainOnThreads(c),
                     std::string(schedule) + " pp=" + std::to_string(pp));
  }
}

TEST_F(TrainerTest, TiedEmbeddingsStayEqualAcrossFirstAndLastStage) {
  TrainConfig c = TinyGpt();
  c.tie_embeddings = true;
  const std::vector<double> reference = TrainOnThreads(c);
  c.pp = 2;
  c.schedule = "1f1b";
  std::vector<at::Tensor> copies(2);
  const std::vector<double> losses = TrainOnThreads(c, [&](Trainer& t, Transport&) {
    for (const auto& [name, p] : t.Parameters()) {
      if (name == "embed.wte") copies[t.rank()] = p.detach().clone();
    }
  });
  ExpectSameLosses(reference, losses, "tied pp=2");
  ASSERT_TRUE(copies[0].defined() && copies[1].defined()) << "both ends hold the tied weight";
  EXPECT_TRUE(at::equal(copies[0], copies[1]));
}

TEST_F(TrainerTest, MeasuresWhereEachRanksTimeGoes) {
  TrainConfig c = TinyGpt();
  c.pp = 2;
  c.schedule = "1f1b";
  std::vector<RankMetrics> ranks;
  double predicted = -1, pipeline_s = -1, hop_s = -1;
  size_t spans = 0;
  std::set<std::string> phases;
  TrainOnThreads(c, [&](Trainer& t, Transport&) {
    const std::vector<RankMetrics> gathered = t.GatherRankMetrics();
    const double p = t.PredictedBubble();
    if (t.rank() == 0) {
      ranks = gathered;
      predicted = p;
      pipeline_s = t.pipeline_s();
      hop_s = t.hop_s();
      for (const Span& s : t.LastTimeline().spans) spans += s.kind == SpanKind::kRun;
      for (const Phase& p : t.LastTimeline().phases) phases.insert(p.name);
    }
  });
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_GT(hop_s, 0);
  // The pipeline's makespan spans every rank's own step.
  for (const RankMetrics& r : ranks) EXPECT_GE(pipeline_s, r.step_s) << r.rank;
  const double bubble = MeasuredBubble(ranks, pipeline_s);
  EXPECT_GT(bubble, 0);
  EXPECT_LT(bubble, 1);
  for (const RankMetrics& r : ranks) {
    EXPECT_GT(r.compute_s, 0) << r.rank;
    EXPECT_LE(r.compute_s + r.comm_wait_s, r.step_s * 1.0001) << r.rank;
    EXPECT_GE(r.bubble_fraction, 0);
    EXPECT_LT(r.bubble_fraction, 1);
    // Every wait splits into the peer's compute and the transfer.
    EXPECT_NEAR(r.dependency_wait_s + r.transfer_wait_s, r.comm_wait_s, 1e-9) << r.rank;
    EXPECT_GE(r.comm_overlap, 0);
    EXPECT_LE(r.comm_overlap, 1);
    // Each rank sends one (B, T, C) float tensor per step in pieces: activations or gradients.
    EXPECT_EQ(r.sent_bytes, 4.0 * c.batch_size * c.seq_len * c.hidden) << r.rank;
    EXPECT_GT(r.peak_activation_bytes, 0);
    EXPECT_GT(r.predicted_peak_activation_bytes, 0);
  }
  // 1F1B holds min(p - rank, m) micro-batches.
  EXPECT_EQ(ranks[0].predicted_peak_microbatches, 2);
  EXPECT_EQ(ranks[1].predicted_peak_microbatches, 1);
  EXPECT_GT(ranks[1].comm_wait_s, 0);  // the last stage waits for its first input
  EXPECT_GT(predicted, 0);
  EXPECT_LT(predicted, 1);
  EXPECT_EQ(spans, 2u * 4u);  // rank 0: F and B of each of the 4 micro-batches
  EXPECT_EQ(phases, (std::set<std::string>{"sum shared grads", "grad norm", "optimizer",
                                           "all-reduce loss"}));
}

// GPipe on one rank holds every micro-batch's activations at its peak: selective
// recomputation drops the attention scores from them, full keeps only each stage's input.
// The losses stay those of the run that keeps everything.
TEST_F(TrainerTest, RecomputationLowersPeakMemoryAndKeepsTheLosses) {
  std::map<std::string, int64_t> peak;
  std::map<std::string, std::vector<double>> losses;
  for (const std::string mode : {"none", "selective", "full"}) {
    TrainConfig c = TinyGpt();
    c.recompute = mode;
    losses[mode] = TrainOnThreads(c, [&](Trainer& t, Transport&) {
      peak[mode] = t.GatherRankMetrics()[0].peak_activation_bytes;
    });
  }
  EXPECT_LT(peak["full"], peak["selective"]);
  EXPECT_LT(peak["selective"], peak["none"]);
  for (const std::string mode : {"selective", "full"}) {
    ASSERT_EQ(losses[mode].size(), losses["none"].size());
    for (size_t k = 0; k < losses[mode].size(); ++k) {
      EXPECT_NEAR(losses[mode][k], losses["none"][k], 1e-5) << mode << " step " << k;
    }
  }
}

TEST_F(TrainerTest, RejectsRunsThatCannotStart) {
  TrainConfig c = TinyGpt();
  c.pp = 2;
  c.layers = 1;  // 3 layers cannot fill 2 ranks x 2 chunks
  c.schedule = "zb-v";
  EXPECT_THROW(TrainOnThreads(c), UserError);
  c = TinyGpt();
  c.batch_size = 2;  // fewer samples than micro-batches
  EXPECT_THROW(c.Validate(), UserError);
}

// A weight holding NaN (a diverged run, a bad checkpoint) once trained on with loss -nan
// to the end and exit 0.
TEST_F(TrainerTest, NonFiniteStepStopsTheRunBeforeTheUpdate) {
  const TrainConfig c = TinyGpt();
  Trainer trainer(c, MakeTask(c), nullptr);
  const auto params = trainer.Parameters();
  const at::Tensor other = params.back().second.detach().clone();
  {
    at::NoGradGuard no_grad;
    params.front().second.fill_(std::numeric_limits<float>::quiet_NaN());
  }
  try {
    trainer.Step();
    FAIL() << "a NaN step was accepted";
  } catch (const UserError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("step 1: the loss is ", 0), 0u) << what;
    EXPECT_NE(what.find("--skip-nonfinite-steps"), std::string::npos) << what;
  }
  EXPECT_EQ(trainer.step(), 0);
  EXPECT_TRUE(at::equal(params.back().second.detach(), other)) << "no update was made";
}

TEST_F(TrainerTest, NonFiniteStepIsSkippedWhenAsked) {
  TrainConfig c = TinyGpt();
  c.skip_nonfinite_steps = true;
  Trainer trainer(c, MakeTask(c), nullptr);
  const auto params = trainer.Parameters();
  const at::Tensor other = params.back().second.detach().clone();
  {
    at::NoGradGuard no_grad;
    params.front().second.fill_(std::numeric_limits<float>::infinity());
  }
  const StepMetrics m = trainer.Step();
  EXPECT_TRUE(m.skipped);
  EXPECT_EQ(m.step, 1);
  EXPECT_EQ(trainer.step(), 1);
  EXPECT_TRUE(at::equal(params.back().second.detach(), other)) << "no update was made";
}

TEST_F(TrainerTest, PreflightFindsBadFilesBeforeAnyRank) {
  TrainConfig c = TinyGpt();
  EXPECT_NO_THROW(PreflightFiles(c));
  auto error_of = [](const TrainConfig& config) -> std::string {
    try {
      PreflightFiles(config);
    } catch (const UserError& e) {
      return e.what();
    }
    return "accepted";
  };
  c.metrics = "/nonexistent/dir/m.json";
  EXPECT_NE(error_of(c).find("--metrics '/nonexistent/dir/m.json': the folder '/nonexistent/dir' "
                             "does not exist"),
            std::string::npos)
      << error_of(c);
  c.metrics = ::testing::TempDir();
  EXPECT_NE(error_of(c).find("is a folder"), std::string::npos) << error_of(c);
  c = TinyGpt();
  c.checkpoint_dir = "/proc/nope/ckpt";
  EXPECT_NE(error_of(c).find("--checkpoint-dir '/proc/nope/ckpt': cannot create files in '/proc'"),
            std::string::npos)
      << error_of(c);
  c = TinyGpt();
  c.seq_len = 60000;  // longer than the tiny corpus
  EXPECT_NE(error_of(c), "accepted");
  c = TinyGpt();
  c.model = "classifier";
  c.classes = 50;  // the tiny corpus is one file: one category
  EXPECT_NE(error_of(c), "accepted");
}

TEST_F(TrainerTest, PartitionFollowsTheCostChoice) {
  TrainConfig c = TinyGpt();
  c.pp = 2;
  c.schedule = "1f1b";
  c.partition = "uniform";
  std::vector<LayerRange> uniform, flops;
  TrainOnThreads(c, [&](Trainer& t, Transport&) {
    if (t.rank() == 0) uniform = t.partition();
  });
  EXPECT_EQ(uniform[0].size(), 3);  // 6 layers, equal cost
  c.partition = "flops";
  TrainOnThreads(c, [&](Trainer& t, Transport&) {
    if (t.rank() == 0) flops = t.partition();
  });
  // The LM head (2 C V per token with V = 256) outweighs a block at this size.
  EXPECT_GT(flops[0].size(), flops[1].size());
  // Measured times differ per rank; the ranks still agree on one partition.
  c.partition = "profile";
  std::vector<std::vector<LayerRange>> profiled(2);
  TrainOnThreads(c, [&](Trainer& t, Transport&) { profiled[t.rank()] = t.partition(); });
  ASSERT_EQ(profiled[0].size(), 2u);
  EXPECT_EQ(profiled[0][0].end, profiled[1][0].end);
  EXPECT_EQ(profiled[0][1].end, 6);
}

}  // namespace
}  // namespace conveyor
