#include "conveyor/train/evaluate.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "conveyor/train/train_testing.h"

namespace conveyor {
namespace {

// The held-out loss after training, as rank `rank` reports it.
EvalMetrics EvaluateAfterTraining(const TrainConfig& c, int rank = 0) {
  EvalMetrics result;
  TrainOnThreads(c, [&](Trainer& t, Transport&) {
    ForwardPipeline forward(t);
    const EvalMetrics first = Evaluate(forward);
    const EvalMetrics second = Evaluate(forward);  // reuses the programs
    EXPECT_EQ(first.loss, second.loss);
    EXPECT_EQ(forward.built_programs(),
              1);  // every batch has the same micro-batch count
    if (t.rank() == rank) result = first;
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

}  // namespace
}  // namespace conveyor
