// The models learn the real corpus: a GPT's loss falls clearly, and the classifier beats
// the majority class on the held-out split. Small sizes; skipped without the fortunes.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "conveyor/data/corpus.h"
#include "conveyor/train/builtin_tasks.h"
#include "conveyor/train/evaluate.h"
#include "conveyor/train/train_testing.h"

namespace conveyor {
namespace {

class LearningTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kFortunesDir)) {
      GTEST_SKIP() << "no fortunes corpus at " << kFortunesDir << " (apt-get install fortunes)";
    }
    at::set_num_threads(1);
  }
};

TEST_F(LearningTest, GptLossFallsOnFortunes) {
  TrainConfig c = TinyGpt();
  c.data = "fortunes";
  c.model.hidden = 32;
  c.model.seq_len = 32;
  c.batch_size = 16;
  c.steps = 30;
  c.warmup_steps = 5;
  c.pp = 2;
  c.schedule = "1f1b";
  const std::vector<double> losses = TrainOnThreads(c);
  ASSERT_EQ(losses.size(), 30u);
  EXPECT_GT(losses.front(), 5.0);  // about ln 256 = 5.5 at the start
  EXPECT_LT(losses.back(), losses.front() - 1.5);
}

TEST_F(LearningTest, ClassifierBeatsTheMajorityClass) {
  TrainConfig c;
  c.model.kind = ModelKind::kClassifier;
  c.model.layers = 2;
  c.model.hidden = 32;
  c.model.heads = 2;
  c.model.seq_len = 48;
  c.batch_size = 32;
  c.microbatches = 4;
  c.steps = 60;
  c.warmup_steps = 5;
  c.lr = 2e-3;
  c.pp = 2;
  c.schedule = "1f1b";
  c.timeout_s = 120;
  EvalMetrics eval;
  double baseline = 0;
  TrainOnThreads(c, [&](Trainer& t, Transport&) {
    ForwardPipeline forward(t.model());
    const EvalMetrics e = Evaluate(forward, t.task(), t.step());
    if (t.model().rank() == 0) eval = e;
  });
  baseline = MakeTask(c)->BaselineAccuracy();
  EXPECT_GT(baseline, 0.2);
  EXPECT_GT(eval.accuracy, baseline + 0.1) << "majority class " << baseline;
}

}  // namespace
}  // namespace conveyor
