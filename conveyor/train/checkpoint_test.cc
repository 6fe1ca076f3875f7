#include "conveyor/train/checkpoint.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "conveyor/common/checksum.h"
#include "conveyor/common/remove_tree.h"
#include "conveyor/formats/safetensors.h"
#include "conveyor/train/builtin_tasks.h"
#include "conveyor/train/hf_export.h"
#include "conveyor/train/train_testing.h"

namespace conveyor {
namespace {

namespace fs = std::filesystem;

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    at::set_num_threads(1);
    dir_ = ::testing::TempDir() + "conveyor_ckpt_" + std::to_string(::getpid());
    RemoveTree(dir_);
    config_ = TinyGpt();
    config_.pp = 2;
    config_.schedule = "1f1b";
    config_.steps = 6;
    // Uninterrupted, and interrupted after 3 steps with a checkpoint.
    full_ = TrainOnThreads(config_);
    TrainOnThreads(
        config_, [&](Trainer& t, Transport& w) { SaveCheckpoint(dir_, t, config_, &w); }, 3);
  }
  void TearDown() override { RemoveTree(dir_); }

  std::string dir_;
  TrainConfig config_;
  std::vector<double> full_;
};

TEST_F(CheckpointTest, ResumeContinuesTheSameLossCurve) {
  ASSERT_TRUE(fs::exists(fs::path(dir_) / "step-000003" / "meta.json"));
  ASSERT_TRUE(fs::exists(fs::path(dir_) / "latest"));
  TrainConfig resumed = config_;
  resumed.resume = dir_;
  const std::vector<double> rest = TrainOnThreads(resumed);
  ASSERT_EQ(rest.size(), 3u);
  for (int k = 0; k < 3; ++k) EXPECT_NEAR(rest[k], full_[3 + k], 1e-6 * full_[3 + k]) << k;
}

TEST_F(CheckpointTest, LoadsIntoAnotherPartition) {
  for (const auto& [pp, schedule] : {std::pair{1, "gpipe"}, std::pair{3, "zb-h1"}}) {
    TrainConfig other = config_;
    other.pp = pp;
    other.schedule = schedule;
    other.resume = dir_ + "/step-000003";
    const std::vector<double> rest = TrainOnThreads(other);
    ASSERT_EQ(rest.size(), 3u);
    for (int k = 0; k < 3; ++k) {
      EXPECT_NEAR(rest[k], full_[3 + k], 2e-5 * full_[3 + k]) << schedule << " step " << 4 + k;
    }
  }
}

// Checkpoints stay global: replica 0's pipeline writes whole tensors (its tensor-parallel
// ranks gather their shards), and any mesh reads them.
TEST_F(CheckpointTest, MeshCheckpointResumesOnAnotherMesh) {
  TrainConfig c = config_;
  c.batch_size = 8;  // two replicas of 4 micro-batches
  const std::vector<double> full = TrainOnThreads(c);
  const std::string dir = dir_ + "_dp";
  TrainConfig dp = c;
  dp.dp = 2;
  dp.tp = 2;
  TrainOnThreads(
      dp, [&](Trainer& t, Transport& w) { SaveCheckpoint(dir, t, dp, &w); }, 3);
  std::set<std::string> files;
  for (const auto& entry : fs::directory_iterator(fs::path(dir) / "step-000003")) {
    files.insert(entry.path().filename().string());
  }
  EXPECT_EQ(files,
            (std::set<std::string>{"meta.json", "rank-0.safetensors", "rank-1.safetensors"}));
  struct Mesh3 {
    int dp, tp, pp;
  };
  for (const auto& [replicas, tp, pp] : {Mesh3{1, 1, 1}, Mesh3{1, 1, 4}, Mesh3{2, 2, 2}}) {
    TrainConfig other = c;
    other.dp = replicas;
    other.tp = tp;
    other.pp = pp;
    other.schedule = pp == 1 ? "gpipe" : "1f1b";
    other.resume = dir;
    const std::vector<double> rest = TrainOnThreads(other);
    ASSERT_EQ(rest.size(), 3u);
    for (int k = 0; k < 3; ++k) {
      EXPECT_NEAR(rest[k], full[3 + k], 2e-5 * full[3 + k])
          << "dp " << replicas << " tp " << tp << " pp " << pp << " step " << 4 + k;
    }
  }
  RemoveTree(dir);
}

// A Llama saved from tp 4 (its 2 key-value heads replicated on 2 ranks each, its 301-token
// vocabulary padded) holds whole unpadded tensors and resumes on tp 1 and tp 2 with the
// uninterrupted losses.
TEST_F(CheckpointTest, ReplicatedHeadsAndAPaddedVocabularyResumeOnAnotherMesh) {
  TrainConfig c = TinyLlama();
  c.model.vocab = 301;
  c.steps = 6;
  const std::vector<double> full = TrainOnThreads(c);
  const std::string dir = dir_ + "_kv";
  TrainConfig saved = c;
  saved.tp = 4;
  TrainOnThreads(
      saved, [&](Trainer& t, Transport& w) { SaveCheckpoint(dir, t, saved, &w); }, 3);
  CheckpointWeights weights(dir);
  EXPECT_EQ(weights.Read("model.embed_tokens.weight").size(0), 301);
  EXPECT_EQ(weights.Read("model.layers.0.self_attn.k_proj.weight").size(0), 2 * 32 / 4);
  for (int tp : {1, 2}) {
    TrainConfig other = c;
    other.tp = tp;
    other.resume = dir;
    const std::vector<double> rest = TrainOnThreads(other);
    ASSERT_EQ(rest.size(), 3u);
    for (int k = 0; k < 3; ++k) {
      EXPECT_NEAR(rest[k], full[3 + k], 2e-5 * full[3 + k]) << "tp " << tp << " step " << 4 + k;
    }
  }
  RemoveTree(dir);
}

TEST_F(CheckpointTest, RefusesAMismatchedModel) {
  TrainConfig other = config_;
  other.model.hidden = 32;
  other.resume = dir_;
  try {
    TrainOnThreads(other);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("hidden = 16, this run has 32"), std::string::npos)
        << e.what();
  }
}

TEST_F(CheckpointTest, RefusesACorruptFileWithoutHalfLoading) {
  const fs::path file = fs::path(dir_) / "step-000003" / "rank-1.safetensors";
  fs::resize_file(file, fs::file_size(file) / 2);
  TrainConfig single = config_;
  single.pp = 1;
  single.schedule = "gpipe";
  Trainer trainer(single, MakeTask(single), InProcessRank(nullptr, single.device));
  std::vector<at::Tensor> before;
  for (const auto& [name, p] : trainer.model().Parameters()) before.push_back(p.detach().clone());
  EXPECT_THROW(LoadCheckpoint(dir_, trainer, single), UserError);
  size_t k = 0;
  for (const auto& [name, p] : trainer.model().Parameters())
    EXPECT_TRUE(at::equal(p, before[k++])) << name;
  EXPECT_EQ(trainer.step(), 0);
}

TEST_F(CheckpointTest, GivesTheModelConfigurationBack) {
  const TrainConfig c = CheckpointConfig(dir_);
  EXPECT_EQ(c.model.hidden, 16);
  EXPECT_EQ(c.model.layers, 4);
  EXPECT_EQ(c.data, config_.data);
  EXPECT_THROW(CheckpointConfig(dir_ + "/nothing"), UserError);
}

}  // namespace
}  // namespace conveyor
