#include "conveyor/train/rank_report.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "conveyor/common/process_stats.h"
#include "conveyor/train/train_testing.h"
#include "conveyor/train/trainer.h"

namespace conveyor {
namespace {

TEST(RankReportTest, GathersWhereEachRanksTimeGoes) {
  at::set_num_threads(1);
  TrainConfig c = TinyGpt();
  c.pp = 2;
  c.schedule = "1f1b";
  std::vector<std::vector<RankReport>> gathered(2);
  std::vector<RankReport> own(2);
  double pipeline_s = -1;
  TrainOnThreads(c, [&](Trainer& t, Transport&) {
    gathered[t.model().rank()] = t.RankReports();
    own[t.model().rank()] = t.measurements().Means(t.model().rank());
    if (t.model().rank() == 0) pipeline_s = t.measurements().pipeline_s();
  });
  // Every rank holds every rank's row, as that rank measured it.
  ASSERT_EQ(gathered[0].size(), 2u);
  ASSERT_EQ(gathered[1].size(), 2u);
  for (int r = 0; r < 2; ++r) {
    for (int holder = 0; holder < 2; ++holder) {
      const RankReport& m = gathered[holder][r];
      EXPECT_EQ(m.rank, r);
      EXPECT_EQ(m.step_s, own[r].step_s) << r << " on " << holder;
      EXPECT_EQ(m.compute_s, own[r].compute_s) << r << " on " << holder;
      EXPECT_EQ(m.transfer_wait_s, own[r].transfer_wait_s) << r << " on " << holder;
      EXPECT_EQ(m.comm_overlap, own[r].comm_overlap) << r << " on " << holder;
      EXPECT_EQ(m.peak_activation_bytes, own[r].peak_activation_bytes) << r << " on " << holder;
      EXPECT_EQ(m.predicted_peak_activation_bytes, gathered[0][r].predicted_peak_activation_bytes);
    }
  }
  const std::vector<RankReport>& ranks = gathered[0];
  // The pipeline's makespan spans every rank's own step.
  for (const RankReport& r : ranks) EXPECT_GE(pipeline_s, r.step_s) << r.rank;
  const double bubble = MeasuredBubble(ranks, pipeline_s);
  EXPECT_GT(bubble, 0);
  EXPECT_LT(bubble, 1);
  for (const RankReport& r : ranks) {
    EXPECT_GT(r.compute_s, 0) << r.rank;
    EXPECT_LE(r.compute_s + r.comm_wait_s, r.step_s * 1.0001) << r.rank;
    EXPECT_GE(r.bubble_fraction, 0);
    EXPECT_LT(r.bubble_fraction, 1);
    // Every wait splits into the peer's compute and the transfer.
    EXPECT_NEAR(r.dependency_wait_s + r.transfer_wait_s, r.comm_wait_s, 1e-9) << r.rank;
    EXPECT_GE(r.comm_overlap, 0);
    EXPECT_LE(r.comm_overlap, 1);
    // Each rank sends one (B, T, C) float tensor per step in pieces: activations or
    // gradients.
    EXPECT_EQ(r.sent_bytes, 4.0 * c.batch_size * c.model.seq_len * c.model.hidden) << r.rank;
    EXPECT_GT(r.peak_activation_bytes, 0);
    EXPECT_GT(r.predicted_peak_activation_bytes, 0);
    // Threads of this process: its whole resident memory, and time since it started.
    EXPECT_GE(r.peak_resident_bytes, r.peak_activation_bytes) << r.rank;
    EXPECT_GE(r.startup_s, 0) << r.rank;
    EXPECT_GT(r.stage_build_s, 0) << r.rank;
    EXPECT_LE(r.startup_s, SecondsSinceProcessStart()) << r.rank;
  }
  // 1F1B holds min(p - rank, m) micro-batches.
  EXPECT_EQ(ranks[0].predicted_peak_microbatches, 2);
  EXPECT_EQ(ranks[1].predicted_peak_microbatches, 1);
  EXPECT_GT(ranks[1].comm_wait_s,
            0);  // the last stage waits for its first input
}

// On a mesh, every rank of the world has its row, with its coordinates, the time of its
// data- and tensor-parallel collectives, and the prediction for its own pipeline; the
// collectives are on their tracks of the rank's timeline.
TEST(RankReportTest, EveryRankOfAMeshWithItsCollectives) {
  at::set_num_threads(1);
  TrainConfig c = TinyGpt();
  c.dp = 2;
  c.tp = 2;
  c.pp = 2;
  c.batch_size = 8;
  c.schedule = "1f1b";
  std::vector<std::vector<RankReport>> gathered(8);
  std::vector<std::set<PhaseTrack>> tracks(8);
  TrainOnThreads(c, [&](Trainer& t, Transport&) {
    gathered[t.model().rank()] = t.RankReports();
    for (const Phase& p : t.LastTimeline().phases) tracks[t.model().rank()].insert(p.track);
  });
  const Mesh mesh = Mesh::Make(8, 2, 2, 2, Mesh::ParseOrder("tp-dp-pp"));
  for (int holder = 0; holder < 8; ++holder) {
    EXPECT_EQ(tracks[holder], (std::set<PhaseTrack>{PhaseTrack::kStep, PhaseTrack::kDataParallel,
                                                    PhaseTrack::kTensorParallel}))
        << holder;
    ASSERT_EQ(gathered[holder].size(), 8u);
    for (int r = 0; r < 8; ++r) {
      const RankReport& m = gathered[holder][r];
      EXPECT_EQ(m.rank, r);
      EXPECT_EQ(m.coords, mesh.coords(r));
      EXPECT_EQ(m.dp_comm_s, gathered[0][r].dp_comm_s);
      EXPECT_GT(m.dp_comm_s, 0) << r;
      EXPECT_GE(m.dp_exposed_s, 0) << r;
      EXPECT_LE(m.dp_exposed_s, m.dp_comm_s) << r;
      EXPECT_GT(m.tp_comm_s, 0) << r;
      EXPECT_GT(m.compute_s, 0) << r;
      // The prediction depends on the pipeline rank only: the stages are alike in size.
      EXPECT_EQ(m.predicted_peak_microbatches, m.coords.pp == 0 ? 2 : 1) << r;
      EXPECT_GT(m.predicted_peak_activation_bytes, 0) << r;
    }
  }
}

TEST(RankReportTest, HiddenShareOfTheDataParallelCommunication) {
  RankReport m;
  EXPECT_EQ(m.dp_hidden_fraction(), 1);  // nothing to hide
  m.dp_comm_s = 4, m.dp_exposed_s = 1;
  EXPECT_DOUBLE_EQ(m.dp_hidden_fraction(), 0.75);
  m.dp_exposed_s = 5;
  EXPECT_EQ(m.dp_hidden_fraction(), 0);
}

TEST(RankReportTest, BubbleAndExposedCommunicationOverAllRanks) {
  std::vector<RankReport> ranks(2);
  ranks[0].compute_s = ranks[0].work_s = 3, ranks[0].step_s = 5, ranks[0].transfer_wait_s = 1;
  ranks[1].compute_s = ranks[1].work_s = 1, ranks[1].step_s = 3, ranks[1].transfer_wait_s = 1;
  EXPECT_DOUBLE_EQ(MeasuredBubble(ranks, 8), 0.75);    // 1 - 4 / (2 x 8)
  EXPECT_DOUBLE_EQ(MeasuredBubble(ranks, 4, 0.5), 0);  // room for one: 1 - 4 / (2 x 0.5 x 4)
  EXPECT_EQ(MeasuredBubble(ranks, 1), 0) << "never below 0";
  EXPECT_EQ(MeasuredBubble(ranks, 0), 0);
  EXPECT_DOUBLE_EQ(ExposedCommFraction(ranks), 0.25);  // 2 / 8
  EXPECT_EQ(ExposedCommFraction({}), 0);
}

}  // namespace
}  // namespace conveyor
