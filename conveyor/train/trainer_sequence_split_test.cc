// The sequence split in training: sequence parallelism (nn/tensor_parallel.h: the activations
// outside the tensor-parallel regions split along the sequence) and context parallelism
// (nn/context_parallel.h: each sequence over cp ranks, attention by ring) change where each
// number is computed, not what it is: the losses and the whole weights after AdamW steps are
// one process's, under every schedule family, with data parallelism, ZeRO-1, recomputation,
// checkpoints and evaluation.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <tuple>
#include <vector>

#include "conveyor/common/error.h"
#include "conveyor/common/remove_tree.h"
#include "conveyor/train/checkpoint.h"
#include "conveyor/train/evaluate.h"
#include "conveyor/train/train_testing.h"

namespace conveyor {
namespace {

struct Run {
  int dp, tp, pp;
  std::string schedule;
  int zero = 0;
  Recompute recompute = Recompute::kNone;
  int cp = 1;
  bool sequence_parallel = true;  // where tp > 1
};

std::string Describe(const TrainConfig& c) {
  return std::string(ModelKindName(c.model.kind)) + " dp " + std::to_string(c.dp) + " x cp " +
         std::to_string(c.cp) + " x tp " + std::to_string(c.tp) + " x pp " + std::to_string(c.pp) +
         " " + c.schedule + " zero " + std::to_string(c.zero) + " recompute " +
         std::string(RecomputeName(c.recompute)) +
         (c.sequence_parallel ? ", sequence parallel" : "");
}

// Trains `base` on one process, then at each run: the same losses and weights.
void ExpectRunsTrainAsOneProcess(const TrainConfig& base, const std::vector<Run>& runs) {
  Weights want;
  const std::vector<double> reference = TrainCollecting(base, want);
  for (const Run& run : runs) {
    TrainConfig c = base;
    c.dp = run.dp;
    c.tp = run.tp;
    c.pp = run.pp;
    c.schedule = run.schedule;
    c.zero = run.zero;
    c.recompute = run.recompute;
    c.cp = run.cp;
    c.sequence_parallel = run.sequence_parallel && run.tp > 1;
    Weights got;
    ExpectSameLosses(reference, TrainCollecting(c, got), Describe(c));
    ExpectSameWeights(want, got, c.lr, Describe(c));
  }
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
  Weights plain, split;
  const std::vector<double> want = TrainCollecting(c, plain);
  c.sequence_parallel = true;
  ExpectSameLosses(want, TrainCollecting(c, split), Describe(c));
  ExpectSameWeights(plain, split, 10 * c.lr, Describe(c));
}

// In bf16 the products round alike with and without it: within bf16's steps of each other.
TEST(TrainerSequenceSplitTest, Bf16TrainsAsTensorParallelismWithoutIt) {
  at::set_num_threads(1);
  TrainConfig c = TinyGpt();
  c.dtype = ComputeDtype::kBf16;
  c.tp = 2;
  c.pp = 2;
  c.schedule = "1f1b";
  Weights plain, split;
  const std::vector<double> want = TrainCollecting(c, plain);
  c.sequence_parallel = true;
  ExpectSameLosses(want, TrainCollecting(c, split), Describe(c), 1e-2);
  ExpectSameWeights(plain, split, c.lr, Describe(c), 1e-2);
}

// A checkpoint saved under sequence parallelism is the one tensor parallelism saves: it
// resumes with or without it, at another tp, and continues as the uninterrupted run; the
// evaluation loss under it is one process's on every rank.
TEST(TrainerSequenceSplitTest, CheckpointsResumeAtAnyLayoutAndEvaluationIsOneProcesss) {
  at::set_num_threads(1);
  const std::string dir = ::testing::TempDir() + "conveyor_sp_ckpt_" + std::to_string(::getpid());
  RemoveTree(dir);
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
    ExpectSameLosses({full.begin() + 3, full.end()}, rest, Describe(resumed));
    ExpectSameWeights(want, got, base.lr, Describe(resumed));
  }
  RemoveTree(dir);

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
