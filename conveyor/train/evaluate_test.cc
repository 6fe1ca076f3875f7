#include "conveyor/train/evaluate.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "conveyor/data/token_windows.h"
#include "conveyor/train/builtin_tasks.h"
#include "conveyor/train/train_testing.h"

namespace conveyor {
namespace {

// The held-out loss after training, as rank `rank` reports it.
EvalMetrics EvaluateAfterTraining(const TrainConfig& c, int rank = 0) {
  EvalMetrics result;
  TrainOnThreads(c, [&](Trainer& t, Transport&) {
    ForwardPipeline forward(t.model());
    const EvalMetrics first = Evaluate(forward, t.task(), t.step());
    const EvalMetrics second = Evaluate(forward, t.task(), t.step());  // reuses the programs
    EXPECT_EQ(first.loss, second.loss);
    EXPECT_EQ(forward.built_programs(),
              1);  // every batch has the same micro-batch count
    if (t.model().rank() == rank) result = first;
  });
  return result;
}

TEST(EvaluateTest, LossDoesNotDependOnScheduleOrPp) {
  at::set_num_threads(1);
  TrainConfig c = TinyGpt();
  const EvalMetrics reference = EvaluateAfterTraining(c);
  EXPECT_EQ(reference.step, c.steps);
  EXPECT_TRUE(std::isfinite(reference.loss) && reference.loss > 0) << reference.loss;
  EXPECT_EQ(reference.accuracy, -1) << "a GPT has no accuracy";
  const std::pair<int, const char*> runs[] = {{2, "1f1b"}, {2, "dualpipe-v"}, {3, "zb-h1"}};
  for (const auto& [pp, schedule] : runs) {
    c.pp = pp;
    c.schedule = schedule;
    for (int rank = 0; rank < pp; ++rank) {
      EXPECT_NEAR(EvaluateAfterTraining(c, rank).loss, reference.loss, 2e-5 * reference.loss)
          << schedule << " pp=" << pp << " rank " << rank;
    }
  }
}

// On dp x tp x pp meshes the replicas share the batches (3 of them: one replica runs two,
// the other one) and sum their losses: every rank reports the loss of one process running
// them all. Were every replica to run every batch, the sum would count each twice.
TEST(EvaluateTest, MeshesShareTheBatchesAndReportTheLossOfOneProcess) {
  at::set_num_threads(1);
  TrainConfig c = TinyGpt();
  c.batch_size = 8;
  c.eval_batches = 3;
  const EvalMetrics reference = EvaluateAfterTraining(c);
  struct Run {
    int dp, tp, pp;
    const char* schedule;
  };
  for (const Run& run : {Run{2, 1, 1, "gpipe"}, Run{2, 2, 2, "1f1b"}, Run{2, 2, 2, "zb-v"}}) {
    c.dp = run.dp;
    c.tp = run.tp;
    c.pp = run.pp;
    c.schedule = run.schedule;
    const std::string what = "dp " + std::to_string(run.dp) + " x tp " + std::to_string(run.tp) +
                             " x pp " + std::to_string(run.pp) + " " + run.schedule;
    std::vector<EvalMetrics> got(run.dp * run.tp * run.pp);
    TrainOnThreads(c, [&](Trainer& t, Transport&) {
      ForwardPipeline forward(t.model());
      got[t.model().rank()] = Evaluate(forward, t.task(), t.step());
    });
    for (size_t rank = 0; rank < got.size(); ++rank) {
      EXPECT_EQ(got[rank].step, c.steps) << what;
      EXPECT_NEAR(got[rank].loss, reference.loss, 2e-5 * reference.loss)
          << what << " rank " << rank;
    }
  }
}

// One held-out batch on two replicas: replica 0 runs it, replica 1 runs nothing (builds no
// program) and still reports its loss.
TEST(EvaluateTest, OnlyTheReplicaOfABatchRunsIt) {
  at::set_num_threads(1);
  TrainConfig c = TinyGpt();
  c.batch_size = 8;
  const EvalMetrics reference = EvaluateAfterTraining(c);
  c.dp = 2;
  std::vector<int> built(2);
  std::vector<double> losses(2);
  TrainOnThreads(c, [&](Trainer& t, Transport&) {
    ForwardPipeline forward(t.model());
    losses[t.model().rank()] = Evaluate(forward, t.task(), t.step()).loss;
    built[t.model().rank()] = forward.built_programs();
  });
  EXPECT_EQ(built, (std::vector<int>{1, 0}));
  for (const double loss : losses) EXPECT_NEAR(loss, reference.loss, 2e-5 * reference.loss);
}

// The classifier's accuracy counts every sample once on a mesh too.
TEST(EvaluateTest, AccuracyOnAMeshIsThatOfOneProcess) {
  at::set_num_threads(1);
  TrainConfig c = TinyGpt();
  c.model.kind = ModelKind::kClassifier;
  c.data = TrainConfig().data;  // the fortunes: documents in categories
  c.model.classes = 2;
  c.batch_size = 8;
  auto evaluate = [&c] {  // world rank 3's metrics (rank 0's with one rank)
    EvalMetrics last;
    TrainOnThreads(c, [&](Trainer& t, Transport&) {
      ForwardPipeline forward(t.model());
      const EvalMetrics e = Evaluate(forward, t.task(), t.step());
      if (t.model().rank() == std::min(3, t.model().mesh().size() - 1)) last = e;
    });
    return last;
  };
  const EvalMetrics reference = evaluate();
  ASSERT_GE(reference.accuracy, 0);
  c.dp = 2;
  c.tp = 2;
  const EvalMetrics mesh = evaluate();
  EXPECT_NEAR(mesh.loss, reference.loss, 2e-5 * reference.loss);
  EXPECT_DOUBLE_EQ(mesh.accuracy, reference.accuracy);
}

}  // namespace
}  // namespace conveyor

namespace conveyor {
namespace {

// The windows' mean loss computed directly: the whole model on one process, every window's
// summed cross-entropy over its counted targets, over their count.
double DirectWindowLoss(const TrainConfig& c, const std::vector<Batch>& windows) {
  const LayerList layers = BuildAllLayers(*MakeModelTask(c));
  double sum = 0, count = 0;
  for (const Batch& b : windows) {
    MicroBatch mb;
    mb.inputs = b.inputs;
    mb.targets = b.targets;
    at::Tensor x = b.inputs;
    for (const auto& layer : layers) x = layer->Forward(x, mb);
    sum += at::cross_entropy_loss(x.reshape({-1, x.size(-1)}), b.targets.reshape({-1}), {},
                                  at::Reduction::Sum, -1)
               .item<double>();
    count += b.targets.ge(0).sum().item<double>();
  }
  return sum / count;
}

// The exact windows' loss is that of the whole model on one process, on every mesh; the
// count is N - 1.
TEST(EvaluateTokensTest, EveryMeshGivesTheDirectLossOfTheWindows) {
  at::set_num_threads(1);
  TrainConfig c = TinyLlama();
  const at::Tensor stream = at::randint(0, 256, {203}, at::kLong);
  const std::vector<Batch> windows = NextTokenWindows(stream, c.model.seq_len, 3);
  const double direct = DirectWindowLoss(c, windows);
  TrainConfig mesh = c;
  mesh.dp = 2;
  mesh.tp = 2;
  mesh.pp = 2;
  mesh.schedule = "1f1b";
  mesh.microbatches = 2;
  TrainConfig pp4 = c;
  pp4.pp = 4;
  pp4.schedule = "interleaved-1f1b";
  pp4.model.layers = 6;
  pp4.chunks = 2;
  pp4.microbatches = 4;
  for (const TrainConfig& config : {c, mesh, pp4}) {
    const double want =
        config.model.layers == c.model.layers ? direct : DirectWindowLoss(config, windows);
    TrainOnThreads(
        config,
        [&](Trainer& t, Transport&) {
          ForwardPipeline forward(t.model());
          const TokenEvalMetrics m = EvaluateTokens(forward, windows);
          EXPECT_EQ(m.tokens, 202);
          EXPECT_NEAR(m.loss, want, 1e-5 * want) << "pp " << config.pp << " tp " << config.tp;
          EXPECT_NEAR(m.perplexity, std::exp(want), 1e-4 * std::exp(want));
        },
        -1);
  }
}

}  // namespace
}  // namespace conveyor
