// Real model shapes train like one process: a Llama and a GPT-2 under every schedule family,
// a Llama with fewer key-value heads than tensor-parallel ranks and a padded vocabulary, and
// a tokenized data set on any mesh (trainer_test.cc holds the trainer's own mechanics).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "conveyor/common/remove_tree.h"
#include "conveyor/data/indexed_dataset.h"
#include "conveyor/train/builtin_tasks.h"
#include "conveyor/train/checkpoint.h"
#include "conveyor/train/train_testing.h"

namespace conveyor {
namespace {

class TrainerModelsTest : public ::testing::Test {
 protected:
  void SetUp() override { at::set_num_threads(1); }
};

// `base` trains like one process under every schedule family and on a dp x tp x pp mesh:
// the same losses and the same weights.
void ExpectEveryScheduleTrainsLikeOneProcess(const TrainConfig& base, const std::string& name) {
  Weights want;
  const std::vector<double> reference = TrainCollecting(base, want);
  ASSERT_EQ(reference.size(), 3u);
  EXPECT_LT(reference.back(), reference.front());
  struct Run {
    int dp, tp, pp;
    const char* schedule;
  };
  for (const Run& run : {Run{1, 1, 2, "1f1b"}, Run{1, 1, 2, "interleaved-1f1b"},
                         Run{1, 1, 3, "zb-h1"}, Run{1, 1, 2, "zb-v"}, Run{1, 1, 2, "dualpipe-v"},
                         Run{1, 1, 2, "dualpipe"}, Run{2, 2, 2, "zb-h2"}}) {
    TrainConfig c = base;
    c.dp = run.dp;
    c.tp = run.tp;
    c.pp = run.pp;
    c.schedule = run.schedule;
    const std::string what = name + " dp " + std::to_string(run.dp) + " x tp " +
                             std::to_string(run.tp) + " x pp " + std::to_string(run.pp) + " " +
                             run.schedule;
    Weights got;
    ExpectSameLosses(reference, TrainCollecting(c, got), what);
    ExpectSameWeights(want, got, c.lr, what);
  }
}

// A Llama: grouped-query attention, untied.
TEST_F(TrainerModelsTest, LlamaTrainsLikeOneProcessUnderEverySchedule) {
  ExpectEveryScheduleTrainsLikeOneProcess(TinyLlama(), "llama");
}

// A GPT-2 as a Hugging Face folder describes one: GELU's tanh form, a tied head, a
// vocabulary of its own and more positions than the sequence.
TEST_F(TrainerModelsTest, Gpt2TrainsLikeOneProcessUnderEverySchedule) {
  TrainConfig gpt2 = TinyGpt();
  gpt2.model.gelu_tanh = true;
  gpt2.model.tie_embeddings = true;
  gpt2.model.vocab = 301;  // odd: padded to 151 rows a rank at tp 2
  gpt2.model.positions = 2 * gpt2.model.seq_len;
  gpt2.batch_size = 8;
  ExpectEveryScheduleTrainsLikeOneProcess(gpt2, "gpt2");
}

// A tokenized data set of 400 documents of token ids below 301 (a GPT-2-like vocabulary),
// written by the test into `prefix`, and TinyGpt's run on it.
TrainConfig TokenDataSetRun(const std::string& prefix) {
  IndexedDatasetWriter writer(prefix, 301);
  for (int64_t j = 0; j < 400; ++j) {
    std::vector<int64_t> tokens;
    for (int64_t k = 0; k < 20 + j % 13; ++k) tokens.push_back((j * 31 + k * k) % 301);
    writer.AddDocument(tokens);
  }
  writer.Finish();
  TrainConfig c = TinyGpt();
  c.model.vocab = 301;
  c.data = prefix;
  c.split = "90,10,0";
  c.batch_size = 8;
  return c;
}

// Training from a tokenized data set: the global batch of a step is a function of the seed
// and the step alone (any dp, micro-batch count or restart gives the same token ids), so a
// mesh trains like one process on it.
TEST_F(TrainerModelsTest, ATokenDataSetTrainsLikeOneProcessOnAnyMesh) {
  const std::string prefix = ::testing::TempDir() + "conveyor_tokens_" + std::to_string(getpid());
  TrainConfig base = TokenDataSetRun(prefix);
  const Batch first = MakeTask(base)->TrainBatch(2);
  for (const auto& [dp, microbatches] : {std::pair{2, 2}, std::pair{4, 2}, std::pair{1, 8}}) {
    TrainConfig c = base;
    c.dp = dp;
    c.microbatches = microbatches;
    const Batch again = MakeTask(c)->TrainBatch(2);  // a fresh task: as after a restart
    EXPECT_TRUE(at::equal(again.inputs, first.inputs)) << "dp " << dp << " m " << microbatches;
    EXPECT_TRUE(at::equal(again.targets, first.targets));
  }
  // The order is the seed's: these are step 2's first windows' first tokens for the default
  // seed (a change of the sampler changes every run's data; it must be deliberate).
  const at::Tensor heads = first.inputs.select(1, 0).slice(0, 0, 4).contiguous();
  EXPECT_TRUE(at::equal(heads, at::tensor({135, 42, 190, 38}, at::kLong))) << heads;
  Weights want;
  const std::vector<double> reference = TrainCollecting(base, want);
  for (const auto& [dp, tp, pp] : {std::tuple{2, 1, 2}, std::tuple{1, 2, 2}}) {
    TrainConfig c = base;
    c.dp = dp;
    c.tp = tp;
    c.pp = pp;
    c.schedule = "1f1b";
    const std::string what =
        "dp " + std::to_string(dp) + " x tp " + std::to_string(tp) + " x pp " + std::to_string(pp);
    Weights got;
    ExpectSameLosses(reference, TrainCollecting(c, got), what);
    ExpectSameWeights(want, got, c.lr, what);
  }
  std::filesystem::remove(prefix + ".bin");
  std::filesystem::remove(prefix + ".idx");
}

// Records every share of a batch the trainers ask for, by (step, replica), and checks that
// every rank of a replica asked for the same rows.
class RecordingTask : public TrainTask {
 public:
  explicit RecordingTask(std::shared_ptr<const TrainTask> task) : task_(std::move(task)) {}
  std::shared_ptr<const ModelTask> model() const override { return task_->model(); }
  Batch TrainBatch(int64_t step) const override { return task_->TrainBatch(step); }
  ReplicaBatch TrainShare(int64_t step, int replica, int replicas) const override {
    ReplicaBatch share = task_->TrainShare(step, replica, replicas);
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, fresh] = fed_.try_emplace({step, replica}, share.rows.inputs.clone());
    EXPECT_TRUE(fresh || at::equal(it->second, share.rows.inputs)) << "step " << step;
    return share;
  }
  std::vector<Batch> EvalBatches() const override { return task_->EvalBatches(); }
  double TokensPerBatch() const override { return task_->TokensPerBatch(); }
  std::string Describe() const override { return task_->Describe(); }

  // The token ids fed at `step`: every replica's rows, in replica order.
  at::Tensor Fed(int64_t step, int replicas) const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<at::Tensor> rows;
    for (int r = 0; r < replicas; ++r) {
      const auto it = fed_.find({step, r});
      if (it == fed_.end()) return at::Tensor();
      rows.push_back(it->second);
    }
    return at::cat(rows);
  }

 private:
  std::shared_ptr<const TrainTask> task_;
  mutable std::mutex mu_;
  mutable std::map<std::pair<int64_t, int>, at::Tensor> fed_;
};

// What the trainers feed, step by step: the same token ids for any dp and micro-batch count,
// and after a resume on another mesh, as one process's run.
TEST_F(TrainerModelsTest, EveryStepFeedsTheSameTokensOnAnyMeshAndAfterAResume) {
  const std::string prefix = ::testing::TempDir() + "conveyor_fed_" + std::to_string(getpid());
  TrainConfig base = TokenDataSetRun(prefix);
  base.steps = 4;
  auto fed = [](const TrainConfig& c, int64_t stop_at = 0,
                const std::function<void(Trainer&, Transport&)>& after = {}) {
    auto task = std::make_shared<RecordingTask>(MakeTask(c));
    TrainOnThreads(c, after, stop_at, task);
    return task;
  };
  const auto reference = fed(base);
  for (int64_t step = 0; step < base.steps; ++step) ASSERT_TRUE(reference->Fed(step, 1).defined());
  for (const auto& [dp, pp, microbatches] :
       {std::tuple{2, 1, 2}, std::tuple{4, 1, 2}, std::tuple{1, 2, 8}, std::tuple{2, 2, 4}}) {
    TrainConfig c = base;
    c.dp = dp;
    c.pp = pp;
    c.microbatches = microbatches;
    c.schedule = "1f1b";
    const auto run = fed(c);
    for (int64_t step = 0; step < base.steps; ++step) {
      const at::Tensor got = run->Fed(step, dp);
      ASSERT_TRUE(got.defined()) << "dp " << dp << " step " << step;
      EXPECT_TRUE(at::equal(got, reference->Fed(step, 1)))
          << "dp " << dp << " pp " << pp << " m " << microbatches << " step " << step;
    }
  }
  // Stopped after step 2 on one process, resumed on dp 2 x pp 2: steps 3 and 4 as before.
  const std::string dir = prefix + "_ckpt";
  TrainConfig first = base;
  fed(first, 2, [&](Trainer& t, Transport& world) { SaveCheckpoint(dir, t, first, &world); });
  TrainConfig resumed = base;
  resumed.dp = 2;
  resumed.pp = 2;
  resumed.schedule = "1f1b";
  resumed.microbatches = 2;
  resumed.resume = dir + "/step-000002";
  const auto rest = fed(resumed);
  EXPECT_FALSE(rest->Fed(1, 2).defined());  // nothing before the checkpoint is read again
  for (int64_t step = 2; step < base.steps; ++step) {
    EXPECT_TRUE(at::equal(rest->Fed(step, 2), reference->Fed(step, 1))) << "step " << step;
  }
  RemoveTree(dir);
  std::filesystem::remove(prefix + ".bin");
  std::filesystem::remove(prefix + ".idx");
}

// A Llama of 2 key-value heads over 4 tensor-parallel ranks (each head on 2 of them, their
// weight gradients summed) and a vocabulary of 301 tokens (76 rows a rank, 3 of padding), with
// split backward and data parallelism: trains like one process, the clipped norm included.
TEST_F(TrainerModelsTest, ALlamaWithMoreTpRanksThanKeyValueHeadsTrainsLikeOneProcess) {
  TrainConfig base = TinyLlama();  // 4 heads, 2 key-value heads
  base.model.vocab = 301;
  base.clip = 0.05;  // the norm must count each replicated head once to clip alike
  Weights want;
  const std::vector<double> reference = TrainCollecting(base, want);
  struct Run {
    int dp, tp, pp;
    const char* schedule;
  };
  for (const Run& run : {Run{1, 4, 2, "zb-h1"}, Run{2, 4, 1, "gpipe"}}) {
    TrainConfig c = base;
    c.dp = run.dp;
    c.tp = run.tp;
    c.pp = run.pp;
    c.schedule = run.schedule;
    const std::string what = "llama dp " + std::to_string(run.dp) + " x tp 4 x pp " +
                             std::to_string(run.pp) + " " + run.schedule;
    Weights got;
    ExpectSameLosses(reference, TrainCollecting(c, got), what);
    ExpectSameWeights(want, got, c.lr, what);
  }
}

}  // namespace
}  // namespace conveyor
