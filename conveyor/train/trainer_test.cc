#include "conveyor/train/trainer.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "conveyor/comm/local_transport.h"
#include "conveyor/comm/rank_threads.h"
#include "conveyor/common/remove_tree.h"
#include "conveyor/device/compute_device.h"
#include "conveyor/train/builtin_tasks.h"
#include "conveyor/train/checkpoint.h"
#include "conveyor/train/rank_report.h"
#include "conveyor/train/train_testing.h"

namespace conveyor {
namespace {

class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override { at::set_num_threads(1); }
};

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
  c.model.tie_embeddings = true;
  const std::vector<double> reference = TrainOnThreads(c);
  c.pp = 2;
  c.schedule = "1f1b";
  std::vector<at::Tensor> copies(2);
  const std::vector<double> losses = TrainOnThreads(c, [&](Trainer& t, Transport&) {
    for (const auto& [name, p] : t.model().Parameters()) {
      if (name == "embed.wte") copies[t.model().rank()] = p.detach().clone();
    }
  });
  ExpectSameLosses(reference, losses, "tied pp=2");
  ASSERT_TRUE(copies[0].defined() && copies[1].defined()) << "both ends hold the tied weight";
  EXPECT_TRUE(at::equal(copies[0], copies[1]));
}

// Data parallelism: each replica runs the pipeline on its slice of the batch; the losses and
// the weights after AdamW steps are those of one process on the whole batch, whatever the
// schedule (full or split backward), with tied embeddings too.
TEST_F(TrainerTest, DataParallelReplicasTrainLikeOneProcess) {
  TrainConfig base = TinyGpt();
  base.batch_size = 10;  // 5 and 5 samples per replica; micro-batches of 2 and 1 samples
  base.microbatches = 3;
  base.model.tie_embeddings = true;
  Weights want;
  const std::vector<double> reference = TrainCollecting(base, want);
  ASSERT_EQ(reference.size(), 3u);
  const struct {
    int dp, pp;
    const char* schedule;
  } runs[] = {{2, 1, "gpipe"}, {2, 2, "1f1b"}, {2, 2, "zb-h1"}, {3, 2, "zb-v"}};
  for (const auto& run : runs) {
    TrainConfig c = base;
    c.dp = run.dp;
    c.pp = run.pp;
    c.schedule = run.schedule;
    c.batch_size = std::max(10, run.dp * c.microbatches);
    const std::string what =
        "dp " + std::to_string(run.dp) + " x pp " + std::to_string(run.pp) + " " + run.schedule;
    Weights want_here = want;
    std::vector<double> reference_here = reference;
    if (c.batch_size != base.batch_size) {
      TrainConfig one = base;
      one.batch_size = c.batch_size;
      want_here.clear();
      reference_here = TrainCollecting(one, want_here);
    }
    Weights got;
    std::vector<DataParallelStats> dp;
    ExpectSameLosses(reference_here, TrainCollecting(c, got, &dp), what);
    ExpectSameWeights(want_here, got, c.lr, what);
    ASSERT_EQ(static_cast<int>(dp.size()), run.dp * run.pp);
    for (const DataParallelStats& s : dp) {
      EXPECT_GT(s.buckets, 0) << what;
      EXPECT_GT(s.bytes, 0) << what;
    }
  }
}

// bf16 matrix products (autocast) with fp32 weights: the pipeline with a full and with a
// split backward (deferred W) trains like one process in bf16, whose losses stay near fp32's
// (bf16's 8-bit mantissa: 2% on these), while parameters and gradients stay fp32.
TEST_F(TrainerTest, Bf16PipelinesTrainLikeOneProcessNearFp32) {
  const std::vector<double> fp32 = TrainOnThreads(TinyGpt());
  TrainConfig base = TinyGpt();
  base.dtype = ComputeDtype::kBf16;
  std::vector<std::string> not_fp32;
  const std::vector<double> reference = TrainOnThreads(base, [&](Trainer& t, Transport&) {
    for (const auto& [name, p] : t.model().Parameters()) {
      if (p.scalar_type() != at::kFloat || p.grad().scalar_type() != at::kFloat) {
        not_fp32.push_back(name);
      }
    }
  });
  EXPECT_TRUE(not_fp32.empty()) << not_fp32.front();
  ExpectSameLosses(fp32, reference, "bf16 against fp32", 2e-2);
  EXPECT_NE(fp32.front(), reference.front()) << "bf16 should change the loss a little";
  // Other micro-batch groupings round other sums to bf16: 0.2%.
  for (const char* schedule : {"1f1b", "zb-h1", "zb-v"}) {
    TrainConfig c = base;
    c.pp = 2;
    c.schedule = schedule;
    ExpectSameLosses(reference, TrainOnThreads(c), std::string("bf16 ") + schedule, 2e-3);
  }
  // Recomputation (the attention core's or the whole forward) repeats the bf16 products:
  // the same losses to fp32 rounding.
  for (const Recompute recompute : {Recompute::kSelective, Recompute::kFull}) {
    TrainConfig c = base;
    c.recompute = recompute;
    ExpectSameLosses(reference, TrainOnThreads(c),
                     "bf16 recompute " + std::string(RecomputeName(recompute)), 1e-5);
  }
}

// The GPU path: ranks as threads sharing one GPU, each computing on its own stream, with
// messages ordered by events and matched by order (as NCCL matches them): losses and weights
// after AdamW steps are those of one process on the CPU. CUDA kernels sum in other orders
// than the CPU's, hence 1e-4 relative on the losses and 1e-3 on the weights.
TEST_F(TrainerTest, RanksSharingOneGpuTrainLikeOneProcessOnTheCpu) {
  if (VisibleGpus() == 0) GTEST_SKIP() << "no CUDA device";
  TrainConfig base = TinyGpt();
  base.model.tie_embeddings = true;
  base.batch_size = 8;
  Weights want;
  const std::vector<double> reference = TrainCollecting(base, want);
  const struct {
    int dp, pp;
    const char* schedule;
  } runs[] = {{1, 2, "1f1b"}, {1, 2, "zb-h1"}, {1, 2, "dualpipe"}, {2, 2, "zb-v"}};
  for (const auto& run : runs) {
    TrainConfig c = base;
    c.device = DeviceKind::kCuda;
    c.dp = run.dp;
    c.pp = run.pp;
    c.schedule = run.schedule;
    const std::string what = std::string("cuda dp ") + std::to_string(run.dp) + " x pp " +
                             std::to_string(run.pp) + " " + run.schedule;
    Weights got;
    ExpectSameLosses(reference, TrainCollecting(c, got), what, 1e-4);
    ExpectSameWeights(want, got, c.lr, what, 1e-3);
  }
}

// Tensor parallelism, alone with the pipeline and in the full 3D mesh (8 ranks as threads),
// over every schedule family: the losses and the whole weights after AdamW steps are those of
// one process. The GPT with tied embeddings (vocabulary-parallel embedding, head and loss),
// and the classifier.
TEST_F(TrainerTest, TensorAndDataParallelMeshesTrainLikeOneProcess) {
  for (const ModelKind model : {ModelKind::kGpt, ModelKind::kClassifier}) {
    TrainConfig base = TinyGpt();
    base.model.kind = model;
    base.batch_size = 8;
    base.microbatches = 4;
    base.model.tie_embeddings = model == ModelKind::kGpt;
    if (model == ModelKind::kClassifier) {
      base.data = TrainConfig().data;  // the fortunes: documents in categories
      base.model.classes = 2;
    }
    Weights want;
    const std::vector<double> reference = TrainCollecting(base, want);
    const std::vector<MeshRun> runs = model == ModelKind::kGpt
                                          ? std::vector<MeshRun>{{1, 2, 2, "1f1b"},
                                                                 {2, 2, 2, "gpipe"},
                                                                 {2, 2, 2, "interleaved-1f1b"},
                                                                 {2, 2, 2, "zb-h1"},
                                                                 {2, 2, 2, "zb-v"},
                                                                 {2, 2, 2, "dualpipe-v"},
                                                                 {1, 2, 2, "dualpipe"}}
                                          : std::vector<MeshRun>{{2, 2, 2, "1f1b"}};
    for (const MeshRun& run : runs) {
      const TrainConfig c = WithMesh(base, run);
      const std::string what = DescribeRun(c);
      Weights got;
      ExpectSameLosses(reference, TrainCollecting(c, got), what);
      ExpectSameWeights(want, got, c.lr, what);
    }
  }
}

TEST_F(TrainerTest, MeshMustFillTheWorld) {
  TrainConfig c = TinyGpt();
  c.batch_size = 12;
  c.pp = 2;
  c.dp = 2;
  c.schedule = "1f1b";
  auto world = LocalWorld(6);
  auto task = MakeTask(c);
  std::vector<std::string> errors(6);
  RunRankThreads(world, [&](int r) {
    try {
      Trainer trainer(c, task, InProcessRank(world[r].get(), c.device));
    } catch (const UserError& e) {
      errors[r] = e.what();
    }
  });
  for (const std::string& e : errors) {
    EXPECT_EQ(e, "dp 2 x tp 1 x pp 2 = 4 ranks, the world has 6");
  }
  c.dp = 0;  // 6 ranks make 3 replicas of 2
  std::vector<int> replicas(6);
  RunRankThreads(world, [&](int r) {
    Trainer trainer(c, task, InProcessRank(world[r].get(), c.device));
    replicas[r] = trainer.model().mesh().dp();
    EXPECT_EQ(trainer.model().pipeline_rank(),
              r / 3);  // tp-dp-pp: the pipeline rank varies slowest
  });
  EXPECT_EQ(replicas, std::vector<int>(6, 3));
}

// The step records its timeline and adds it to the rank's totals.
TEST_F(TrainerTest, RecordsEveryStep) {
  TrainConfig c = TinyGpt();
  c.pp = 2;
  c.schedule = "1f1b";
  size_t spans = 0;
  std::set<std::string> phases;
  int64_t measured_steps = -1;
  double hop_s = -1;
  TrainOnThreads(c, [&](Trainer& t, Transport&) {
    if (t.model().rank() != 0) return;
    for (const Span& s : t.LastTimeline().spans) spans += s.kind == SpanKind::kRun;
    for (const Phase& p : t.LastTimeline().phases) phases.insert(p.name);
    measured_steps = t.measurements().measured_steps();
    hop_s = t.hop_s();
  });
  EXPECT_EQ(spans, 2u * 4u);  // rank 0: F and B of each of the 4 micro-batches
  EXPECT_EQ(phases,
            (std::set<std::string>{"sum shared grads", "grad norm", "optimizer", "gather loss"}));
  EXPECT_EQ(measured_steps, c.steps - 1) << "every step but the first";
  EXPECT_GT(hop_s, 0);
}

// GPipe on one rank holds every micro-batch's activations at its peak: selective
// recomputation drops the attention scores from them, full keeps only each stage's input.
// The losses stay those of the run that keeps everything.
TEST_F(TrainerTest, RecomputationLowersPeakMemoryAndKeepsTheLosses) {
  std::map<std::string, int64_t> peak;
  std::map<std::string, std::vector<double>> losses;
  for (const Recompute recompute : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    const std::string mode(RecomputeName(recompute));
    TrainConfig c = TinyGpt();
    c.recompute = recompute;
    losses[mode] = TrainOnThreads(
        c, [&](Trainer& t, Transport&) { peak[mode] = t.RankReports()[0].peak_activation_bytes; });
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
  c.model.layers = 1;  // 3 layers cannot fill 2 ranks x 2 chunks
  c.schedule = "zb-v";
  EXPECT_THROW(TrainOnThreads(c), UserError);
  c = TinyGpt();
  c.batch_size = 2;  // fewer samples than micro-batches
  EXPECT_THROW(c.Validate(), UserError);
}

// A weight holding NaN (a diverged run, a bad checkpoint) once trained on with loss -nan to
// the end and exit 0.
TEST_F(TrainerTest, NonFiniteStepStopsTheRunBeforeTheUpdate) {
  const TrainConfig c = TinyGpt();
  Trainer trainer(c, MakeTask(c), InProcessRank(nullptr, c.device));
  const auto params = trainer.model().Parameters();
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
  Trainer trainer(c, MakeTask(c), InProcessRank(nullptr, c.device));
  const auto params = trainer.model().Parameters();
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

TEST_F(TrainerTest, PartitionFollowsTheCostChoice) {
  TrainConfig c = TinyGpt();
  c.pp = 2;
  c.schedule = "1f1b";
  c.partition = PartitionBy::kUniform;
  std::vector<LayerRange> uniform, flops;
  TrainOnThreads(c, [&](Trainer& t, Transport&) {
    if (t.model().rank() == 0) uniform = t.model().partition();
  });
  EXPECT_EQ(uniform[0].size(), 3);  // 6 layers, equal cost
  c.partition = PartitionBy::kFlops;
  TrainOnThreads(c, [&](Trainer& t, Transport&) {
    if (t.model().rank() == 0) flops = t.model().partition();
  });
  // The LM head (2 C V per token with V = 256) outweighs a block at this size.
  EXPECT_GT(flops[0].size(), flops[1].size());
  // Measured times differ per rank; the ranks still agree on one partition.
  c.partition = PartitionBy::kProfile;
  std::vector<std::vector<LayerRange>> profiled(2);
  TrainOnThreads(
      c, [&](Trainer& t, Transport&) { profiled[t.model().rank()] = t.model().partition(); });
  ASSERT_EQ(profiled[0].size(), 2u);
  EXPECT_EQ(profiled[0][0].end, profiled[1][0].end);
  EXPECT_EQ(profiled[0][1].end, 6);
}

// ZeRO stage 1: with the AdamW state sharded across the two replicas, dp2 x pp2 and
// dp2 x tp2 x pp2 train like one process (losses and whole weights), and every rank holds
// half the optimizer state it holds without (to an element of padding).
TEST_F(TrainerTest, ZeroShardedOptimizerTrainsLikeOneProcessOnHalfTheState) {
  TrainConfig base = TinyGpt();
  base.batch_size = 8;
  base.microbatches = 4;
  base.model.tie_embeddings = true;
  Weights want;
  const std::vector<double> reference = TrainCollecting(base, want);
  for (const auto& [tp, schedule] : {std::pair{1, "zb-h1"}, std::pair{2, "1f1b"}}) {
    TrainConfig c = base;
    c.dp = 2;
    c.tp = tp;
    c.pp = 2;
    c.schedule = schedule;
    const std::string what = "dp 2 x tp " + std::to_string(tp) + " x pp 2 " + schedule;
    std::mutex mu;
    std::map<int, int64_t> whole, sharded;
    auto bytes_into = [&](std::map<int, int64_t>& bytes) {
      return [&](Trainer& t, Transport&) {
        std::lock_guard<std::mutex> lock(mu);
        bytes[t.model().rank()] = t.optimizer_state_bytes();
      };
    };
    TrainOnThreads(c, bytes_into(whole));
    c.zero = 1;
    TrainOnThreads(c, bytes_into(sharded));
    Weights got;
    ExpectSameLosses(reference, TrainCollecting(c, got), what);
    ExpectSameWeights(want, got, c.lr, what);
    ASSERT_EQ(whole.size(), 2u * tp * 2);
    ASSERT_EQ(sharded.size(), whole.size());
    for (const auto& [rank, bytes] : whole) {
      EXPECT_GT(bytes, 0) << what;
      // Two float moments: a range is half the elements, rounded either way.
      EXPECT_NEAR(sharded.at(rank), bytes / 2, 2 * 4) << what << " rank " << rank;
    }
  }
}

// ZeRO stage 1 reduce-scatters the gradients of the unshared parameters: each replica
// receives the summed gradient of only its range of them (the two replicas' ranges make up
// the whole), the tied embedding is all-reduced whole, and the gradient norm (above the clip,
// so that it scales the update) is the one the all-reduced gradients give.
TEST_F(TrainerTest, ZeroReduceScattersTheGradientsAndKeepsTheNorm) {
  TrainConfig c = TinyGpt();
  c.batch_size = 8;
  c.microbatches = 4;
  c.model.tie_embeddings = true;
  c.dp = 2;
  c.pp = 2;
  c.schedule = "1f1b";
  std::mutex mu;
  std::map<int, StepMetrics> plain, zero;
  std::map<int, MeshCoords> coords;
  auto step_into = [&](std::map<int, StepMetrics>& metrics) {
    return [&](Trainer& t, Transport&) {
      const StepMetrics m = t.Step();
      std::lock_guard<std::mutex> lock(mu);
      metrics[t.model().rank()] = m;
      coords[t.model().rank()] = t.model().coords();
    };
  };
  TrainOnThreads(c, step_into(plain));
  c.zero = 1;
  TrainOnThreads(c, step_into(zero));
  ASSERT_EQ(zero.size(), 4u);
  std::map<int, int64_t> kept_by_stage;  // pipeline rank -> both replicas' kept bytes
  for (const auto& [rank, m] : zero) {
    const StepMetrics& p = plain.at(rank);
    EXPECT_EQ(p.dp.scattered_bytes, 0) << "rank " << rank;
    EXPECT_GT(p.grad_norm, c.clip) << "rank " << rank;
    EXPECT_NEAR(m.grad_norm, p.grad_norm, 1e-6 * p.grad_norm) << "rank " << rank;
    EXPECT_EQ(m.dp.bytes, p.dp.bytes) << "rank " << rank;
    // The tied embedding (on both pipeline ranks) is all-reduced, the rest reduce-scattered.
    EXPECT_GT(m.dp.scattered_bytes, 0) << "rank " << rank;
    EXPECT_LT(m.dp.scattered_bytes, m.dp.bytes) << "rank " << rank;
    EXPECT_GT(m.dp.scattered_kept_bytes, 0) << "rank " << rank;
    EXPECT_LT(m.dp.scattered_kept_bytes, m.dp.scattered_bytes) << "rank " << rank;
    kept_by_stage[coords.at(rank).pp] += m.dp.scattered_kept_bytes;
  }
  for (const auto& [rank, m] : zero) {
    EXPECT_EQ(kept_by_stage.at(coords.at(rank).pp), m.dp.scattered_bytes)
        << "the replicas' ranges make up the whole: rank " << rank;
  }
}

// A --zero 1 checkpoint holds the whole state: it resumes with --zero 1 and on one process
// with the uninterrupted losses.
TEST_F(TrainerTest, ZeroShardedCheckpointResumes) {
  TrainConfig c = TinyGpt();
  c.batch_size = 8;
  c.microbatches = 4;
  c.steps = 5;
  c.dp = 2;
  c.pp = 2;
  c.schedule = "1f1b";
  c.zero = 1;
  const std::vector<double> full = TrainOnThreads(c);
  const std::string dir = ::testing::TempDir() + "conveyor_zero_ckpt_" + std::to_string(::getpid());
  RemoveTree(dir);
  TrainOnThreads(
      c, [&](Trainer& t, Transport& w) { SaveCheckpoint(dir, t, c, &w); }, 3);
  for (const int dp : {2, 1}) {
    TrainConfig other = c;
    other.dp = dp;
    other.zero = dp == 2 ? 1 : 0;
    other.resume = dir;
    const std::vector<double> rest = TrainOnThreads(other);
    ASSERT_EQ(rest.size(), 2u);
    for (int k = 0; k < 2; ++k) {
      EXPECT_NEAR(rest[k], full[3 + k], 2e-5 * full[3 + k]) << "dp " << dp << " step " << 4 + k;
    }
  }
  RemoveTree(dir);
}

}  // namespace
}  // namespace conveyor
