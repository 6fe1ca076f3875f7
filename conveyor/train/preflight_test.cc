#include "conveyor/train/preflight.h"

#include <gtest/gtest.h>

#include <string>

#include "conveyor/common/error.h"
#include "conveyor/train/train_testing.h"

namespace conveyor {
namespace {

// The message of the UserError `check` throws for `config`, or "accepted".
std::string ErrorOf(void (*check)(const TrainConfig&), const TrainConfig& config) {
  try {
    check(config);
  } catch (const UserError& e) {
    return e.what();
  }
  return "accepted";
}

TEST(PreflightTest, RefusesRunsThatCannotStart) {
  TrainConfig c = TinyGpt();
  EXPECT_EQ(ErrorOf(PreflightCheck, c), "accepted");
  c.pp = 2;
  c.layers = 1;  // 3 layers cannot fill 2 ranks x 2 chunks
  c.schedule = "zb-v";
  EXPECT_NE(ErrorOf(PreflightCheck, c), "accepted");
  // The corpus is the files' check (generation runs without one).
  c = TinyGpt();
  c.data = "/nonexistent/corpus";
  EXPECT_EQ(ErrorOf(PreflightCheck, c), "accepted");
  EXPECT_NE(ErrorOf(PreflightFiles, c).find("corpus '/nonexistent/corpus' does not exist"),
            std::string::npos)
      << ErrorOf(PreflightFiles, c);
}

TEST(PreflightTest, FindsBadFilesBeforeAnyRank) {
  TrainConfig c = TinyGpt();
  auto error_of = [](const TrainConfig& config) { return ErrorOf(PreflightFiles, config); };
  EXPECT_EQ(error_of(c), "accepted");
  c.metrics = "/nonexistent/dir/m.json";
  EXPECT_NE(
      error_of(c).find(
          "--metrics '/nonexistent/dir/m.json': the folder '/nonexistent/dir' does not exist"),
      std::string::npos)
      << error_of(c);
  c.metrics = ::testing::TempDir();
  EXPECT_NE(error_of(c).find("is a folder"), std::string::npos) << error_of(c);
  c = TinyGpt();
  c.checkpoint_dir = "/proc/nope/ckpt";
  EXPECT_NE(error_of(c).find("--checkpoint-dir '/proc/nope/ckpt': cannot create files in '/proc'"),
            std::string::npos)
      << error_of(c);
  c = TinyGpt();
  c.seq_len = 60000;  // longer than the tiny corpus
  EXPECT_NE(error_of(c), "accepted");
  c = TinyGpt();
  c.model = ModelKind::kClassifier;
  c.classes = 50;  // the tiny corpus is one file: one category
  EXPECT_NE(error_of(c), "accepted");
}

}  // namespace
}  // namespace conveyor
