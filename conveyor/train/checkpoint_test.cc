#include "conveyor/train/checkpoint.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "conveyor/train/tasks.h"
#include "conveyor/train/train_testing.h"

namespace conveyor {
namespace {

namespace fs = std::filesystem;
using testing::TinyGpt;
using testing::TrainOnThreads;

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    at::set_num_threads(1);
    dir_ = ::testing::TempDir() + "conveyor_ckpt_" + std::to_string(::getpid());
    fs::remove_all(dir_);
    config_ = TinyGpt();
    config_.pp = 2;
    config_.schedule = "1f1b";
    config_.steps = 6;
    // Uninterrupted, and interrupted after 3 steps with a checkpoint.
    full_ = TrainOnThreads(config_);
    TrainOnThreads(
        config_, [&](Trainer& t, Transport& w) { SaveCheckpoint(dir_, t, config_, &w); }, 3);
  }
  void TearDown() override { fs::remove_all(dir_); }

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

TEST_F(CheckpointTest, RefusesAMismatchedModel) {
  TrainConfig other = config_;
  other.hidden = 32;
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
  Trainer trainer(single, MakeTask(single), nullptr);
  std::vector<at::Tensor> before;
  for (const auto& [name, p] : trainer.Parameters()) before.push_back(p.detach().clone());
  EXPECT_THROW(LoadCheckpoint(dir_, trainer, single), UserError);
  size_t k = 0;
  for (const auto& [name, p] : trainer.Parameters()) EXPECT_TRUE(at::equal(p, before[k++])) << name;
  EXPECT_EQ(trainer.step(), 0);
}

TEST_F(CheckpointTest, GivesTheModelConfigurationBack) {
  const TrainConfig c = CheckpointConfig(dir_);
  EXPECT_EQ(c.hidden, 16);
  EXPECT_EQ(c.layers, 4);
  EXPECT_EQ(c.data, config_.data);
  EXPECT_THROW(CheckpointConfig(dir_ + "/nothing"), UserError);
}

}  // namespace
}  // namespace conveyor
