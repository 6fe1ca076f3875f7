#include "conveyor/train/forward_pipeline.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <vector>

#include "conveyor/profile/memory_tracker.h"
#include "conveyor/train/builtin_tasks.h"
#include "conveyor/train/train_testing.h"

namespace conveyor {
namespace {

std::vector<MicroBatch> Copies(const at::Tensor& inputs, int count) {
  std::vector<MicroBatch> mbs(count);
  for (int i = 0; i < count; ++i) {
    mbs[i].index = i;
    mbs[i].inputs = inputs;
  }
  return mbs;
}

// One program per micro-batch count, reused whatever the micro-batches' shapes; the outputs
// are those of a pipeline built for the call alone.
TEST(ForwardPipelineTest, BuildsOneProgramPerMicroBatchCount) {
  at::set_num_threads(1);
  TrainConfig c = TinyGpt();
  c.pp = 2;
  c.schedule = "1f1b";
  const at::Tensor longer = at::arange(12, at::kLong).reshape({2, 6});
  const at::Tensor shorter = at::arange(5, at::kLong).reshape({1, 5});
  std::vector<at::Tensor> reused(2), fresh(2), shorter_out(2);
  std::vector<int> built(2);
  TrainOnThreads(c, [&](Trainer& t, Transport&) {
    ForwardPipeline forward(t.model());
    const auto first = forward.Run(Copies(longer, 1));
    const auto pair = forward.Run(Copies(longer, 2));
    const auto again = forward.Run(Copies(shorter, 1));
    const auto last = forward.Run(Copies(longer, 1));
    built[t.model().rank()] = forward.built_programs();
    ForwardPipeline alone(t.model());
    const auto expected = alone.Run(Copies(longer, 1));
    if (t.model().rank() == 1) {  // the last stage's rank
      ASSERT_EQ(last.outputs.size(), 1u);
      ASSERT_EQ(pair.outputs.size(), 2u);
      reused[0] = last.outputs.at(0);
      reused[1] = pair.outputs.at(1);
      fresh[0] = expected.outputs.at(0);
      fresh[1] = first.outputs.at(0);
      shorter_out[1] = again.outputs.at(0);
    } else {
      EXPECT_TRUE(last.outputs.empty()) << "rank 0 holds no last stage";
    }
  });
  EXPECT_EQ(built[0], 2);
  EXPECT_EQ(built[1], 2);
  EXPECT_TRUE(at::equal(reused[0], fresh[0]));
  EXPECT_TRUE(at::equal(reused[1], fresh[1]));
  EXPECT_EQ(shorter_out[1].sizes(), (std::vector<int64_t>{1, 5, 256}));
}

// Without keep_outputs (evaluation of a language model) the logits go once their loss is
// taken: the same loss, no outputs, and less memory held at the peak than with all of them.
TEST(ForwardPipelineTest, DroppedOutputsGiveTheSameLossWithLessMemory) {
  at::set_num_threads(1);
  ASSERT_TRUE(MemoryTracker::Install());
  TrainConfig c = TinyGpt();
  c.pp = 2;
  c.schedule = "1f1b";
  const at::Tensor inputs = at::arange(64, at::kLong).remainder(50).reshape({4, 16});
  std::vector<MicroBatch> mbs = Copies(inputs, 8);
  for (MicroBatch& mb : mbs) mb.targets = inputs, mb.loss_denominator = 1;
  std::vector<double> kept_loss(2), dropped_loss(2);
  std::vector<size_t> dropped_outputs(2, 99);
  int64_t kept_peak = 0, dropped_peak = 0;
  TrainOnThreads(c, [&](Trainer& t, Transport& world) {
    ForwardPipeline forward(t.model());
    forward.Run(mbs, false);  // built and warm
    // The most held during a run, over what was held before it (rank 0 measures).
    auto measure = [&](bool keep, int64_t* peak) {
      int64_t before = 0;
      world.Barrier();
      if (t.model().rank() == 0)
        MemoryTracker::ResetPeak(), before = MemoryTracker::current_bytes();
      world.Barrier();
      Executor::Inference result = forward.Run(mbs, keep);
      world.Barrier();
      if (t.model().rank() == 0) *peak = MemoryTracker::peak_bytes() - before;
      return result;
    };
    const auto kept = measure(true, &kept_peak);
    const auto dropped = measure(false, &dropped_peak);
    kept_loss[t.model().rank()] = kept.loss;
    dropped_loss[t.model().rank()] = dropped.loss;
    dropped_outputs[t.model().rank()] = dropped.outputs.size();
  });
  EXPECT_EQ(kept_loss, dropped_loss);
  EXPECT_GT(kept_loss[1], 0);
  EXPECT_EQ(dropped_outputs, (std::vector<size_t>{0, 0}));
  // Seven micro-batches' logits (4 x 16 x 256 floats each) fewer at the end of the step. The
  // ranks are threads of one process and its count is the whole process's, so where the
  // other rank's transients fall moves either peak by about one micro-batch's logits (a
  // fresh clone's run under load measured 5.9 of the 7 fewer): at least 4 fewer.
  EXPECT_LT(dropped_peak, kept_peak - 4 * 4 * 16 * 256 * 4);
}

}  // namespace
}  // namespace conveyor
