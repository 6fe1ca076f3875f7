// LoRA fine-tuning (nn/lora.h) through the trainer: the first step's loss is the base
// model's, the adapters train like one process on every mesh and schedule family while the
// base stays bit for bit, only the adapters hold optimizer state, and checkpoints name their
// base (a resume with another is refused).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "conveyor/common/error.h"
#include "conveyor/common/remove_tree.h"
#include "conveyor/common/scratch_folder_testing.h"
#include "conveyor/nn/lora.h"
#include "conveyor/train/builtin_tasks.h"
#include "conveyor/train/checkpoint.h"
#include "conveyor/train/hf_export.h"
#include "conveyor/train/train_testing.h"

namespace conveyor {
namespace {

class TrainerLoraTest : public ::testing::Test {
 protected:
  void SetUp() override { at::set_num_threads(1); }
};

// TinyLlama with rank-4 adapters on every projection (column- and row-parallel ones, in the
// attention and the MLP), at a learning rate that moves them visibly in 3 steps.
TrainConfig TinyLora() {
  TrainConfig c = TinyLlama();
  c.model.lora_rank = 4;
  c.model.lora_alpha = 8;
  c.model.lora_targets = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj";
  c.lr = 1e-2;
  return c;
}

// With B zeros the adapters add exactly nothing: the first step's loss is the base model's,
// bit for bit, for a base drawn from the seed and for one read from a Hugging Face folder
// (whose adapters are drawn, not read).
TEST_F(TrainerLoraTest, TheFirstStepsLossIsTheBaseModels) {
  const TrainConfig drawn = TinyLlama();
  const std::vector<double> plain = TrainOnThreads(drawn, {}, 1);
  const std::vector<double> lora = TrainOnThreads(TinyLora(), {}, 1);
  ASSERT_EQ(plain.size(), 1u);
  ASSERT_EQ(lora.size(), 1u);
  EXPECT_EQ(lora[0], plain[0]);

  ScratchFolder scratch;
  const std::string ckpt = scratch.Path("ckpt"), folder = scratch.Path("folder");
  TrainOnThreads(
      drawn, [&](Trainer& t, Transport& w) { SaveCheckpoint(ckpt, t, drawn, &w); }, 2);
  ExportHfCheckpoint(ckpt, folder, HfWriteOptions{});
  TrainConfig from_folder = drawn;
  SetModel(from_folder, folder, "--model");
  ApplyModelFolder(from_folder);
  TrainConfig lora_from_folder = from_folder;
  lora_from_folder.model.lora_rank = 4;
  const std::vector<double> folder_plain = TrainOnThreads(from_folder, {}, 1);
  const std::vector<double> folder_lora = TrainOnThreads(lora_from_folder, {}, 1);
  ASSERT_EQ(folder_lora.size(), 1u);
  EXPECT_EQ(folder_lora[0], folder_plain.at(0));
  EXPECT_NE(folder_plain[0], plain[0]) << "the folder holds the trained weights";
}

// The adapters after 3 steps are one process's on every mesh and schedule family (1F1B and
// interleaved, zero bubble's split backward, DualPipe and DualPipeV, tensor and data parallelism,
// ZeRO-1, sequence and context parallelism), the losses too; every base weight is its
// initial value bit for bit, and the adapters moved (B from zeros, A after the first step).
TEST_F(TrainerLoraTest, AdaptersTrainLikeOneProcessOnEveryMeshAndScheduleWhileTheBaseStays) {
  const TrainConfig base = TinyLora();
  Weights initial;
  for (const auto& layer : BuildAllLayers(*MakeTask(base)->model())) {
    for (const auto& [name, p] : layer->NamedParameters()) initial[name] = p.detach().clone();
  }
  Weights want;
  const std::vector<double> reference = TrainCollecting(base, want);
  ASSERT_EQ(reference.size(), 3u);
  ASSERT_EQ(want.size(), initial.size());
  int adapters = 0;
  for (const auto& [name, w] : want) {
    if (!IsLoraParameter(name)) continue;
    ++adapters;
    EXPECT_FALSE(at::equal(w, initial.at(name))) << name << " did not train";
  }
  EXPECT_EQ(adapters, 2 * 7 * base.model.layers);
  for (const MeshRun& run :
       {MeshRun{1, 1, 2, "1f1b"}, MeshRun{1, 1, 2, "interleaved-1f1b"}, MeshRun{1, 1, 2, "zb-h1"},
        MeshRun{1, 1, 2, "zb-v"}, MeshRun{1, 1, 2, "dualpipe-v"}, MeshRun{1, 1, 2, "dualpipe"},
        MeshRun{1, 2, 1, "1f1b"}, MeshRun{2, 1, 1, "1f1b"},
        MeshRun{.dp = 2, .tp = 2, .pp = 2, .schedule = "zb-h1", .zero = 1},
        MeshRun{.tp = 2, .sequence_parallel = true}, MeshRun{.cp = 2}}) {
    const TrainConfig c = WithMesh(base, run);
    const std::string what = DescribeRun(c);
    Weights got;
    ExpectSameLosses(reference, TrainCollecting(c, got), what);
    ExpectSameWeights(want, got, c.lr, what);
    for (const auto& [name, w] : got) {
      if (IsLoraParameter(name)) continue;
      EXPECT_TRUE(at::equal(w, initial.at(name))) << what << ": the frozen " << name << " moved";
    }
  }
}

// Only the adapters have gradients and AdamW state; the frozen base has neither.
TEST_F(TrainerLoraTest, OnlyTheAdaptersHoldGradientsAndOptimizerState) {
  const TrainConfig c = TinyLora();
  std::mutex mutex;
  int64_t adapter_numbers = 0, state_numbers = 0;
  std::vector<std::string> frozen_with_grad;
  TrainOnThreads(c, [&](Trainer& t, Transport&) {
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto& [name, p] : t.model().Parameters()) {
      if (IsLoraParameter(name)) {
        EXPECT_TRUE(p.requires_grad()) << name;
        adapter_numbers += p.numel();
      } else if (p.requires_grad() || p.grad().defined()) {
        frozen_with_grad.push_back(name);
      }
    }
    for (const auto& [key, state] : t.optimizer().State()) {
      EXPECT_TRUE(IsLoraParameter(key)) << key << " has optimizer state";
      state_numbers += state.numel();
    }
  });
  EXPECT_TRUE(frozen_with_grad.empty()) << frozen_with_grad.front();
  EXPECT_GT(adapter_numbers, 0);
  EXPECT_EQ(state_numbers, 2 * adapter_numbers);  // exp_avg and exp_avg_sq
}

// A checkpoint names the base its adapters were trained on: with the same base a resume (on
// another mesh) continues as one run; one with another --model folder is refused in one line
// naming both.
TEST_F(TrainerLoraTest, AResumeContinuesAndOneWithAnotherBaseIsRefusedNamingBoth) {
  const std::string dir = ::testing::TempDir() + "conveyor_lora_" + std::to_string(::getpid());
  RemoveTree(dir);
  TrainConfig c = TinyLora();
  const std::vector<double> straight = TrainOnThreads(c);
  TrainOnThreads(
      c, [&](Trainer& t, Transport& w) { SaveCheckpoint(dir, t, c, &w); }, 2);
  c.resume = dir;
  CheckResume(c);  // the same base: drawn from the seed
  const std::vector<double> rest =
      TrainOnThreads(WithMesh(c, {.tp = 2, .pp = 2, .schedule = "1f1b"}));
  ASSERT_EQ(rest.size(), 1u);
  ASSERT_EQ(straight.size(), 3u);
  EXPECT_NEAR(rest[0], straight[2], 2e-5 * straight[2]);
  c.model.model_dir = "/elsewhere/llama-base";
  try {
    CheckResume(c);
    ADD_FAILURE() << "another base was resumed";
  } catch (const UserError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("drawn from the seed"), std::string::npos) << message;
    EXPECT_NE(message.find("/elsewhere/llama-base"), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
  RemoveTree(dir);
}

// The UserError `config.Validate()` throws, "" when it throws none.
std::string RefusalOf(const TrainConfig& config) {
  try {
    config.Validate();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

// Bad LoRA settings are refused before any rank starts, in one line naming the value.
TEST_F(TrainerLoraTest, BadSettingsAreRefusedInOneLineNamingTheValue) {
  EXPECT_EQ(RefusalOf(TinyLora()), "");
  TrainConfig gpt = TinyGpt();
  gpt.model.lora_rank = 4;
  TrainConfig target = TinyLora();
  target.model.lora_targets = "q_proj,wq";
  TrainConfig wide = TinyLora();
  wide.model.lora_rank = 33;  // q_proj is 32 x 32
  TrainConfig rankless = TinyLlama();
  rankless.model.lora_targets = "q_proj";
  const std::vector<std::pair<TrainConfig, std::string>> cases = {
      {gpt, "--lora-rank 4: LoRA adapters are a llama's"},
      {target, "'wq' names no layer"},
      {wide, "--lora-rank 33 exceeds the width of q_proj (32 x 32: at most 32)"},
      {rankless, "without --lora-rank"}};
  for (const auto& [config, want] : cases) {
    const std::string message = RefusalOf(config);
    EXPECT_NE(message.find(want), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace conveyor
