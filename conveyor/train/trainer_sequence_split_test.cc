// The sequence split in training: sequence parallelism (nn/tensor_parallel.h: the activations
// outside the tensor-parallel regions split along the sequence) and context parallelism
// (nn/context_parallel.h: each sequence over cp ranks, attention by ring) change where each
// number is computed, not what it is: the losses and the whole weights after AdamW steps are
// one process's, under every schedule family, with data parallelism, ZeRO-1, recomputation,
// checkpoints and evaluation.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "conveyor/common/error.h"
#include "conveyor/common/scratch_folder_testing.h"
#include "conveyor/train/checkpoint.h"
#include "conveyor/train/evaluate.h"
#include "conveyor/train/train_testing.h"

namespace conveyor {
namespace {

// Trains `base` on one process, then at each run (sequence parallel where its tp splits, unless
// it says otherwise): the same losses and weights.
void ExpectRunsTrainAsOneProcess(const TrainConfig& base, const std::vector<MeshRun>& runs) {
  Weights want;
  const std::vector<double> reference = TrainCollecting(base, want);
  for (const MeshRun& run : runs) {
    TrainConfig c = WithMesh(base, run);
    c.sequence_parallel = run.sequence_parallel.value_or(true) && run.tp > 1;
    Weights got;
    ExpectSameLosses(reference, TrainCollecting(c, got), DescribeRun(c));
    ExpectSameWeights(want, got, c.lr, DescribeRun(c));
  }
}

// Trains `c` (tp > 1) with tensor parallelism alone, then with sequence parallelism: the
// losses within `loss_relative`, the weights within `lr_steps` AdamW steps and
// `weight_relative`.
void ExpectSequenceParallelTrainsAsWithout(TrainConfig c, double lr_steps, double loss_relative,
                                           double weight_relative) {
  Weights plain, split;
  const std::vector<double> want = TrainCollecting(c, plain);
  c.sequence_parallel = true;
  ExpectSameLosses(want, TrainCollecting(c, split), DescribeRun(c), loss_relative);
  ExpectSameWeights(plain, split, lr_steps * c.lr, DescribeRun(c), weight_relative);
}

// A GPT with tied embeddings (its position table and norms on each rank's positions) over
// every schedule family, split backward (ZB) and overlapped pairs (DualPipe) among them.
TEST(TrainerSequenceSplitTest, GptTrainsAsOneProcessUnderEveryScheduleFamily) {
  at::set_num_threads(1);
  TrainConfig base = TinyGpt();
  base.batch_size = 8;
  base.microbatches = 4;
  base.model.tie_embeddings = true;
  ExpectRunsTrainAsOneProcess(base, {{1, 2, 2, "1f1b"},
                                     {2, 2, 2, "gpipe"},
                                     {1, 2, 2, "interleaved-1f1b"},
                                     {2, 2, 2, "zb-h1"},
                                     {1, 2, 2, "zb-v"},
                                     {2, 2, 2, "dualpipe-v"},
                                     {1, 2, 2, "dualpipe"},
                                     {2, 2, 1, "1f1b", /*zero=*/1},
                                     {1, 2, 2, "1f1b", 0, Recompute::kFull},
                                     {1, 2, 2, "zb-h1", 0, Recompute::kSelective}});
}

// A Llama: key-value heads split at tp 2 and replicated at tp 4 (2 of them), with data and
// pipeline parallelism.
TEST(TrainerSequenceSplitTest, LlamaTrainsAsOneProcessAtTp2And4) {
  at::set_num_threads(1);
  TrainConfig base = TinyLlama();
  base.microbatches = 4;
  ExpectRunsTrainAsOneProcess(base, {{1, 2, 2, "1f1b"}, {1, 4, 2, "zb-h1"}, {2, 4, 1, "gpipe"}});
}

// Qwen3's per-head query and key norms (their gradients summed over the TP ranks, each
// rank's covering its heads): with sequence parallelism as without, the losses to fp32's
// rounding. The weights within a tenth of an AdamW step: a few entries' gradients (the norms'
// cancel) are near AdamW's epsilon, where two summation orders' rounding moves an update by a
// few percent (seen up to 5% after 3 steps, 2% after one, run to run; tp 4 against one
// process alike). nn's test compares the gradients themselves, to 1e-5.
TEST(TrainerSequenceSplitTest, PerHeadNormsTrainAsTensorParallelismWithoutIt) {
  at::set_num_threads(1);
  TrainConfig c = TinyLlama();
  c.model.qk_norm = "head";
  c.microbatches = 4;
  c.tp = 4;
  c.pp = 2;
  c.schedule = "1f1b";
  ExpectSequenceParallelTrainsAsWithout(c, /*lr_steps=*/10, /*loss_relative=*/2e-5,
                                        /*weight_relative=*/1e-4);
}

// In bf16 the products round alike with and without it: losses within bf16's steps of each
// other, weights within a tenth of an AdamW step (an entry whose gradient is near zero moves
// by a visible part of a step when bf16 rounds its gradient otherwise: 2% of one with
// libtorch 2.6's kernels).
TEST(TrainerSequenceSplitTest, Bf16TrainsAsTensorParallelismWithoutIt) {
  at::set_num_threads(1);
  TrainConfig c = TinyGpt();
  c.dtype = ComputeDtype::kBf16;
  c.tp = 2;
  c.pp = 2;
  c.schedule = "1f1b";
  ExpectSequenceParallelTrainsAsWithout(c, /*lr_steps=*/10, /*loss_relative=*/1e-2,
                                        /*weight_relative=*/1e-2);
}

// A checkpoint saved under sequence parallelism is the one tensor parallelism saves: it
// resumes with or without it, at another tp, and continues as the uninterrupted run; the
// evaluation loss under it is one process's on every rank.
TEST(TrainerSequenceSplitTest, CheckpointsResumeAtAnyLayoutAndEvaluationIsOneProcesss) {
  at::set_num_threads(1);
  const ScratchFolder scratch;
  const std::string dir = scratch.Path("checkpoint");
  TrainConfig base = TinyLlama();
  base.steps = 4;
  base.microbatches = 4;
  Weights want;
  const std::vector<double> full = TrainCollecting(base, want);
  TrainConfig saved = base;
  saved.cp = 2;
  saved.tp = 2;
  saved.pp = 2;
  saved.schedule = "1f1b";
  saved.sequence_parallel = true;
  TrainOnThreads(
      saved, [&](Trainer& t, Transport& w) { SaveCheckpoint(dir, t, saved, &w); }, 3);
  for (const auto& [cp, tp, sequence_parallel] : std::vector<std::tuple<int, int, bool>>{
           {1, 1, false}, {1, 2, false}, {1, 4, true}, {4, 1, false}}) {
    TrainConfig resumed = base;
    resumed.cp = cp;
    resumed.tp = tp;
    resumed.sequence_parallel = sequence_parallel;
    resumed.resume = dir;
    Weights got;
    const std::vector<double> rest = TrainCollecting(resumed, got);
    ExpectSameLosses({full.begin() + 3, full.end()}, rest, DescribeRun(resumed));
    ExpectSameWeights(want, got, base.lr, DescribeRun(resumed));
  }

  TrainConfig c = TinyLlama();
  c.steps = 1;
  c.eval_batches = 2;
  const std::vector<EvalMetrics> one = EvaluateOnThreads(c);
  ASSERT_EQ(one.size(), 1u);
  c.cp = 2;
  c.tp = 2;
  c.pp = 2;
  c.schedule = "1f1b";
  c.sequence_parallel = true;
  const std::vector<EvalMetrics> split = EvaluateOnThreads(c);
  EXPECT_EQ(split.size(), 8u);
  for (const EvalMetrics& m : split) EXPECT_NEAR(m.loss, one[0].loss, 2e-5 * one[0].loss);
}

// Context parallelism: cp 2 and 4 alone, with pipelines and replicas, with TP (with and
// without sequence parallelism), ZeRO-1, the zero-bubble split backward and full
// recomputation (the ring runs again in the backward).
TEST(TrainerSequenceSplitTest, ContextParallelLlamaTrainsAsOneProcess) {
  at::set_num_threads(1);
  TrainConfig base = TinyLlama();
  base.microbatches = 4;
  ExpectRunsTrainAsOneProcess(
      base, {{1, 1, 1, "1f1b", 0, Recompute::kNone, /*cp=*/2},
             {1, 1, 1, "1f1b", 0, Recompute::kNone, 4},
             {1, 1, 2, "1f1b", 0, Recompute::kNone, 2},
             {2, 1, 2, "zb-h1", 0, Recompute::kNone, 2},
             {1, 2, 2, "interleaved-1f1b", 0, Recompute::kNone, 2},
             {1, 2, 2, "gpipe", 0, Recompute::kNone, 2, /*sequence_parallel=*/false},
             {2, 1, 1, "1f1b", /*zero=*/1, Recompute::kNone, 2},
             {1, 1, 2, "1f1b", 0, Recompute::kFull, 2},
             {1, 1, 2, "zb-v", 0, Recompute::kNone, 4}});
}

// Refused before a rank starts, naming the setting and the numbers.
TEST(TrainerSequenceSplitTest, LayoutsItCannotSplitAreRefusedByName) {
  const auto refusal = [](const TrainConfig& c) -> std::string {
    try {
      c.Validate();
    } catch (const UserError& e) {
      return e.what();
    }
    return "accepted";
  };
  TrainConfig c = TinyGpt();
  c.sequence_parallel = true;
  EXPECT_NE(refusal(c).find("needs --tp 2 or more"), std::string::npos) << refusal(c);
  c.tp = 2;
  c.model.seq_len = 15;
  EXPECT_NE(refusal(c).find("--seq-len 15 must divide by it"), std::string::npos) << refusal(c);
  c = TinyGpt();
  c.sequence_parallel = true;
  c.tp = 2;
  c.model.kind = ModelKind::kClassifier;
  c.model.classes = 2;
  EXPECT_NE(refusal(c).find("pools whole sequences"), std::string::npos) << refusal(c);
  c = TinyGpt();
  c.cp = 2;
  EXPECT_NE(refusal(c).find("runs a Llama without experts"), std::string::npos) << refusal(c);
  c = TinyLlama();
  c.cp = 3;
  EXPECT_NE(refusal(c).find("--seq-len 16 must divide by 6"), std::string::npos) << refusal(c);
  c.cp = 4;
  c.tp = 4;
  c.sequence_parallel = true;
  c.model.seq_len = 24;  // 8 chunks of 3: 6 tokens a CP rank, not 4 TP ranks' whole share
  EXPECT_NE(refusal(c).find("--seq-len 24 / --cp 4 must divide by it"), std::string::npos)
      << refusal(c);
}

}  // namespace
}  // namespace conveyor
