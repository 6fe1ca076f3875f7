#include "conveyor/train/forward_pipeline.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <vector>

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

}  // namespace
}  // namespace conveyor
